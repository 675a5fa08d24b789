"""The measured plan choice (`--autotune`, fsl_model_set_autotune) end to end.

A small model (MatMul + bias + Tanh + MatMul + Softmax: the strategies make
different plans of it) is compiled with `--autotune` in a fresh cache folder
(FSL_CACHE_DIR).  The first compile runs every distinct candidate plan and
keeps the one its own medians say is fastest (the optimal plan unless a
baseline is more than 2% faster); the second reads the medians from the
profile cache and runs nothing; another thread count is another device and
measures again.  The kept plan computes what the reference interpreter
computes, and is the plan its strategy builds.  A profile cache that
cannot be opened gives a warning, never a failure, and is left as it was.
"""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fissile
import fsl_models

TOL = 1e-4
MARGIN = 0.02  # api_tune.c TUNE_MARGIN
STRATEGIES = ("optimal", "greedy", "opfuse", "unfused")
LINE = re.compile(r"^autotune: kept (\w+)'s plan; median (.*) \((.*)\)$", re.M)


def _mlp(path, rng):
    w1 = numpy_helper.from_array(rng.standard_normal((64, 128)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(128).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((128, 32)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Tanh", ["hb"], ["g"]),
        helper.make_node("MatMul", ["g", "w2"], ["z"]),
        helper.make_node("Softmax", ["z"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 32])], [w1, b1, w2])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _compile(fissile_bin, path, *args):
    proc = subprocess.run([str(fissile_bin), "compile", str(path), "--autotune", *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


def _parse(stdout):
    """(kept strategy, {strategy: median ms or the strategy it equals}, tail)."""
    m = LINE.search(stdout)
    assert m, stdout
    med = {}
    for part in m.group(2).split(", "):
        name, value = part.split(" ", 1)
        med[name] = value[2:] if value.startswith("= ") else float(value.removesuffix(" ms"))
    return m.group(1), med, m.group(3)


def _check_choice(kept, med):
    """The kept plan is what the medians say: the fastest, or the optimal plan within the margin."""
    times = {s: v for s, v in med.items() if isinstance(v, float)}
    assert len(times) >= 2 and "optimal" in times
    best = min(times, key=times.get)
    eps = 1e-6  # the CLI prints milliseconds with 6 decimals
    if kept == "optimal":
        assert times["optimal"] <= times[best] * (1 + MARGIN) + eps
    else:
        assert times[kept] <= times[best] + eps and times[kept] * (1 + MARGIN) < times["optimal"] + eps
    for s, v in med.items():
        if isinstance(v, str):
            assert v in times  # an identical plan stood for it


@pytest.fixture
def model(tmp_path, rng, monkeypatch):
    monkeypatch.setenv("FSL_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "mlp.onnx"
    _mlp(path, rng)
    return path


def test_measured_then_cached(model, fissile, tmp_path):
    first = _compile(fissile, model, "--threads", "1")
    kept, med, tail = _parse(first.stdout)
    assert re.fullmatch(r"\d+ rounds, [0-9.]+ s", tail), tail
    assert int(tail.split()[0]) >= 7
    assert set(med) == set(STRATEGIES)
    _check_choice(kept, med)
    assert re.search(rf"^strategy: {kept}\b", first.stdout, re.M)
    assert "backend: cpu" in first.stdout  # --autotune runs on the default backend
    timed = sum(isinstance(v, float) for v in med.values())
    with sqlite3.connect(tmp_path / "cache" / "profile.sqlite") as con:
        assert con.execute("select count(*) from plan_time where seconds > 0").fetchone()[0] == timed
    second = _compile(fissile, model, "--threads", "1")
    kept2, med2, tail2 = _parse(second.stdout)
    assert tail2.startswith("from the profile cache")
    assert (kept2, med2) == (kept, med)
    # another thread count is another device: measured again
    other = _compile(fissile, model, "--threads", "2")
    assert "rounds" in _parse(other.stdout)[2]


def test_kept_plan_runs_and_matches_reference(model, rng):
    x = rng.standard_normal((32, 64)).astype(np.float32)
    want = fissile.InferenceSession(model, backend="ref", strategy=None).run(None, {"x": x})[0]
    sess = fissile.InferenceSession(model, backend="cpu", threads=1, autotune=True)
    plan = sess.plan
    tune = plan["autotune"]
    assert tune is not None and tune["kept"] == plan["strategy"]
    med = {s: tune["same_as"].get(s, tune["median_s"][s]) for s in STRATEGIES}
    _check_choice(tune["kept"], {s: v * 1e3 if isinstance(v, float) else v for s, v in med.items()})
    assert tune["candidates"] == sum(isinstance(v, float) for v in med.values())
    got = sess.run(None, {"x": x})[0]
    assert fsl_models.rel_l2(got, want) <= TOL
    # the kept plan is the one its strategy builds
    alone = fissile.InferenceSession(model, backend="cpu", threads=1, strategy=tune["kept"]).plan
    assert alone["n_kernels"] == plan["n_kernels"] and alone["kernels_by_kind"] == plan["kernels_by_kind"]
    assert alone["plan_hash"] == plan["plan_hash"]
    # the second session reads the choice
    again = fissile.InferenceSession(model, backend="cpu", threads=1, autotune=True).plan["autotune"]
    assert again["cached"] and again["rounds"] == 0 and again["kept"] == tune["kept"]


def test_only_for_the_optimal_strategy(model):
    assert fissile.InferenceSession(model, backend="cpu", threads=1).plan["autotune"] is None
    assert fissile.InferenceSession(model, backend="cpu", threads=1, strategy="greedy",
                                    autotune=True).plan["autotune"] is None


def test_one_plan_for_every_strategy(tmp_path, monkeypatch, fissile):
    monkeypatch.setenv("FSL_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "relu.onnx"
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    proc = _compile(fissile, path, "--threads", "1")
    assert "autotune: every strategy made the same plan (nothing to run)" in proc.stdout


def test_unusable_cache_warns(model, fissile, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    junk = b"not a database\n" * 100
    (cache / "profile.sqlite").write_bytes(junk)
    proc = _compile(fissile, model, "--threads", "1")
    assert "warning: autotune:" in proc.stderr and "this compile only" in proc.stderr, proc.stderr
    kept, med, tail = _parse(proc.stdout)
    _check_choice(kept, med)
    assert "rounds" in tail
    assert (cache / "profile.sqlite").read_bytes() == junk


def test_bench_json(model, fissile, tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([str(fissile), "bench", str(model), "--strategies", "optimal,greedy", "--threads", "1",
                           "--repeats", "2", "--warmup", "1", "--autotune", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^optimal autotune: kept \w+'s plan", proc.stdout, re.M), proc.stdout
    rows = {r["name"]: r for r in json.loads(out.read_text())["strategies"]}
    tune = rows["optimal"]["autotune"]
    assert tune["kept"] in STRATEGIES and tune["candidates"] >= 2 and tune["rounds"] >= 7
    assert tune["median_s"]["optimal"] > 0
    assert "autotune" not in rows["greedy"]
