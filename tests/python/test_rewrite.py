"""Rewrites of the primitive graph (docs/rewrite.md) on real input: each
rewrite mode gives ONNX Runtime's answer on models whose patterns the rules
match (BatchNorm after a conv, QKV projections, a SqueezeNet fire module
whose 1x1 and 3x3 expand convolutions share an input, SegFormer's MLP
decoder whose 1x1 fuse convolution moves before its bilinear upsamplings), the rules that
should fire do, and a compiled model file keeps its rewrite mode.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import fissile as fsl  # the `fissile` fixture is the binary

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from cases import CASES  # noqa: E402

TOL = 1e-4
MODES = ["off", "rules", "search"]


def fire_module(channels=16, squeeze=8, expand=16, size=14):
    """SqueezeNet's fire module: squeeze 1x1 -> BatchNormalization -> ReLU ->
    (expand 1x1, expand 3x3 pad 1) -> ReLU -> Concat."""
    rng = np.random.default_rng(3)

    def init(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [init("ws", squeeze, channels, 1, 1), init("bs", squeeze), init("w1", expand, squeeze, 1, 1),
             init("b1", expand), init("w3", expand, squeeze, 3, 3), init("b3", expand),
             init("scale", squeeze), init("shift", squeeze), init("mean", squeeze),
             numpy_helper.from_array(rng.uniform(0.5, 2, squeeze).astype(np.float32), "var")]
    nodes = [
        helper.make_node("Conv", ["x", "ws", "bs"], ["s"]),
        helper.make_node("BatchNormalization", ["s", "scale", "shift", "mean", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["sr"]),
        helper.make_node("Conv", ["sr", "w1", "b1"], ["e1"]),
        helper.make_node("Conv", ["sr", "w3", "b3"], ["e3"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["e1"], ["r1"]),
        helper.make_node("Relu", ["e3"], ["r3"]),
        helper.make_node("Concat", ["r1", "r3"], ["y"], axis=1),
    ]
    g = helper.make_graph(nodes, "fire", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def mlp_decoder(fuse_kernel=1, mode="linear"):
    """SegFormer's all-MLP decoder head: three feature maps resized to the
    first one's size (2x by scales, half_pixel; 4x by sizes, align_corners;
    the first a copy), concatenated over channels, a fuse Conv (1x1 in
    SegFormer) with bias, ReLU."""
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array((rng.standard_normal((16, 36, fuse_kernel, fuse_kernel)) * 0.2).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")
    sc = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
    sz = numpy_helper.from_array(np.array([1, 16, 16, 16], np.int64), "sz")
    pad = (fuse_kernel - 1) // 2
    nodes = [
        helper.make_node("Resize", ["f1", "", "sc"], ["r1"], mode=mode),
        helper.make_node("Resize", ["f2", "", "", "sz"], ["r2"], mode=mode,
                         coordinate_transformation_mode="align_corners"),
        helper.make_node("Concat", ["f0", "r1", "r2"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w", "b"], ["c"], pads=[pad] * 4),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
           for n, s in (("f0", [1, 8, 16, 16]), ("f1", [1, 12, 8, 8]), ("f2", [1, 16, 4, 4]))]
    g = helper.make_graph(nodes, "mlp_decoder", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [w, b, sc, sz])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def segformer_head():
    """SegFormer's decoder as exported: each stage's tokens [1, HW, C_i]
    projected to 16 channels (MatMul, Add), transposed and reshaped to
    NCHW, resized to the first stage's 16x16 (bilinear), concatenated, a
    1x1 fuse Conv."""
    rng = np.random.default_rng(6)
    inits, nodes, ins, cat = [], [], [], []
    for i, (c, hw) in enumerate(((8, 16), (12, 8), (16, 4))):
        inits += [numpy_helper.from_array((rng.standard_normal((c, 16)) * 0.3).astype(np.float32), f"m{i}"),
                  numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), f"b{i}"),
                  numpy_helper.from_array(np.array([1, 16, hw, hw], np.int64), f"s{i}")]
        ins.append(helper.make_tensor_value_info(f"t{i}", TensorProto.FLOAT, [1, hw * hw, c]))
        nodes += [helper.make_node("MatMul", [f"t{i}", f"m{i}"], [f"p{i}"]),
                  helper.make_node("Add", [f"p{i}", f"b{i}"], [f"q{i}"]),
                  helper.make_node("Transpose", [f"q{i}"], [f"u{i}"], perm=[0, 2, 1]),
                  helper.make_node("Reshape", [f"u{i}", f"s{i}"], [f"v{i}"])]
        if hw != 16:
            inits.append(numpy_helper.from_array(np.array([1, 1, 16 / hw, 16 / hw], np.float32), f"sc{i}"))
            nodes.append(helper.make_node("Resize", [f"v{i}", "", f"sc{i}"], [f"r{i}"], mode="linear"))
            cat.append(f"r{i}")
        else:
            cat.append(f"v{i}")
    inits += [numpy_helper.from_array((rng.standard_normal((16, 48, 1, 1)) * 0.2).astype(np.float32), "w"),
              numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")]
    nodes += [helper.make_node("Concat", cat[::-1], ["cat"], axis=1),
              helper.make_node("Conv", ["cat", "w", "b"], ["y"])]
    g = helper.make_graph(nodes, "segformer_head", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def models(tmp_path):
    """The first shape of four bench cases, the fire module and the MLP
    decoder."""
    out = {}
    for name in ("conv_bn_silu", "attention", "gelu_mlp", "layernorm"):
        c = next(c for c in CASES if c.name == name)
        p = tmp_path / f"{c.id}.onnx"
        p.write_bytes(c.build().SerializeToString())
        out[c.id] = p
    p = tmp_path / "fire.onnx"
    p.write_bytes(fire_module().SerializeToString())
    out["fire"] = p
    p = tmp_path / "decoder.onnx"
    p.write_bytes(mlp_decoder().SerializeToString())
    out["decoder"] = p
    return out


def rel_l2(got, want):
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return models(tmp_path_factory.mktemp("rewrite"))


@pytest.mark.parametrize("mode", MODES)
def test_modes_match_onnxruntime(suite, mode, rng):
    for name, path in suite.items():
        sess = fsl.InferenceSession(path, rewrite=mode, threads=1)
        feeds = {i.name: rng.standard_normal([d for d in i.shape]).astype(np.float32) for i in sess.get_inputs()}
        got = sess.run(None, feeds)
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
        for g, w in zip(got, want):
            assert rel_l2(g, w) <= TOL, (name, mode)
        plan = sess.plan
        assert plan["rewrite"] == mode
        # every model has a pattern the rules match
        assert (plan["n_rewrites"] == 0) == (mode == "off"), (name, plan)


def compile_summary(fissile_exe, path, *args, env=None):
    p = subprocess.run([str(fissile_exe), "compile", str(path), "--backend", "ref", *args],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_expected_rules_fire(fissile, suite):
    conv = next(p for n, p in suite.items() if n.startswith("conv_bn_silu"))
    assert re.search(r"^rewrites: rules, 1 applied \(conv-scale-into-weights x1\) in [0-9.]+ s$",
                     compile_summary(fissile, conv), re.M)
    assert re.search(r"^rewrites: off$", compile_summary(fissile, conv, "--rewrite", "off"), re.M)
    att = next(p for n, p in suite.items() if n.startswith("attention"))
    assert "permute-pair x1" in compile_summary(fissile, att)
    # the fire module's BatchNormalization goes into the squeeze conv; the
    # search decides about its expand convolutions (both are cost rules)
    fire = compile_summary(fissile, suite["fire"], "--rewrite", "search")
    assert re.search(r"^rewrites: search, \d+ applied", fire, re.M), fire


def test_conv_moves_before_resize(fissile, suite, tmp_path, rng):
    # SegFormer's decoder: the 1x1 fuse conv runs on each branch at its own
    # resolution, before the bilinear upsampling (fewer FLOPs, one fewer
    # 36-channel tensor)
    out = compile_summary(fissile, suite["decoder"])
    assert "conv1x1-before-resample x1" in out, out
    # near misses: a 3x3 fuse conv does not commute with the resampling;
    # nearest upsampling is a view (no gathers to move the conv through);
    # cubic taps are linear too
    for kernel, mode, fires in ((3, "linear", False), (1, "nearest", False), (1, "cubic", True)):
        p = tmp_path / f"decoder_{kernel}_{mode}.onnx"
        p.write_bytes(mlp_decoder(kernel, mode).SerializeToString())
        assert ("conv1x1-before-resample" in compile_summary(fissile, p)) == fires, (kernel, mode)
        sess = fsl.InferenceSession(p, threads=1)
        feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in sess.get_inputs()}
        want = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feeds)
        assert rel_l2(sess.run(None, feeds)[0], want[0]) <= TOL, (kernel, mode)


def test_conv_merges_into_projections(fissile, tmp_path, rng):
    # after the fuse conv moved before the upsampling, each branch's slice
    # of it follows the branch's MatMul projection: the two weight matrices
    # multiply at compile time, and no conv is left
    p = tmp_path / "segformer_head.onnx"
    p.write_bytes(segformer_head().SerializeToString())
    out = compile_summary(fissile, p)
    assert "conv1x1-before-resample x1" in out and "conv1x1-into-matmul x3" in out, out
    for mode in MODES:
        sess = fsl.InferenceSession(p, rewrite=mode, threads=1)
        feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in sess.get_inputs()}
        want = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feeds)
        assert rel_l2(sess.run(None, feeds)[0], want[0]) <= TOL, mode


def test_search_merges_sibling_convs_with_fewer_kernels(fissile, suite):
    """Sibling convs over one input (the fire module's expand branches):
    the search keeps a merge only when the plan gets cheaper.  Cheaper by
    the search's own cost: the greedy plan's prediction on the documented
    default device (FSL_DEVICE=default), the same on every machine, not the
    calibrated one."""
    env = dict(os.environ, FSL_DEVICE="default")

    def kernels_and_predicted(mode):
        out = compile_summary(fissile, suite["fire"], "--rewrite", mode, "--strategy", "greedy", env=env)
        assert re.search(r"^device: default", out, re.M), out
        k = int(re.search(r"^kernels: (\d+)", out, re.M).group(1))
        ms = float(re.search(r"^predicted: ([0-9.]+) ms", out, re.M).group(1))
        return k, ms, out
    k_rules, ms_rules, _ = kernels_and_predicted("rules")
    k_search, ms_search, out = kernels_and_predicted("search")
    assert ms_search <= ms_rules + 1e-6, out  # printed to 1e-6 ms
    if "conv-siblings" in out:
        assert k_search <= k_rules, out


def test_compiled_file_keeps_rewrite_mode(fissile, suite, tmp_path, rng):
    path = suite["fire"]
    x = rng.standard_normal((1, 16, 14, 14)).astype(np.float32)
    for mode in MODES:
        out = tmp_path / f"fire_{mode}.fsl"
        p = subprocess.run([str(fissile), "compile", str(path), "--rewrite", mode, "-o", str(out)],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        sess = fsl.InferenceSession(out)
        assert sess.plan["rewrite"] == mode
        (y,) = sess.run(None, {"x": x})
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        assert rel_l2(y, want) <= TOL


def test_bad_rewrite_mode(fissile, suite):
    p = subprocess.run([str(fissile), "compile", str(suite["fire"]), "--rewrite", "bogus"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "--rewrite expects off, rules or search" in p.stderr
    with pytest.raises(fsl.InvalidArgument):
        fsl.InferenceSession(suite["fire"], rewrite="bogus")


def test_compiled_file_replays_its_search(fissile, suite, tmp_path, rng):
    """A file compiled with --rewrite search rebuilds the same graph when it
    is loaded where the search would go elsewhere: under another
    $FSL_REWRITE_ALPHA (on the fire module alpha = 1 keeps 3 convolutions,
    1.1 merges the expand branches), or on a machine where the time budget
    runs out at another point.  The file records the search's alpha and
    evaluations and the load replays them."""
    path = suite["fire"]
    x = rng.standard_normal((1, 16, 14, 14)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    kernels = {}
    for alpha in ("1", "1.1"):
        out = tmp_path / f"fire_alpha{alpha}.fsl"
        env = dict(os.environ, FSL_REWRITE_ALPHA=alpha)
        p = subprocess.run([str(fissile), "compile", str(path), "--rewrite", "search", "-o", str(out)],
                           capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, p.stderr
        kernels[alpha] = int(re.search(r"^kernels: (\d+)", p.stdout, re.M).group(1))
        # loaded here, under the other alpha
        os.environ["FSL_REWRITE_ALPHA"] = "1.1" if alpha == "1" else "1"
        try:
            sess = fsl.InferenceSession(out)
        finally:
            del os.environ["FSL_REWRITE_ALPHA"]
        assert sess.plan["n_kernels"] == kernels[alpha]
        (y,) = sess.run(None, {"x": x})
        assert rel_l2(y, want) <= TOL
    assert kernels["1"] > kernels["1.1"], kernels  # the two searches differ
