"""A/B of two fissile builds on bench entries, in interleaved processes.

    .venv/bin/python bench/ab.py OLD_FISSILE NEW_FISSILE NAMES PAIRS

NAMES: comma-separated subgraph pattern names (bench/cases.py: attention,
gelu_mlp, ...) and model names (.cache/models).  For each entry, PAIRS
pairs of `fissile bench ENTRY --strategies optimal --repeats R --warmup 20`
(R: AB_REPEATS, default 100; threads: AB_THREADS, default 2; AB_INT8=1: each
model followed by its int8 variants, bench.py --int8), old and new
one after the other in alternating order (ABBA), so that a machine that
drifts between minutes favours neither.  Prints per entry the kernel and
generated-step counts of both plans and, for the median run time and the
FSL_CPU_PROFILE sums of generated (gen) and oneDNN (dnn) steps, the old and
new medians and the median and range of the per-pair ratios new/old.
Environment such as FSL_CPU_ISA=avx2 passes through to both builds.
Compare two builds of the same machine and ISA only; ratios, not times, are
what carry over (bench/results/softmax-deferred-div.md).
"""
import json
import os
import re
import statistics as st
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.append(str(ROOT / "python"))
import bench  # noqa: E402
from cases import CASES  # noqa: E402

PROFILE = re.compile(r"cpu profile: .* ([0-9.]+) ms per run \(gen ([0-9.]+) ms in (\d+) steps, onednn ([0-9.]+) ms in (\d+)")


def run(fissile: str, path: Path, shapes: dict, seed: int, out: Path) -> dict:
    threads = os.environ.get("AB_THREADS", "2")
    cmd = [fissile, "bench", str(path), "--threads", threads, "--repeats", os.environ.get("AB_REPEATS", "100"),
           "--warmup", "20", "--seed", str(seed), "--strategies", "optimal", "--json", str(out)]
    for n, s in shapes.items():
        cmd += ["--shape", f"{n}={'x'.join(map(str, s))}"]
    env = dict(os.environ, OMP_NUM_THREADS=threads, FSL_CPU_PROFILE="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    m = PROFILE.search(p.stderr)
    if not m:
        raise SystemExit(f"ab: no CPU profile from {fissile} on {path}")
    s = json.load(open(out))["strategies"][0]
    return dict(t=s["median_s"] * 1e3, gen=float(m.group(2)), ngen=int(m.group(3)), dnn=float(m.group(4)),
                k=s["kernels"])


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    old, new, names, pairs = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
    tmp = Path(tempfile.mkdtemp())
    case_names = {c.name for c in CASES}
    cases = [n for n in names if n in case_names]
    models = [n for n in names if n not in case_names]
    for kind, name, label, _, path, shapes in bench.entries(tmp, cases=",".join(cases) or None, no_cases=not cases,
                                                             models=",".join(models) or None, no_models=not models,
                                                             who="ab", int8=bool(os.environ.get("AB_INT8"))):
        key = name if kind == "model" else f"{name} {label}"
        O, N = [], []
        for r in range(pairs):
            order = [(old, O), (new, N)] if r % 2 == 0 else [(new, N), (old, O)]
            for b, acc in order:
                acc.append(run(b, path, shapes, r, tmp / "o.json"))
        line = [f"{key}: kernels {O[0]['k']} -> {N[0]['k']}, gen steps {O[0]['ngen']} -> {N[0]['ngen']}"]
        for f in ("t", "gen", "dnn"):
            rs = sorted(y[f] / x[f] for x, y in zip(O, N) if x[f] > 0)
            if not rs:  # no such steps in the old plan (e.g. gen 0 -> 0.05 ms)
                line.append(f"{f} {st.median(x[f] for x in O):.3f} -> {st.median(y[f] for y in N):.3f} ms")
                continue
            line.append(f"{f} {st.median(x[f] for x in O):.3f} -> {st.median(y[f] for y in N):.3f} ms, "
                        f"new/old {st.median(rs):.3f} ({rs[0]:.2f}-{rs[-1]:.2f})")
        print("; ".join(line) + f"; {pairs} pairs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
