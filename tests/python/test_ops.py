"""Differential single-op tests: fissile against ONNX Runtime.

Every ONNX op listed in src/ir/ops.def has one or more cases below: a model
with one node, built with onnx.helper, over several shapes and attribute
combinations (broadcasting, negative axes, odd sizes).  Inputs are fresh
random values every run; arguments that must be known at compile time
(axes, shapes, pads, ...) are initializers.  ONNX Runtime runs with all
graph optimizations disabled; ops it lacks fall back to onnx.reference.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fsl_models

ROOT = Path(__file__).resolve().parents[2]
OPSET = 21

# ---- input specs ----


@dataclass
class In:
    shape: tuple = ()
    dtype: str = "float32"
    kind: str = "normal"       # normal pos unit ge1 special halves int nz bool
    lo: int = 0
    hi: int = 10
    value: object = None       # a fixed value: the input becomes an initializer


def F(*shape, kind="normal", dtype="float32"):
    return In(tuple(shape), dtype, kind)


def I(*shape, lo=0, hi=10, dtype="int64", kind="int"):
    return In(tuple(shape), dtype, kind, lo, hi)


def B(*shape):
    return In(tuple(shape), "bool", "bool")


def K(value, dtype="int64"):
    """A constant (initializer) input."""
    return In(value=np.array(value, dtype=dtype))


NONE = In(kind="none")         # an omitted optional input ("")


def gen(spec: In, rng: np.random.Generator) -> np.ndarray:
    if spec.value is not None:
        return spec.value
    s, dt, k = spec.shape, np.dtype(spec.dtype), spec.kind
    if k == "bool":
        return rng.random(s) < 0.5
    if k in ("int", "nz"):
        a = rng.integers(spec.lo, spec.hi, size=s).astype(dt)
        if k == "nz":
            a[a == 0] = 1
        return a
    if k == "pos":
        a = rng.uniform(0.1, 3.0, s)
    elif k == "unit":
        a = rng.uniform(-0.95, 0.95, s)
    elif k == "ge1":
        a = rng.uniform(1.05, 4.0, s)
    elif k == "near1":
        a = rng.uniform(0.8, 1.25, s)
    elif k == "halves":
        a = rng.integers(-4, 4, s) + np.where(rng.random(s) < 0.5, 0.5, rng.uniform(-1, 1, s))
    elif k == "special":
        a = rng.standard_normal(s)
        flat = a.reshape(-1)
        specials = [np.nan, np.inf, -np.inf]
        for i in range(0, flat.size, 3):
            flat[i] = specials[(i // 3) % 3]
    else:
        a = rng.standard_normal(s)
    return np.asarray(a).astype(dt)


@dataclass
class Case:
    op: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    outs: int = 1
    opset: int = OPSET
    label: str = ""
    rtol: float = 1e-4
    atol: float = 1e-5
    oracle: str = "ort"        # "onnx": onnx.reference, where ORT departs from the spec;
                               # "exact": the NumPy integer reference in EXACT (below)

    @property
    def id(self):
        return f"{self.op}-{self.label}" if self.label else self.op


CASES: list[Case] = []


def case(op, inputs, label="", **kw):
    special = ("outs", "opset", "rtol", "atol", "oracle")
    attrs = {k: v for k, v in kw.items() if k not in special}
    extra = {k: v for k, v in kw.items() if k in special}
    CASES.append(Case(op, inputs, attrs, label=label, **extra))


# ---- the cases ----

BCAST = [((3, 4), (3, 4), "same"), ((2, 3, 5), (5,), "row"), ((2, 1, 5), (3, 1), "both"),
         ((7,), (), "scalar"), ((1,), (2, 3), "one")]

for op in ["Add", "Sub", "Mul", "Div"]:
    for a, b, lab in BCAST:
        case(op, [F(*a), F(*b, kind="pos") if op == "Div" else F(*b)], lab)
    case(op, [I(2, 3, lo=-20, hi=20), I(3, lo=1, hi=7)], "int64")
    case(op, [I(4, lo=-20, hi=20, dtype="int32"), I(4, lo=1, hi=7, dtype="int32")], "int32")
case("Pow", [F(2, 3, kind="pos"), F(2, 3)], "same")
case("Pow", [F(2, 3, 4, kind="pos"), F(4)], "bcast")
case("Pow", [F(5, kind="normal"), K(2.0, "float32")], "square")
case("Pow", [F(5, kind="pos"), K(3, "int64")], "int_exponent")
case("Mod", [I(3, 4, lo=-30, hi=30), I(4, lo=-7, hi=8, kind="nz")], "int")
case("Mod", [I(6, lo=-30, hi=30, dtype="int32"), I(6, lo=1, hi=8, dtype="int32")], "int32")
case("Mod", [F(3, 4), F(4, kind="pos")], "fmod", fmod=1)
for op in ["Max", "Min", "Sum", "Mean"]:
    case(op, [F(3, 4)], "one")
    case(op, [F(3, 4), F(4)], "two")
    case(op, [F(2, 1, 4), F(3, 1), F(4)], "three")
case("Max", [I(5, lo=-9, hi=9), I(5, lo=-9, hi=9)], "int")
case("Min", [I(5, lo=-9, hi=9, dtype="int32"), I(1, lo=-9, hi=9, dtype="int32")], "int32")
for op in ["And", "Or", "Xor"]:
    case(op, [B(3, 4), B(3, 4)], "same")
    case(op, [B(2, 3, 4), B(4)], "bcast")
case("Not", [B(3, 5)])
for d in ["LEFT", "RIGHT"]:
    case("BitShift", [I(3, 4, lo=0, hi=200, dtype="uint8"), I(4, lo=0, hi=7, dtype="uint8")], d.lower() + "_u8", direction=d)
    case("BitShift", [I(5, lo=0, hi=10**6, dtype="uint32"), I(5, lo=0, hi=12, dtype="uint32")], d.lower() + "_u32", direction=d)
for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]:
    case(op, [I(3, 4, lo=-100, hi=100, dtype="int32"), I(4, lo=-100, hi=100, dtype="int32")], "int32")
    case(op, [I(6, lo=0, hi=255, dtype="uint8"), I(6, lo=0, hi=255, dtype="uint8")], "uint8")
case("BitwiseNot", [I(3, 4, lo=-100, hi=100, dtype="int32")], "int32")
case("BitwiseNot", [I(7, lo=0, hi=255, dtype="uint8")], "uint8")
for op in ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]:
    case(op, [I(3, 4, lo=0, hi=4), I(4, lo=0, hi=4)], "int")
    case(op, [F(2, 3, 5), F(5)], "float")
    case(op, [I(2, 1, 3, lo=0, hi=3, dtype="int32"), I(4, 1, lo=0, hi=3, dtype="int32")], "int32_bcast")
case("Where", [B(3, 4), F(3, 4), F(3, 4)], "same")
case("Where", [B(2, 1, 4), F(3, 1), F(4)], "bcast")
case("Where", [B(5), I(5, lo=-5, hi=5), I(1, lo=-5, hi=5)], "int")

UNARY = {"Neg": "normal", "Abs": "normal", "Exp": "normal", "Log": "pos", "Sqrt": "pos",
         "Reciprocal": "pos", "Tanh": "normal", "Erf": "normal", "Sigmoid": "normal",
         "Sin": "normal", "Cos": "normal", "Tan": "unit", "Asin": "unit", "Acos": "unit",
         "Atan": "normal", "Sinh": "normal", "Cosh": "normal", "Asinh": "normal",
         "Acosh": "ge1", "Atanh": "unit", "Floor": "normal", "Ceil": "normal",
         "Round": "halves", "Sign": "normal", "Relu": "normal", "Softplus": "normal",
         "Softsign": "normal", "Mish": "normal", "HardSwish": "normal", "Identity": "normal"}
for op, kind in UNARY.items():
    case(op, [F(3, 5, kind=kind)], "2d")
    case(op, [F(2, 3, 7, kind=kind)], "3d")
case("Neg", [I(6, lo=-9, hi=9)], "int")
case("Abs", [I(6, lo=-9, hi=9, dtype="int32")], "int32")
case("Sign", [I(6, lo=-3, hi=3)], "int")
case("Identity", [I(2, 3, lo=-9, hi=9)], "int")
case("Sqrt", [F(1, kind="pos")], "one")
case("IsNaN", [F(3, 5, kind="special")])
case("IsInf", [F(3, 5, kind="special")], "both")
case("IsInf", [F(3, 5, kind="special")], "pos", detect_negative=0)
case("IsInf", [F(3, 5, kind="special")], "neg", detect_positive=0)
for to, name in [(TensorProto.INT32, "f2i32"), (TensorProto.INT64, "f2i64"), (TensorProto.BOOL, "f2bool"),
                 (TensorProto.DOUBLE, "f2f64"), (TensorProto.FLOAT16, "f2f16"), (TensorProto.UINT8, "f2u8")]:
    spec = F(3, 4, kind="pos") if to == TensorProto.UINT8 else F(3, 4)
    case("Cast", [spec], name, to=to)
case("Cast", [I(2, 5, lo=-50, hi=50)], "i64tof", to=TensorProto.FLOAT)
case("Cast", [B(2, 5)], "bool2f", to=TensorProto.FLOAT)
case("Cast", [I(2, 5, lo=-50, hi=50, dtype="int32")], "i32toi64", to=TensorProto.INT64)
case("CastLike", [F(3, 4), I(1, dtype="int32")], "f2i32")
case("CastLike", [I(3, 4, lo=-9, hi=9), F(2)], "i2f")
case("Clip", [F(3, 4), K(-0.5, "float32"), K(0.7, "float32")], "both")
case("Clip", [F(3, 4), NONE, K(0.2, "float32")], "max_only")
case("Clip", [F(2, 6), K(-0.1, "float32")], "min_only")
case("Clip", [F(5)], "none")
case("Clip", [I(6, lo=-9, hi=9), K(-3), K(4)], "int")
case("Dropout", [F(3, 4)], "inference")
case("Dropout", [F(2, 5)], "ratio", seed=1)
case("LeakyRelu", [F(3, 4)], "default")
case("LeakyRelu", [F(2, 7)], "alpha", alpha=0.3)
case("PRelu", [F(2, 3, 4, 4), F(3, 1, 1)], "channel")
case("PRelu", [F(3, 5), F(5)], "row")
case("Elu", [F(3, 4)], alpha=0.7)
case("Selu", [F(3, 4)], "default")
case("Selu", [F(3, 4)], "attrs", alpha=1.5, gamma=2.0)
case("Celu", [F(3, 4)], alpha=1.3)
case("ThresholdedRelu", [F(3, 4)], alpha=0.4)
case("HardSigmoid", [F(3, 4)], "default")
case("HardSigmoid", [F(3, 4)], "attrs", alpha=0.3, beta=0.4)
case("Gelu", [F(3, 5)], "erf", opset=20)
case("Gelu", [F(3, 5)], "tanh", approximate="tanh", opset=20)
case("Shrink", [F(3, 5)], "default")
case("Shrink", [F(3, 5)], "attrs", bias=0.5, lambd=0.3)
case("Swish", [F(3, 5)], "default", opset=24)
case("Swish", [F(2, 7)], "alpha", alpha=1.7, opset=24)

for op in ["Softmax", "LogSoftmax", "Hardmax"]:
    case(op, [F(3, 5)], "default")
    case(op, [F(2, 3, 4)], "axis0", axis=0)
    case(op, [F(2, 3, 4)], "axis1", axis=1)
    case(op, [F(2, 3, 7)], "neg", axis=-2)
case("LayerNormalization", [F(2, 3, 8), F(8), F(8)], "last")
case("LayerNormalization", [F(2, 3, 5), F(3, 5)], "axis_neg2_nobias", axis=-2)
case("LayerNormalization", [F(4, 6), F(6), F(6)], "eps", epsilon=1e-2)
case("BatchNormalization", [F(2, 3, 4, 5), F(3), F(3), F(3), F(3, kind="pos")], "4d")
case("BatchNormalization", [F(2, 4), F(4), F(4), F(4), F(4, kind="pos")], "2d", epsilon=1e-3)
case("InstanceNormalization", [F(2, 3, 4, 5), F(3), F(3)], "4d")
case("InstanceNormalization", [F(2, 3, 7), F(3), F(3)], "3d", epsilon=1e-3)
case("GroupNormalization", [F(2, 6, 4, 3), F(6), F(6)], "g3", num_groups=3)
case("GroupNormalization", [F(1, 4, 5), F(4), F(4)], "g1", num_groups=1)
case("LpNormalization", [F(3, 5)], "default")
case("LpNormalization", [F(2, 3, 4)], "p1_axis1", p=1, axis=1)
case("RMSNormalization", [F(2, 3, 8), F(8)], "last", opset=23)
case("RMSNormalization", [F(2, 3, 5), F(3, 5)], "axis1", axis=1, opset=23)
case("MeanVarianceNormalization", [F(2, 3, 4, 5)], "default")
case("MeanVarianceNormalization", [F(2, 3, 4)], "axes", axes=[1, 2])
case("LRN", [F(2, 5, 4, 4)], "size3", size=3)
case("LRN", [F(1, 6, 3, 3)], "attrs", size=5, alpha=2e-4, beta=0.6, bias=1.5)

REDUCE = {"ReduceSum": "normal", "ReduceMean": "normal", "ReduceMax": "normal", "ReduceMin": "normal",
          "ReduceProd": "near1", "ReduceL1": "normal", "ReduceL2": "normal", "ReduceLogSum": "pos",
          "ReduceLogSumExp": "normal", "ReduceSumSquare": "normal"}
for op, kind in REDUCE.items():
    case(op, [F(2, 3, 4, kind=kind), K([1])], "axis1", opset=18)
    case(op, [F(2, 3, 5, kind=kind), K([-1, 0])], "neg_nokeep", keepdims=0, opset=18)
    case(op, [F(3, 5, kind=kind)], "all", opset=18)
    case(op, [F(3, 1, 7, kind=kind)], "all_nokeep", keepdims=0, opset=18)
case("ReduceSum", [I(3, 4, lo=-9, hi=9), K([0])], "int", opset=18)
case("ReduceMax", [I(3, 4, lo=-9, hi=9), K([1])], "int", opset=18)
case("ReduceSum", [F(3, 4), K([], "int64")], "empty_axes_noop", noop_with_empty_axes=1, opset=18)
for op in ["ArgMax", "ArgMin"]:
    case(op, [F(3, 5)], "default")
    case(op, [F(2, 3, 4)], "axis_neg_nokeep", axis=-1, keepdims=0)
    case(op, [I(4, 6, lo=0, hi=3)], "last_index", axis=1, select_last_index=1)
    case(op, [I(4, 6, lo=0, hi=3)], "first_index", axis=0)

case("MatMul", [F(3, 4), F(4, 5)], "2d")
case("MatMul", [F(2, 3, 4), F(4, 5)], "batch_rhs2d")
case("MatMul", [F(2, 1, 3, 4), F(3, 4, 2)], "bcast")
case("MatMul", [F(4), F(4, 5)], "vec_mat")
case("MatMul", [F(3, 4), F(4)], "mat_vec")
case("MatMul", [F(1, 7), F(7, 1)], "odd")
case("Gemm", [F(3, 4), F(4, 5), F(5)], "bias_row")
case("Gemm", [F(4, 3), F(5, 4), F(3, 5)], "trans", transA=1, transB=1)
case("Gemm", [F(3, 4), F(4, 5), F(1)], "alpha_beta", alpha=0.5, beta=2.0)
case("Gemm", [F(2, 6), F(6, 3)], "no_c")
case("Gemm", [F(3, 4), F(5, 4), F(3, 1)], "transB_col", transB=1)
case("Conv", [F(1, 3, 7, 7), F(4, 3, 3, 3), F(4)], "pads_bias", pads=[1, 1, 1, 1])
case("Conv", [F(2, 4, 9, 8), F(6, 2, 3, 3)], "group_stride", group=2, strides=[2, 2])
case("Conv", [F(1, 2, 10, 10), F(3, 2, 3, 3)], "dilation", dilations=[2, 2], pads=[0, 1, 2, 1])
case("Conv", [F(1, 4, 6, 6), F(4, 1, 3, 3), F(4)], "depthwise", group=4, pads=[1, 1, 1, 1])
case("Conv", [F(1, 3, 7, 5), F(2, 3, 2, 3)], "same_upper", auto_pad="SAME_UPPER", strides=[2, 1])
case("Conv", [F(2, 3, 11), F(4, 3, 3), F(4)], "1d", strides=[2], pads=[1, 1])
case("Conv", [F(1, 2, 4, 5, 5), F(3, 2, 2, 3, 3)], "3d", pads=[0, 1, 1, 0, 1, 1])
case("Conv", [F(1, 5, 4, 4), F(3, 5, 1, 1)], "pointwise")
case("ConvTranspose", [F(1, 3, 4, 4), F(3, 2, 3, 3), F(2)], "stride2", strides=[2, 2])
case("ConvTranspose", [F(1, 2, 5, 5), F(2, 3, 3, 3)], "pads_outpad", strides=[2, 2], pads=[1, 1, 1, 1],
     output_padding=[1, 1])
case("ConvTranspose", [F(1, 4, 3, 3), F(4, 1, 2, 2)], "group", group=2)
case("ConvTranspose", [F(2, 3, 6), F(3, 2, 4)], "1d", strides=[2], pads=[1, 1])
case("ConvTranspose", [F(1, 2, 3, 3), F(2, 2, 3, 3)], "dilation", dilations=[2, 2])
# strides == kernel_shape: one output block per input pixel (a 1x1 conv then depth-to-space)
case("ConvTranspose", [F(1, 6, 5, 7), F(6, 3, 2, 2), F(3)], "blockwise", strides=[2, 2])
case("ConvTranspose", [F(2, 4, 5), F(4, 2, 3)], "blockwise_1d", strides=[3])
case("ConvTranspose", [F(1, 2, 3, 2, 4), F(2, 3, 2, 1, 2)], "blockwise_3d", strides=[2, 1, 2])
case("ConvTranspose", [F(1, 4, 3, 5), F(4, 3, 2, 3), F(6)], "blockwise_group", strides=[2, 3], group=2)
case("ConvTranspose", [F(1, 3, 4, 4), F(3, 2, 2, 2)], "blockwise_pads", strides=[2, 2], pads=[1, 0, 0, 1])
case("ConvTranspose", [F(1, 3, 4, 4), F(3, 5, 1, 1), F(5)], "blockwise_1x1")
# Integer matmul and convolution have one exact answer (ONNX spec: int32
# accumulation that "MUST never overflow"); ONNX Runtime's u8 x s8 kernels on
# AVX2 without VNNI (vpmaddubsw) saturate the int16 sum of two products, so
# these cases are checked against exact NumPy int64 arithmetic, never a peer.
case("MatMulInteger", [I(3, 4, lo=0, hi=256, dtype="uint8"), I(4, 5, lo=0, hi=256, dtype="uint8")], "u8",
     oracle="exact")
case("MatMulInteger", [I(2, 3, 4, lo=0, hi=256, dtype="uint8"), I(4, 5, lo=-128, hi=128, dtype="int8"),
                       K(7, "uint8"), K(-3, "int8")], "zero_points", oracle="exact")
case("MatMulInteger", [I(4, 64, lo=250, hi=256, dtype="uint8"), I(64, 3, lo=120, hi=128, dtype="int8")],
     "u8s8_saturating_pairs", oracle="exact")
case("ConvInteger", [I(1, 2, 5, 5, lo=0, hi=256, dtype="uint8"), I(3, 2, 3, 3, lo=0, hi=256, dtype="uint8")], "u8",
     oracle="exact")
case("ConvInteger", [I(1, 2, 5, 5, lo=0, hi=256, dtype="uint8"), I(3, 2, 2, 2, lo=0, hi=256, dtype="uint8"),
                     K(100, "uint8")], "x_zero_point", pads=[1, 1, 0, 0], oracle="exact")
case("ConvInteger", [I(1, 4, 6, 7, lo=0, hi=256, dtype="uint8"), I(4, 2, 3, 2, lo=-128, hi=128, dtype="int8"),
                     K(3, "uint8"), K(-5, "int8")], "u8s8_group_strides", group=2, strides=[2, 1],
     dilations=[1, 2], pads=[1, 0, 1, 1], oracle="exact")
case("Einsum", [F(3, 4), F(4, 5)], "matmul", equation="ij,jk->ik")
case("Einsum", [F(2, 3, 4), F(2, 4, 5)], "batch", equation="bij,bjk->bik")
case("Einsum", [F(3, 4)], "transpose", equation="ij->ji")
case("Einsum", [F(5), F(5)], "dot", equation="i,i->")
case("Einsum", [F(2, 3, 4)], "sum_axis", equation="abc->ac")
case("Einsum", [F(3, 4), F(5, 4)], "outer_contract", equation="ik,jk->ij")

case("MaxPool", [F(1, 2, 7, 7)], "k3s2p1", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
case("MaxPool", [F(2, 3, 6, 5)], "ceil", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
case("MaxPool", [F(1, 1, 8, 8)], "dilation", kernel_shape=[2, 2], dilations=[2, 2])
case("MaxPool", [F(1, 2, 9)], "1d", kernel_shape=[3], strides=[2])
case("MaxPool", [F(1, 2, 5, 5)], "same_upper", kernel_shape=[3, 3], auto_pad="SAME_UPPER")
# large windows run one spatial axis at a time (pool.c, separable_max)
case("MaxPool", [F(1, 3, 10, 10)], "spp13", kernel_shape=[13, 13], pads=[6, 6, 6, 6])
case("MaxPool", [F(1, 2, 12, 12)], "k7_dilated", kernel_shape=[7, 7], dilations=[2, 2], pads=[6, 6, 6, 6])
case("MaxPool", [F(1, 2, 6, 6, 6)], "3d_k5", kernel_shape=[5, 5, 5], pads=[2] * 6)
case("MaxPool", [F(1, 2, 11, 11)], "k6_ceil", kernel_shape=[6, 6], strides=[1, 2], ceil_mode=1)
case("AveragePool", [F(1, 2, 7, 7)], "k3s2p1", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
case("AveragePool", [F(1, 2, 7, 7)], "count_pad", kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)
case("AveragePool", [F(2, 3, 6, 5)], "ceil", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
case("AveragePool", [F(1, 2, 9)], "1d", kernel_shape=[2])
case("LpPool", [F(1, 2, 6, 6)], "p2", kernel_shape=[2, 2], strides=[2, 2])
case("LpPool", [F(1, 2, 5, 5)], "p1_pads", kernel_shape=[3, 3], p=1, pads=[1, 1, 1, 1])
for op in ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"]:
    case(op, [F(2, 3, 5, 4)], "2d")
    case(op, [F(1, 4, 7)], "1d")
case("GlobalLpPool", [F(1, 3, 3, 3)], "p1", p=1)

case("Reshape", [F(2, 3, 4), K([4, -1])], "infer")
case("Reshape", [F(2, 3, 4), K([0, 4, 3])], "zero_copies")
case("Reshape", [F(6), K([1, 2, 1, 3])], "expand_rank")
case("Reshape", [I(2, 3, lo=-9, hi=9), K([3, 2])], "int")
case("Flatten", [F(2, 3, 4)], "default")
case("Flatten", [F(2, 3, 4)], "axis0", axis=0)
case("Flatten", [F(2, 3, 4, 2)], "neg", axis=-1)
case("Squeeze", [F(1, 3, 1, 4), K([0, -2])], "axes")
case("Squeeze", [F(1, 3, 1, 4)], "all")
case("Unsqueeze", [F(3, 4), K([0, -1])], "neg")
case("Unsqueeze", [F(5), K([1, 0])], "unsorted")
case("Transpose", [F(2, 3, 4)], "default")
case("Transpose", [F(2, 3, 4, 5)], "perm", perm=[0, 2, 3, 1])
case("Transpose", [I(3, 5, lo=0, hi=9)], "int", perm=[1, 0])
case("Concat", [F(2, 3), F(2, 5)], "last", axis=-1)
case("Concat", [F(1, 3), F(4, 3), F(2, 3)], "three_axis0", axis=0)
case("Concat", [I(2, 2, 1, lo=0, hi=9), I(2, 2, 3, lo=0, hi=9)], "int", axis=2)
case("Split", [F(6, 4), K([2, 4])], "sizes", outs=2)
case("Split", [F(2, 9)], "equal3", axis=1, outs=3, opset=13)
case("Split", [F(3, 7)], "num_outputs_uneven", axis=-1, num_outputs=3, outs=3, opset=18)
case("Slice", [F(5, 6), K([1, 0]), K([4, 5])], "basic")
case("Slice", [F(5, 6, 3), K([-1]), K([-100]), K([1]), K([-1])], "neg_step")
case("Slice", [F(7, 8), K([0, 1]), K([7, 8]), K([-1, 0]), K([2, 3])], "steps_neg_axes")
case("Slice", [F(4, 5), K([2]), K([1000]), K([1])], "clamp")
case("Expand", [F(3, 1), K([2, 3, 4])], "grow")
case("Expand", [F(1, 4), K([3, 1])], "keep")
case("Tile", [F(2, 3), K([2, 3])], "2d")
case("Tile", [I(3, lo=0, hi=9), K([4])], "int")
case("Pad", [F(2, 3), K([1, 0, 2, 1])], "constant_zero")
case("Pad", [F(2, 3), K([0, 1, 1, 2]), K(1.5, "float32")], "constant_value")
case("Pad", [F(3, 4), K([2, 1, 1, 2])], "reflect", mode="reflect")
case("Pad", [F(3, 4), K([1, 2, 2, 1])], "edge", mode="edge")
case("Pad", [F(2, 3, 4), K([1, 2]), NONE, K([-1])], "axes", opset=18)
case("Pad", [F(4, 5), K([-1, 0, 0, -2])], "negative")
case("DepthToSpace", [F(1, 8, 2, 3)], "dcr", blocksize=2)
case("DepthToSpace", [F(2, 8, 3, 2)], "crd", blocksize=2, mode="CRD")
# wide rows: the generated nest runs blocksize interleaved streams per row (codegen/loops.c)
case("DepthToSpace", [F(1, 12, 5, 16)], "dcr_wide", blocksize=2)
case("DepthToSpace", [F(1, 18, 4, 9)], "crd_wide_b3", blocksize=3, mode="CRD")
case("SpaceToDepth", [F(1, 2, 4, 6)], "b2", blocksize=2)
case("Trilu", [F(4, 5)], "upper")
case("Trilu", [F(2, 4, 5), K(1)], "upper_k1")
case("Trilu", [F(5, 4), K(-1)], "lower_k-1", upper=0)
case("Constant", [], "tensor", value=numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1))
case("Constant", [], "value_ints", value_ints=[3, -1, 4])
case("Constant", [], "value_float", value_float=2.5)
case("Shape", [F(2, 3, 4)], "default")
case("Shape", [F(2, 3, 4, 5)], "start_end", start=1, end=-1)
case("Size", [F(2, 3, 5)])
case("ConstantOfShape", [K([2, 3])], "default")
case("ConstantOfShape", [K([3, 1, 2])], "value", value=numpy_helper.from_array(np.array([7], dtype=np.int64)))
case("Range", [K(1.0, "float32"), K(4.0, "float32"), K(0.75, "float32")], "float")
case("Range", [K(10), K(-2), K(-3)], "int_down")
case("EyeLike", [F(3, 4)], "default")
case("EyeLike", [F(4, 4)], "k_dtype", k=-1, dtype=TensorProto.INT64)
case("OneHot", [I(2, 3, lo=-4, hi=5), K(5), K([0.0, 1.0], "float32")], "default")
case("OneHot", [I(4, lo=0, hi=3), K(3), K([-1, 2])], "axis0", axis=0)
case("Gather", [F(5, 4), I(3, lo=-5, hi=5)], "axis0")
case("Gather", [F(2, 6, 3), I(2, 2, lo=0, hi=6)], "axis1", axis=1)
case("Gather", [F(3, 4), I(lo=0, hi=4)], "scalar_idx", axis=-1)
case("Gather", [I(5, lo=-9, hi=9), I(7, lo=0, hi=5, dtype="int32")], "int")
case("GatherElements", [F(3, 4), I(3, 2, lo=-4, hi=4)], "axis1", axis=1)
case("GatherElements", [F(3, 4), I(2, 4, lo=0, hi=3)], "axis0")
case("GatherND", [F(3, 4, 2), I(5, 2, lo=0, hi=2)], "pairs")
case("GatherND", [F(2, 3, 4), I(2, 1, lo=0, hi=3)], "batch_dims", batch_dims=1)
case("ScatterElements", [F(4, 5), K([[1, 0, 3], [2, 3, 0]]), F(2, 3)], "axis0_unique")
case("ScatterElements", [F(3, 5), K([[0, 4], [-1, 2], [1, 1]]), F(3, 2)], "add_axis1", axis=1, reduction="add")
case("ScatterElements", [F(3, 4), K([[1, 2], [0, 3]]), F(2, 2)], "max", axis=1, reduction="max")
case("Scatter", [F(4, 5), K([[1, 0, 3], [2, 3, 0]]), F(2, 3)], "opset10", opset=10)
case("ScatterND", [F(4, 3), K([[1], [3]]), F(2, 3)], "rows")
case("ScatterND", [F(2, 3, 4), K([[0, 1], [1, 2]]), F(2, 4)], "pairs")
case("ScatterND", [F(5), K([[1], [1], [3]]), F(3)], "add", reduction="add")

case("Resize", [F(1, 2, 3, 4), NONE, K([1, 1, 2, 2], "float32")], "nearest_scales")
case("Resize", [F(1, 2, 3, 4), NONE, K([1, 1, 1.5, 2.5], "float32")], "linear_half_pixel", mode="linear")
case("Resize", [F(1, 1, 4, 4), NONE, NONE, K([1, 1, 7, 3])], "linear_sizes_align", mode="linear",
     coordinate_transformation_mode="align_corners")
case("Resize", [F(1, 1, 4, 5), NONE, K([1, 1, 2, 2], "float32")], "cubic", mode="cubic")
case("Resize", [F(1, 2, 5, 5), NONE, NONE, K([1, 2, 3, 2])], "nearest_down_floor", nearest_mode="floor",
     coordinate_transformation_mode="asymmetric")
case("Upsample", [F(1, 2, 3, 3), K([1, 1, 2, 3], "float32")], "nearest", opset=9)
case("QuantizeLinear", [F(3, 4), K(0.05, "float32"), K(10, "uint8")], "u8")
case("QuantizeLinear", [F(2, 5), K(0.02, "float32"), K(-3, "int8")], "i8")
case("QuantizeLinear", [F(2, 3, 2), K([0.05, 0.1, 0.02], "float32"), K([1, 2, 3], "uint8")], "per_axis", axis=1)
case("DequantizeLinear", [I(3, 4, lo=0, hi=255, dtype="uint8"), K(0.05, "float32"), K(10, "uint8")], "u8")
case("DequantizeLinear", [I(2, 5, lo=-128, hi=127, dtype="int8"), K(0.1, "float32")], "i8_no_zp")
case("DequantizeLinear", [I(2, 3, 2, lo=0, hi=255, dtype="uint8"), K([0.05, 0.1, 0.02], "float32"),
                          K([1, 2, 3], "uint8")], "per_axis", axis=1)
case("DynamicQuantizeLinear", [F(3, 4)], outs=3)
case("TopK", [F(3, 7), K([3])], "largest", outs=2)
case("TopK", [F(2, 5, 4), K([2])], "smallest_axis1", axis=1, largest=0, outs=2)
case("TopK", [F(4, 6), K([6])], "all_neg_axis", axis=-1, outs=2)
case("CumSum", [F(3, 4), K(1)], "axis1")
case("CumSum", [F(5), K(0)], "exclusive_reverse", exclusive=1, reverse=1)
case("CumSum", [I(2, 3, lo=-5, hi=5), K(-2)], "int_neg_axis")

# Recurrent: X [seq, batch, in], W [dirs, G*hidden, in], R [dirs, G*hidden, hidden], B [dirs, 2*G*hidden]
for op, g in [("RNN", 1), ("GRU", 3), ("LSTM", 4)]:
    h = 3
    case(op, [F(4, 2, 5), F(1, g * h, 5), F(1, g * h, h)], "fwd", hidden_size=h, outs=2)
    case(op, [F(3, 2, 4), F(2, g * h, 4), F(2, g * h, h), F(2, 2 * g * h), NONE, F(2, 2, h)],
         "bidir_bias_h0", hidden_size=h, direction="bidirectional", outs=2)
    case(op, [F(3, 1, 4), F(1, g * h, 4), F(1, g * h, h), F(1, 2 * g * h)], "reverse",
         hidden_size=h, direction="reverse", outs=2)
case("GRU", [F(3, 2, 4), F(1, 9, 4), F(1, 9, 3), F(1, 18)], "linear_before_reset",
     hidden_size=3, linear_before_reset=1, outs=2)
case("LSTM", [F(3, 2, 4), F(1, 12, 4), F(1, 12, 3), F(1, 24), NONE, F(1, 2, 3), F(1, 2, 3)],
     "h0_c0_3out", hidden_size=3, outs=3)
case("RNN", [F(3, 2, 4), F(1, 3, 4), F(1, 3, 3)], "relu", hidden_size=3, activations=["Relu"], outs=2)

# Later additions to ops.def.
case("AffineGrid", [F(2, 2, 3), K([2, 1, 3, 4])], "2d", opset=20)
case("AffineGrid", [F(1, 2, 3), K([1, 1, 4, 3])], "align", align_corners=1, opset=20)
case("Attention", [F(2, 3, 4, 8), F(2, 3, 6, 8), F(2, 3, 6, 8)], "4d", opset=23)
case("Attention", [F(1, 2, 5, 4), F(1, 2, 5, 4), F(1, 2, 5, 4)], "causal", is_causal=1, opset=23)
case("Attention", [F(2, 4, 12), F(2, 6, 12), F(2, 6, 12)], "3d_heads", q_num_heads=3, kv_num_heads=3, opset=23)
case("Attention", [F(1, 2, 3, 4), F(1, 2, 5, 4), F(1, 2, 5, 4), F(3, 5)], "mask_scale", scale=0.3, opset=23)
for op in ["BlackmanWindow", "HammingWindow", "HannWindow"]:
    case(op, [K(10)], "periodic", opset=17)
    case(op, [K(7)], "symmetric", periodic=0, opset=17)
case("CenterCropPad", [F(5, 6), K([3, 8])], "crop_pad", opset=18)
case("CenterCropPad", [F(2, 7, 4, 3), K([4, 5])], "axes", axes=[1, 2], opset=18)
case("Col2Im", [F(1, 4, 16), K([5, 5]), K([2, 2])], "basic", opset=18)
case("Col2Im", [F(2, 3, 12), K([4, 5]), K([1, 3])], "strides_pads", strides=[1, 2], pads=[0, 1, 0, 1], opset=18)
case("CumProd", [F(3, 4, kind="near1"), K(1)], "axis1", opset=26)
case("CumProd", [F(5, kind="near1"), K(0)], "exclusive_reverse", exclusive=1, reverse=1, opset=26)
case("DFT", [F(1, 8, 1), NONE, K(1)], "real", opset=20)
case("DFT", [F(2, 6, 2), NONE, K(1)], "complex", opset=20)
case("DFT", [F(1, 8, 1), NONE, K(1)], "onesided", onesided=1, opset=20)
case("DFT", [F(1, 5, 2), NONE, K(1)], "inverse", inverse=1, opset=20)
case("Det", [F(3, 3)], "2d")
case("Det", [F(2, 4, 4)], "batch")
case("GridSample", [F(1, 2, 4, 5), F(1, 3, 3, 2, kind="unit")], "bilinear", opset=20)
case("GridSample", [F(1, 1, 4, 4), F(1, 2, 5, 2, kind="unit")], "nearest_border", mode="nearest",
     padding_mode="border", opset=20)
case("GridSample", [F(1, 1, 5, 5), F(1, 3, 3, 2, kind="unit")], "align", align_corners=1, opset=20)
case("GridSample", [F(1, 1, 4, 4), F(1, 2, 2, 2, kind="unit")], "cubic", mode="cubic", opset=20)
case("MaxUnpool", [F(1, 1, 2, 2), K([[[[5, 2], [8, 15]]]])], "k2s2", kernel_shape=[2, 2], strides=[2, 2])
# With output_shape, ONNX (and its backend test maxunpool_export_with_output_shape)
# index into the default-sized output and pad; ONNX Runtime indexes the larger one.
case("MaxUnpool", [F(1, 1, 2, 2), K([[[[0, 3], [12, 14]]]]), K([1, 1, 5, 5])], "output_shape",
     kernel_shape=[2, 2], strides=[2, 2], oracle="onnx")
case("MelWeightMatrix", [K(8), K(16), K(8000), K(0.0, "float32"), K(4000.0, "float32")], "basic", opset=17,
     atol=1e-4)
case("NegativeLogLikelihoodLoss", [F(3, 5), I(3, lo=0, hi=5)], "mean")
case("NegativeLogLikelihoodLoss", [F(2, 4, 3), I(2, 3, lo=0, hi=4), F(4, kind="pos")], "weight_sum",
     reduction="sum")
case("NegativeLogLikelihoodLoss", [F(4, 3), K([0, 2, 1, 2])], "none_ignore", reduction="none", ignore_index=2)
case("SoftmaxCrossEntropyLoss", [F(3, 5), I(3, lo=0, hi=5)], "mean")
case("SoftmaxCrossEntropyLoss", [F(2, 4, 3), I(2, 3, lo=0, hi=4), F(4, kind="pos")], "weight_logprob",
     outs=2)
case("SoftmaxCrossEntropyLoss", [F(4, 3), K([0, 2, 1, 2])], "none_ignore", reduction="none", ignore_index=1)
case("QLinearMatMul", [I(3, 4, lo=0, hi=256, dtype="uint8"), K(0.02, "float32"), K(100, "uint8"),
                       I(4, 5, lo=0, hi=256, dtype="uint8"), K(0.03, "float32"), K(120, "uint8"),
                       K(0.5, "float32"), K(110, "uint8")], "u8", oracle="exact")
case("QLinearMatMul", [I(2, 32, lo=0, hi=256, dtype="uint8"), K(0.01, "float32"), K(128, "uint8"),
                       I(32, 6, lo=-128, hi=128, dtype="int8"), K(0.004, "float32"), K(0, "int8"),
                       K(0.05, "float32"), K(-4, "int8")], "u8s8", oracle="exact")
case("QLinearConv", [I(1, 2, 5, 5, lo=0, hi=256, dtype="uint8"), K(0.02, "float32"), K(100, "uint8"),
                     I(3, 2, 3, 3, lo=0, hi=256, dtype="uint8"), K(0.03, "float32"), K(120, "uint8"),
                     K(0.5, "float32"), K(110, "uint8"), I(3, lo=-500, hi=500, dtype="int32")],
     "u8_bias", pads=[1, 1, 1, 1], oracle="exact")
case("ReverseSequence", [F(4, 3), K([4, 2, 3])], "time_major", batch_axis=1, time_axis=0)
case("ReverseSequence", [F(3, 5, 2), K([1, 5, 3])], "batch_major", batch_axis=0, time_axis=1)
case("RotaryEmbedding", [F(1, 2, 3, 8), F(6, 4), F(6, 4), K([[0, 2, 5]])], "4d", opset=23)
case("RotaryEmbedding", [F(2, 3, 8), F(2, 3, 2), F(2, 3, 2)], "3d_no_pos", num_heads=2, opset=23)
case("RotaryEmbedding", [F(1, 2, 3, 8), F(6, 4), F(6, 4), K([[1, 2, 3]])], "interleaved", interleaved=1,
     opset=23)

# ---- exact integer references (oracle="exact") ----
# Semantics from the ONNX spec (MatMulInteger, ConvInteger, QLinearMatMul,
# QLinearConv): operands minus their zero points, products summed exactly
# (int64 here), then for QLinear* the accumulator times the float32
# multiplier a_scale * b_scale / y_scale in float64, rounded half to even,
# plus y_zero_point, saturated to y's type (as onnx.reference computes it).


def _minus_zp(x, zp, axis=None):
    x = x.astype(np.int64)
    if zp is None:
        return x
    zp = np.asarray(zp).astype(np.int64)
    if zp.ndim == 1 and zp.size > 1 and axis is not None:
        shape = [1] * x.ndim
        shape[axis] = zp.size
        zp = zp.reshape(shape)
    return x - zp


def _conv_int64(x, w, attrs):
    """Direct N-d convolution of int64 x [N, C, *S] and w [M, C/group, *K]."""
    nsp = x.ndim - 2
    group = attrs.get("group", 1)
    strides = attrs.get("strides", [1] * nsp)
    dil = attrs.get("dilations", [1] * nsp)
    pads = attrs.get("pads", [0] * (2 * nsp))
    x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nsp]) for i in range(nsp)])
    ksz = w.shape[2:]
    span = [(k - 1) * d + 1 for k, d in zip(ksz, dil)]
    win = np.lib.stride_tricks.sliding_window_view(x, span, axis=tuple(range(2, 2 + nsp)))
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
              + tuple(slice(None, None, d) for d in dil)]
    cg, mg = x.shape[1] // group, w.shape[0] // group
    outs = []
    for g in range(group):
        xs = win[:, g * cg:(g + 1) * cg]                     # [N, cg, *O, *K]
        ws = w[g * mg:(g + 1) * mg]                          # [mg, cg, *K]
        outs.append(np.tensordot(xs, ws, axes=([1] + list(range(2 + nsp, 2 + 2 * nsp)),
                                               [1] + list(range(2, 2 + nsp)))))  # [N, *O, mg]
    return np.moveaxis(np.concatenate(outs, axis=-1), -1, 1)


def _requantize(acc, a_scale, b_scale, y_scale, y_zp):
    mult = (np.float32(a_scale) * np.asarray(b_scale, np.float32)) / np.float32(y_scale)
    d = np.rint(acc.astype(np.float64) * mult.astype(np.float64) + np.float64(y_zp))
    info = np.iinfo(np.asarray(y_zp).dtype)
    return np.clip(d, info.min, info.max).astype(np.asarray(y_zp).dtype)


def _exact_matmul_integer(c, v):
    a, b = v[0], v[1]
    a_zp, b_zp = (v[2] if len(v) > 2 else None), (v[3] if len(v) > 3 else None)
    return [np.matmul(_minus_zp(a, a_zp), _minus_zp(b, b_zp, axis=b.ndim - 1)).astype(np.int32)]


def _exact_conv_integer(c, v):
    x, w = v[0], v[1]
    x_zp, w_zp = (v[2] if len(v) > 2 else None), (v[3] if len(v) > 3 else None)
    return [_conv_int64(_minus_zp(x, x_zp), _minus_zp(w, w_zp, axis=0), c.attrs).astype(np.int32)]


def _exact_qlinear_matmul(c, v):
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = v
    acc = np.matmul(_minus_zp(a, a_zp), _minus_zp(b, b_zp, axis=b.ndim - 1))
    return [_requantize(acc, a_s, b_s, y_s, y_zp)]


def _exact_qlinear_conv(c, v):
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = v[:8]
    acc = _conv_int64(_minus_zp(x, x_zp), _minus_zp(w, w_zp, axis=0), c.attrs)
    if len(v) > 8:
        acc = acc + v[8].astype(np.int64).reshape([1, -1] + [1] * (acc.ndim - 2))
    w_s = np.asarray(w_s, np.float32)
    if w_s.size > 1:
        w_s = w_s.reshape([1, -1] + [1] * (acc.ndim - 2))
    return [_requantize(acc, x_s, w_s, y_s, y_zp)]


EXACT = {"MatMulInteger": _exact_matmul_integer, "ConvInteger": _exact_conv_integer,
         "QLinearMatMul": _exact_qlinear_matmul, "QLinearConv": _exact_qlinear_conv}


def test_exact_references_see_saturation():
    """The exact references are exact where ORT's AVX2 u8s8 kernel saturates:
    255*127 + 255*127 = 64770 does not fit int16."""
    a = np.full((1, 2), 255, np.uint8)
    b = np.full((2, 1), 127, np.int8)
    assert _exact_matmul_integer(None, [a, b])[0][0, 0] == 64770
    x = np.arange(2 * 3 * 4, dtype=np.int64).reshape(1, 2, 3, 4)
    w = np.ones((2, 1, 1, 2), np.int64)
    got = _conv_int64(x, w, {"group": 2, "dilations": [1, 2]})
    assert got.shape == (1, 2, 3, 2)
    assert got[0, 1, 2, 1] == x[0, 1, 2, 1] + x[0, 1, 2, 3]


# ---- building and running ----

_ONNX_TYPE = {np.dtype(k): v for k, v in [
    ("float32", TensorProto.FLOAT), ("float64", TensorProto.DOUBLE), ("float16", TensorProto.FLOAT16),
    ("int64", TensorProto.INT64), ("int32", TensorProto.INT32), ("int16", TensorProto.INT16),
    ("int8", TensorProto.INT8), ("uint8", TensorProto.UINT8), ("uint16", TensorProto.UINT16),
    ("uint32", TensorProto.UINT32), ("uint64", TensorProto.UINT64), ("bool", TensorProto.BOOL)]}


def build_model(c: Case, values: list):
    """The one-node model of case c; returns (model, runtime inputs by name)."""
    node_inputs, graph_inputs, inits, feeds = [], [], [], {}
    for k, (spec, v) in enumerate(zip(c.inputs, values)):
        if spec.kind == "none":
            node_inputs.append("")
            continue
        name = f"in{k}"
        node_inputs.append(name)
        if spec.value is not None:
            inits.append(numpy_helper.from_array(v, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, _ONNX_TYPE[v.dtype], list(v.shape)))
            feeds[name] = v
    outs = [f"out{k}" for k in range(c.outs)]
    node = helper.make_node(c.op, node_inputs, outs, **c.attrs)
    graph = helper.make_graph([node], c.id.replace("-", "_"), graph_inputs,
                              [helper.make_value_info(o, onnx.TypeProto()) for o in outs], inits)
    ir = 10 if c.opset <= 22 else 11 if c.opset <= 24 else 13
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c.opset)], ir_version=ir)
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 -- the runtimes give the better message
        pass
    return model, feeds


def reference(model, feeds, oracle="ort"):
    """ONNX Runtime (no graph optimizations), else onnx.reference."""
    if oracle == "onnx":
        from onnx.reference import ReferenceEvaluator
        return ReferenceEvaluator(model).run(None, feeds)
    try:
        _, outs = fsl_models.run_ort(model.SerializeToString(), feeds, optimize=False)
        return outs
    except Exception as ort_err:  # noqa: BLE001
        from onnx.reference import ReferenceEvaluator
        try:
            return ReferenceEvaluator(model).run(None, feeds)
        except Exception as ref_err:  # noqa: BLE001
            pytest.skip(f"no reference: onnxruntime: {ort_err}; onnx.reference: {ref_err}")


def check_close(c: Case, k: int, got: np.ndarray, want: np.ndarray):
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"output {k}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"output {k}: shape {got.shape}, expected {want.shape}"
    if np.issubdtype(want.dtype, np.floating):
        rtol = max(c.rtol, 1e-3) if want.dtype == np.float16 else c.rtol
        np.testing.assert_allclose(got, want, rtol=rtol, atol=c.atol, equal_nan=True,
                                   err_msg=f"output {k}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"output {k}")


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_op(c: Case, rng, fissile, tmp_path):
    values = [gen(s, rng) for s in c.inputs]
    model, feeds = build_model(c, values)
    want = EXACT[c.op](c, values) if c.oracle == "exact" else reference(model, feeds, c.oracle)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    outs = [f"out{k}" for k in range(c.outs)]
    try:
        got = fsl_models.run_fissile(path, feeds, outs, timeout=120)
    except fsl_models.FissileError as e:
        pytest.fail(f"fissile failed (exit {e.returncode}): {e.stderr.strip()[-2000:]}", pytrace=False)
    for k, name in enumerate(outs):
        check_close(c, k, got[name], want[k])


def onnx_ops_in_table():
    text = (ROOT / "src/ir/ops.def").read_text()
    return re.findall(r"^ONNX\(\s*(\w+)\s*,", text, flags=re.M)


def test_every_op_has_a_case():
    ops = onnx_ops_in_table()
    assert len(ops) > 50, "could not parse src/ir/ops.def"
    covered = {c.op for c in CASES}
    missing = sorted(set(ops) - covered)
    assert not missing, f"ops in src/ir/ops.def without a case in tests/python/test_ops.py: {missing}"


@pytest.mark.parametrize("kernel,pads,want", [(13, 6, 2), (3, 1, 1)])
def test_maxpool_window_split_by_axis(fissile, tmp_path, kernel, pads, want):
    """A 13x13 stride-1 MaxPool reads 13 + 13 taps per output as two
    one-axis windows (two reduce_max primitives); a 3x3 one stays whole."""
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[kernel] * 2, pads=[pads] * 4)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 10])])
    path = tmp_path / "pool.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)]), path)
    dot = subprocess.run([str(fissile), "explain", str(path), "--strategy", "unfused"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert dot.count('label="reduce_max"') == want, dot
