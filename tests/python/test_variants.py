"""Deployment variants of real models on the CPU backend (issue 61).

The suite's models converted as users convert them run on the CPU backend
with no kernel through the reference interpreter, and match ONNX Runtime
on the same converted model:
- float16 (onnxconverter-common's `float16.convert_float_to_float16`, with
  float32 inputs and outputs kept, and without: float16 inputs and
  outputs): relative L2 <= 5e-3.  fissile computes half values in float32
  between the graph's inputs and outputs (passes/widen.c), so a converted
  model keeps the float32 model's kernels (opfuse: the same count) and its
  speed; half inputs and outputs are converted by generated code (the C
  dialect's float16 storage);
- int8, dynamic (`onnxruntime.quantization.quantize_dynamic`: int8 weights,
  DynamicQuantizeLinear + ConvInteger/MatMulInteger) and static QDQ
  (`quantize_static`, per channel, uint8 activations, int8 weights,
  calibrated on seeded random inputs): relative L2 <= 3e-2.
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

TOL = {"fp16_io32": 5e-3, "fp16_io16": 5e-3, "int8_dynamic": 3e-2, "int8_qdq": 3e-2}
TIMEOUT = 900
MODELS = ["resnet18", "mobilenet_v3_small"]
FAST = ("mobilenet_v3_small", "optimal")  # make test: this model under this strategy; the rest is slow
STRATEGIES = ["unfused", "opfuse", "greedy", "optimal"]


def _rng(model, salt=0):
    return np.random.default_rng([SEED, zlib.crc32(model.name.encode()), salt])


def _convert(name, variant, tmp_path):
    model = fsl_models.BY_NAME[name]
    if not model.path.exists():
        pytest.skip(f"{model.path} missing: `make models` makes it")
    path = tmp_path / f"{name}_{variant}.onnx"
    import warnings
    with warnings.catch_warnings():  # the converters warn for every weight they clamp
        warnings.simplefilter("ignore")
        if variant.startswith("fp16"):
            m16 = float16.convert_float_to_float16(onnx.load(str(model.path)), keep_io_types=variant == "fp16_io32")
            onnx.save(m16, str(path))
        else:
            fsl_models.int8_variant(model, variant, path, seed=SEED)
    return model, path


def _feeds(model, variant):
    feeds = fsl_models.random_inputs(model, _rng(model))
    if variant == "fp16_io16":
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


def _params():
    return [pytest.param(name, variant, strategy, marks=[] if (name, strategy) == FAST else [pytest.mark.slow],
                         id=f"{name}-{variant}-{strategy}")
            for name in MODELS for variant in TOL for strategy in STRATEGIES]


@pytest.mark.parametrize("name,variant,strategy", _params())
def test_variant(name, variant, strategy, tmp_path):
    model, path = _convert(name, variant, tmp_path)
    feeds = _feeds(model, variant)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got, plan = _run(path, feeds, strategy)
    assert plan["n_fallback"] == 0, f"{name} {variant} {strategy}: {plan['fallback_why']}"
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, f"{name} {variant}: output dtype {g.dtype}, ONNX Runtime's {w.dtype}"
        assert g.shape == w.shape
        err = _rel_l2(g, w)
        assert err <= TOL[variant], f"{name} {variant} {strategy}: rel. L2 {err:.3g} against ONNX Runtime"


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == FAST[0] else [pytest.mark.slow]) for n in MODELS])
def test_fp16_keeps_fp32_kernels(name, tmp_path):
    """Half values computed in float32: the converted model (float32 I/O) has
    the float32 model's kernel count under opfuse."""
    model, path = _convert(name, "fp16_io32", tmp_path)
    feeds = _feeds(model, "fp16_io32")
    _, plan16 = _run(path, feeds, "opfuse")
    _, plan32 = _run(model.path, feeds, "opfuse")
    assert plan16["n_kernels"] == plan32["n_kernels"]
