"""CPU benchmark: every fusion strategy of fissile against ONNX Runtime, in one run.

    .venv/bin/python bench/bench.py [--threads N] [--repeats 20] [--warmup 3]
                                    [--cases a,b | --no-cases] [--models a,b | --no-models]
                                    [--strategies unfused,opfuse,greedy,optimal,optimal-norewrite]
                                    [--out bench/results] [--timeout 1800]

For every subgraph case of bench/cases.py (each pattern at several shapes)
and every real model in .cache/models (python/fsl_models.py), runs
`fissile bench MODEL --backend cpu --threads N --repeats R --warmup W --json`
(per strategy: kernel count, predicted time, median latency of R timed runs
after W warm-up runs with fresh random inputs each, planned arena size), and
ONNX Runtime on the same model in this process: CPU provider,
ORT_ENABLE_ALL, intra_op_num_threads = N, inter_op_num_threads = 1, W
warm-up runs, then the median of R timed runs of `session.run`, fresh
random inputs each run drawn like fissile's (floats uniform in [-1, 1),
integers uniform in [0, 10), bools random), same shapes.  Writes
<out>/cpu.json (everything, every timed run) and <out>/cpu.md (tables and
ratios fissile / ORT: below 1 means fissile is faster), with the machine
(lscpu), the versions and the thread count beside the numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))
import fsl_models  # noqa: E402
from cases import CASES  # noqa: E402

# the four strategies (with rewrites, the default) and optimal without them
STRATEGIES = ["unfused", "opfuse", "greedy", "optimal", "optimal-norewrite"]

_NP_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64,
              9: np.bool_, 10: np.float16, 11: np.float64}


# ---- machine and versions ----

def lscpu() -> dict:
    keys = ["Architecture", "Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
            "L1d cache", "L2 cache", "L3 cache", "CPU max MHz", "Hypervisor vendor"]
    out = {}
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return out
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k.strip() in keys:
            out[k.strip()] = v.strip()
        if k.strip() == "Flags":
            flags = v.split()
            out["SIMD"] = " ".join(f for f in ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile"]
                                   if f in flags)
    return out


def versions() -> dict:
    v = {"python": platform.python_version(), "numpy": np.__version__, "onnx": onnx.__version__,
         "kernel": platform.release()}
    try:
        import onnxruntime
        v["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        v["onnxruntime"] = None
    for name, cmd in [("cc", ["cc", "--version"])]:
        try:
            v[name] = subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            v[name] = None
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        v["fissile"] = (commit or "?") + ("+local changes" if dirty else "")
    except OSError:
        v["fissile"] = "?"
    return v


# ---- ONNX Runtime ----

def random_like_fissile(shape, dtype, rng):
    """The distribution of `fissile run`'s random inputs (docs/cli.md)."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dt, np.integer):
        a = rng.integers(0, 10, size=shape).astype(dt)
        if a.size:
            a.flat[0] = max(int(a.flat[0]), 1)
        return a
    return rng.uniform(-1.0, 1.0, size=shape).astype(dt)


def ort_inputs(path: Path, shapes: dict[str, tuple]):
    """[(name, shape, dtype)] of the model's runtime inputs (initializers excluded)."""
    m = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        if vi.name in shapes:
            shape = tuple(shapes[vi.name])
        else:
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in t.shape.dim)
        out.append((vi.name, shape, _NP_DTYPES.get(t.elem_type, np.float32)))
    return out


def time_ort(path: Path, shapes: dict, threads: int, repeats: int, warmup: int, seed: int = 0) -> dict:
    try:
        import onnxruntime as ort
    except ImportError:
        return {"status": "onnxruntime not installed"}
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        t0 = time.perf_counter()
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        session_s = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001
        return {"status": f"error: {str(e)[:300]}"}
    specs = ort_inputs(path, shapes)
    rng = np.random.default_rng(seed)
    times = []
    try:
        for r in range(warmup + repeats):
            feeds = {n: random_like_fissile(s, d, rng) for n, s, d in specs}
            t0 = time.perf_counter()
            sess.run(None, feeds)
            dt = time.perf_counter() - t0
            if r >= warmup:
                times.append(dt)
    except Exception as e:  # noqa: BLE001
        return {"status": f"error: {str(e)[:300]}"}
    return {"status": "ok", "median_s": statistics.median(times), "min_s": min(times), "times_s": times,
            "session_s": session_s}


# ---- fissile ----

def run_fissile_bench(path: Path, shapes: dict, args, timeout: int) -> dict:
    exe = fsl_models.fissile_bin()
    with tempfile.TemporaryDirectory(prefix="fsl_bench_") as tmp:
        js = Path(tmp) / "bench.json"
        cmd = [str(exe), "bench", str(path), "--backend", args.backend, "--threads", str(args.threads),
               "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--json", str(js),
               "--strategies", ",".join(args.strategies)]
        for name, shape in shapes.items():
            cmd += ["--shape", f"{name}={'x'.join(map(str, shape))}"]
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"status": f"timeout after {timeout} s", "strategies": []}
        wall = time.perf_counter() - t0
        if not js.exists():
            err = proc.stderr.strip().splitlines()
            return {"status": f"exit {proc.returncode}: {err[-1] if err else ''}"[:300], "strategies": []}
        data = json.loads(js.read_text())
        data["status"] = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        data["wall_s"] = wall
        return data


# ---- what is benchmarked ----

def entries(tmp: Path, cases: str | None = None, no_cases: bool = False, models: str | None = None,
            no_models: bool = False, who: str = "bench"):
    """(kind, name, shape label, description, ONNX path, input shapes) of every
    subgraph case of bench/cases.py (written into tmp; `cases`: comma-separated
    ids or pattern names) and every bench model present in .cache/models
    (`models`: comma-separated names), in that order."""
    if not no_cases:
        wanted = set(cases.split(",")) if cases else None
        for c in CASES:
            if wanted and c.id not in wanted and c.name not in wanted:
                continue
            path = Path(tmp) / f"{c.id}.onnx"
            onnx.save(c.build(), path)
            yield "subgraph", c.name, c.shape, c.description, path, {}
    if not no_models:
        names = models.split(",") if models else [m.name for m in fsl_models.MODELS if "bench" in m.tags]
        for name in names:
            model = fsl_models.BY_NAME[name]
            if not model.path.exists():
                print(f"{who}: {name}: {model.path} missing (make bench fetches it)", file=sys.stderr)
                continue
            shapes = {i.name: i.shape for i in model.inputs}
            label = ", ".join(f"{i.name} {'x'.join(map(str, i.shape))}" for i in model.inputs)
            yield "model", name, label, model.description, model.path, shapes


# ---- one benchmark entry ----

def bench_one(kind, name, shape_label, description, path, shapes, args) -> dict:
    print(f"bench: {name} {shape_label} ...", file=sys.stderr, flush=True)
    fs = run_fissile_bench(path, shapes, args, args.timeout)
    ort_r = time_ort(path, shapes, args.threads, args.repeats, args.warmup)
    row = {"kind": kind, "name": name, "shape": shape_label, "description": description,
           "fissile": fs, "ort": ort_r, "ratios": {}}
    ort_med = ort_r.get("median_s")
    for s in fs.get("strategies", []):
        if s.get("status") == "ok" and ort_med:
            row["ratios"][s.get("name", s["strategy"])] = s["median_s"] / ort_med
    by = {s.get("name", s["strategy"]): s for s in fs.get("strategies", [])}
    summary = "  ".join(f"{k} {by[k]['median_s'] * 1e3:.3f} ms" if by.get(k, {}).get("status") == "ok"
                        else f"{k} error" for k in args.strategies if k in by)
    ort_txt = f"{ort_med * 1e3:.3f} ms" if ort_med else ort_r.get("status")
    print(f"bench: {name} {shape_label}: ORT {ort_txt}  {summary}  [{fs.get('status')}]", file=sys.stderr, flush=True)
    return row


# ---- report ----

def ms(v):
    return "-" if v is None else f"{v * 1e3:.3f}"


def fmt_ratio(v):
    return "-" if v is None else f"{v:.2f}"


def markdown(result: dict, args) -> str:
    mach, ver = result["machine"], result["versions"]
    strategies = args.strategies
    lines = [
        "# CPU benchmark: fusion strategies vs ONNX Runtime",
        "",
        f"Generated by `bench/bench.py` on {result['date']}.  fissile: `fissile bench --backend "
        f"{args.backend}` (generated C per kernel + oneDNN); ONNX Runtime {ver.get('onnxruntime')}: CPU "
        "provider, ORT_ENABLE_ALL.  Both with "
        f"**{args.threads} thread(s)**, {args.warmup} warm-up runs, then the **median of {args.repeats}** "
        "timed runs, fresh random inputs every run (floats uniform in [-1, 1), integers in [0, 10)), same shapes.",
        "Times in milliseconds; *ratio* = fissile / ORT (below 1: fissile is faster).  *pred* is the "
        "roofline prediction of the optimal plan, *kernels* the kernel count per strategy "
        f"({'/'.join(strategies)}), *arena* the planned memory for kernel outputs of the optimal plan.",
        "",
    ] + ([f"Note: {args.note}", ""] if args.note else []) + [
        "## Machine",
        "",
    ]
    for k, v in mach.items():
        lines.append(f"- {k}: {v}")
    lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in ver.items()))
    lines.append(f"- threads: {args.threads} (fissile `--threads`, OMP_NUM_THREADS; ORT intra_op_num_threads)")
    lines.append("")
    for kind, title in [("subgraph", "Subgraph cases (bench/cases.py)"), ("model", "Real models (.cache/models)")]:
        rows = [r for r in result["rows"] if r["kind"] == kind]
        if not rows:
            continue
        lines += [f"## {title}", ""]
        head = ["case", "shape", "ORT"] + strategies + ["best/ORT", "optimal/ORT", "pred (opt)", "kernels",
                                                        "arena MiB", "status"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for r in rows:
            by = {s.get("name", s["strategy"]): s for s in r["fissile"].get("strategies", [])}
            ok = {k: v for k, v in by.items() if v.get("status") == "ok"}
            cells = [r["name"], r["shape"], ms(r["ort"].get("median_s"))]
            cells += [ms(ok[k]["median_s"]) if k in ok else ("err" if k in by else "-") for k in strategies]
            best = min((v["median_s"] for v in ok.values()), default=None)
            ort_med = r["ort"].get("median_s")
            cells.append(fmt_ratio(best / ort_med) if best and ort_med else "-")
            cells.append(fmt_ratio(r["ratios"].get("optimal")))
            opt = by.get("optimal", {})
            cells.append(ms(opt.get("predicted_s")))
            cells.append("/".join(str(by[k].get("kernels", "-")) if k in by else "-" for k in strategies))
            cells.append(f"{opt['peak_bytes'] / 2**20:.2f}" if "peak_bytes" in opt else "-")
            errs = [f"{k}: {v.get('error', '')[:100]}" for k, v in by.items() if v.get("status") != "ok"]
            status = r["fissile"].get("status", "?")
            if r["ort"].get("status") != "ok":
                errs.append(f"ORT: {r['ort'].get('status', '')[:100]}")
            cells.append((status + ("; " + "; ".join(errs) if errs else "")).replace("|", "/"))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    # geometric means of the ratios
    lines += ["## Summary", ""]
    for kind in ["subgraph", "model"]:
        rows = [r for r in result["rows"] if r["kind"] == kind]
        parts = []
        for s in strategies:
            rs = [r["ratios"][s] for r in rows if s in r["ratios"]]
            if rs:
                parts.append(f"{s} {float(np.exp(np.mean(np.log(rs)))):.2f} (n={len(rs)})")
        if parts:
            lines.append(f"- {kind}s, geometric mean of fissile/ORT: " + ", ".join(parts))
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--cases", help="comma-separated case ids or pattern names (default: all)")
    ap.add_argument("--no-cases", action="store_true")
    ap.add_argument("--models", help="comma-separated model names (default: every bench model present)")
    ap.add_argument("--no-models", action="store_true")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per `fissile bench` call")
    ap.add_argument("--out", default=str(ROOT / "bench/results"))
    ap.add_argument("--note", default="", help="a remark printed under the title (e.g. machine load)")
    args = ap.parse_args()
    args.strategies = [s for s in args.strategies.split(",") if s]
    if args.repeats < 20:
        print("bench: note: fewer than 20 repeats; the results are less stable", file=sys.stderr)
    exe = fsl_models.fissile_bin()
    if not exe.exists():
        print(f"bench: {exe} not found; run `make build` (or set FSL_BUILD_DIR)", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory(prefix="fsl_cases_") as tmp:
        rows = [bench_one(*e, args) for e in entries(Path(tmp), args.cases, args.no_cases, args.models, args.no_models)]

    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "note": args.note, "machine": lscpu(), "versions": versions(),
              "threads": args.threads, "repeats": args.repeats, "warmup": args.warmup, "backend": args.backend,
              "strategies": args.strategies, "rows": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cpu.json").write_text(json.dumps(result, indent=1))
    (out / "cpu.md").write_text(markdown(result, args))
    print(f"bench: wrote {out / 'cpu.md'} and {out / 'cpu.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
