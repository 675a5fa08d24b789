"""bench/bench.py: fissile strategies, ONNX Runtime and OpenVINO timed in rotating rounds,
ratios taken per round (issue 9, item 7: a comparison that drift on a shared
machine does not bias).

Runs the script on one small subgraph case for two rounds and checks what
the report is built from: every strategy's and each peer's runs of both rounds
kept, one median per round, the ratio being the median of the per-round
ratios and inside their range, and the markdown printing that range.  The
merging helpers are checked on hand-made rounds where the answer is known.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench  # noqa: E402

pytest.importorskip("onnxruntime")


def fs_round(med: float, times: list[float], status: str = "ok") -> dict:
    return {"status": "ok", "wall_s": 1.0, "strategies": [
        {"strategy": "optimal", "name": "optimal", "status": status, "median_s": med, "times_s": times,
         "kernels": 3}]}


def test_merge_rounds_pools_runs_and_keeps_round_medians():
    m = bench.merge_rounds([fs_round(2.0, [1.0, 2.0, 3.0]), fs_round(5.0, [4.0, 5.0, 6.0])])
    s = m["strategies"][0]
    assert s["times_s"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert s["median_s"] == pytest.approx(3.5) and s["min_s"] == 1.0
    assert s["round_median_s"] == [2.0, 5.0]
    assert s["kernels"] == 3 and m["wall_s"] == 2.0 and m["status"] == "ok"


def test_merge_rounds_reports_a_failed_round():
    bad = fs_round(0.0, [], status="error")
    bad["strategies"][0]["error"] = "compile failed"
    s = bench.merge_rounds([fs_round(2.0, [2.0]), bad])["strategies"][0]
    assert s["status"] == "error" and s["error"] == "compile failed" and "round_median_s" not in s


def test_round_ratios_are_per_round():
    # fissile 2x slower in a slow minute, and ORT too: the ratio is 1 in both rounds
    rr = bench.round_ratios([1.0, 2.0], [1.0, 2.0])
    assert rr["median"] == 1.0 and rr["min"] == 1.0 and rr["max"] == 1.0
    rr = bench.round_ratios([0.8, 1.2, 0.9], [1.0, 1.0, 1.0])
    assert rr["median"] == pytest.approx(0.9) and rr["min"] == pytest.approx(0.8) and rr["max"] == pytest.approx(1.2)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_round_orders_balance_positions_and_predecessors(n):
    names = [f"s{i}" for i in range(n)]
    orders = bench.round_orders(names)
    assert len(orders) == (n if n % 2 == 0 else 2 * n)
    assert all(sorted(o) == sorted(names) for o in orders)
    per_pos = len(orders) // n  # each entry in each position this often
    for pos in range(n):
        assert sorted(o[pos] for o in orders) == sorted(names * per_pos)
    # first-order carry-over: every entry right after every other one equally often
    follows = {}
    for o in orders:
        for a, b in zip(o, o[1:]):
            follows[(a, b)] = follows.get((a, b), 0) + 1
    assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1, follows


def test_optimal_vs_baselines_takes_the_faster_baseline_not_the_per_round_min():
    def strat(plan, medians, times):
        return {"plan_hash": plan, "round_median_s": medians, "median_s": float(sorted(times)[len(times) // 2]),
                "times_s": times}
    # the same plan three times, noise only: the per-round min of the two
    # baselines would give optimal 1.25 in every round
    ok = {"opfuse": strat("h", [1.0, 1.25, 1.0], [1.0, 1.0, 1.25, 1.25, 1.0]),
          "greedy": strat("h", [1.25, 1.0, 1.25], [1.25, 1.25, 1.0, 1.0, 1.25]),
          "optimal": strat("h", [1.25, 1.25, 1.25], [1.25] * 5)}
    ob = bench.optimal_vs_baselines(ok)
    assert ob["baseline"] == "opfuse" and ob["rounds"] == pytest.approx([1.25, 1.0, 1.25])
    assert ob["same_plan"] == ["opfuse", "greedy"] and not ob["beyond_spread"]
    # a plan of its own, slower in every run
    ok["optimal"] = strat("o", [2.0, 2.0, 2.0], [2.0] * 5)
    ob = bench.optimal_vs_baselines(ok)
    assert ob["same_plan"] == [] and ob["beyond_spread"] and ob["median"] == pytest.approx(2.0)
    assert bench.optimal_vs_baselines({"optimal": ok["optimal"]}) == {}


def test_bench_script_two_rounds(tmp_path, fissile):
    out = tmp_path / "res"
    proc = subprocess.run([sys.executable, str(ROOT / "bench/bench.py"), "--no-models", "--cases", "softmax",
                           "--strategies", "opfuse,greedy,optimal", "--threads", "1", "--repeats", "3",
                           "--warmup", "1", "--rounds", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((out / "cpu.json").read_text())
    assert res["rounds"] == 2 and res["rows"]
    for row in res["rows"]:
        assert row["ort"]["status"] == "ok" and len(row["ort"]["round_median_s"]) == 2
        assert len(row["ort"]["times_s"]) == 6
        for s in row["fissile"]["strategies"]:
            assert s["status"] == "ok", s
            assert len(s["round_median_s"]) == 2 and len(s["times_s"]) == 6
        lo, hi = row["ratio_range"]["optimal"]
        per_round = [f / o for f, o in zip(next(s for s in row["fissile"]["strategies"]
                                                if s["name"] == "optimal")["round_median_s"],
                                           row["ort"]["round_median_s"])]
        assert lo == pytest.approx(min(per_round)) and hi == pytest.approx(max(per_round))
        assert lo <= row["ratios"]["optimal"] <= hi
        assert row["optimal_vs_baselines"]["min"] <= row["optimal_vs_baselines"]["median"]
        # a softmax is one kernel whatever the strategy: every plan is the same plan
        hashes = {s["name"]: s["plan_hash"] for s in row["fissile"]["strategies"]}
        assert all(len(h) == 16 for h in hashes.values()) and len(set(hashes.values())) == 1, hashes
        assert row["optimal_vs_baselines"]["same_plan"] == ["opfuse", "greedy"]
        assert not row["optimal_vs_baselines"]["beyond_spread"]
    # OpenVINO (installed by scripts/setup.sh) timed in the same rounds: its
    # runs kept per round, the ratios to it and to the faster peer per round
    assert res["peers"] == ["ORT", "OpenVINO"]
    for row in res["rows"]:
        ov = row["peers"]["OpenVINO"]
        assert ov["status"] == "ok", ov
        assert len(ov["round_median_s"]) == 2 and len(ov["times_s"]) == 6
        opt = next(s for s in row["fissile"]["strategies"] if s["name"] == "optimal")["round_median_s"]
        per_round = [f / min(o, v) for f, o, v in zip(opt, row["ort"]["round_median_s"], ov["round_median_s"])]
        lo, hi = row["peer_ratio_range"]["best peer"]["optimal"]
        assert lo == pytest.approx(min(per_round)) and hi == pytest.approx(max(per_round))
        assert row["peer_ratios"]["ORT"]["optimal"] == row["ratios"]["optimal"]
        assert set(row["best_peer"]["who"]) <= {"ORT", "OpenVINO"}
    md = (out / "cpu.md").read_text()
    assert "| optimal/ORT | optimal/OV | optimal/peer | best/peer |" in md
    assert "geometric mean of fissile/the faster peer" in md and "where optimal is slower than OpenVINO" in md
    assert "2 rounds" in md and "opt/base" in md
    assert "where optimal is slower than ORT" in md
    assert " =opfuse,greedy |" in md and "built optimal's very plan" in md
    assert "ran kernels in the reference interpreter (fallback): none" in md


def test_best_peer_is_the_faster_of_each_round():
    """The faster peer is taken round by round (ORT in one, OpenVINO in the
    other), not as the peer with the lower median overall; a peer that
    failed does not count."""
    ort = {"status": "ok", "median_s": 2.0, "round_median_s": [1.0, 3.0]}
    ov = {"status": "ok", "median_s": 2.5, "round_median_s": [2.0, 2.5]}
    bp = bench.best_peer({"ORT": ort, "OpenVINO": ov, "X": {"status": "error: no"}})
    assert bp["round_median_s"] == [1.0, 2.5] and bp["who"] == ["ORT", "OpenVINO"] and bp["name"] == "ORT"
    ratios, ranges = bench.peer_ratios({"optimal": {"round_median_s": [1.5, 2.0]}}, bp)
    assert ratios["optimal"] == pytest.approx((1.5 + 0.8) / 2) and ranges["optimal"] == [0.8, 1.5]
    assert bench.best_peer({"ORT": {"status": "error: x"}}) is None


def test_openvino_precision_hint_follows_the_model(tmp_path):
    """f16 for a float16 model, f32 for a float32 one (issue 61: the hint is
    the model's own precision), f32 for both with --openvino-precision f32."""
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np
    for dt, want in [(np.float16, "f16"), (np.float32, "f32")]:
        w = numpy_helper.from_array(np.ones((2,), dt), "w")
        elem = TensorProto.FLOAT16 if dt == np.float16 else TensorProto.FLOAT
        g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", elem, [2])],
                              [helper.make_tensor_value_info("y", elem, [2])], [w])
        path = tmp_path / f"m_{want}.onnx"
        import onnx
        onnx.save(helper.make_model(g), str(path))
        assert bench.openvino_precision(path, "model") == want
        assert bench.openvino_precision(path, "f32") == "f32"


def test_markdown_names_a_fallback():
    """A strategy whose plan ran kernels in the reference interpreter is named
    in the summary with the count and the reason (nudenet_320n's optimal once
    hid one behind a slow median)."""
    fs = {"strategy": "optimal", "name": "optimal", "status": "ok", "median_s": 2e-3, "times_s": [2e-3],
          "kernels": 3, "fallback": 1, "fallback_why": "kernel 34 (MaxPool 'pool'): c codegen: unsupported"}
    row = {"kind": "model", "name": "m", "shape": "x 1", "description": "", "ratios": {"optimal": 1.2},
           "ratio_range": {"optimal": [1.1, 1.3]}, "ort": {"status": "ok", "median_s": 1e-3},
           "fissile": {"status": "ok", "strategies": [fs]}}
    result = {"date": "d", "note": "", "machine": {}, "versions": {}, "isa": "native", "threads": 1, "repeats": 1,
              "rounds": 1, "warmup": 0, "backend": "cpu", "strategies": ["optimal"], "rows": [row]}
    args = argparse.Namespace(strategies=["optimal"], backend="cpu", threads=1, rounds=1, warmup=0, repeats=1,
                              note="")
    md = bench.markdown(result, args)
    assert "(fallback): m optimal 1 (kernel 34 (MaxPool 'pool')" in md, md


def test_combine_calls_one_call_per_strategy():
    calls = {"greedy": fs_round(1.0, [1.0]), "optimal": {"status": "timeout after 5 s", "strategies": []}}
    calls["greedy"]["strategies"][0].update(strategy="greedy", name="greedy")
    out = bench.combine_calls(calls, ["optimal", "greedy"])
    assert [t["name"] for t in out["strategies"]] == ["optimal", "greedy"]
    assert out["strategies"][0]["status"] == "timeout after 5 s" and out["strategies"][1]["status"] == "ok"
    assert out["status"] == "timeout after 5 s"


_HAS_CPUID_FAULT = Path("/proc/cpuinfo").exists() and " cpuid_fault" in Path("/proc/cpuinfo").read_text()

# numpy's CPU features read in a new thread (CPUID faulting must follow it there), then ORT on a MatMul
_PROBE = """
import json, threading
out = {}
def probe():
    import numpy as np
    out.update({k: bool(v) for k, v in np.core._multiarray_umath.__cpu_features__.items()})
t = threading.Thread(target=probe); t.start(); t.join()
import numpy as np, onnxruntime as ort
from onnx import TensorProto, helper
g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "g",
                      [helper.make_tensor_value_info(n, TensorProto.FLOAT, [64, 64]) for n in "ab"],
                      [helper.make_tensor_value_info("c", TensorProto.FLOAT, [64, 64])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
rng = np.random.default_rng(1)
a, b = (rng.uniform(-1, 1, (64, 64)).astype(np.float32) for _ in range(2))
out["ort_err"] = float(np.abs(s.run(None, {"a": a, "b": b})[0] - a @ b).max())
print(json.dumps(out))
"""


@pytest.mark.skipif(not _HAS_CPUID_FAULT, reason="this CPU/hypervisor offers no CPUID faulting")
def test_hide_avx512_limits_cpuid(tmp_path):
    """bench/hide_avx512.c: under it a process (its threads too) sees no AVX-512 and the rest as the same
    probe sees it without the library, and ORT still computes."""
    lib = bench.build_hide_avx512(tmp_path / "hide_avx512.so")

    def probe(preload):
        env = dict(os.environ, FSL_HIDE_AVX512_COUNT="1")
        env.pop("LD_PRELOAD", None)
        if preload:
            env["LD_PRELOAD"] = str(lib)
        p = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout), p.stderr

    plain, _ = probe(False)
    hidden, err = probe(True)
    assert re.search(r"hide_avx512: [1-9]\d* CPUID emulated", err), err
    assert not any(v for k, v in hidden.items() if k.startswith("AVX512")), hidden
    for k in ["SSE42", "AVX", "F16C", "FMA3", "AVX2"]:
        assert hidden[k] == plain[k], k
    assert hidden["ort_err"] < 1e-4 and plain["ort_err"] < 1e-4
