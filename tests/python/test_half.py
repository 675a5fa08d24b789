"""float16 deployment variants of real models on the CPU backend (issue 61).

The suite's models converted as users convert them
(onnxconverter-common's `float16.convert_float_to_float16`, with float32
inputs and outputs kept, and without: float16 inputs and outputs) run on
the CPU backend with no kernel through the reference interpreter, and
match ONNX Runtime on the same converted model: relative L2 <= 5e-3.
fissile computes half values in float32 between the graph's inputs and
outputs (passes/widen.c), so a converted model keeps the float32 model's
kernels (opfuse: the same count) and its speed; half inputs and outputs
are converted by generated code (the C dialect's float16 storage).
"""
from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest

import fissile
import fsl_models
from conftest import SEED, call_with_timeout

float16 = pytest.importorskip("onnxconverter_common.float16")
ort = pytest.importorskip("onnxruntime")

TOL = 5e-3
TIMEOUT = 900
MODELS = ["resnet18", "mobilenet_v3_small"]
STRATEGIES = ["unfused", "opfuse", "greedy", "optimal"]


def _convert(name, keep_io, tmp_path):
    model = fsl_models.BY_NAME[name]
    if not model.path.exists():
        pytest.skip(f"{model.path} missing: `make models` makes it")
    import warnings
    with warnings.catch_warnings():  # the converter warns for every weight it clamps
        warnings.simplefilter("ignore")
        m16 = float16.convert_float_to_float16(onnx.load(str(model.path)), keep_io_types=keep_io)
    path = tmp_path / f"{name}_fp16{'_io32' if keep_io else ''}.onnx"
    onnx.save(m16, str(path))
    return model, path


def _feeds(model, keep_io):
    rng = np.random.default_rng([SEED, zlib.crc32(model.name.encode())])
    feeds = fsl_models.random_inputs(model, rng)
    if not keep_io:
        feeds = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in feeds.items()}
    return feeds


def _run(path, feeds, strategy):
    def go():
        s = fissile.InferenceSession(str(path), strategy=strategy, backend="cpu",
                                     shapes={k: v.shape for k, v in feeds.items()})
        return s.run(None, feeds), s.plan
    return call_with_timeout(TIMEOUT, f"{path.name} {strategy}/cpu", go)


def _rel_l2(got, want):
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))


@pytest.mark.parametrize("strategy", [pytest.param(s, marks=[] if s == "optimal" else [pytest.mark.slow])
                                      for s in STRATEGIES])
@pytest.mark.parametrize("keep_io", [True, False], ids=["io32", "io16"])
@pytest.mark.parametrize("name", MODELS)
def test_fp16_model(name, keep_io, strategy, tmp_path):
    model, path = _convert(name, keep_io, tmp_path)
    feeds = _feeds(model, keep_io)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got, plan = _run(path, feeds, strategy)
    assert plan["n_fallback"] == 0, f"{name} fp16 {strategy}: {plan['fallback_why']}"
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, f"{name}: output dtype {g.dtype}, ONNX Runtime's {w.dtype}"
        assert g.shape == w.shape
        err = _rel_l2(g, w)
        assert err <= TOL, f"{name} fp16 {strategy}: rel. L2 {err:.3g} against ONNX Runtime"


@pytest.mark.parametrize("name", MODELS)
def test_fp16_keeps_fp32_kernels(name, tmp_path):
    """Half values computed in float32: the converted model (float32 I/O) has
    the float32 model's kernel count under opfuse."""
    model, path = _convert(name, True, tmp_path)
    feeds = _feeds(model, True)
    _, plan16 = _run(path, feeds, "opfuse")
    _, plan32 = _run(model.path, feeds, "opfuse")
    assert plan16["n_kernels"] == plan32["n_kernels"]
