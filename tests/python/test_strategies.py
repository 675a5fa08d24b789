"""Every fusion strategy on every plan backend against the reference interpreter.

For each strategy (unfused, opfuse, greedy, optimal) and backend ("plan-ref":
the reference interpreter executing the plan kernel by kernel; "cpu":
generated C + oneDNN; "opencl": generated OpenCL C, when the build has it
and an OpenCL platform is found, e.g. PoCL), runs real models and a sample
of the single-op cases of test_ops.py in a session of the Python package
(`fissile.InferenceSession(path, strategy=S, backend=B)`, the same library
calls as `fissile run --strategy S --backend B`) and compares the outputs
with a session on backend "ref" (the whole-graph reference interpreter, no
plan: `fissile run --backend ref`) on the same fresh random inputs:
relative L2 error <= 1e-4 for float outputs, exact equality otherwise.
Every session runs under a time limit (conftest.call_with_timeout): a hang
fails its case with a message instead of stalling the run.
"""
from __future__ import annotations

import shutil
import subprocess
import zlib

import numpy as np
import onnx
import pytest

import fissile
import fsl_models
from conftest import SEED, call_with_timeout
from test_ops import CASES, build_model, gen

TOL = 1e-4
# Seconds one session (load, compile, one run) may take.
REAL_MODEL_TIMEOUT = 900
SINGLE_OP_REF_TIMEOUT = 120
SINGLE_OP_TIMEOUT = 300
STRATEGIES = ["unfused", "opfuse", "greedy", "optimal"]
BACKENDS = ["plan-ref", "cpu", "opencl"]
REAL_MODELS = ["resnet18", "minilm_l3", "transformer_encoder", "yolox_nano", "efficientvit_b1", "segformer_b0"]
# On the CPU backend only: nudenet_320n's SPP block (three chained max pools
# in one kernel under optimal) once fell back to the reference interpreter.
CPU_ONLY_MODELS = ["nudenet_320n"]

# Set to a reason string if the CPU backend cannot run yet: its cases are
# then expected to fail (xfail, not strict) instead of failing the suite.
CPU_XFAIL: str | None = None

# One case per op for these ops (the first case test_ops.py lists), chosen
# to cover every kernel kind: elementwise with broadcasting, reductions and
# normalizations, linear ops, movement, gather, and opaque ops.
SAMPLE_OPS = ["Add", "Mul", "Relu", "Sigmoid", "Erf", "Where", "Cast", "Softmax", "LogSoftmax",
              "LayerNormalization", "InstanceNormalization", "BatchNormalization", "ReduceMean",
              "ReduceMax", "ArgMax", "MatMul", "Gemm", "Conv", "ConvTranspose", "MaxPool",
              "AveragePool", "GlobalAveragePool", "Transpose", "Reshape", "Concat", "Slice", "Pad",
              "Expand", "Gather", "Resize", "TopK", "CumSum", "HardSwish", "Gelu", "Einsum"]
# Further cases by id, for paths the first case of their op misses:
# ConvTranspose with strides == kernel_shape (a 1x1 conv + depth-to-space),
# and depth-to-space rows wide enough for interleaved streams.
SAMPLE_IDS = ["ConvTranspose-blockwise_group", "DepthToSpace-dcr_wide", "DepthToSpace-crd_wide_b3"]


def _sample_cases():
    seen, out = set(), []
    for c in CASES:
        if (c.op in SAMPLE_OPS and c.op not in seen) or c.id in SAMPLE_IDS:
            seen.add(c.op)
            out.append(c)
    return out


SAMPLE = _sample_cases()


def _opencl_missing() -> str | None:
    """Why the opencl cases cannot run here (None: they can)."""
    if "opencl" not in fissile.backends():
        return "this build has no OpenCL backend (FSL_BACKEND_OPENCL off)"
    if shutil.which("clinfo"):
        probe = subprocess.run(["clinfo", "-l"], capture_output=True, text=True)
        if "Platform" not in probe.stdout:
            return "no OpenCL platform found (install pocl-opencl-icd)"
    return None


OPENCL_SKIP = _opencl_missing()


def _marks(backend):
    if backend == "cpu" and CPU_XFAIL:
        return [pytest.mark.xfail(reason=CPU_XFAIL, strict=False)]
    if backend == "opencl" and OPENCL_SKIP:
        return [pytest.mark.skip(reason=OPENCL_SKIP)]
    return []


def _params(items, ids, backends=BACKENDS, quick=lambda strategy, backend: True):
    """Every strategy x backend for each item; those quick() declines are
    marked slow (make test-full)."""
    return [pytest.param(s, b, it, marks=_marks(b) + ([] if quick(s, b) else [pytest.mark.slow]), id=f"{s}-{b}-{i}")
            for it, i in zip(items, ids) for s in STRATEGIES for b in backends]


def _quick_real_model(strategy, backend):
    """make test runs the real models on the CPU backend's optimal plan (the
    fused kernels users run); the other 3 strategies x 3 backends are slow
    (minutes each on 2 cores: plan-ref interprets every kernel)."""
    return strategy == "optimal" and backend == "cpu"


def _compare(got: dict, want: dict, what: str):
    problems = []
    for name, w in want.items():
        g = got[name]
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"{name}: got {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}")
        elif np.issubdtype(w.dtype, np.floating):
            finite = np.isfinite(w)
            if not np.array_equal(finite, np.isfinite(g)) or not np.array_equal(np.isnan(w), np.isnan(g)):
                problems.append(f"{name}: NaN/inf positions differ")
                continue
            err = fsl_models.rel_l2(g[finite], w[finite])
            if not err <= TOL:
                problems.append(f"{name}: relative L2 error {err:.3g} > {TOL:g}")
        elif not np.array_equal(g, w):
            problems.append(f"{name}: {int(np.sum(g != w))} of {w.size} values differ")
    assert not problems, f"{what}: " + "; ".join(problems)


def _session_run(path, feeds, names, strategy, backend, timeout, info=None):
    """The outputs `names` of one run of a fresh session, by name (and its
    plan_info() into `info`, a dict, when given); the test fails when that
    takes more than `timeout` seconds."""
    def session_run():
        sess = fissile.InferenceSession(path, strategy=strategy, backend=backend)
        got = dict(zip(names, sess.run(names, feeds)))
        if info is not None:
            info.update(sess.plan)
        return got

    what = f"backend {backend}" if strategy is None else f"strategy {strategy}, backend {backend}"
    return call_with_timeout(timeout, what, session_run)


def _run(path, feeds, names, strategy, backend, timeout, info=None):
    try:
        return _session_run(path, feeds, names, strategy, backend, timeout, info)
    except fissile.FissileError as e:
        pytest.fail(f"strategy {strategy}, backend {backend} failed: {type(e).__name__}: {str(e)[-2000:]}",
                    pytrace=False)


# ---- real models: inputs and the reference output are made once per model ----

_REF_CACHE: dict = {}


def _model_reference(name):
    if name not in _REF_CACHE:
        model = fsl_models.BY_NAME[name]
        if not model.path.exists():
            pytest.skip(f"{model.path} missing: `make bench` (python/fetch_models.py, export_models.py) makes it")
        rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
        feeds = fsl_models.random_inputs(model, rng)
        names = [o.name for o in onnx.load(str(model.path), load_external_data=False).graph.output]
        want = _session_run(model.path, feeds, names, None, "ref", REAL_MODEL_TIMEOUT)
        _REF_CACHE[name] = (model.path, feeds, names, want)
    return _REF_CACHE[name]


@pytest.mark.parametrize("strategy,backend,name",
                         _params(REAL_MODELS, REAL_MODELS, quick=_quick_real_model)
                         + _params(CPU_ONLY_MODELS, CPU_ONLY_MODELS, ["cpu"], quick=_quick_real_model))
def test_real_model(strategy, backend, name):
    """Every kernel of a real model's plan runs natively on the CPU backend
    (generated code or oneDNN, none in the reference interpreter), and the
    outputs match."""
    path, feeds, names, want = _model_reference(name)
    info = {}
    got = _run(path, feeds, names, strategy, backend, REAL_MODEL_TIMEOUT, info)
    _compare(got, want, f"{name} {strategy}/{backend}")
    if backend == "cpu":
        assert info["n_fallback"] == 0, f"{name} {strategy}/cpu: {info['n_fallback']} kernels fall back: " \
                                        f"{info['fallback_why']}"


# ---- single-op models ----

@pytest.mark.parametrize("strategy,backend,c", _params(SAMPLE, [c.id for c in SAMPLE]))
def test_single_op(strategy, backend, c, rng, tmp_path):
    values = [gen(s, rng) for s in c.inputs]
    model, feeds = build_model(c, values)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    outs = [f"out{k}" for k in range(c.outs)]
    try:
        want = _session_run(path, feeds, outs, None, "ref", SINGLE_OP_REF_TIMEOUT)
    except fissile.FissileError as e:
        pytest.skip(f"the reference interpreter cannot run this case: {type(e).__name__}: {str(e)[-300:]}")
    got = _run(path, feeds, outs, strategy, backend, SINGLE_OP_TIMEOUT)
    _compare(got, want, f"{c.id} {strategy}/{backend}")


def test_sample_covers_ops():
    """The sample names ops test_ops.py has cases for (a renamed op would drop silently)."""
    missing = sorted(set(SAMPLE_OPS) - {c.op for c in SAMPLE})
    assert len(missing) <= 3, f"no test_ops.py case for {missing}"
