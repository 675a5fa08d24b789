"""Memory-bound kernels against the copy bandwidth (issue 9): for every bench
model, the optimal plan's LOOP and REDUCE kernels that move more than
1 MiB, each timed standalone by the backend, with the fraction of the
calibrated copy bandwidth it reaches; the ones under 60% are listed with
what they compute.

    .venv/bin/python bench/bandwidth.py [--threads N] [--models a,b] [--min-mib 1]
                                        [--target 0.6] [--out bench/results] [--name bandwidth]

Per model: `fissile report MODEL --strategies optimal --json FILE` (the
per-kernel breakdown: every kernel timed now by the backend, median of at
least 5 runs on fresh random inputs; bytes = inputs read, a broadcast
source once, + outputs written; the device's bandwidth is the calibrated
copy bandwidth, read + write counted, the roofline's memory roof).
fraction = bytes / time / bandwidth.  A kernel that also does real
arithmetic (exp, erf, division per element) can be compute-bound below
the memory roof: its flops per byte are in the table.  Writes
<out>/<name>.md and <out>/<name>.json with the machine, ISA (FSL_CPU_ISA)
and versions.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "python"))  # after site-packages: an installed fissile (with its extension) wins over python/fissile
sys.path.insert(0, str(ROOT / "bench"))
import bench as cpu_bench  # noqa: E402  (machine, versions)
import fsl_models  # noqa: E402


def report(path: Path, shapes: dict, args) -> dict:
    exe = fsl_models.fissile_bin()
    with tempfile.TemporaryDirectory(prefix="fsl_bw_") as tmp:
        js, html = Path(tmp) / "r.json", Path(tmp) / "r.html"
        cmd = [str(exe), "report", str(path), "-o", str(html), "--json", str(js), "--strategies", "optimal",
               "--threads", str(args.threads), "--repeats", "3", "--warmup", "1"]
        for name, shape in shapes.items():
            cmd += ["--shape", f"{name}={'x'.join(map(str, shape))}"]
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
        if not js.exists():
            return {"status": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}
        data = json.loads(js.read_text())
        data["status"] = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--models", help="comma-separated model names (default: every bench model present)")
    ap.add_argument("--min-mib", type=float, default=1.0, help="kernels moving more than this many MiB")
    ap.add_argument("--target", type=float, default=0.6, help="fraction of the copy bandwidth to reach")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--out", default=str(ROOT / "bench/results"))
    ap.add_argument("--name", default="bandwidth", help="file name of the results (without extension)")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    rows, device, bw = [], None, None
    for _, name, _, _, path, shapes in cpu_bench.entries(Path(tempfile.gettempdir()), no_cases=True,
                                                          models=args.models, who="bandwidth"):
        print(f"bandwidth: {name} ...", file=sys.stderr, flush=True)
        data = report(path, shapes, args)
        if data.get("status") != "ok":
            rows.append({"model": name, "status": data.get("status")})
            continue
        device, bw = data.get("device"), data.get("device_bandwidth")
        for k in data["breakdown"]["kernels"]:
            if k["kind"] not in ("loop", "reduce") or not k.get("bytes") or k["bytes"] <= args.min_mib * 2**20:
                continue
            ops = sorted({n["op_type"] for n in k["onnx_nodes"]})
            rows.append({"model": name, "status": "ok", "kernel": k["index"], "kind": k["kind"],
                         "mib": k["bytes"] / 2**20, "time_s": k.get("time_s"), "flops": k.get("flops"),
                         "fraction": k.get("bandwidth_fraction"), "ops": ops,
                         "nodes": [n["name"] for n in k["onnx_nodes"]][:4]})
    isa = os.environ.get("FSL_CPU_ISA", "native")
    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "note": args.note, "machine": cpu_bench.lscpu(),
              "versions": cpu_bench.versions(), "threads": args.threads, "isa": isa, "device": device,
              "device_bandwidth": bw, "min_mib": args.min_mib, "target": args.target, "rows": rows}
    ok = [r for r in rows if r.get("status") == "ok" and r.get("fraction") is not None]
    below = [r for r in ok if r["fraction"] < args.target]
    mach = result["machine"]
    lines = [
        f"# Memory-bound kernels vs the copy bandwidth ({isa})",
        "",
        f"Generated by `bench/bandwidth.py` on {result['date']}: the optimal plan's LOOP and REDUCE kernels "
        f"moving more than {args.min_mib:g} MiB, each timed standalone by the CPU backend "
        f"(`fissile report --json`), {args.threads} thread(s), FSL_CPU_ISA={isa}.  Device: {device}, calibrated "
        f"copy bandwidth {bw / 1e9 if bw else float('nan'):.2f} GB/s (read + write).  *fraction* = bytes / time / "
        f"bandwidth; target {args.target:.0%}.  Machine: {mach.get('Model name')}, {mach.get('CPU(s)')} CPUs; "
        "versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + ".",
        "",
    ] + ([f"Note: {args.note}", ""] if args.note else []) + [
        f"{len(ok)} kernels, {len(ok) - len(below)} at or above {args.target:.0%}, {len(below)} below.",
        "",
        "| model | kernel | kind | MiB | ms | GB/s | fraction | flops/byte | ONNX ops | first nodes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(ok, key=lambda r: r["fraction"]):
        gbs = r["mib"] * 2**20 / r["time_s"] / 1e9 if r.get("time_s") else float("nan")
        fpb = (r["flops"] or 0) / (r["mib"] * 2**20)
        lines.append(f"| {r['model']} | {r['kernel']} | {r['kind']} | {r['mib']:.2f} | {r['time_s'] * 1e3:.3f} | "
                     f"{gbs:.2f} | {r['fraction']:.2f}{' **below**' if r['fraction'] < args.target else ''} | "
                     f"{fpb:.2f} | {', '.join(r['ops'])} | {', '.join(r['nodes']).replace('|', '/')} |")
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"\n{r['model']}: {r['status']}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print(f"bandwidth: wrote {out / (args.name + '.md')}: {len(below)} of {len(ok)} kernels below "
          f"{args.target:.0%}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
