"""Front-end benchmark: import + compile (fission, CSE, DCE) time per model.

    .venv/bin/python bench/frontend.py [--repeat N] [--models a,b] [--out FILE]

Times `fissile inspect MODEL --shape ... --time` (the CLI prints the load
and compile times), takes the median of N runs, and for comparison the time
ONNX Runtime takes to create a CPU session (parse + graph optimizations).
Writes bench/results/frontend.md.  Needs the models: `make bench` fetches
and exports them (python/fetch_models.py, python/export_models.py --bert-base).
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "python"))  # after site-packages: an installed fissile (with its extension) wins over python/fissile
import fsl_models  # noqa: E402
from fsl_models import MODELS, shape_args  # noqa: E402


def time_fissile(model, repeat):
    loads, compiles, out, err, rc = [], [], "", "", 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run([str(fsl_models.fissile_bin()), "inspect", str(model.path), "--time",
                               *shape_args(model)], capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - t0
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
        m_load = re.search(r"time: load ([0-9.]+) s", err)
        m_comp = re.search(r"time: compile ([0-9.]+) s", err)
        if m_load:
            loads.append(float(m_load.group(1)))
        if m_comp:
            compiles.append(float(m_comp.group(1)))
        if rc != 0:
            break
    totals = re.findall(r"^\s*total\s+(\d+)", out, flags=re.M)
    errors = [ln for ln in err.splitlines() if not ln.startswith("time:")]
    return {
        "load": statistics.median(loads) if loads else None,
        "compile": statistics.median(compiles) if compiles and rc == 0 else None,
        "wall": wall,
        "onnx_nodes": int(totals[0]) if totals else None,
        "primitives": int(totals[1]) if len(totals) > 1 else None,
        "status": "ok" if rc == 0 else f"exit {rc}: " + " ".join(errors)[:160],
    }


def time_ort(model, repeat):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    times = []
    for _ in range(repeat):
        so = ort.SessionOptions()
        so.log_severity_level = 3
        t0 = time.perf_counter()
        try:
            ort.InferenceSession(str(model.path), so, providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001
            return None
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def machine_info():
    info = {"cpu": platform.processor() or "?", "cores": str(os.cpu_count())}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s*(.+)", lscpu)
        if m:
            info["cpu"] = m.group(1).strip()
    except OSError:
        pass
    try:
        info["cc"] = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        info["cc"] = "?"
    try:
        info["commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip() or "uncommitted"
    except OSError:
        info["commit"] = "?"
    try:
        import onnxruntime
        info["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        info["onnxruntime"] = "-"
    info["kernel"] = platform.release()
    return info


def fmt(v, unit="s"):
    return "-" if v is None else f"{v:.3f} {unit}" if v < 100 else f"{v:.0f} {unit}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", help="comma-separated names (default: all bench models)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/frontend.md"))
    args = ap.parse_args()
    names = args.models.split(",") if args.models else [m.name for m in MODELS if "bench" in m.tags]
    exe = fsl_models.fissile_bin()
    if not exe.exists():
        print(f"frontend: {exe} not found; run `make build`", file=sys.stderr)
        return 1

    rows = []
    for name in names:
        model = fsl_models.BY_NAME[name]
        if not model.path.exists():
            print(f"frontend: {name}: {model.path} missing (make bench fetches it)", file=sys.stderr)
            continue
        r = time_fissile(model, args.repeat)
        r["ort"] = time_ort(model, args.repeat)
        r["model"] = model
        rows.append(r)
        print(f"frontend: {name:22s} load {fmt(r['load'])}  compile {fmt(r['compile'])}  "
              f"ORT session {fmt(r['ort'])}  {r['status']}", flush=True)

    info = machine_info()
    lines = [
        "# Front-end timings: import + compile",
        "",
        "`fissile inspect MODEL --time` with the input shapes bound; *load* is parsing the",
        "protobuf and importing the graph, *compile* is shape binding, fission (with shape",
        "inference and constant folding), CSE and DCE.  Median of "
        f"{args.repeat} runs.  *ORT session* is the time ONNX Runtime takes to create a CPU",
        "session for the same file (parse + its default graph optimizations), for scale.",
        "",
        f"- machine: {info['cpu']}, {info['cores']} cores, Linux {info['kernel']}",
        f"- compiler: {info['cc']}; fissile commit {info['commit']}; onnxruntime {info['onnxruntime']}",
        f"- generated by `bench/frontend.py` on {time.strftime('%Y-%m-%d %H:%M')}",
        "",
        "| model | input shapes | size | ONNX nodes | primitives | load | compile | ORT session | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = r["model"]
        shapes = ", ".join(f"{i.name} {'x'.join(map(str, i.shape))}" for i in m.inputs)
        size = m.path.stat().st_size / 1e6
        status = r["status"].replace("|", "/")
        lines.append(f"| {m.name} | {shapes} | {size:.1f} MB | {r['onnx_nodes'] or '-'} | "
                     f"{r['primitives'] or '-'} | {fmt(r['load'])} | {fmt(r['compile'])} | "
                     f"{fmt(r['ort'])} | {status} |")
    lines += ["", "Models: " + "; ".join(f"{r['model'].name}: {r['model'].description}" for r in rows), ""]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(f"frontend: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
