"""CUDA C compile check per real model: `fissile compile MODEL --backend
cuda --emit-only` (optimal plan) for every model of python/fsl_models.py
that is on disk.

    .venv/bin/python bench/cuda_emit.py [--models a,b] [--out FILE]

Reports plan kernels, generated functions, kernels the CUDA dialect
refuses, NVRTC wall time per architecture (sm_90, sm_80: front end +
ptxas, one source per model), the largest resource figures of ptxas
(registers, spills, stack, shared memory) over the model's functions, and
how many functions run with a fixed block size (REDUCE kernels with a
thread block per row beside those with a thread per row; tiled matmuls
and convolutions).  No GPU needed.
Writes bench/results/cuda.md.  `make models` fetches and exports the models.
"""
from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "python"))  # after site-packages: an installed fissile (with its extension) wins over python/fissile
import fsl_models  # noqa: E402
from fsl_models import MODELS, shape_args  # noqa: E402


def emit(model):
    proc = subprocess.run([str(fsl_models.fissile_bin()), "compile", str(model.path), "--backend", "cuda",
                           "--emit-only", *shape_args(model)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[0][:200]}
    out = proc.stdout
    m = re.search(r"cuda: (\d+) kernels: (\d+) generated as (\d+) functions, (\d+) opaque \(host\), (\d+) refused", out)
    r = dict(zip(["kernels", "generated", "functions", "opaque", "refused"], map(int, m.groups())))
    r["nvrtc"] = {a: float(s) for a, s in re.findall(r"(sm_\d+) ([\d.]+) s \(CUBIN", out)}
    r["source_kb"] = int(re.search(r"cuda: (\d+) bytes of CUDA C", out).group(1)) / 1024
    worst = {"regs": 0, "spill": 0, "stack": 0, "smem": 0}
    blocks = {"reduce": 0, "reduce_any": 0, "tiled": 0}
    for line in out.splitlines():
        mm = re.match(r"\d+\s+fsl_k\d+\s+(\w+)\s+(\d+|any)\s+(\d+|-)\s.*?\|(.*)$", line)
        if not mm:
            continue
        part, block = mm.group(1), mm.group(2)
        if part == "reduce":
            blocks["reduce" if block != "any" else "reduce_any"] += 1
        elif part in ("matmul", "conv") and block != "any":
            blocks["tiled"] += 1
        for arch in mm.group(4).split("|"):
            regs, spst, spld, stack, smem, cmem = (int(v) for v in arch.split())
            worst["regs"] = max(worst["regs"], regs)
            worst["spill"] = max(worst["spill"], spst + spld)
            worst["stack"] = max(worst["stack"], stack)
            worst["smem"] = max(worst["smem"], smem)
    r["worst"] = worst
    r["blocks"] = blocks
    r["why"] = [line[len("refused: "):] for line in out.splitlines() if line.startswith("refused: ")]
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "cuda.md"))
    args = ap.parse_args()
    wanted = set(filter(None, args.models.split(",")))
    rows = []
    for model in MODELS:
        if (wanted and model.name not in wanted) or not model.path.exists():
            continue
        r = emit(model)
        rows.append((model, r))
        print(model.name, r, flush=True)
    lines = ["# CUDA C: NVRTC compile check per model", "",
             "`.venv/bin/python bench/cuda_emit.py`: `fissile compile MODEL --backend cuda --emit-only`, optimal "
             "plan for the host device (so no LINEAR kernel takes operand views: docs/gpu-backend.md), "
             "one CUDA C source per model compiled by NVRTC to CUBINs for sm_90 and sm_80 with ptxas -v "
             f"(no GPU). Machine: {platform.node()}, {platform.processor() or platform.machine()}, "
             "times are wall seconds of one run each.", "",
             "| model | kernels | generated (functions) | opaque | refused | CUDA C (KiB) | NVRTC sm_90 (s) "
             "| NVRTC sm_80 (s) | max registers | max spill bytes | max stack bytes | max shared bytes "
             "| REDUCE: a block per row / a thread per row | tiled matmul/conv |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, r in rows:
        if "error" in r:
            lines.append(f"| {model.name} | error: {r['error']} ||||||||||||")
            continue
        w = r["worst"]
        lines.append(f"| {model.name} | {r['kernels']} | {r['generated']} ({r['functions']}) | {r['opaque']} | "
                     f"{r['refused']} | {r['source_kb']:.0f} | {r['nvrtc'].get('sm_90', 0):.2f} | "
                     f"{r['nvrtc'].get('sm_80', 0):.2f} | {w['regs']} | {w['spill']} | {w['stack']} | {w['smem']} | "
                     f"{r['blocks']['reduce']} / {r['blocks']['reduce_any']} | {r['blocks']['tiled']} |")
    why = [(model.name, y) for model, r in rows for y in r.get("why", [])]
    if why:
        lines += ["", "Refused kernels (the dialect cannot take them yet):", ""]
        lines += [f"- {name}: {y}" for name, y in why]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
