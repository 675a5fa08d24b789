"""Subgraph benchmark cases: small ONNX models built with onnx.helper.

Each case is a pattern that fusion decides the speed of (the patterns of
DESIGN.md section 5 and the Korch paper): Softmax, LayerNorm, an erf-GELU
MLP, a multi-head attention block, InstanceNorm + ReLU, Conv + BatchNorm +
SiLU, depthwise conv + HardSwish, and linear attention.  Every case comes
at several shapes.  Weights are seeded random initializers; the inputs are
graph inputs with static shapes (no binding needed).

    from cases import CASES
    for c in CASES:
        model = c.build()          # onnx.ModelProto
        c.inputs                   # [(name, shape, numpy dtype)]

`python bench/cases.py DIR` writes every case to DIR/<id>.onnx.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization is opset 17


@dataclass
class Case:
    name: str        # pattern, e.g. "softmax"
    shape: str       # shape label, e.g. "64x1024"
    inputs: list     # [(name, shape tuple, dtype str)]
    builder: Callable[[], onnx.ModelProto]
    description: str = ""

    @property
    def id(self) -> str:
        return f"{self.name}_{self.shape}"

    def build(self) -> onnx.ModelProto:
        return self.builder()


class G:
    """A tiny graph builder: fresh value names, seeded initializers."""

    def __init__(self, name: str, seed: int = 0):
        self.name, self.nodes, self.inits, self.ins, self.outs = name, [], [], [], []
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def fresh(self, base="t"):
        self.n += 1
        return f"{base}{self.n}"

    def input(self, name, shape, dtype=TensorProto.FLOAT):
        self.ins.append(helper.make_tensor_value_info(name, dtype, list(shape)))
        return name

    def const(self, arr, base="w"):
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(self, *shape, scale=None):
        fan_in = shape[0] if len(shape) == 2 else int(np.prod(shape[1:])) if len(shape) > 1 else 1
        s = scale if scale is not None else 1.0 / math.sqrt(max(fan_in, 1))
        return self.const(self.rng.uniform(-s, s, size=shape).astype(np.float32))

    def ints(self, values):
        return self.const(np.array(values, dtype=np.int64), "shape")

    def scalar(self, v):
        return self.const(np.array(v, dtype=np.float32), "c")

    def op(self, op_type, *inputs, n_out=1, **attrs):
        outs = [self.fresh() for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def output(self, name):
        """Makes value `name` (a node output) the graph output "y"."""
        for node in self.nodes:
            for i, o in enumerate(node.output):
                if o == name:
                    node.output[i] = "y"
        self.outs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.ins, self.outs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)
        m = onnx.shape_inference.infer_shapes(m)
        onnx.checker.check_model(m)
        return m


# ---- the patterns ----

def softmax(shape):
    def build():
        g = G("softmax")
        x = g.input("x", shape)
        g.output(g.op("Softmax", x, axis=-1))
        return g.model()
    return build


def layernorm(shape):
    def build():
        g = G("layernorm")
        x = g.input("x", shape)
        d = shape[-1]
        gamma = g.const(np.random.default_rng(1).uniform(0.5, 1.5, d).astype(np.float32))
        beta = g.weight(d, scale=0.1)
        g.output(g.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=1e-5))
        return g.model()
    return build


def gelu_mlp(s, d):
    """x[s,d] -> MatMul(d,4d) + b -> erf-GELU -> MatMul(4d,d) + b."""
    def build():
        g = G("gelu_mlp")
        x = g.input("x", (s, d))
        h = g.op("Add", g.op("MatMul", x, g.weight(d, 4 * d)), g.weight(4 * d, scale=0.1))
        e = g.op("Erf", g.op("Div", h, g.scalar(math.sqrt(2.0))))
        a = g.op("Mul", g.op("Mul", h, g.op("Add", e, g.scalar(1.0))), g.scalar(0.5))
        g.output(g.op("Add", g.op("MatMul", a, g.weight(4 * d, d)), g.weight(d, scale=0.1)))
        return g.model()
    return build


def attention(s, d, heads):
    """x[1,s,d]: Q,K,V projections, heads, softmax(QK^T/sqrt(dh)) V, output projection + residual."""
    def build():
        g = G("attention")
        dh = d // heads
        x = g.input("x", (1, s, d))

        def split(t):  # [1,s,d] -> [1,h,s,dh]
            r = g.op("Reshape", t, g.ints([1, s, heads, dh]))
            return g.op("Transpose", r, perm=[0, 2, 1, 3])

        q = split(g.op("Add", g.op("MatMul", x, g.weight(d, d)), g.weight(d, scale=0.1)))
        k = split(g.op("Add", g.op("MatMul", x, g.weight(d, d)), g.weight(d, scale=0.1)))
        v = split(g.op("Add", g.op("MatMul", x, g.weight(d, d)), g.weight(d, scale=0.1)))
        kt = g.op("Transpose", k, perm=[0, 1, 3, 2])
        scores = g.op("Div", g.op("MatMul", q, kt), g.scalar(math.sqrt(dh)))
        p = g.op("Softmax", scores, axis=-1)
        o = g.op("Transpose", g.op("MatMul", p, v), perm=[0, 2, 1, 3])
        o = g.op("Reshape", o, g.ints([1, s, d]))
        out = g.op("Add", g.op("MatMul", o, g.weight(d, d)), g.weight(d, scale=0.1))
        g.output(g.op("Add", out, x))
        return g.model()
    return build


def instnorm_relu(n, c, h, w):
    def build():
        g = G("instnorm_relu")
        x = g.input("x", (n, c, h, w))
        scale = g.const(np.random.default_rng(2).uniform(0.5, 1.5, c).astype(np.float32))
        y = g.op("InstanceNormalization", x, scale, g.weight(c, scale=0.1), epsilon=1e-5)
        g.output(g.op("Relu", y))
        return g.model()
    return build


def conv_bn_silu(c_in, c_out, hw):
    def build():
        g = G("conv_bn_silu")
        x = g.input("x", (1, c_in, hw, hw))
        y = g.op("Conv", x, g.weight(c_out, c_in, 3, 3), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        rng = np.random.default_rng(3)
        bn = [g.const(rng.uniform(0.5, 1.5, c_out).astype(np.float32)),
              g.const(rng.uniform(-0.1, 0.1, c_out).astype(np.float32)),
              g.const(rng.uniform(-0.1, 0.1, c_out).astype(np.float32)),
              g.const(rng.uniform(0.5, 1.5, c_out).astype(np.float32))]
        y = g.op("BatchNormalization", y, *bn, epsilon=1e-5)
        g.output(g.op("Mul", y, g.op("Sigmoid", y)))
        return g.model()
    return build


def dwconv_hardswish(c, hw):
    def build():
        g = G("dwconv_hardswish")
        x = g.input("x", (1, c, hw, hw))
        y = g.op("Conv", x, g.weight(c, 1, 3, 3), g.weight(c, scale=0.1), kernel_shape=[3, 3],
                 pads=[1, 1, 1, 1], group=c)
        g.output(g.op("HardSwish", y))
        return g.model()
    return build


def linear_attention(heads, s, dh):
    """phi = elu + 1; out = phi(Q) (phi(K)^T V) / (phi(Q) sum_s phi(K)) per head."""
    def build():
        g = G("linear_attention")
        q = g.input("q", (heads, s, dh))
        k = g.input("k", (heads, s, dh))
        v = g.input("v", (heads, s, dh))
        one = g.scalar(1.0)
        fq = g.op("Add", g.op("Elu", q, alpha=1.0), one)
        fk = g.op("Add", g.op("Elu", k, alpha=1.0), one)
        kv = g.op("MatMul", g.op("Transpose", fk, perm=[0, 2, 1]), v)            # [h,dh,dh]
        ksum = g.op("ReduceSum", fk, g.ints([1]), keepdims=1)                    # [h,1,dh]
        num = g.op("MatMul", fq, kv)                                             # [h,s,dh]
        den = g.op("ReduceSum", g.op("Mul", fq, ksum), g.ints([2]), keepdims=1)  # [h,s,1]
        g.output(g.op("Div", num, g.op("Add", den, g.scalar(1e-6))))
        return g.model()
    return build


def _f(*shape):
    return tuple(shape)


CASES: list[Case] = [
    Case("softmax", "64x1024", [("x", _f(64, 1024), "float32")], softmax((64, 1024)), "row softmax"),
    Case("softmax", "12x128x128", [("x", _f(12, 128, 128), "float32")], softmax((12, 128, 128)),
         "attention-score softmax (12 heads, seq 128)"),
    Case("softmax", "8x32000", [("x", _f(8, 32000), "float32")], softmax((8, 32000)), "vocabulary softmax"),
    Case("layernorm", "128x768", [("x", _f(1, 128, 768), "float32")], layernorm((1, 128, 768)), "BERT-base LayerNorm"),
    Case("layernorm", "512x256", [("x", _f(8, 512, 256), "float32")], layernorm((8, 512, 256)), ""),
    Case("gelu_mlp", "128x256", [("x", _f(128, 256), "float32")], gelu_mlp(128, 256), "transformer MLP, erf GELU"),
    Case("gelu_mlp", "128x768", [("x", _f(128, 768), "float32")], gelu_mlp(128, 768), "BERT-base MLP"),
    Case("attention", "s128_d256_h4", [("x", _f(1, 128, 256), "float32")], attention(128, 256, 4),
         "multi-head self-attention block"),
    Case("attention", "s256_d384_h6", [("x", _f(1, 256, 384), "float32")], attention(256, 384, 6), ""),
    Case("instnorm_relu", "1x32x64x64", [("x", _f(1, 32, 64, 64), "float32")], instnorm_relu(1, 32, 64, 64),
         "InstanceNorm + ReLU"),
    Case("instnorm_relu", "4x64x32x32", [("x", _f(4, 64, 32, 32), "float32")], instnorm_relu(4, 64, 32, 32), ""),
    Case("conv_bn_silu", "32to64_56", [("x", _f(1, 32, 56, 56), "float32")], conv_bn_silu(32, 64, 56),
         "Conv 3x3 + BatchNorm + SiLU"),
    Case("conv_bn_silu", "64to128_28", [("x", _f(1, 64, 28, 28), "float32")], conv_bn_silu(64, 128, 28), ""),
    Case("dwconv_hardswish", "64_56", [("x", _f(1, 64, 56, 56), "float32")], dwconv_hardswish(64, 56),
         "depthwise Conv 3x3 + HardSwish"),
    Case("dwconv_hardswish", "128_28", [("x", _f(1, 128, 28, 28), "float32")], dwconv_hardswish(128, 28), ""),
    Case("linear_attention", "h4_s256_d64",
         [(n, _f(4, 256, 64), "float32") for n in "qkv"], linear_attention(4, 256, 64),
         "linear attention (elu+1 feature map)"),
    Case("linear_attention", "h8_s1024_d64",
         [(n, _f(8, 1024, 64), "float32") for n in "qkv"], linear_attention(8, 1024, 64), ""),
]

BY_ID = {c.id: c for c in CASES}


def main(argv) -> int:
    out = Path(argv[1] if len(argv) > 1 else "bench/cases")
    out.mkdir(parents=True, exist_ok=True)
    for c in CASES:
        onnx.save(c.build(), out / f"{c.id}.onnx")
        print(out / f"{c.id}.onnx")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
