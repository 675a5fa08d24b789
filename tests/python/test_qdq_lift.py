"""QuantizeLinear of moved, pooled or clamped DequantizeLinear values on the
8-bit integers (src/passes/qdq_lift.c, issue 61).

quantize_static wraps MaxPool, Reshape, Transpose, Concat, Slice, Relu and
Clip in DequantizeLinear ... QuantizeLinear with the same scale and zero
point; fissile computes those stretches on the uint8/int8 values.  Each
model here is checked bit for bit under every strategy on the cpu backend,
and on the reference backend, against a NumPy evaluation of the ONNX spec
(DequantizeLinear in float32, the op, QuantizeLinear dividing in float32
and rounding half to even) and against ONNX Runtime; plan["n_qdq_lifted"]
says how many QuantizeLinear outputs were computed on the integers: the
stretches above, and none where the parameters differ or are per axis.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fissile

ort = pytest.importorskip("onnxruntime")

STRATEGIES = ["unfused", "opfuse", "greedy", "optimal"]
SEED = 611
F32 = np.float32


def _range(dt):
    return (0, 255) if dt == np.uint8 else (-128, 127)


def _dq(q, s, z):
    return ((q.astype(F32) - F32(z)) * F32(s)).astype(F32)


def _q(x, s, z, dt):
    lo, hi = _range(dt)
    return np.clip(np.rint(x.astype(F32) / F32(s)) + F32(z), lo, hi).astype(dt)


def _maxpool(x, k, stride, pad):
    n, c, h, w = x.shape
    xp = np.full((n, c, h + 2 * pad, w + 2 * pad), -np.inf, F32)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    out = np.full((n, c, oh, ow), -np.inf, F32)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride])
    return out


def _model(tmp_path, name, nodes, inputs, inits):
    tp = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, tp[a.dtype.type], a.shape)
                                        for n, a in inputs.items()],
                          [helper.make_tensor_value_info("y", tp[next(iter(inputs.values())).dtype.type], None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return path


def _params(dt, s, z, prefix="p"):
    return [numpy_helper.from_array(np.array(s, F32), f"{prefix}s"), numpy_helper.from_array(np.array(z, dt), f"{prefix}z")]


def _case(name, dt, tmp_path):
    """(path, feeds, NumPy reference of y, expected n_qdq_lifted)."""
    rng = np.random.default_rng([SEED, len(name), int(dt == np.int8)])
    lo, hi = _range(dt)
    s, z = 0.0213, (131 if dt == np.uint8 else -7)
    x = rng.integers(lo, hi + 1, size=(2, 6, 13, 11)).astype(dt)
    dq = lambda i, o, p="p": helper.make_node("DequantizeLinear", [i, f"{p}s", f"{p}z"], [o])  # noqa: E731
    qn = lambda i, o, p="p": helper.make_node("QuantizeLinear", [i, f"{p}s", f"{p}z"], [o])  # noqa: E731
    inits = _params(dt, s, z)
    # every model ends in a Transpose of the quantized q (y): the lifted QuantizeLinear is read
    # inside the graph (passes leave graph outputs alone), and y is compared as integers
    tail = [helper.make_node("Transpose", ["q"], ["y"])]
    feeds = {"x": x}
    if name == "maxpool":
        nodes = [dq("x", "xd"), helper.make_node("MaxPool", ["xd"], ["m"], kernel_shape=[3, 3], strides=[2, 2],
                                                 pads=[1, 1, 1, 1]), qn("m", "q")]
        q = _q(_maxpool(_dq(x, s, z), 3, 2, 1), s, z, dt)
        lifted = 1
    elif name == "relu_clip":
        inits += [numpy_helper.from_array(np.array(-0.4, F32), "cmin"), numpy_helper.from_array(np.array(1.1, F32), "cmax")]
        nodes = [dq("x", "xd"), helper.make_node("Relu", ["xd"], ["r"]), qn("r", "rq"), dq("rq", "rd"),
                 helper.make_node("Clip", ["rd", "cmin", "cmax"], ["c"]), qn("c", "q")]
        q = _q(np.clip(_dq(_q(np.maximum(_dq(x, s, z), 0), s, z, dt), s, z), F32(-0.4), F32(1.1)), s, z, dt)
        lifted = 2
    elif name == "movement":
        x2 = rng.integers(lo, hi + 1, size=(2, 3, 13, 11)).astype(dt)
        feeds["x2"] = x2
        inits.append(numpy_helper.from_array(np.array([2, 9, 13 * 11], np.int64), "shape"))
        inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                  [("st", [1, 0]), ("en", [9, 100]), ("ax", [1, 2]), ("sp", [2, 3])]]
        nodes = [dq("x", "xd"), dq("x2", "x2d"), helper.make_node("Concat", ["xd", "x2d"], ["c"], axis=1),
                 helper.make_node("Reshape", ["c", "shape"], ["r"]),
                 helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
                 helper.make_node("Slice", ["t", "st", "en", "ax", "sp"], ["sl"]), qn("sl", "q")]
        c = np.concatenate([_dq(x, s, z), _dq(x2, s, z)], axis=1).reshape(2, 9, 143).transpose(0, 2, 1)
        q = _q(c[:, 1:9:2, 0:100:3], s, z, dt)
        lifted = 1
    elif name == "other_scale":
        # QuantizeLinear with another scale: a requantization, not lifted
        inits += _params(dt, s * 1.5, z, "o")
        nodes = [dq("x", "xd"), helper.make_node("MaxPool", ["xd"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
                 qn("m", "q", "o")]
        q = _q(_maxpool(_dq(x, s, z), 2, 2, 0), s * 1.5, z, dt)
        lifted = 0
    else:
        raise ValueError(name)
    path = _model(tmp_path, f"lift_{name}_{np.dtype(dt).name}", nodes + tail, feeds, inits)
    return path, feeds, q.transpose(), lifted


CASES = ["maxpool", "relu_clip", "movement", "other_scale"]


@pytest.mark.parametrize("dt", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize("name", CASES)
def test_qdq_lift_exact(tmp_path, name, dt):
    path, feeds, want, lifted = _case(name, dt, tmp_path)
    np.testing.assert_array_equal(ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
                                  .run(None, feeds)[0], want)
    ref = fissile.InferenceSession(str(path), backend="ref")
    np.testing.assert_array_equal(ref.run(None, feeds)[0], want)
    for strategy in STRATEGIES:
        s = fissile.InferenceSession(str(path), backend="cpu", strategy=strategy, threads=2)
        got = s.run(None, feeds)[0]
        assert s.plan["n_fallback"] == 0, s.plan["fallback_why"]
        assert s.plan["n_qdq_lifted"] == lifted, (strategy, s.plan["n_qdq_lifted"])
        np.testing.assert_array_equal(got, want, err_msg=f"{name} {strategy}")
