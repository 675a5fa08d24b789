"""Integer matmuls and convolutions through oneDNN's int8 primitives (issue 61).

Fission makes ConvInteger, MatMulInteger, QLinearConv and QLinearMatMul an
int32 matmul/conv of 8-bit values cast to int32 minus their zero points;
on the cpu backend oneDNN runs it on the 8-bit data
(src/backend/cpu/onednn_int8.c).  Every case here has constant weights
(what quantizers write) and checks:
- the result bit for bit against the reference interpreter (backend "ref":
  int64 accumulation, the spec's semantics) under every strategy;
- that the linear op ran through the library (plan["n_library"]) where the
  source is uint8 or a matmul's, which oneDNN takes on every ISA (without
  VNNI weights beyond [-64, 64] are split in two 7-bit halves; an int8
  convolution source with a zero point needs VNNI and stays generated code
  without it, exact too).
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fissile

STRATEGIES = ["unfused", "opfuse", "greedy", "optimal"]
SEED = 61


def _tp(dt):
    return {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8, np.float32: TensorProto.FLOAT,
            np.int32: TensorProto.INT32}[dt]


def _save(tmp_path, name, nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return path


def _int8(rng, shape, dt, lim=None):
    lo, hi = (0, 255) if dt == np.uint8 else (-128, 127)
    if lim is not None:
        lo, hi = max(lo, -lim), min(hi, lim)
    return rng.integers(lo, hi + 1, size=shape).astype(dt)


def conv_integer(tmp_path, rng, *, xdt=np.uint8, wlim=64, group=1, strides=(1, 1), pads=(1, 1, 1, 1),
                 dil=(1, 1), x_zp=7, k=3, c=8, m=16, hw=9):
    x = _int8(rng, (2, c, hw, hw), xdt)
    w = _int8(rng, (m, c // group, k, k), np.int8, wlim)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if x_zp is not None:
        inits.append(numpy_helper.from_array(np.array(x_zp, dtype=xdt), "x_zp"))
        ins.append("x_zp")
    node = helper.make_node("ConvInteger", ins, ["y"], group=group, strides=list(strides), pads=list(pads),
                            dilations=list(dil), kernel_shape=[k, k])
    path = _save(tmp_path, "conv_integer", [node], [helper.make_tensor_value_info("x", _tp(xdt), x.shape)],
                 [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits, opset=10)
    return path, {"x": x}


def matmul_integer(tmp_path, rng, *, adt=np.uint8, wlim=64, a_zp=128, shape=(2, 5, 32), n=24, bdt=np.int8,
                   b_zp=None):
    a = _int8(rng, shape, adt)
    if bdt == np.uint8:  # b - b_zp within the limit
        b = (_int8(rng, (shape[-1], n), np.int8, wlim).astype(np.int32) + b_zp).astype(np.uint8)
    else:
        b = _int8(rng, (shape[-1], n), bdt, wlim)
    inits = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.array(a_zp, dtype=adt), "a_zp")]
    ins = ["a", "b", "a_zp"]
    if b_zp is not None:
        inits.append(numpy_helper.from_array(np.array(b_zp, dtype=bdt), "b_zp"))
        ins.append("b_zp")
    node = helper.make_node("MatMulInteger", ins, ["y"])
    path = _save(tmp_path, "matmul_integer", [node], [helper.make_tensor_value_info("a", _tp(adt), a.shape)],
                 [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits, opset=10)
    return path, {"a": a}


def qlinear_conv(tmp_path, rng, *, wlim=64):
    x = _int8(rng, (1, 8, 10, 10), np.uint8)
    w = _int8(rng, (12, 8, 3, 3), np.int8, wlim)
    ws = (rng.random(12) * 0.01 + 0.001).astype(np.float32)
    bias = rng.integers(-2000, 2000, size=12).astype(np.int32)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
             numpy_helper.from_array(np.array(5, np.uint8), "xz"), numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(ws, "ws"), numpy_helper.from_array(np.zeros(12, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "ys"),
             numpy_helper.from_array(np.array(100, np.uint8), "yz"), numpy_helper.from_array(bias, "bias")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"], ["y"],
                            pads=[1, 1, 1, 1], strides=[2, 2])
    path = _save(tmp_path, "qlinear_conv", [node], [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)],
                 [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    return path, {"x": x}


def qlinear_matmul(tmp_path, rng, *, wlim=64):
    a = _int8(rng, (4, 3, 40), np.int8)
    b = _int8(rng, (40, 16), np.int8, wlim)
    inits = [numpy_helper.from_array(np.array(0.03, np.float32), "as"),
             numpy_helper.from_array(np.array(-3, np.int8), "az"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array(np.array(0.02, np.float32), "bs"),
             numpy_helper.from_array(np.array(0, np.int8), "bz"),
             numpy_helper.from_array(np.array(0.5, np.float32), "ys"),
             numpy_helper.from_array(np.array(-10, np.int8), "yz")]
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    path = _save(tmp_path, "qlinear_matmul", [node], [helper.make_tensor_value_info("a", TensorProto.INT8, a.shape)],
                 [helper.make_tensor_value_info("y", TensorProto.INT8, None)], inits)
    return path, {"a": a}


CASES = {
    "conv_u8_pad_zp": lambda t, r: conv_integer(t, r),
    "conv_s8_stride2_group2": lambda t, r: conv_integer(t, r, xdt=np.int8, x_zp=-3, group=2, strides=(2, 2)),
    "conv_dilated_no_zp": lambda t, r: conv_integer(t, r, x_zp=None, dil=(2, 2), pads=(2, 1, 2, 1)),
    "conv_depthwise": lambda t, r: conv_integer(t, r, group=8, c=8, m=8),
    "conv_1x1": lambda t, r: conv_integer(t, r, k=1, pads=(0, 0, 0, 0)),
    "matmul_u8_3d": lambda t, r: matmul_integer(t, r),
    "matmul_s8": lambda t, r: matmul_integer(t, r, adt=np.int8, a_zp=-5, shape=(7, 64)),
    "matmul_u8_weights_zp128": lambda t, r: matmul_integer(t, r, bdt=np.uint8, b_zp=128, shape=(6, 48)),
    "qlinear_conv": qlinear_conv,
    "qlinear_matmul": qlinear_matmul,
}


def _run(path, feeds, backend, strategy=None):
    s = fissile.InferenceSession(str(path), backend=backend, strategy=strategy, threads=2)
    return s.run(None, feeds)[0], (s.plan if backend != "ref" else None)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_int8_linear_exact(tmp_path, case, strategy):
    rng = np.random.default_rng([SEED, len(case), sum(map(ord, case))])
    path, feeds = CASES[case](tmp_path, rng)
    want, _ = _run(path, feeds, "ref")
    got, plan = _run(path, feeds, "cpu", strategy)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert plan["n_fallback"] == 0
    if "s8" not in case or case.startswith("matmul"):
        # 7-bit weights: oneDNN's int8 primitive on every ISA
        assert plan["n_library"] == 1 and plan["n_library_int8"] == 1, plan


@pytest.mark.parametrize("case", ["conv_u8_pad_zp", "matmul_u8_3d"])
def test_int8_linear_full_range_weights_exact(tmp_path, case):
    """Weights over all of int8: oneDNN int8 on every ISA (split in two 7-bit halves without VNNI), exact."""
    rng = np.random.default_rng([SEED, 1])
    make = conv_integer if case.startswith("conv") else matmul_integer
    path, feeds = make(tmp_path, rng, wlim=None)
    want, _ = _run(path, feeds, "ref")
    got, plan = _run(path, feeds, "cpu", "optimal")
    np.testing.assert_array_equal(got, want)
    assert plan["n_fallback"] == 0 and plan["n_library_int8"] == 1, plan


def _qdq_model(tmp_path, rng, op):
    """DequantizeLinear(x) -> op with DequantizeLinear'd int8 weights (per
    output channel, 7-bit) -> Relu -> QuantizeLinear, as quantize_static writes."""
    f32 = np.float32
    if op == "Conv":
        x = _int8(rng, (1, 8, 9, 9), np.uint8)
        w = _int8(rng, (16, 8, 3, 3), np.int8, 64)
        axis, n_out = 0, 16
        extra = dict(pads=[1, 1, 1, 1])
    else:  # MatMul [K, N] weights (axis 1), Gemm transB [N, K] weights (axis 0)
        x = _int8(rng, (6, 32), np.uint8)
        w = _int8(rng, (32, 24) if op == "MatMul" else (24, 32), np.int8, 64)
        axis, n_out = (1 if op == "MatMul" else 0), 24
        extra = {} if op == "MatMul" else dict(transB=1)
    ws = (rng.random(n_out) * 0.01 + 0.002).astype(f32)
    inits = [numpy_helper.from_array(np.array(0.05, f32), "xs"), numpy_helper.from_array(np.array(9, np.uint8), "xz"),
             numpy_helper.from_array(w, "wq"), numpy_helper.from_array(ws, "ws"),
             numpy_helper.from_array(np.zeros(n_out, np.int8), "wz"),
             numpy_helper.from_array((rng.standard_normal(n_out) * 0.1).astype(f32), "bias"),
             numpy_helper.from_array(np.array(0.04, f32), "ys"), numpy_helper.from_array(np.array(3, np.uint8), "yz")]
    ins = ["xd", "wd"] + (["bias"] if op != "MatMul" else [])
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=axis),
             helper.make_node(op, ins, ["y"], **extra),
             helper.make_node("Relu", ["y"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["q"])]
    path = _save(tmp_path, f"qdq_{op}", nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)],
                 [helper.make_tensor_value_info("q", TensorProto.UINT8, None)], inits)
    return path, {"x": x}


@pytest.mark.parametrize("op", ["Conv", "MatMul", "Gemm"])
@pytest.mark.parametrize("strategy", ["opfuse", "optimal"])
def test_qdq_linear_runs_int8(tmp_path, op, strategy):
    """passes/qdq.c: a QDQ conv/matmul runs as an int8 primitive that also
    requantizes (onednn_int8.c: post-ops and a u8 destination) and matches
    ONNX Runtime (which fuses the same pattern into QLinearConv/MatMul)
    within one quantization step, and the reference interpreter (float
    graph) within one step too."""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng([SEED, sum(map(ord, op))])
    path, feeds = _qdq_model(tmp_path, rng, op)
    got, plan = _run(path, feeds, "cpu", strategy)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    ref, _ = _run(path, feeds, "ref")
    assert plan["n_fallback"] == 0 and plan["n_library_int8"] == 1, plan
    # the scales, bias, Relu and QuantizeLinear run inside the primitive (post-ops, u8 destination)
    assert plan["n_library_requant"] == 1, plan
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= 1
    assert (got == want).mean() > 0.95  # mostly bit-equal: both sum integers exactly


def _qdq_activation_model(tmp_path, act, xdt=np.uint8):
    """x (8-bit) -> DequantizeLinear -> act -> QuantizeLinear (q) -> DequantizeLinear -> Add(1) ->
    ReduceMax (y), q also Transposed (qt), with act a QDQ SiLU (Sigmoid quantized, then Mul by the
    input, as quantize_static writes it), Sigmoid, or Tanh: the Transpose reads the 8-bit q, the
    ReduceMax a float function of x."""
    f32 = np.float32
    zx = 131 if xdt == np.uint8 else -5
    inits = [numpy_helper.from_array(np.array(0.07, f32), "xs"), numpy_helper.from_array(np.array(zx, xdt), "xz"),
             numpy_helper.from_array(np.array(1.0 / 255, f32), "ss"), numpy_helper.from_array(np.array(0, np.uint8), "sz"),
             numpy_helper.from_array(np.array(0.03, f32), "ys"), numpy_helper.from_array(np.array(7, np.uint8), "yz"),
             numpy_helper.from_array(np.array(1.0, f32), "one")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"])]
    if act == "silu":
        nodes += [helper.make_node("Sigmoid", ["xd"], ["s"]),
                  helper.make_node("QuantizeLinear", ["s", "ss", "sz"], ["sq"]),
                  helper.make_node("DequantizeLinear", ["sq", "ss", "sz"], ["sd"]),
                  helper.make_node("Mul", ["xd", "sd"], ["a"])]
    else:
        op = {"sigmoid": "Sigmoid", "tanh": "Tanh", "hardswish": "HardSwish"}[act]
        nodes += [helper.make_node(op, ["xd"], ["a"])]
    nodes += [helper.make_node("QuantizeLinear", ["a", "ys", "yz"], ["q"]),
              helper.make_node("DequantizeLinear", ["q", "ys", "yz"], ["qd"]),
              helper.make_node("Add", ["qd", "one"], ["a1"]),
              helper.make_node("ReduceMax", ["a1"], ["y"], axes=[1]),
              helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 3, 1])]
    rng = np.random.default_rng([SEED, len(act)])
    x = _int8(rng, (2, 8, 16, 16), xdt)
    path = _save(tmp_path, f"qdq_{act}", nodes, [helper.make_tensor_value_info("x", _tp(xdt), x.shape)],
                 [helper.make_tensor_value_info("qt", TensorProto.UINT8, None),
                  helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits, opset=14)
    return path, {"x": x}


@pytest.mark.parametrize("act,xdt", [("silu", np.uint8), ("sigmoid", np.int8), ("tanh", np.uint8),
                                     ("hardswish", np.uint8)])
@pytest.mark.parametrize("strategy", ["unfused", "optimal"])
def test_qdq_activation_tables_exact(tmp_path, act, xdt, strategy):
    """passes/lut.c: an activation between 8-bit tensors becomes a 256-entry
    table (plan["n_lut_tables"]): a transcendental, or HardSwish's chain of
    some 17 arithmetic primitives, and its outputs equal the reference
    interpreter's evaluation of the chain bit for bit (every input value of
    x occurs, so every table entry is checked)."""
    path, feeds = _qdq_activation_model(tmp_path, act, xdt)
    s = fissile.InferenceSession(str(path), backend="cpu", strategy=strategy, threads=2)
    got = s.run(None, feeds)
    want = fissile.InferenceSession(str(path), backend="ref").run(None, feeds)
    assert s.plan["n_fallback"] == 0
    assert s.plan["n_lut_tables"] >= 1, s.plan
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
