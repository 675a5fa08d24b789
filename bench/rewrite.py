"""Rewrite benchmark: the optimal plan with and without rewrites, measured.

    .venv/bin/python bench/rewrite.py [--threads N] [--repeats 30] [--warmup 3] [--runs 3]
                                      [--models a,b] [--cases a,b] [--out bench/results]

For every subgraph case of bench/cases.py (first shape of each pattern) and
every real model in .cache/models that compiles with static shapes, runs
`fissile bench MODEL --backend cpu --strategies optimal,optimal-norewrite
--rewrite MODE` for MODE in rules and search, `--runs` times (separate
processes; inside each, the two rows are interleaved round by round on the
same fresh random inputs).  Reports per model: the kernels of each plan, the
rules that fired, and the ratio optimal / optimal-norewrite of the median
latencies (below 1: the rewrites made it faster) as the median over the runs
with its min-max spread.  Writes <out>/rewrite.json and <out>/rewrite.md
with the machine (lscpu), the versions and the thread count.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.append(str(ROOT / "python"))  # after site-packages: an installed fissile (with its extension) wins over python/fissile
import fsl_models  # noqa: E402
from bench import lscpu, versions  # noqa: E402
from cases import CASES  # noqa: E402

MODES = ["rules", "search"]


def fired(exe: Path, path: Path, mode: str) -> str:
    p = subprocess.run([str(exe), "compile", str(path), "--backend", "ref", "--rewrite", mode],
                       capture_output=True, text=True, timeout=600)
    m = re.search(r"^rewrites: (.*)$", p.stdout, re.M)
    return m.group(1) if m else f"error: {p.stderr.strip()[-200:]}"


def bench_once(exe: Path, path: Path, mode: str, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "b.json"
        p = subprocess.run([str(exe), "bench", str(path), "--backend", "cpu", "--threads", str(args.threads),
                            "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--rewrite", mode,
                            "--strategies", "optimal,optimal-norewrite", "--json", str(out)],
                           capture_output=True, text=True, timeout=1800)
        if p.returncode != 0 or not out.exists():
            return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
        rows = {s["name"]: s for s in json.loads(out.read_text())["strategies"]}
        return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--models", default=None, help="comma-separated model names (default: every cached model)")
    ap.add_argument("--cases", default=None, help="comma-separated case patterns (default: all)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args()
    exe = fsl_models.fissile_bin()
    work = Path(tempfile.mkdtemp(prefix="fsl-rewrite-bench-"))
    items = []
    seen = set()
    for c in CASES:
        if c.name in seen or (args.cases and c.name not in args.cases.split(",")):
            continue
        seen.add(c.name)
        p = work / f"{c.id}.onnx"
        p.write_bytes(c.build().SerializeToString())
        items.append(("subgraph", c.id, p))
    for p in sorted((ROOT / ".cache" / "models").glob("*.onnx")):
        if args.models and p.stem not in args.models.split(","):
            continue
        items.append(("model", p.stem, p))
    results = []
    for kind, name, path in items:
        row = {"kind": kind, "name": name, "modes": {}}
        for mode in MODES:
            runs = [bench_once(exe, path, mode, args) for _ in range(args.runs)]
            ok = [r for r in runs if "error" not in r and all(r[k]["status"] == "ok" for k in r)]
            entry = {"fired": fired(exe, path, mode), "runs": runs}
            if ok:
                ratios = [r["optimal"]["median_s"] / r["optimal-norewrite"]["median_s"] for r in ok]
                entry.update(ratio=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios),
                             kernels=ok[0]["optimal"]["kernels"], kernels_off=ok[0]["optimal-norewrite"]["kernels"],
                             median_ms=statistics.median(r["optimal"]["median_s"] for r in ok) * 1e3,
                             median_off_ms=statistics.median(r["optimal-norewrite"]["median_s"] for r in ok) * 1e3)
            else:
                entry["error"] = (runs[0].get("error") if runs else "no run")
            row["modes"][mode] = entry
            print(f"rewrite bench: {name} {mode}: {entry.get('ratio', entry.get('error'))}", file=sys.stderr, flush=True)
        results.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"lscpu": lscpu(), "versions": versions(), "threads": args.threads, "repeats": args.repeats,
            "warmup": args.warmup, "runs": args.runs}
    (out / "rewrite.json").write_text(json.dumps({"meta": meta, "rows": results}, indent=1))
    lines = ["# Rewrites: the optimal plan with and without them (CPU backend)", "",
             f"Machine: {meta['lscpu'].get('Model name', '?')}, {meta['lscpu'].get('CPU(s)', '?')} CPUs; "
             f"threads {args.threads}; versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()), "",
             f"Each cell: `fissile bench --strategies optimal,optimal-norewrite` run {args.runs} times "
             f"({args.repeats} timed rounds after {args.warmup} warm-up rounds each, the two plans interleaved on "
             "the same inputs); *ratio* = median latency with rewrites / without, the median over the runs "
             "[min - max]; below 1: the rewrites made the model faster.  *kernels*: with / without.", ""]
    for mode in MODES:
        lines += [f"## --rewrite {mode}", "", "| kind | model | kernels | ms with | ms without | ratio [spread] | fired |",
                  "|---|---|---|---|---|---|---|"]
        for r in results:
            e = r["modes"][mode]
            if "ratio" in e:
                lines.append(f"| {r['kind']} | {r['name']} | {e['kernels']} / {e['kernels_off']} | {e['median_ms']:.3f} | "
                             f"{e['median_off_ms']:.3f} | {e['ratio']:.3f} [{e['ratio_min']:.3f} - {e['ratio_max']:.3f}] | "
                             f"{e['fired']} |")
            else:
                lines.append(f"| {r['kind']} | {r['name']} | - | - | - | error: {e.get('error')} | {e['fired']} |")
        lines.append("")
    (out / "rewrite.md").write_text("\n".join(lines))
    print(f"rewrite bench: wrote {out / 'rewrite.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
