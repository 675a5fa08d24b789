"""Finds the first node whose output differs between fissile and ONNX Runtime.

    .venv/bin/python python/bisect_model.py MODEL.onnx [--shape NAME=1x3x64x64]... [--tol 1e-4]
    .venv/bin/python python/bisect_model.py --model ppocr_det        # a registry model

Makes every intermediate tensor a graph output (shapes from ONNX shape
inference), runs both with the same random inputs, and prints per node, in
graph order, the relative L2 error of its outputs; stops listing after the
first few bad ones.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fsl_models  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?")
    ap.add_argument("--model", help="a model name from python/fsl_models.py")
    ap.add_argument("--shape", action="append", default=[], help="NAME=DxD (float inputs)")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=5, help="bad nodes to show")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.model:
        spec = fsl_models.BY_NAME[args.model]
        path = spec.path
        inputs = fsl_models.random_inputs(spec, rng)
    else:
        path = Path(args.path)
        inputs = {}
        for s in args.shape:
            name, dims = s.split("=")
            inputs[name] = rng.uniform(-1, 1, [int(d) for d in dims.split("x")]).astype(np.float32)

    model = onnx.load(str(path))
    have = {o.name for o in model.graph.output}
    inits = {i.name for i in model.graph.initializer}
    order = []
    for node in model.graph.node:
        if node.op_type == "Constant":
            continue
        for o in node.output:
            if o and o not in have and o not in inits:
                model.graph.output.append(onnx.ValueInfoProto(name=o))
                have.add(o)
            order.append((node, o))
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "all_outputs.onnx"
        onnx.save(model, str(p))
        names, want = fsl_models.run_ort(p, inputs)
        got = fsl_models.run_fissile(p, inputs, names)
    ref = dict(zip(names, want))
    bad = 0
    for node, o in order:
        if o not in ref or o not in got:
            continue
        w, g = np.asarray(ref[o]), got[o]
        if w.shape != g.shape:
            msg = f"shape {g.shape} vs ORT {w.shape}"
        elif np.issubdtype(w.dtype, np.floating):
            err = fsl_models.rel_l2(g, w)
            msg = f"rel L2 {err:.3g}" if err > args.tol else ""
        else:
            msg = "" if np.array_equal(g, w) else f"{int(np.sum(g != w))} values differ"
        if msg:
            bad += 1
            print(f"BAD  {node.op_type:20s} {node.name or '-':40s} -> {o}: {msg}")
            if bad >= args.show:
                break
    if not bad:
        print(f"all {len(order)} intermediate values agree within {args.tol:g}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
