"""GPU benchmark (issue 11): fissile's fusion strategies on --backend cuda, with
and without CUDA graphs, against PyTorch eager, torch.compile and
torch.compile(mode="reduce-overhead"), in one run, on an NVIDIA GPU.

    python3 bench/gpu.py [--repeats 50] [--warmup 5] [--cases a,b | --no-cases]
                         [--models a,b | --no-models] [--strategies unfused,opfuse,greedy,optimal]
                         [--no-torch] [--out bench/results]

For every subgraph case of bench/cases.py and every bench model in
.cache/models (python/fsl_models.py): `fissile bench MODEL --backend cuda
--json` per strategy, once with CUDA graphs (the default) and once with
FSL_CUDA_GRAPHS=0 (kernel count, predicted time, median latency of
`run`); then the PyTorch module of the same ONNX file (onnx2torch 1.5.15,
PyPI; where it cannot convert, the row says so) on the GPU: eager,
`torch.compile` (default mode) and `torch.compile(mode="reduce-overhead")`
(CUDA graphs on both sides), float32, TF32 off (torch.backends.*.allow_tf32
= False: fissile's cuBLASLt matmuls are float32 too).  Every run on both
sides is end to end, as `fissile run` is: fresh random host inputs (drawn
as bench/bench.py draws them), copied to the GPU, the model, the outputs
copied back; W warm-up runs, then the median of R timed runs.  Inductor's
kernel count is torch._inductor.metrics.generated_kernel_count after the
default compile.  Writes <out>/gpu.json (everything) and <out>/gpu.md
(tables; ratio = fissile optimal with graphs / torch.compile
reduce-overhead: below 1, fissile is faster) with the GPU, driver, CUDA,
PyTorch and fissile versions.

On a machine without PyTorch (or with --no-torch) the PyTorch columns say
so; without an NVIDIA driver every fissile row says so: the script runs
end to end anyway (bench/results/gpu.md is written only with --out).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "python"))  # after site-packages: an installed fissile (with its extension) wins over python/fissile
sys.path.insert(0, str(ROOT / "bench"))
import bench as cpu_bench  # noqa: E402  (random inputs, versions, `fissile bench` runs)
import fsl_models  # noqa: E402

STRATEGIES = ["unfused", "opfuse", "greedy", "optimal"]


def gpu_versions() -> dict:
    v = cpu_bench.versions()
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        v["gpu"] = out.splitlines()[0] if out else None
    except (OSError, subprocess.SubprocessError):
        v["gpu"] = None
    try:
        v["nvcc"] = subprocess.run(["/usr/local/cuda/bin/nvcc", "--version"], capture_output=True,
                                   text=True).stdout.strip().splitlines()[-1]
    except (OSError, IndexError):
        v["nvcc"] = None
    try:
        import torch
        v["torch"] = torch.__version__
        v["torch_cuda"] = torch.version.cuda
    except ImportError:
        v["torch"] = None
    try:
        import onnx2torch
        v["onnx2torch"] = getattr(onnx2torch, "__version__", "present")
    except ImportError:
        v["onnx2torch"] = None
    return v


# ---- fissile ----

def run_fissile(path: Path, shapes: dict, args, graphs: bool) -> dict:
    os.environ["FSL_CUDA_GRAPHS"] = "1" if graphs else "0"
    try:
        return cpu_bench.run_fissile_bench(path, shapes, args, args.timeout)
    finally:
        os.environ.pop("FSL_CUDA_GRAPHS", None)


# ---- PyTorch ----

def torch_module(name: str, path: Path):
    """The PyTorch peer of model `name` at `path`, and where it came from.
    A model exported from PyTorch (python/export_models.py) is that
    module itself, built from the same seed (the ONNX file's weights where
    this PyTorch draws them as the exporting one did: the rel. L2 column
    says); any other ONNX file goes through onnx2torch, its initializers
    first taken out of the graph inputs (old exporters list them there)
    and the tensors of Constant nodes made initializers (onnx2torch reads
    a Conv's weights from initializers only)."""
    spec = fsl_models.BY_NAME.get(name)
    if spec is not None and spec.source == "export" and spec.path == path:
        import torch
        import export_models
        torch.manual_seed(0)
        # drawn on the CPU, as the exporter drew them, whatever the default device
        with torch.device("cpu") if hasattr(torch, "get_default_device") else contextlib.nullcontext():
            module, _, _ = export_models.build(name)
        return module, "PyTorch (export_models.py)"
    import onnx
    from onnx2torch import convert
    m = onnx.load(str(path))
    inits = {i.name for i in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in inits]
    del m.graph.input[:]
    m.graph.input.extend(inputs)
    nodes = []
    for n in m.graph.node:  # weights held in Constant nodes (Paddle's exporter): initializers, as onnx2torch wants
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            t = onnx.TensorProto()
            t.CopyFrom(n.attribute[0].t)
            t.name = n.output[0]
            m.graph.initializer.append(t)
        else:
            nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return convert(m), "onnx2torch"


def time_torch(name: str, path: Path, shapes: dict, args) -> dict:
    """eager, compile and compile-reduce-overhead medians (seconds), or a
    status.  Tensors a module makes in its forward without naming a device
    (YOLOX's grids, an encoder's position ids) are made on the GPU: the
    default device is CUDA while it runs."""
    if args.no_torch:
        return {"status": "skipped (--no-torch)"}
    try:
        import torch
    except ImportError:
        return {"status": "torch not installed"}
    if not torch.cuda.is_available():
        return {"status": "no CUDA device for torch"}
    if not hasattr(torch, "get_default_device"):  # before PyTorch 2.3
        return torch_runs(name, path, shapes, args)
    before = torch.get_default_device()
    torch.set_default_device("cuda")
    try:
        return torch_runs(name, path, shapes, args)
    finally:
        torch.set_default_device(before)


def torch_runs(name: str, path: Path, shapes: dict, args) -> dict:
    """time_torch's runs, on a machine where PyTorch sees a GPU."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        module, source = torch_module(name, path)
        module = module.cuda().eval()
    except ImportError:
        return {"status": "onnx2torch not installed (pip install onnx2torch==1.5.15)"}
    except Exception as e:  # noqa: BLE001
        return {"status": f"no PyTorch module: {str(e)[:200]}"}
    specs = cpu_bench.ort_inputs(path, shapes)
    rng = np.random.default_rng(0)
    out = {"status": "ok", "module": source}
    try:  # the peer's function: its first output against ONNX Runtime's on one input
        host = {n: cpu_bench.random_like_fissile(s, d, rng) for n, s, d in specs}
        _, want = fsl_models.run_ort(path, host, optimize=True)
        with torch.no_grad():
            y = module(*[torch.from_numpy(np.ascontiguousarray(h)).cuda() for h in host.values()])
        y = y[0] if isinstance(y, (list, tuple)) else y
        out["rel_l2_vs_onnx"] = fsl_models.rel_l2(y.cpu().numpy(), want[0])
    except Exception as e:  # noqa: BLE001
        out["rel_l2_vs_onnx"] = None
        out["check"] = f"not compared: {str(e)[:200]}"

    def timed(fn, label):
        times = []
        for r in range(args.warmup + args.repeats):
            host = [cpu_bench.random_like_fissile(s, d, rng) for _, s, d in specs]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                y = fn(*[torch.from_numpy(np.ascontiguousarray(h)).cuda() for h in host])
            ys = y if isinstance(y, (list, tuple)) else [y]
            _ = [t.cpu() for t in ys]
            torch.cuda.synchronize()
            if r >= args.warmup:
                times.append(time.perf_counter() - t0)
        out[label] = {"median_s": statistics.median(times), "min_s": min(times), "times_s": times}

    try:
        timed(module, "eager")
    except Exception as e:  # noqa: BLE001
        return {"status": f"eager failed: {str(e)[:200]}"}
    for label, mode in [("compile", None), ("compile_ro", "reduce-overhead")]:
        try:
            torch._dynamo.reset()
            try:
                from torch._inductor import metrics
                metrics.reset()
            except ImportError:
                metrics = None
            compiled = torch.compile(module, mode=mode) if mode else torch.compile(module)
            timed(compiled, label)
            if label == "compile" and metrics is not None:
                out["inductor_kernels"] = int(getattr(metrics, "generated_kernel_count", -1))
        except Exception as e:  # noqa: BLE001
            out[label] = {"status": f"failed: {str(e)[:200]}"}
    return out


# ---- one entry ----

def bench_one(kind, name, shape_label, description, path, shapes, args) -> dict:
    print(f"gpu bench: {name} {shape_label} ...", file=sys.stderr, flush=True)
    row = {"kind": kind, "name": name, "shape": shape_label,
           "fissile_graphs": run_fissile(path, shapes, args, True),
           "fissile_stream": run_fissile(path, shapes, args, False),
           "torch": time_torch(name, path, shapes, args)}
    return row


def ms(v):
    return "-" if v is None else f"{v * 1e3:.3f}"


def by_strategy(fs: dict) -> dict:
    return {s.get("name", s["strategy"]): s for s in fs.get("strategies", [])}


def markdown(result: dict, args) -> str:
    ver = result["versions"]
    lines = [
        "# GPU benchmark: fusion strategies on --backend cuda vs PyTorch",
        "",
        f"Generated by `bench/gpu.py` on {result['date']}.  GPU: {ver.get('gpu')}; {ver.get('nvcc')}; "
        f"PyTorch {ver.get('torch')} (CUDA {ver.get('torch_cuda')}), onnx2torch {ver.get('onnx2torch')}; "
        f"fissile {ver.get('fissile')}.  Float32, TF32 off on both sides.  End to end per run (host inputs "
        f"in, host outputs out), {args.warmup} warm-up runs, median of {args.repeats}.  Times in ms; "
        "*graphs* / *stream*: fissile with CUDA graphs / FSL_CUDA_GRAPHS=0; *ro*: torch.compile "
        "mode=reduce-overhead; *ratio* = fissile optimal (graphs) / torch.compile ro.",
        "",
    ] + ([f"Note: {args.note}", ""] if args.note else [])
    strategies = args.strategies
    for kind, title in [("subgraph", "Subgraph cases (bench/cases.py)"), ("model", "Real models (.cache/models)")]:
        rows = [r for r in result["rows"] if r["kind"] == kind]
        if not rows:
            continue
        lines += [f"## {title}", ""]
        head = (["case", "shape"] + [f"{s} graphs" for s in strategies] + ["optimal stream", "eager", "compile",
                                                                             "ro", "ratio", "kernels",
                                                                             "inductor kernels", "PyTorch peer",
                                                                             "status"])
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for r in rows:
            g, st, t = by_strategy(r["fissile_graphs"]), by_strategy(r["fissile_stream"]), r["torch"]
            ok = lambda d, k: d.get(k, {}).get("median_s") if d.get(k, {}).get("status") == "ok" else None  # noqa: E731
            cells = [r["name"], r["shape"]] + [ms(ok(g, s)) for s in strategies] + [ms(ok(st, "optimal"))]
            tm = {k: t.get(k, {}).get("median_s") if isinstance(t.get(k), dict) else None
                  for k in ("eager", "compile", "compile_ro")}
            cells += [ms(tm["eager"]), ms(tm["compile"]), ms(tm["compile_ro"])]
            opt = ok(g, "optimal")
            cells.append(f"{opt / tm['compile_ro']:.2f}" if opt and tm["compile_ro"] else "-")
            cells.append("/".join(str(g[s].get("kernels", "-")) if s in g else "-" for s in strategies))
            cells.append(str(t.get("inductor_kernels", "-")))
            rel = t.get("rel_l2_vs_onnx")
            cells.append(f"{t['module']}, rel. L2 vs ONNX {rel:.1e}" if "module" in t and rel is not None
                         else t.get("module", "-"))
            errs = [f"{k}: {v.get('error', '')[:80]}" for k, v in g.items() if v.get("status") != "ok"]
            if r["fissile_graphs"].get("status") != "ok":
                errs.append(f"fissile: {r['fissile_graphs'].get('status')}"[:120])
            if t.get("status") != "ok":
                errs.append(f"torch: {t.get('status')}"[:120])
            cells.append(("; ".join(dict.fromkeys(e.split(": ", 1)[-1] for e in errs)) or "ok").replace("|", "/"))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def write(result: dict, args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.json").write_text(json.dumps(result, indent=1))
    (out / "gpu.md").write_text(markdown(result, args))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--cases", help="comma-separated case ids or pattern names (default: all)")
    ap.add_argument("--no-cases", action="store_true")
    ap.add_argument("--models", help="comma-separated model names (default: every bench model present)")
    ap.add_argument("--no-models", action="store_true")
    ap.add_argument("--no-torch", action="store_true", help="fissile only")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per `fissile bench` call")
    ap.add_argument("--out", help="folder for gpu.md and gpu.json (default: print the table only)")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    args.strategies = [s for s in args.strategies.split(",") if s]
    args.backend, args.threads = "cuda", os.cpu_count() or 1  # what cpu_bench.run_fissile_bench passes
    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "note": args.note, "versions": gpu_versions(),
              "repeats": args.repeats, "warmup": args.warmup, "strategies": args.strategies, "rows": []}
    with tempfile.TemporaryDirectory(prefix="fsl_gpu_cases_") as tmp:
        for e in cpu_bench.entries(Path(tmp), args.cases, args.no_cases, args.models, args.no_models,
                                   who="gpu bench"):
            result["rows"].append(bench_one(*e, args))
            if args.out:  # after every row: a run stopped at a time limit keeps what it measured
                write(result, args)
    if args.out:
        write(result, args)
        print(f"gpu bench: wrote {Path(args.out) / 'gpu.md'} and {Path(args.out) / 'gpu.json'}", file=sys.stderr)
    else:
        print(markdown(result, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
