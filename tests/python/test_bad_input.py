"""Bad inputs: fissile must refuse them with a clear message, never crash.

Each case builds a broken model (or broken input) in a temporary folder and
runs the CLI on it.  Expected: a non-zero exit that is not a signal, an
error message on stderr that says what is wrong, and no sanitizer report
(run this file against an ASan build with FSL_BUILD_DIR=build-asan).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper



def conv_model(dim_param=None):
    """A small valid model: Conv + Relu with a weight initializer."""
    x_shape = [dim_param or 1, 2, 5, 5]
    w = numpy_helper.from_array(np.arange(36, dtype=np.float32).reshape(2, 2, 3, 3) / 36, "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def simple_model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def fin(name="x", shape=(2, 3), dt=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dt, list(shape) if shape is not None else None)


def external_init(name, location, length, dims=(4,)):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in [("location", location), ("offset", "0"), ("length", str(length))]:
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def ext_model(location, length=16, dims=(4,)):
    return simple_model([helper.make_node("Add", ["x", "w"], ["y"])], [fin("x", (4,))], [fin("y", (4,))],
                        [external_init("w", location, length, dims)])


def run_cli(fissile, args, timeout=60):
    proc = subprocess.run([str(fissile), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return proc


def expect_clean_error(proc, pattern):
    err = proc.stderr
    assert proc.returncode != 0, f"expected an error, got exit 0; stdout: {proc.stdout[-500:]}"
    assert proc.returncode > 0, f"killed by signal {-proc.returncode}; stderr: {err[-2000:]}"
    assert proc.returncode < 64, f"exit {proc.returncode} (a crash or abort?); stderr: {err[-2000:]}"
    assert not re.search(r"Sanitizer|runtime error:|Assertion|FSL_ASSERT|internal error", err), err[-3000:]
    assert err.strip(), "no message on stderr"
    assert re.search(pattern, err, re.I), f"message does not match /{pattern}/: {err.strip()[-1000:]}"


# ---- model files that are broken ----

def write(tmp_path, model_or_bytes, name="model.onnx"):
    p = tmp_path / name
    if isinstance(model_or_bytes, (bytes, bytearray)):
        p.write_bytes(model_or_bytes)
    else:
        p.write_bytes(model_or_bytes.SerializeToString())
    return p


def case_truncated(tmp):
    data = conv_model().SerializeToString()
    return write(tmp, data[: len(data) // 2]), r"trunc|parse|protobuf|invalid|malformed"


def case_truncated_tiny(tmp):
    data = conv_model().SerializeToString()
    return write(tmp, data[:7]), r"trunc|parse|protobuf|invalid|malformed|graph"


def case_empty_file(tmp):
    return write(tmp, b""), r"empty|parse|protobuf|invalid|graph|no graph"


def case_garbage(tmp):
    rng = np.random.default_rng(7)
    return write(tmp, rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()), r"parse|protobuf|invalid|malformed"


def case_text_file(tmp):
    return write(tmp, b"this is not an onnx model\n" * 20), r"parse|protobuf|invalid|malformed"


def case_wrong_wire_type(tmp):
    # ModelProto.graph (field 7) encoded as a varint instead of a message.
    return write(tmp, b"\x08\x08\x38\x01"), r"parse|protobuf|invalid|malformed|graph"


def case_wrong_message(tmp):
    # A TensorProto where a ModelProto should be.
    t = numpy_helper.from_array(np.ones((3, 3), np.float32), "t")
    return write(tmp, t.SerializeToString()), r"parse|protobuf|invalid|graph|malformed|opset|ir"


def case_missing_file(tmp):
    return tmp / "does_not_exist.onnx", r"no such file|cannot open|not found|read"


def case_dangling_value(tmp):
    m = simple_model([helper.make_node("Add", ["x", "w_missing"], ["y"])], [fin()], [fin("y")])
    return write(tmp, m), r"w_missing"


def case_missing_initializer(tmp):
    m = conv_model()
    del m.graph.initializer[:]
    return write(tmp, m), r"'?w'?|undefined|dangling|not defined|unknown"


def case_dangling_output(tmp):
    m = simple_model([helper.make_node("Relu", ["x"], ["y"])], [fin()], [fin("nowhere")])
    return write(tmp, m), r"nowhere"


def case_cycle(tmp):
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n_add"),
             helper.make_node("Relu", ["a"], ["b"], name="n_relu")]
    m = simple_model(nodes, [fin()], [fin("a")])
    return write(tmp, m), r"cycle|cyclic|order|topolog|dangling|undefined"


def case_bad_attribute(tmp):
    m = simple_model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5])], [fin()], [fin("y")])
    return write(tmp, m), r"perm|Transpose"


def case_unknown_op(tmp):
    m = simple_model([helper.make_node("NoSuchOp", ["x"], ["y"])], [fin()], [fin("y")])
    return write(tmp, m), r"NoSuchOp"


def opset_model(op, opset, **attrs):
    m = simple_model([helper.make_node(op, ["x"], ["y"], name="n1", **attrs)], [fin()], [fin("y")])
    m.opset_import[0].version = opset
    return m


def case_op_deprecated(tmp):
    # Upsample is deprecated from opset 10 (ops.def: Upsample opsets 7 to 9)
    scales = numpy_helper.from_array(np.array([1, 2], np.float32), "s")
    m = simple_model([helper.make_node("Upsample", ["x", "s"], ["y"], name="n1")], [fin()], [fin("y")], [scales])
    m.opset_import[0].version = 10
    return write(tmp, m), r"node 'n1' \(Upsample, opset 10\).*opsets 7 to 9"


def case_op_newer_opset(tmp):
    # a newer opset than the ONNX spec fissile knows: no silent match by name
    return write(tmp, opset_model("Relu", 28)), r"node 'n1' \(Relu, opset 28\).*opsets 1 to 27"


def case_op_before_it_existed(tmp):
    return write(tmp, opset_model("Gelu", 17)), r"node 'n1' \(Gelu, opset 17\).*opsets 20 to 27"


def case_dims_overflow_initializer(tmp):
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.extend([1 << 40, 1 << 40, 16])
    t.raw_data = b"\0" * 16
    m = simple_model([helper.make_node("Add", ["x", "w"], ["y"])], [fin()], [fin("y")], [t])
    return write(tmp, m), r"overflow|too large|size|dims|raw_data|bytes|invalid"


def case_dims_overflow_input(tmp):
    big = (1 << 62) + 1
    m = simple_model([helper.make_node("Relu", ["x"], ["y"])], [fin("x", (big, 4))], [fin("y")])
    return write(tmp, m), r"overflow|too large|size|memory|dims|invalid"


def case_negative_dim(tmp):
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.extend([-3, 2])
    m = simple_model([helper.make_node("Add", ["x", "w"], ["y"])], [fin()], [fin("y")], [t])
    return write(tmp, m), r"negative|dim|invalid"


def case_raw_data_short(tmp):
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.extend([2, 3])
    t.raw_data = b"\0" * 10
    m = simple_model([helper.make_node("Add", ["x", "w"], ["y"])], [fin()], [fin("y")], [t])
    return write(tmp, m), r"raw_data|bytes|size|short|invalid|expected"


def case_external_absolute(tmp):
    return write(tmp, ext_model("/etc/passwd")), r"external|outside|absolute|location|escape"


def case_external_dotdot(tmp):
    (tmp / "secret.bin").write_bytes(b"\0" * 64)
    sub = tmp / "model_dir"
    sub.mkdir()
    return write(sub, ext_model("../secret.bin")), r"external|outside|\.\.|location|escape"


def case_external_symlink(tmp):
    (tmp / "secret.bin").write_bytes(b"\0" * 64)
    sub = tmp / "model_dir"
    sub.mkdir()
    os.symlink(tmp / "secret.bin", sub / "weights.bin")
    return write(sub, ext_model("weights.bin")), r"external|outside|symlink|link|location|escape"


def case_external_short(tmp):
    (tmp / "weights.bin").write_bytes(b"\0" * 8)
    return write(tmp, ext_model("weights.bin", length=16)), r"external|short|length|bytes|size|end of file|eof"


def case_external_missing(tmp):
    return write(tmp, ext_model("nope.bin")), r"nope\.bin|external|no such file|cannot open"


def case_range_past_constant_limit(tmp):
    # a 4-byte input asks fission for a 2 GiB int64 constant
    lim = numpy_helper.from_array(np.array(1 << 28, np.int64), "lim")
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    m = simple_model([helper.make_node("Range", ["zero", "lim", "one"], ["r"]),
                      helper.make_node("ReduceMax", ["r"], ["m"], keepdims=0),
                      helper.make_node("Add", ["x", "m"], ["y"])],
                     [fin("x", (1,), TensorProto.INT64)], [fin("y", (1,), TensorProto.INT64)], [lim, zero, one])
    return write(tmp, m), r"Range.*limit"


def case_rnn_sequence_too_long(tmp):
    w = numpy_helper.from_array(np.ones((1, 2, 1), np.float32), "w")
    r = numpy_helper.from_array(np.ones((1, 2, 2), np.float32), "r")
    m = simple_model([helper.make_node("RNN", ["x", "w", "r"], ["", "h"], hidden_size=2)],
                     [fin("x", (1 << 20, 1, 1))], [fin("h", (1, 1, 2))], [w, r])
    return write(tmp, m), r"RNN.*sequence length"


def quantize_model(scale, zp=None, x_shape=(2, 3), axis=None, op="QuantizeLinear", x_dt=TensorProto.FLOAT,
                   zp_dt=TensorProto.UINT8):
    """x -> QuantizeLinear (or DequantizeLinear) with the scale (and zero
    point) as initializers (issue 61: bad quantization parameters)."""
    inits = [numpy_helper.from_array(np.asarray(scale, np.float32), "s")]
    ins = ["x", "s"]
    if zp is not None:
        inits.append(helper.make_tensor("zp", zp_dt, np.shape(zp), np.asarray(zp).ravel().tolist()))
        ins.append("zp")
    kw = {} if axis is None else {"axis": axis}
    out_dt = TensorProto.FLOAT if op == "DequantizeLinear" else (zp_dt if zp is not None else TensorProto.UINT8)
    return simple_model([helper.make_node(op, ins, ["y"], **kw)], [fin("x", x_shape, x_dt)],
                        [fin("y", x_shape, out_dt)], inits)


def case_quantize_zero_scale(tmp):
    return write(tmp, quantize_model(0.0)), r"QuantizeLinear.*y_scale element 0 is 0 .*positive finite"


def case_quantize_negative_scale(tmp):
    return write(tmp, quantize_model([0.5, -0.25, 1.0], axis=1, x_shape=(2, 3))), \
        r"QuantizeLinear.*y_scale element 1 is -0.25"


def case_quantize_nan_scale(tmp):
    return write(tmp, quantize_model(float("nan"))), r"QuantizeLinear.*y_scale.*nan"


def case_quantize_scale_wrong_length(tmp):
    return write(tmp, quantize_model([0.5, 0.25], axis=1, x_shape=(2, 3))), r"QuantizeLinear.*per-axis.*length 3"


def case_dequantize_zero_point_type(tmp):
    return write(tmp, quantize_model(0.5, zp=3, op="DequantizeLinear", x_dt=TensorProto.UINT8,
                                     zp_dt=TensorProto.INT8)), r"DequantizeLinear.*x_zero_point is int8, x is uint8"


MODEL_CASES = [v for k, v in sorted(globals().items()) if k.startswith("case_")]


@pytest.mark.parametrize("make", MODEL_CASES, ids=[f.__name__[5:] for f in MODEL_CASES])
def test_bad_model(make, tmp_path, fissile):
    path, pattern = make(tmp_path)
    for cmd in (["inspect", path], ["run", path, "--output-dir", tmp_path / "out"]):
        expect_clean_error(run_cli(fissile, cmd), pattern)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir()), \
        "outputs were written although the run failed"


# ---- good model, bad use ----

def test_unbound_dim_param(tmp_path, fissile):
    path = write(tmp_path, conv_model(dim_param="batch"))
    expect_clean_error(run_cli(fissile, ["run", path]), r"batch")


def test_input_wrong_shape(tmp_path, fissile):
    path = write(tmp_path, conv_model())
    np.save(tmp_path / "x.npy", np.ones((1, 2, 4, 5), np.float32))
    expect_clean_error(run_cli(fissile, ["run", path, "--input", f"x={tmp_path / 'x.npy'}"]), r"shape|dim|\bx\b")


def test_input_wrong_rank(tmp_path, fissile):
    path = write(tmp_path, conv_model())
    np.save(tmp_path / "x.npy", np.ones((2, 5, 5), np.float32))
    expect_clean_error(run_cli(fissile, ["run", path, "--input", f"x={tmp_path / 'x.npy'}"]), r"rank|shape|\bx\b")


def test_input_wrong_dtype(tmp_path, fissile):
    path = write(tmp_path, conv_model())
    np.save(tmp_path / "x.npy", np.ones((1, 2, 5, 5), np.int64))
    expect_clean_error(run_cli(fissile, ["run", path, "--input", f"x={tmp_path / 'x.npy'}"]),
                       r"dtype|type|int64|float")


def test_unknown_input_name(tmp_path, fissile):
    path = write(tmp_path, conv_model())
    np.save(tmp_path / "x.npy", np.ones((1, 2, 5, 5), np.float32))
    expect_clean_error(run_cli(fissile, ["run", path, "--input", f"nosuch={tmp_path / 'x.npy'}"]), r"nosuch")


def test_bad_npy(tmp_path, fissile):
    path = write(tmp_path, conv_model())
    (tmp_path / "x.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': garbage")
    expect_clean_error(run_cli(fissile, ["run", path, "--input", f"x={tmp_path / 'x.npy'}"]), r"npy|header|parse")


def test_shape_overflow_binding(tmp_path, fissile):
    path = write(tmp_path, conv_model(dim_param="batch"))
    expect_clean_error(run_cli(fissile, ["run", path, "--dim", "batch=4611686018427387904"]),
                       r"overflow|too large|size|memory|batch")


def test_bad_usage(tmp_path, fissile):
    proc = run_cli(fissile, ["run"])
    expect_clean_error(proc, r"usage|missing|model")
    proc = run_cli(fissile, ["inspect", write(tmp_path, conv_model()), "--no-such-option"])
    expect_clean_error(proc, r"no-such-option|unknown")


def test_constant_doubling_stays_bounded(tmp_path, fissile):
    """Concat(c, c) repeated 30 times would fold a 4 KiB initializer into
    4 TiB of constants: fission stops folding at the constants' limit (16x the
    model's own, at least 256 MiB) and leaves the rest to run time, so the
    compile is quick and small.  Memory is measured in a fresh Python process
    whose only child is fissile."""
    c = numpy_helper.from_array(np.linspace(-1, 1, 1024, dtype=np.float32), "c0")
    nodes = [helper.make_node("Concat", [f"c{i}", f"c{i}"], [f"c{i + 1}"], axis=0) for i in range(30)]
    nodes += [helper.make_node("ReduceMax", ["c30"], ["s"], keepdims=0), helper.make_node("Add", ["x", "s"], ["y"])]
    path = write(tmp_path, simple_model(nodes, [fin("x", (1,))], [fin("y", (1,))], [c]))
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.stderr.write(p.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe, str(fissile), "compile", str(path)],
                          capture_output=True, text=True, timeout=120)
    rc, rss_kib = map(int, proc.stdout.split())
    assert rc == 0, proc.stderr[-2000:]
    assert rss_kib < 1536 * 1024, f"compile took {rss_kib / 1024:.0f} MiB"
