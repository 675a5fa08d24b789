"""The Python package `fissile` (python/fissile): the onnxruntime-shaped API.

Sessions on a real model (MiniLM-L3 from the model cache) and on small
models built here with onnx.helper, checked against ONNX Runtime (relative
L2 <= 1e-4 for float32 outputs, exact otherwise); the description of inputs
and outputs as onnxruntime spells it; the plan; every error class; inputs
that are not C-contiguous; sessions run from several threads at once;
compare().
"""
from __future__ import annotations

import ctypes

import threading

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import fissile
import fsl_models

TOL = 1e-4
STRATEGIES = ["unfused", "opfuse", "greedy", "optimal"]


# ---- models ----

def _small_model(path, batch="N"):
    """x float[N, 8], m bool[N, 4] -> y = Where(m, Relu(x @ W + b), 0) float[N, 4],
    k = ArgMax(y, axis=1) int64[N]; the batch dimension is the dim_param `batch`."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["xwb"]),
        helper.make_node("Relu", ["xwb"], ["r"]),
        helper.make_node("Where", ["m", "r", "zero"], ["y"]),
        helper.make_node("ArgMax", ["y"], ["k"], axis=1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8]),
         helper.make_tensor_value_info("m", TensorProto.BOOL, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [batch])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(np.zeros((), np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _conv_model(path):
    """x float[1, 16, 64, 64] -> Relu(Conv3x3(x, 32 channels, pad 1) + bias): a oneDNN
    convolution (a Winograd one on AVX-512: 38 MFLOP, scratchpad per running thread)."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.2
    b = rng.standard_normal(32).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 64, 64])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture
def small(tmp_path):
    return str(_small_model(tmp_path / "small.onnx"))


@pytest.fixture
def small_static(tmp_path):
    return str(_small_model(tmp_path / "small3.onnx", batch=3))


def _small_feeds(rng, n=3):
    return {"x": rng.standard_normal((n, 8)).astype(np.float32), "m": rng.random((n, 4)) < 0.7}


def _ort(path):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _check(got, want, what=""):
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray), what
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if np.issubdtype(w.dtype, np.floating):
            err = fsl_models.rel_l2(g, w)
            assert err <= TOL, f"{what}: relative L2 error {err:.3g}"
        else:
            assert np.array_equal(g, w), what


def _minilm():
    model = fsl_models.BY_NAME["minilm_l3"]
    if not model.path.exists():
        pytest.skip(f"{model.path} missing: `make models` fetches it")
    return model


# ---- sessions against ONNX Runtime ----

@pytest.mark.parametrize("strategy", STRATEGIES)
def test_real_model_matches_onnxruntime(strategy, rng):
    model = _minilm()
    feeds = fsl_models.random_inputs(model, rng)
    sess = fissile.InferenceSession(model.path, strategy=strategy, threads=2)
    _check(sess.run(None, feeds), _ort(model.path).run(None, feeds), f"minilm_l3 {strategy}")
    assert sess.plan["strategy"] == strategy and sess.plan["backend"] == fissile.default_backend()


@pytest.mark.parametrize("backend", fissile.backends())
def test_small_model_every_backend(backend, small, rng):
    feeds = _small_feeds(rng)
    if backend == "cuda":
        try:
            ctypes.CDLL("libcuda.so.1")
        except OSError:
            with pytest.raises(fissile.UnsupportedError, match="no NVIDIA driver"):
                fissile.InferenceSession(small, backend=backend, strategy="greedy", dims={"N": 3})
            pytest.skip("no NVIDIA driver on this machine: the CUDA backend says so (checked)")
    sess = fissile.InferenceSession(small, backend=backend, strategy=None if backend == "ref" else "greedy")
    _check(sess.run(None, feeds), _ort(small).run(None, feeds), backend)


def test_output_selection_and_order(small_static, rng):
    feeds = _small_feeds(rng)
    sess = fissile.InferenceSession(small_static)
    y, k = _ort(small_static).run(None, feeds)
    got = sess.run(["k", "y"], feeds)
    _check(got, [k, y])
    _check(sess.run(["y"], feeds), [y])


def test_dynamic_session_specialises_per_shape(small, rng):
    sess = fissile.InferenceSession(small)  # batch unbound: compiles at the first run
    assert [a.shape for a in sess.get_inputs()] == [["N", 8], ["N", 4]]
    with pytest.raises(fissile.InvalidArgument, match="not compiled yet"):
        sess.plan
    o = _ort(small)
    for n in (3, 5, 3):
        feeds = _small_feeds(rng, n)
        _check(sess.run(None, feeds), o.run(None, feeds), f"batch {n}")
        assert [a.shape for a in sess.get_inputs()] == [[n, 8], [n, 4]]


def test_dims_and_shapes_bind_at_construction(small, rng):
    feeds = _small_feeds(rng, 2)
    want = _ort(small).run(None, feeds)
    for kw in ({"dims": {"N": 2}}, {"shapes": {"x": (2, 8), "m": (2, 4)}}):
        sess = fissile.InferenceSession(small, **kw)
        assert sess.plan["n_kernels"] > 0  # compiled already
        _check(sess.run(None, feeds), want, str(kw))


# ---- description ----

def test_inputs_outputs_as_onnxruntime_spells_them(small_static):
    sess, o = fissile.InferenceSession(small_static), _ort(small_static)
    for mine, theirs in ((sess.get_inputs(), o.get_inputs()), (sess.get_outputs(), o.get_outputs())):
        assert [(a.name, a.type, a.shape) for a in mine] == [(a.name, a.type, a.shape) for a in theirs]
    assert [a.type for a in sess.get_inputs()] == ["tensor(float)", "tensor(bool)"]
    assert sess.get_outputs()[1].type == "tensor(int64)"
    assert sess.get_inputs()[0].dtype == np.float32


def test_real_model_description():
    model = _minilm()
    sess = fissile.InferenceSession(model.path, dims={"batch_size": 1, "sequence_length": 128})
    o = _ort(model.path)
    assert [(a.name, a.type) for a in sess.get_inputs()] == [(a.name, a.type) for a in o.get_inputs()]
    assert [(a.name, a.type) for a in sess.get_outputs()] == [(a.name, a.type) for a in o.get_outputs()]
    assert [a.shape for a in sess.get_inputs()] == [[1, 128], [1, 128]]


def test_plan_contents(small_static):
    plans = {s: fissile.InferenceSession(small_static, strategy=s).plan for s in STRATEGIES}
    for s, p in plans.items():
        assert p["strategy"] == s
        assert p["n_kernels"] == sum(p["kernels_by_kind"].values()) > 0, s
        assert set(p["kernels_by_kind"]) == {"loop", "reduce", "linear", "opaque"}
        assert p["predicted_s"] > 0 and p["arena_bytes"] >= 0 and p["n_primitives"] > 0, s
        assert isinstance(p["optimal"], bool)
    assert plans["optimal"]["optimal"] is True
    assert plans["unfused"]["n_kernels"] >= plans["greedy"]["n_kernels"] >= plans["optimal"]["n_kernels"] \
        or plans["optimal"]["predicted_s"] <= plans["greedy"]["predicted_s"] * (1 + 1e-9)
    assert plans["optimal"]["kernels_by_kind"]["linear"] >= 1  # the MatMul
    # plan_hash: the same plan gives the same hash, plans of different kernel counts differ
    assert fissile.InferenceSession(small_static, strategy="optimal").plan["plan_hash"] == plans["optimal"]["plan_hash"]
    for a in STRATEGIES:
        for b in STRATEGIES:
            if plans[a]["n_kernels"] != plans[b]["n_kernels"]:
                assert plans[a]["plan_hash"] != plans[b]["plan_hash"], (a, b)


# ---- inputs: conversion, no copies ----

def test_non_contiguous_and_non_array_inputs(small_static, rng):
    sess = fissile.InferenceSession(small_static)
    feeds = _small_feeds(rng)
    want = sess.run(None, feeds)
    wide = np.zeros((3, 16), np.float32)
    wide[:, ::2] = feeds["x"]
    strided = {"x": wide[:, ::2], "m": feeds["m"]}
    assert not strided["x"].flags.c_contiguous
    _check(sess.run(None, strided), want, "strided")
    fortran = {"x": np.asfortranarray(feeds["x"]), "m": np.asfortranarray(feeds["m"])}
    _check(sess.run(None, fortran), want, "Fortran order")
    lists = {"x": feeds["x"].tolist(), "m": feeds["m"].tolist()}  # converted to the input's dtype
    _check(sess.run(None, lists), want, "lists")
    assert np.array_equal(feeds["x"], wide[:, ::2])  # inputs are not written


def test_outputs_wrap_fissile_buffers_without_copy(small_static, rng):
    sess = fissile.InferenceSession(small_static)
    y, k = sess.run(None, _small_feeds(rng))
    for a in (y, k):
        assert isinstance(a.base, memoryview) and isinstance(a.base.obj, fissile._fissile.Tensor)
        assert a.flags.writeable and a.flags.c_contiguous
    y[:] = 1  # the array owns its memory through the tensor: writable, independent of later runs
    y2, _ = sess.run(None, _small_feeds(rng))
    assert not np.shares_memory(y, y2)


# ---- errors: an exception with libfissile's message, never a crash ----

def test_error_bad_path(tmp_path):
    with pytest.raises(fissile.FileError) as e:
        fissile.InferenceSession(tmp_path / "nope.onnx")
    assert isinstance(e.value, OSError) and isinstance(e.value, fissile.FissileError)
    assert "nope.onnx" in str(e.value)


def test_error_garbage_file(tmp_path):
    p = tmp_path / "garbage.onnx"
    p.write_bytes(b"\xff\xfe this is not a protobuf \x00\x01" * 10)
    with pytest.raises((fissile.ParseError, fissile.InvalidModel)) as e:
        fissile.InferenceSession(p)
    assert "garbage.onnx" in str(e.value)


def test_error_unsupported_op(tmp_path):
    node = helper.make_node("NoSuchOp", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    p = tmp_path / "unsupported.onnx"
    onnx.save(model, str(p))
    with pytest.raises(fissile.UnsupportedError, match="NoSuchOp"):
        fissile.InferenceSession(p)


def test_error_inputs(small_static, rng):
    sess = fissile.InferenceSession(small_static)
    feeds = _small_feeds(rng)
    with pytest.raises(fissile.InvalidArgument, match="no input 'z'") as e:
        sess.run(None, {**feeds, "z": feeds["x"]})
    assert isinstance(e.value, ValueError)
    with pytest.raises(fissile.InvalidArgument, match="'m' is not given"):
        sess.run(None, {"x": feeds["x"]})
    with pytest.raises(fissile.ShapeError, match="'x' must be float"):
        sess.run(None, {**feeds, "x": feeds["x"].astype(np.float64)})
    with pytest.raises(fissile.ShapeError, match="'x' must be float"):
        sess.run(None, {**feeds, "x": np.zeros((4, 8), np.float32)})
    with pytest.raises(fissile.ShapeError):
        sess.run(None, {**feeds, "x": np.zeros((3, 8), ">f4")})  # big-endian: no native dtype
    with pytest.raises(fissile.ShapeError):
        sess.run(None, {**feeds, "x": np.zeros((3, 8), object)})
    with pytest.raises(fissile.InvalidArgument, match="no output 'q'"):
        sess.run(["q"], feeds)
    with pytest.raises(fissile.InvalidArgument):
        sess.run(None, [feeds["x"]])
    _check(sess.run(None, feeds), _ort(small_static).run(None, feeds), "after the errors")


def test_error_arguments(small):
    with pytest.raises(fissile.InvalidArgument, match="unknown strategy 'fastest'"):
        fissile.InferenceSession(small, strategy="fastest")
    with pytest.raises(fissile.InvalidArgument, match="unknown backend 'gpu'"):
        fissile.InferenceSession(small, backend="gpu")
    with pytest.raises(fissile.InvalidArgument, match="CUDAExecutionProvider"):
        fissile.InferenceSession(small, providers=["CUDAExecutionProvider"])
    with pytest.raises(fissile.InvalidArgument, match="no input 'y'"):
        fissile.InferenceSession(small, shapes={"y": (3, 8)})
    with pytest.raises(fissile.ShapeError, match="dimension 1 is 8 in the model"):
        fissile.InferenceSession(small, shapes={"x": (3, 9)})
    with pytest.raises(fissile.InvalidArgument):
        fissile.InferenceSession(small, threads=-1)


def test_closed_session(small_static, rng):
    sess = fissile.InferenceSession(small_static)
    sess.close()
    with pytest.raises(fissile.InvalidArgument, match="closed"):
        sess.run(None, _small_feeds(rng))


def test_onnxruntime_arguments_accepted(small_static, rng):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = fissile.InferenceSession(small_static, so, providers=["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    feeds = _small_feeds(rng)
    _check(sess.run(None, feeds), _ort(small_static).run(None, feeds))


# ---- threads ----

def _run_in_threads(jobs, rounds=5):
    """Runs every job (a callable returning None or raising) `rounds` times in its
    own thread, all started together; returns the exceptions raised."""
    barrier = threading.Barrier(len(jobs))
    errors = []

    def worker(job):
        try:
            barrier.wait()
            for _ in range(rounds):
                job()
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_two_sessions_from_two_threads(small_static, tmp_path, rng):
    """Sessions compiled on this thread, run at once from others (oneDNN
    matmuls and a convolution among them), each result checked."""
    model = _minilm()
    conv = _conv_model(tmp_path / "conv.onnx")
    mfeeds = fsl_models.random_inputs(model, rng)
    sfeeds = _small_feeds(rng)
    cfeeds = {"x": rng.standard_normal((1, 16, 64, 64)).astype(np.float32)}
    mwant = _ort(model.path).run(None, mfeeds)
    swant = _ort(small_static).run(None, sfeeds)
    cwant = _ort(conv).run(None, cfeeds)
    a = fissile.InferenceSession(model.path, threads=1)
    b = fissile.InferenceSession(model.path, strategy="greedy", threads=1)
    c = fissile.InferenceSession(small_static, threads=1)
    d = fissile.InferenceSession(conv, threads=1)
    e = fissile.InferenceSession(conv, strategy="opfuse", threads=1)
    assert d.plan["kernels_by_kind"]["linear"] == 1
    errors = _run_in_threads([lambda: _check(a.run(None, mfeeds), mwant, "a"),
                              lambda: _check(b.run(None, mfeeds), mwant, "b"),
                              lambda: _check(c.run(None, sfeeds), swant, "c"),
                              lambda: _check(d.run(None, cfeeds), cwant, "d"),
                              lambda: _check(e.run(None, cfeeds), cwant, "e")])
    assert not errors, errors


def test_one_session_from_two_threads(rng):
    model = _minilm()
    sess = fissile.InferenceSession(model.path, threads=1)
    o = _ort(model.path)
    feeds = [fsl_models.random_inputs(model, rng) for _ in range(2)]
    wants = [o.run(None, f) for f in feeds]
    errors = _run_in_threads([lambda: _check(sess.run(None, feeds[0]), wants[0], "0"),
                              lambda: _check(sess.run(None, feeds[1]), wants[1], "1")])
    assert not errors, errors


def test_sessions_compile_from_two_threads(small, small_static, rng):
    feeds = _small_feeds(rng)
    want = _ort(small_static).run(None, feeds)
    sessions = {}

    def make(key, path, strategy):
        def job():
            sessions[key] = s = fissile.InferenceSession(path, strategy=strategy, dims={"N": 3})
            _check(s.run(None, feeds), want, key)
        return job
    errors = _run_in_threads([make("a", small, "optimal"), make("b", small_static, "greedy")], rounds=2)
    assert not errors, errors


# ---- compare ----

def test_compare_rows(small_static):
    table = fissile.compare(small_static, repeats=3, warmup=1, threads=1, seed=1)
    assert isinstance(table, list) and all(isinstance(r, dict) for r in table)
    # the four strategies, optimal without rewrites, then the peer
    assert [r["name"] for r in table] == STRATEGIES + ["optimal-norewrite", "onnxruntime"]
    assert [r["rewrite"] for r in table[:-1]] == ["rules"] * 4 + ["off"]
    assert table[-2]["n_rewrites"] == 0
    for r in table[:-1]:
        assert r["kernels"] == r["loop"] + r["reduce"] + r["linear"] + r["opaque"] > 0
        assert r["predicted_s"] > 0 and r["compile_s"] > 0
        assert 0 < r["min_s"] <= r["p10_s"] <= r["median_s"] <= r["p90_s"] <= r["max_s"]
        assert r["rel_l2_vs_ort"] <= TOL, r
    assert table[-1]["median_s"] > 0 and table[-1]["backend"] == "onnxruntime"
    text = str(table)
    assert all(s in text for s in STRATEGIES) and "median ms" in text
    only = fissile.compare(small_static, strategies=["greedy"], repeats=1, warmup=0, peer=False)
    assert [r["name"] for r in only] == ["greedy"] and only[0]["rel_l2_vs_ort"] is None
    with pytest.raises(ValueError):
        fissile.compare(small_static, repeats=0)
