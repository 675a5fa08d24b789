"""Inputs from the command line: random inputs a model can take (`fissile
run` and `bench` without --input), and inputs frozen to constants (--const).

An integer input that indexes a small table (a BERT-style token_type_ids
into a 2-row embedding) must get indices inside that table, a mask 0/1,
any other integer input the default [0, 10) (fsl_model_input_int_range):
with [0, 10) for every integer input, `bench` failed on such models with
"gather index out of range".
"""
from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper


def embedding_model():
    """input_ids [1, 8] into a 30-row table, token_type_ids through an
    Unsqueeze/Squeeze pair into a 2-row table, a mask cast to float, and an
    integer offset that is only added."""
    rng = np.random.default_rng(0)
    words = numpy_helper.from_array(rng.standard_normal((30, 4)).astype(np.float32), "words")
    types = numpy_helper.from_array(rng.standard_normal((2, 4)).astype(np.float32), "types")
    axes = numpy_helper.from_array(np.array([0], dtype=np.int64), "axes")
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, [1, 8])
           for n in ["input_ids", "token_type_ids", "attention_mask", "offset"]]
    nodes = [
        helper.make_node("Gather", ["words", "input_ids"], ["w"]),
        helper.make_node("Unsqueeze", ["token_type_ids", "axes"], ["tt1"]),
        helper.make_node("Squeeze", ["tt1", "axes"], ["tt"]),
        helper.make_node("Gather", ["types", "tt"], ["t"]),
        helper.make_node("Add", ["w", "t"], ["e"]),
        helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mf", "axes2"], ["m3"]),
        helper.make_node("Mul", ["e", "m3"], ["y"]),
        helper.make_node("Add", ["offset", "offset"], ["o2"]),
    ]
    axes2 = numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes2")
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4]),
            helper.make_tensor_value_info("o2", TensorProto.INT64, [1, 8])]
    g = helper.make_graph(nodes, "emb", ins, outs, [words, types, axes, axes2])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_integer_inputs_take_the_range_they_index(fissile, tmp_path):
    path = tmp_path / "emb.onnx"
    path.write_bytes(embedding_model().SerializeToString())
    out = tmp_path / "out"
    for seed in range(3):
        proc = subprocess.run([str(fissile), "run", str(path), "--seed", str(seed), "--output-dir", str(out)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        notes = {m.group(1): m.group(2) for m in re.finditer(r"input '(\w+)' not given: using random \S+( in \[[^)]*\)[^(]*\([^)]*\))",
                                                               proc.stderr)}
        assert "[0, 30) (it indexes a gather)" in notes["input_ids"], proc.stderr
        assert "[0, 2) (it indexes a gather)" in notes["token_type_ids"], proc.stderr
        assert "[0, 2) (a mask)" in notes["attention_mask"], proc.stderr
        assert "[0, 10) (default)" in notes["offset"], proc.stderr
        o2 = np.load(out / "o2.npy")
        assert o2.min() >= 0 and o2.max() <= 18 and o2.any()
    # bench runs every strategy on fresh random inputs: no index error
    proc = subprocess.run([str(fissile), "bench", str(path), "--repeats", "3", "--warmup", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "error" not in proc.stdout


def reshape_model():
    """Reshape(x [2, 6], shape): the output shape depends on the value of
    the graph input `shape`."""
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
           helper.make_tensor_value_info("shape", TensorProto.INT64, [3])]
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    g = helper.make_graph([node], "reshape", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_const_freezes_an_input(fissile, tmp_path):
    """Without --const the model cannot be compiled (a clear 'unsupported',
    exit 3); with --const shape=FILE the input becomes a constant, the
    model has one input left, and the output takes the given shape."""
    path = tmp_path / "reshape.onnx"
    path.write_bytes(reshape_model().SerializeToString())
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "shape.npy", np.array([3, 1, 4], dtype=np.int64))
    proc = subprocess.run([str(fissile), "run", str(path), "--input", f"x={tmp_path / 'x.npy'}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    out = tmp_path / "out"
    for backend in ["ref", "cpu"]:
        proc = subprocess.run([str(fissile), "run", str(path), "--const", f"shape={tmp_path / 'shape.npy'}",
                               "--input", f"x={tmp_path / 'x.npy'}", "--backend", backend, "--output-dir", str(out)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_array_equal(np.load(out / "y.npy"), x.reshape(3, 1, 4))
    proc = subprocess.run([str(fissile), "inspect", str(path), "--const", f"shape={tmp_path / 'shape.npy'}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    after = proc.stdout.split("after fission:")[1]
    assert "inputs (1):" in after and "float[3x1x4]" in after, proc.stdout
    # a name the model does not have: a clear error naming the inputs
    proc = subprocess.run([str(fissile), "run", str(path), "--const", f"nope={tmp_path / 'shape.npy'}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "no input 'nope'" in proc.stderr, proc.stderr


def test_fused_kernel_error_names_the_primitive_node(fissile, tmp_path):
    """A token type index outside the 2-row table: the kernel that fails
    fuses both gathers (the word embedding's comes first), and the error
    names the token-type Gather and the index, as the reference does, on
    every strategy."""
    model = embedding_model()
    model.graph.node[0].name = "word_embedding"
    model.graph.node[3].name = "token_type_embedding"
    path = tmp_path / "emb.onnx"
    path.write_bytes(model.SerializeToString())
    np.save(tmp_path / "tt.npy", np.full((1, 8), 5, dtype=np.int64))
    for backend, strategy in [("ref", "optimal"), ("cpu", "optimal"), ("cpu", "greedy"), ("cpu", "unfused")]:
        proc = subprocess.run([str(fissile), "run", str(path), "--input", f"token_type_ids={tmp_path / 'tt.npy'}",
                               "--backend", backend, "--strategy", strategy],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 5, proc.stderr
        err = proc.stderr.split("fissile: error: ")[-1]
        assert "'token_type_embedding'" in err and "index 5 out of range" in err, (backend, strategy, err)
        assert "word_embedding" not in err, err


def test_run_defaults_to_the_fast_path(fissile, tmp_path):
    """`fissile run MODEL` compiles the optimal plan for the best backend of
    the build; the first build of a plan says so on stderr (plain lines
    when stderr is not a terminal), the second finds it in the cache."""
    path = tmp_path / "emb.onnx"
    path.write_bytes(embedding_model().SerializeToString())
    env = dict(os.environ, FSL_CACHE_DIR=str(tmp_path / "cache"))
    runs = [subprocess.run([str(fissile), "run", str(path), "--time"], capture_output=True, text=True, timeout=120,
                           env=env) for _ in range(2)]
    for p in runs:
        assert p.returncode == 0, p.stderr
    backends = subprocess.run([str(fissile), "run", "--help"], capture_output=True, text=True).stdout
    if "cpu" not in backends:
        pytest.skip("this build has no cpu backend")
    first, second = runs[0].stderr, runs[1].stderr
    assert re.search(r"^fissile: compiling \d+ generated kernels? for the cpu backend \(first build of this plan\) \.\.\.",
                     first, re.M), first
    assert re.search(r"^fissile: compiled \d+ generated kernels? for the cpu backend in [\d.]+ s", first, re.M), first
    assert "\r" not in first and "\033" not in first
    assert "compil" not in second.replace("time: compile", ""), second
    assert runs[0].stdout == runs[1].stdout
    ref = subprocess.run([str(fissile), "run", str(path), "--backend", "ref"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert ref.returncode == 0 and "compiling" not in ref.stderr, ref.stderr


def test_bench_takes_input_files(fissile, tmp_path):
    """`bench --input NAME=FILE` uses the file's data in every run of every
    strategy: an out-of-range token type fails each strategy with the
    node's name, a valid one measures them all."""
    model = embedding_model()
    model.graph.node[3].name = "token_type_embedding"
    path = tmp_path / "emb.onnx"
    path.write_bytes(model.SerializeToString())
    np.save(tmp_path / "bad.npy", np.full((1, 8), 5, dtype=np.int64))
    np.save(tmp_path / "good.npy", np.ones((1, 8), dtype=np.int64))
    bad = subprocess.run([str(fissile), "bench", str(path), "--input", f"token_type_ids={tmp_path / 'bad.npy'}",
                          "--repeats", "2", "--warmup", "0"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 5, bad.stderr
    rows = [ln for ln in bad.stdout.splitlines() if ln.split()[:1] and ln.split()[0] in
            ("unfused", "opfuse", "greedy", "optimal")]
    assert len(rows) == 4 and all("'token_type_embedding'" in r and "index 5" in r for r in rows), bad.stdout
    # every strategy failed in the first round: no more rounds run (or reported)
    assert len(re.findall(r"rounds of runs", bad.stderr)) <= 2, bad.stderr
    good = subprocess.run([str(fissile), "bench", str(path), "--input", f"token_type_ids={tmp_path / 'good.npy'}",
                           "--repeats", "3", "--warmup", "1", "--json", str(tmp_path / "b.json")],
                          capture_output=True, text=True, timeout=300)
    assert good.returncode == 0, good.stdout + good.stderr
    import json
    data = json.loads((tmp_path / "b.json").read_text())
    # the four strategies with the rewrites, then optimal without them
    assert [s["status"] for s in data["strategies"]] == ["ok"] * 5
    assert [s["name"] for s in data["strategies"]][3:] == ["optimal", "optimal-norewrite"]
    assert [s["rewrite"] for s in data["strategies"]][3:] == ["rules", "off"]
    assert all(len(s["times_s"]) == 3 for s in data["strategies"])
    # a wrong shape in the file is a clear error before anything runs
    np.save(tmp_path / "short.npy", np.ones((1, 3), dtype=np.int64))
    p = subprocess.run([str(fissile), "bench", str(path), "--input", f"token_type_ids={tmp_path / 'short.npy'}"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 4 and "token_type_ids" in p.stderr, p.stderr


def test_bench_unbound_dim_runs_nothing(fissile, tmp_path):
    """`bench` on a model whose input has a symbolic dimension and no
    --shape: every strategy fails with the error naming the symbol, and no
    rounds of runs start (they printed 103 progress lines for nothing)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    path = tmp_path / "relu.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
                     .SerializeToString())
    proc = subprocess.run([str(fissile), "bench", str(path), "--repeats", "100"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0, proc.stdout
    assert "symbol 'batch', which is unbound" in proc.stdout + proc.stderr
    assert "rounds of runs" not in proc.stderr, proc.stderr
