"""`--profile` end to end: measured kernel costs and the SQLite profile cache.

A small model (MatMul + bias + Tanh + MatMul + Softmax) is compiled with
`fissile compile --profile` in a fresh cache folder (FSL_CACHE_DIR): the
first compile measures its kernels (progress on stderr), the second reads
every time from the cache and measures nothing; the plan built on measured
costs computes what the reference interpreter computes; a corrupt cache
file gives a warning and the analytic costs, never a failure; `bench
--profile --json` reports where the costs came from.
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

import fsl_models

TOL = 1e-4


def _model(path, rng):
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Tanh", ["hb"], ["g"]),
        helper.make_node("MatMul", ["g", "w2"], ["z"]),
        helper.make_node("Softmax", ["z"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w1, b1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def _compile(fissile, path, *args):
    proc = subprocess.run([str(fissile), "compile", str(path), "--threads", "1", *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def model(tmp_path, rng, monkeypatch, fissile):
    monkeypatch.setenv("FSL_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "mlp.onnx"
    _model(path, rng)
    return path


def test_second_compile_profiles_nothing(model, fissile, tmp_path):
    first = _compile(fissile, model, "--profile")
    m = re.search(r"costs: measured: 0 kernel times from the profile cache, (\d+) measured now", first.stdout)
    assert m, first.stdout
    measured = int(m.group(1))
    assert measured > 0
    assert re.search(rf"profile: {measured}/{measured} kernels", first.stderr), first.stderr
    db = tmp_path / "cache" / "profile.sqlite"
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from kernel_time where seconds > 0").fetchone()[0] == measured
        assert "1 threads" in con.execute("select description from device").fetchone()[0]
    second = _compile(fissile, model, "--profile")
    assert f"{measured} kernel times from the profile cache, 0 measured now" in second.stdout
    assert "nothing profiled" in second.stdout
    assert "profile:" not in second.stderr
    plain = _compile(fissile, model)
    assert "costs: analytic (roofline)" in plain.stdout


def test_measured_plan_matches_reference(model, fissile, rng):
    feeds = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
    want = fsl_models.run_fissile(model, feeds, ["y"], extra_args=["--backend", "ref"])["y"]
    for backend in ("cpu", "plan-ref"):
        got = fsl_models.run_fissile(model, feeds, ["y"], extra_args=["--strategy", "optimal", "--backend", backend,
                                                                       "--threads", "1", "--profile"])["y"]
        assert fsl_models.rel_l2(got, want) <= TOL


def test_corrupt_cache_falls_back(model, fissile, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    junk = b"not a database\n" * 100
    (cache / "profile.sqlite").write_bytes(junk)
    proc = _compile(fissile, model, "--profile")
    assert "warning" in proc.stderr and "profile.sqlite" in proc.stderr, proc.stderr
    assert "costs: analytic (roofline)" in proc.stdout
    assert (cache / "profile.sqlite").read_bytes() == junk


def test_bench_json_reports_costs(model, fissile, tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([str(fissile), "bench", str(model), "--strategies", "greedy,optimal", "--threads", "1",
                           "--repeats", "2", "--warmup", "1", "--profile", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^costs optimal: measured: ", proc.stdout, re.M), proc.stdout
    rows = {r["strategy"]: r for r in json.loads(out.read_text())["strategies"]}
    for s in ("greedy", "optimal"):
        assert rows[s]["profiled"] is True
        assert rows[s]["plan_kernels_measured"] == rows[s]["kernels"]
    # greedy (compiled first) stored its kernels; optimal finds them among its candidates
    assert rows["greedy"]["costs_measured"] > 0
    assert rows["optimal"]["costs_cached"] > 0


def test_cpu_step_profile(model, fissile, monkeypatch):
    """FSL_CPU_PROFILE lists the slowest steps by their median over the runs
    after the first (that one pays one-time costs), each with its mean; a
    single run is listed alone, and says so."""
    monkeypatch.setenv("FSL_CPU_PROFILE", "3")
    proc = subprocess.run([str(fissile), "bench", str(model), "--threads", "1", "--strategies", "optimal",
                           "--repeats", "4"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"cpu profile: (\d+) runs after the first, ([0-9.]+) ms per run", proc.stderr)
    assert m, proc.stderr
    assert int(m.group(1)) >= 4
    med_sum = re.search(r"step medians sum to ([0-9.]+) ms", proc.stderr)
    assert med_sum, proc.stderr
    listed = re.findall(r"^\s+([0-9.]+) ms  step \d+ kernel .*; mean ([0-9.]+) ms$", proc.stderr, re.M)
    steps = [float(a) for a, _ in listed]
    assert 1 <= len(steps) <= 3 and steps == sorted(steps, reverse=True)
    assert sum(steps) <= float(med_sum.group(1)) + 0.002
    assert sum(float(b) for _, b in listed) <= float(m.group(2)) * 1.01 + 0.002
    proc = subprocess.run([str(fissile), "run", str(model), "--threads", "1", "--backend", "cpu"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "cpu profile: the first run only" in proc.stderr, proc.stderr
