"""CPU benchmark: every fusion strategy of fissile against ONNX Runtime and OpenVINO, in one run.

    .venv/bin/python bench/bench.py [--threads N] [--repeats 20] [--warmup 20] [--rounds N]
                                    [--cases a,b | --no-cases] [--models a,b | --no-models]
                                    [--strategies unfused,opfuse,greedy,optimal,optimal-norewrite]
                                    [--peers ORT,OpenVINO] [--openvino-precision model|f32]
                                    [--out bench/results] [--timeout 1800] [--hide-avx512] [--fp16] [--int8]

For every subgraph case of bench/cases.py (each pattern at several shapes)
and every real model in .cache/models (python/fsl_models.py), runs
`fissile bench MODEL --backend cpu --threads N --repeats R --warmup W --json`
(per strategy: kernel count, predicted time, median latency of R timed runs
after W warm-up runs with fresh random inputs each, planned arena size), and
the peers on the same model in this process, W warm-up runs, then the median
of R timed runs, fresh random inputs each run drawn like fissile's (floats
uniform in [-1, 1), integers uniform in [0, 10), bools random), same shapes:
- ONNX Runtime: CPU provider, ORT_ENABLE_ALL, intra_op_num_threads = N,
  inter_op_num_threads = 1, `session.run`;
- OpenVINO (PyPI `openvino`): CPU plugin, the bench shapes made static,
  PERFORMANCE_HINT LATENCY, one stream, INFERENCE_NUM_THREADS = N, and the
  precision hint f32, or f16 for a float16 model (--openvino-precision model,
  the default; `f32` always with --openvino-precision f32), `infer`.  Not the
  plugin's default precision: on CPUs with AVX512-BF16 or AMX it computes
  float32 models in bfloat16.

Everything is timed in --rounds rounds per entry.  In a round, each strategy
(one `fissile bench --strategies S` call) and each peer run their W warm-up
and R timed runs back to back, so every peer runs with its own weights warm in
cache, and the order changes from round to round in a Williams design
(round_orders): over one design's rounds, by default the number of
entries (strategies + peers) when even and twice it when odd, every entry
runs once in each position and right after every other entry equally
often, so that none always runs on the warmer machine or after the same
neighbour (shared VMs drift 1.5x between minutes).  A ratio is
taken per round (the two medians of that round); the tables give the
median of the round ratios and their range (min-max), and the times are
medians over all rounds' runs.  "The faster peer" of a round is the peer
with the lower median in that round.
Writes <out>/cpu.json (everything, every timed run, every round) and
<out>/cpu.md (tables and ratios fissile / peer: below 1 means fissile is
faster), with the machine (lscpu), the versions and the thread count beside
the numbers.

--fp16 follows every model with its float16 variant, converted as users
convert models (onnxconverter-common, float32 inputs and outputs kept; a
model the converter breaks is left out with a note), and writes
<out>/cpu-fp16.json and .md: both variants against ONNX Runtime in one run.

--int8 follows every model with its int8 variants, quantized as users
quantize models (onnxruntime.quantization's quantize_dynamic, and
quantize_static in the QDQ format, per channel, calibrated on seeded
random inputs), and writes <out>/cpu-int8.json and .md.

--hide-avx512 runs this process, and so the peers in it, with AVX-512 hidden from
CPUID by bench/hide_avx512.c (an LD_PRELOAD library; Linux CPUID faulting),
and every `fissile bench` with FSL_CPU_ISA=avx2 (its generated C and
oneDNN): on an AVX-512 machine, both peers then run the AVX2 code they would
run on an AVX2-only machine.  ORT has no ISA switch of its own, so
FSL_CPU_ISA=avx2 alone compares fissile on AVX2 with ORT on AVX-512 (OpenVINO
reads CPUID like ORT: the library limits it too).  The
library stays out of fissile's processes: the C compiler installs its own
SIGSEGV handler, which the emulation needs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "python"))  # after site-packages: an installed fissile (with its extension) wins over python/fissile
sys.path.insert(0, str(ROOT / "bench"))
import fsl_models  # noqa: E402
from cases import CASES  # noqa: E402

# the four strategies (with rewrites, the default) and optimal without them
STRATEGIES = ["unfused", "opfuse", "greedy", "optimal", "optimal-norewrite"]

_NP_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64,
              9: np.bool_, 10: np.float16, 11: np.float64}


# ---- machine and versions ----

def lscpu() -> dict:
    # family / model / stepping name the microarchitecture where "Model name" does not (KVM guests)
    keys = ["Architecture", "Model name", "CPU family", "Model", "Stepping", "CPU(s)", "Thread(s) per core",
            "Core(s) per socket", "Socket(s)",
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
    try:
        import openvino
        v["openvino"] = openvino.__version__.split("-")[0]
    except ImportError:
        v["openvino"] = None
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


HIDE_ENV = "FSL_BENCH_HIDE_AVX512"


def build_hide_avx512(lib: Path) -> Path:
    """Compiles bench/hide_avx512.c into the shared library `lib` unless it is newer than the source."""
    src = ROOT / "bench/hide_avx512.c"
    lib.parent.mkdir(parents=True, exist_ok=True)
    if not lib.exists() or lib.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def cpu_features() -> dict:
    """numpy's reading of this process's CPUID (feature name -> bool)."""
    return getattr(np.core._multiarray_umath, "__cpu_features__", {})


def hide_avx512_reexec() -> None:
    """Builds the library into build/bench and re-executes this script under it (does not return)."""
    lib = build_hide_avx512(ROOT / "build/bench/hide_avx512.so")
    env = dict(os.environ, FSL_CPU_ISA="avx2", **{HIDE_ENV: str(lib)})
    env["LD_PRELOAD"] = " ".join(p for p in [str(lib), env.get("LD_PRELOAD", "")] if p)
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def run_isa() -> str:
    """The SIMD level this process's CPUID reports (numpy's view), and how it was limited."""
    feats = cpu_features()
    level = "AVX-512" if feats.get("AVX512F") else "AVX2" if feats.get("AVX2") else "below AVX2"
    how = []
    if os.environ.get(HIDE_ENV):
        how.append("ORT: AVX-512 hidden from CPUID (bench/hide_avx512.c)")
    if os.environ.get("FSL_CPU_ISA"):
        how.append(f"fissile: FSL_CPU_ISA={os.environ['FSL_CPU_ISA']}")
    return level + (f" ({'; '.join(how)})" if how else "")


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


def time_runs(run, specs, repeats: int, warmup: int, seed: int, extra: dict) -> dict:
    """A peer's timing loop: run(feeds) W warm-up then R timed times, each on
    fresh random inputs drawn like fissile's (specs: ort_inputs); the
    medians and every timed run, with `extra` merged in, or an error."""
    rng = np.random.default_rng(seed)
    times = []
    try:
        for r in range(warmup + repeats):
            feeds = {n: random_like_fissile(s, d, rng) for n, s, d in specs}
            t0 = time.perf_counter()
            run(feeds)
            dt = time.perf_counter() - t0
            if r >= warmup:
                times.append(dt)
    except Exception as e:  # noqa: BLE001
        return {"status": f"error: {' '.join(str(e).split())[:300]}"}
    return {"status": "ok", "median_s": statistics.median(times), "min_s": min(times), "times_s": times, **extra}


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
    return time_runs(lambda feeds: sess.run(None, feeds), ort_inputs(path, shapes), repeats, warmup, seed,
                     {"session_s": session_s})



def openvino_precision(path: Path, how: str) -> str:
    """OpenVINO's INFERENCE_PRECISION_HINT for the model at path: "f32" with
    how == "f32"; with how == "model" (issue 61: the model's own precision)
    "f16" where the model computes in float16 (a float16 initializer or
    value), else "f32" (float32 models, and int8 ones: their integer work is
    the QDQ nodes' own, the hint covers the float rest).  Not "bf16" or the
    plugin's default: on CPUs with AVX512-BF16 or AMX the default computes a
    float32 model in bfloat16."""
    if how == "f32":
        return "f32"
    m = onnx.load(str(path), load_external_data=False)
    f16 = onnx.TensorProto.FLOAT16
    if any(t.data_type == f16 for t in m.graph.initializer) or \
            any(v.type.tensor_type.elem_type == f16 for v in m.graph.value_info):
        return "f16"
    return "f32"


def time_openvino(path: Path, shapes: dict, threads: int, repeats: int, warmup: int, seed: int = 0,
                  precision: str = "model") -> dict:
    """OpenVINO's CPU plugin on the model: shapes made static (the bench
    shapes), LATENCY hint, one stream, `threads` inference threads, the
    precision hint of openvino_precision(path, precision); W warm-up runs,
    then R timed `infer` calls (inputs and outputs shared, not copied) on
    fresh random inputs drawn like fissile's.
    Same result layout as time_ort, plus "precision"."""
    try:
        import openvino as ov
    except ImportError:
        return {"status": "openvino not installed"}
    prec = openvino_precision(path, precision)
    specs = ort_inputs(path, shapes)
    try:
        core = ov.Core()
        t0 = time.perf_counter()
        model = core.read_model(str(path))
        model.reshape({n: ov.PartialShape(list(s)) for n, s, _ in specs})
        compiled = core.compile_model(model, "CPU", {
            "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": threads,
            "INFERENCE_PRECISION_HINT": prec})
        req = compiled.create_infer_request()
        session_s = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 (the converter's failures are of every kind)
        return {"status": f"error: {' '.join(str(e).split())[:300]}"}
    # no copies in or out, like ORT's run (its outputs are views of the
    # request's buffers, overwritten by the next run: unread here)
    return time_runs(lambda feeds: req.infer(feeds, share_inputs=True, share_outputs=True), specs, repeats, warmup,
                     seed, {"session_s": session_s, "precision": prec})


# The peers: name -> (module that must import, timing function).
PEERS = {"ORT": ("onnxruntime", time_ort), "OpenVINO": ("openvino", time_openvino)}


def available_peers(names: list[str]) -> list[str]:
    """The peers of `names` whose Python package imports (a missing one is
    left out with a note on stderr)."""
    import importlib.util
    out = []
    for n in names:
        if n not in PEERS:
            raise SystemExit(f"bench: unknown peer {n!r} (known: {', '.join(PEERS)})")
        if importlib.util.find_spec(PEERS[n][0]) is None:
            print(f"bench: note: {PEERS[n][0]} is not installed: {n} left out (scripts/setup.sh installs it)",
                  file=sys.stderr)
            continue
        out.append(n)
    return out


# ---- fissile ----

def run_fissile_bench(path: Path, shapes: dict, args, timeout: int, seed: int = 0,
                      strategies: list[str] | None = None) -> dict:
    exe = fsl_models.fissile_bin()
    with tempfile.TemporaryDirectory(prefix="fsl_bench_") as tmp:
        js = Path(tmp) / "bench.json"
        cmd = [str(exe), "bench", str(path), "--backend", args.backend, "--threads", str(args.threads),
               "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--json", str(js),
               "--strategies", ",".join(strategies or args.strategies), "--seed", str(seed)]
        for name, shape in shapes.items():
            cmd += ["--shape", f"{name}={'x'.join(map(str, shape))}"]
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        if env.get(HIDE_ENV):  # fissile is limited by FSL_CPU_ISA; its compiler must not run under the library
            env["LD_PRELOAD"] = " ".join(p for p in env.get("LD_PRELOAD", "").split() if p != env[HIDE_ENV])
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

def fp16_variant(path: Path, tmp: Path, who: str) -> Path | None:
    """The model at path converted as users convert it to float16
    (onnxconverter-common, float32 inputs and outputs kept), written into
    tmp; None (with a note) where the converter or ONNX Runtime fails on it."""
    import warnings
    try:
        from onnxconverter_common import float16
        import onnxruntime as ort
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m16 = float16.convert_float_to_float16(onnx.load(str(path)), keep_io_types=True)
        out = Path(tmp) / f"{path.stem}_fp16.onnx"
        onnx.save(m16, str(out))
        ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        return out
    except Exception as e:  # noqa: BLE001 (the converter's failures are of every kind)
        print(f"{who}: {path.stem}: no float16 variant: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
        return None


def int8_variants(model, tmp: Path, who: str):
    """(kind, path) of the model's int8 variants (fsl_models.int8_variant:
    quantize_dynamic, quantize_static QDQ), each checked to load in ONNX
    Runtime; a variant the quantizer or ONNX Runtime fails on is left out
    with a note."""
    import onnxruntime as ort
    for kind in ("int8_dynamic", "int8_qdq"):
        try:
            out = fsl_models.int8_variant(model, kind, Path(tmp) / f"{model.name}_{kind}.onnx")
            ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
            yield kind, out
        except Exception as e:  # noqa: BLE001 (the quantizer's failures are of every kind)
            print(f"{who}: {model.name}: no {kind} variant: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)


def entries(tmp: Path, cases: str | None = None, no_cases: bool = False, models: str | None = None,
            no_models: bool = False, who: str = "bench", fp16: bool = False, int8: bool = False):
    """(kind, name, shape label, description, ONNX path, input shapes) of every
    subgraph case of bench/cases.py (written into tmp; `cases`: comma-separated
    ids or pattern names) and every bench model present in .cache/models
    (`models`: comma-separated names), in that order; with fp16, each model
    followed by its float16 variant (fp16_variant), named <model>_fp16; with
    int8, by its int8 variants (int8_variants), <model>_int8_dynamic and
    <model>_int8_qdq."""
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
            v16 = fp16_variant(model.path, Path(tmp), who) if fp16 else None
            if v16:
                yield "model", f"{name}_fp16", label, f"{model.description} (float16, onnxconverter-common)", v16, shapes
            for kind, v8 in int8_variants(model, Path(tmp), who) if int8 else ():
                how = "quantize_dynamic" if kind == "int8_dynamic" else "quantize_static, QDQ, per channel"
                yield "model", f"{name}_{kind}", label, f"{model.description} (int8, {how})", v8, shapes


# ---- one benchmark entry ----

def merge_rounds(rounds: list[dict]) -> dict:
    """The fissile results of several `fissile bench --json` rounds as one:
    the first round's plan facts, every round's timed runs, the median and
    min over all of them, and "round_median_s" (one median per round)."""
    ok = [r for r in rounds if r.get("strategies")]
    if not ok:
        return rounds[0] if rounds else {"status": "no rounds", "strategies": []}
    out = dict(ok[0])
    out["status"] = next((r["status"] for r in rounds if r.get("status") != "ok"), "ok")
    out["wall_s"] = sum(r.get("wall_s", 0.0) for r in rounds)
    merged = []
    for s in ok[0]["strategies"]:
        key = s.get("name", s["strategy"])
        same = [t for r in ok for t in r["strategies"] if t.get("name", t["strategy"]) == key]
        m = dict(s)
        if all(t.get("status") == "ok" for t in same):
            times = [x for t in same for x in t.get("times_s", [])]
            m.update(times_s=times, median_s=statistics.median(times), min_s=min(times),
                     round_median_s=[t["median_s"] for t in same])
        else:
            bad = next(t for t in same if t.get("status") != "ok")
            m["status"], m["error"] = bad["status"], bad.get("error", "")
        merged.append(m)
    out["strategies"] = merged
    return out


def merge_peer(rounds: list[dict]) -> dict:
    """A peer's rounds (ORT's, OpenVINO's) as one result (times over all rounds, one median per round)."""
    bad = next((r for r in rounds if r.get("status") != "ok"), None)
    if bad:
        return bad
    times = [x for r in rounds for x in r["times_s"]]
    return {"status": "ok", "median_s": statistics.median(times), "min_s": min(times), "times_s": times,
            "round_median_s": [r["median_s"] for r in rounds], "session_s": rounds[0]["session_s"]}


def round_ratios(num: list[float], den: list[float]) -> dict:
    """Per-round ratios num/den: their median and range."""
    rs = [a / b for a, b in zip(num, den) if a and b]
    return {"median": statistics.median(rs), "min": min(rs), "max": max(rs), "rounds": rs} if rs else {}


def combine_calls(calls: dict[str, dict], names: list[str]) -> dict:
    """The `fissile bench --json` results of one call per strategy (name ->
    result) as one round's result, strategies in `names` order; a call
    that failed as a whole stands as an error entry for its strategy."""
    first = next((c for c in calls.values() if c.get("strategies")), {})
    out = dict(first)
    out["status"] = next((c["status"] for c in calls.values() if c.get("status") != "ok"), "ok")
    out["wall_s"] = sum(c.get("wall_s", 0.0) for c in calls.values())
    out["strategies"] = []
    for k in names:
        got = [t for t in calls[k].get("strategies", []) if t.get("name", t["strategy"]) == k]
        out["strategies"].append(got[0] if got else {"strategy": k, "name": k, "status": calls[k].get("status", "?"),
                                                    "error": calls[k].get("status", "")})
    return out


def round_orders(names: list[str]) -> list[list[str]]:
    """The orders in which a round runs `names`: a Williams design, a Latin
    square balanced for first-order carry-over.  Over len(result) rounds
    every entry runs once in every position and directly after every other
    entry equally often (once for an even count of entries, twice for an
    odd one, where the square and its mirror image are used).  A plain
    rotation keeps each entry's predecessor fixed (one strategy always runs
    right after ORT's process), and over fewer rounds than entries leaves
    positions unvisited (Williams 1949, Aust. J. Sci. Res. A 2:149)."""
    n = len(names)
    base, lo, hi = [0], 1, n - 1  # 0, 1, n-1, 2, n-2, ...
    while len(base) < n:
        base.append(lo)
        lo += 1
        if len(base) < n:
            base.append(hi)
            hi -= 1
    rows = [[names[(b + r) % n] for b in base] for r in range(n)]
    return rows if n % 2 == 0 else rows + [list(reversed(row)) for row in rows]


def optimal_vs_baselines(ok: dict[str, dict]) -> dict:
    """Optimal against the faster baseline (target: optimal <= min(opfuse,
    greedy)), from merged strategy results (name -> merge_rounds entry):
    the per-round ratios to the one baseline with the lower median over all
    rounds' runs, that baseline, the baselines that built optimal's very
    plan and whether optimal is slower beyond the spread.  Not the
    per-round min of the two: the smaller of two noisy medians sits below
    either's typical value, so optimal came out 1.04-1.30x "slower" on
    rows where both baselines built optimal's very plan.  {} without
    optimal or a baseline."""
    base = [k for k in ("opfuse", "greedy") if k in ok]
    if "optimal" not in ok or not base:
        return {}
    b = min(base, key=lambda k: ok[k]["median_s"])
    rr = round_ratios(ok["optimal"]["round_median_s"], ok[b]["round_median_s"])
    if not rr:
        return {}
    rr["baseline"] = b
    # a baseline that built optimal's very plan (same plan_hash) runs the
    # same code: any difference is the machine's, not the plan's
    h = ok["optimal"].get("plan_hash")
    rr["same_plan"] = [k for k in base if h and ok[k].get("plan_hash") == h]
    # beyond the spread: optimal's 25th percentile above the 75th of that
    # baseline (all rounds' runs pooled)
    q = lambda k, p: float(np.percentile(ok[k]["times_s"], p))
    rr["beyond_spread"] = q("optimal", 25) > q(b, 75) and not rr["same_plan"]
    return rr


def time_peer(name: str, path: Path, shapes: dict, args, seed: int) -> dict:
    """One round of a peer (PEERS) on the model: its W warm-up and R timed runs."""
    if name == "OpenVINO":
        return time_openvino(path, shapes, args.threads, args.repeats, args.warmup, seed=seed,
                             precision=args.openvino_precision)
    return PEERS[name][1](path, shapes, args.threads, args.repeats, args.warmup, seed=seed)


def peer_ratios(ok: dict[str, dict], peer: dict) -> tuple[dict, dict]:
    """Per-round ratios of every strategy in ok to `peer` (a merged peer
    result: "round_median_s"): ({strategy: median}, {strategy: [min, max]}),
    and the fastest strategy of each round under "best"."""
    ratios, ranges = {}, {}
    for k, v in ok.items():
        rr = round_ratios(v["round_median_s"], peer["round_median_s"])
        if rr:
            ratios[k], ranges[k] = rr["median"], [rr["min"], rr["max"]]
    if ok:
        best = [min(v["round_median_s"][i] for v in ok.values()) for i in range(len(peer["round_median_s"]))]
        rr = round_ratios(best, peer["round_median_s"])
        if rr:
            ratios["best"], ranges["best"] = rr["median"], [rr["min"], rr["max"]]
    return ratios, ranges


def best_peer(peers: dict[str, dict]) -> dict | None:
    """The faster peer of each round as one merged result: per round the
    lower of the peers' round medians, and which peer it was ("who").  None
    unless some peer ran in every round."""
    ok = {k: v for k, v in peers.items() if v.get("status") == "ok"}
    if not ok:
        return None
    n = min(len(v["round_median_s"]) for v in ok.values())
    med = [min(v["round_median_s"][i] for v in ok.values()) for i in range(n)]
    who = [min(ok, key=lambda k: ok[k]["round_median_s"][i]) for i in range(n)]
    fastest = min(ok, key=lambda k: ok[k]["median_s"])
    return {"status": "ok", "round_median_s": med, "who": who, "median_s": ok[fastest]["median_s"],
            "name": fastest}


def bench_one(kind, name, shape_label, description, path, shapes, args) -> dict:
    print(f"bench: {name} {shape_label} ...", file=sys.stderr, flush=True)
    fs_rounds, peer_rounds = [], {p: [] for p in args.peers}
    orders = round_orders(args.strategies + args.peers)
    for r in range(args.rounds):
        # one call per strategy, so that each strategy's runs follow one
        # another as the peers' do (interleaving strategies run by run leaves
        # each plan's weights out of cache: 10% on mobilenet_v3_small); who
        # goes first and who follows whom changes from round to round
        # (round_orders), so that none always runs on the warmer machine
        order = orders[r % len(orders)]
        calls = {}
        for k in order:
            if k in peer_rounds:
                peer_rounds[k].append(time_peer(k, path, shapes, args, seed=r))
            else:
                calls[k] = run_fissile_bench(path, shapes, args, args.timeout, seed=r, strategies=[k])
        fs_rounds.append(combine_calls(calls, args.strategies))
    fs = merge_rounds(fs_rounds)
    peers = {p: merge_peer(rs) for p, rs in peer_rounds.items()}
    row = {"kind": kind, "name": name, "shape": shape_label, "description": description,
           "fissile": fs, "peers": peers, "ort": peers.get("ORT", {"status": "not run"}),
           "ratios": {}, "ratio_range": {}, "peer_ratios": {}, "peer_ratio_range": {}}
    by = {s.get("name", s["strategy"]): s for s in fs.get("strategies", [])}
    ok = {k: v for k, v in by.items() if v.get("status") == "ok" and "round_median_s" in v}
    for p, res in peers.items():
        if res.get("status") == "ok":
            row["peer_ratios"][p], row["peer_ratio_range"][p] = peer_ratios(ok, res)
    bp = best_peer(peers)
    if bp:
        row["best_peer"] = bp
        row["peer_ratios"]["best peer"], row["peer_ratio_range"]["best peer"] = peer_ratios(ok, bp)
    if "ORT" in row["peer_ratios"]:  # the ORT ratios under their old keys
        rat, rng = dict(row["peer_ratios"]["ORT"]), dict(row["peer_ratio_range"]["ORT"])
        if "best" in rat:
            row["best_ratio"], row["best_ratio_range"] = rat.pop("best"), rng.pop("best")
        row["ratios"], row["ratio_range"] = rat, rng
    ob = optimal_vs_baselines(ok)
    if ob:
        row["optimal_vs_baselines"] = ob
    summary = "  ".join(f"{k} {by[k]['median_s'] * 1e3:.3f} ms" if by.get(k, {}).get("status") == "ok"
                        else f"{k} error" for k in args.strategies if k in by)
    peer_txt = "  ".join(f"{p} {res['median_s'] * 1e3:.3f} ms" if res.get("median_s") else f"{p} {res.get('status')}"
                         for p, res in peers.items())
    print(f"bench: {name} {shape_label}: {peer_txt}  {summary}  [{fs.get('status')}]", file=sys.stderr, flush=True)
    return row


# ---- report ----

def ms(v):
    return "-" if v is None else f"{v * 1e3:.3f}"


def fmt_ratio(v):
    return "-" if v is None else f"{v:.2f}"


def fmt_range(v, rng):
    """A median ratio with its per-round range: "0.85 (0.80-0.90)"."""
    if v is None:
        return "-"
    return f"{v:.2f}" + (f" ({rng[0]:.2f}-{rng[1]:.2f})" if rng and len(rng) == 2 and rng[0] != rng[1] else "")


# how the report names the peers: in titles and sentences, in table heads
PEER_TITLES = {"ORT": "ORT", "OpenVINO": "OpenVINO", "best peer": "the faster peer"}
PEER_SHORT = {"ORT": "ORT", "OpenVINO": "OV"}


def row_peers(row: dict) -> dict:
    """A row's merged peer results by peer name (rows written before
    OpenVINO joined carry ORT's alone, under "ort")."""
    return row.get("peers") or {"ORT": row.get("ort", {})}


def row_peer_ratios(row: dict) -> tuple[dict, dict]:
    """A row's ratios and ranges by peer name, then strategy (with "best"):
    older rows carry ORT's alone, under "ratios" and "best_ratio"."""
    if "peer_ratios" in row:
        return row["peer_ratios"], row["peer_ratio_range"]
    rat, rng = dict(row.get("ratios", {})), dict(row.get("ratio_range", {}))
    if "best_ratio" in row:
        rat["best"], rng["best"] = row["best_ratio"], row.get("best_ratio_range")
    return {"ORT": rat}, {"ORT": rng}


def markdown(result: dict, args) -> str:
    mach, ver = result["machine"], result["versions"]
    strategies = args.strategies
    peers = result.get("peers", ["ORT"])
    lines = [
        "# CPU benchmark: fusion strategies vs " + " and ".join(PEER_TITLES.get(p, p) for p in peers),
        "",
        f"Generated by `bench/bench.py` on {result['date']}.  fissile: `fissile bench --backend "
        f"{args.backend}` (generated C per kernel + oneDNN)"
        + ("; ONNX Runtime " + str(ver.get("onnxruntime")) + ": CPU provider, ORT_ENABLE_ALL" if "ORT" in peers else "")
        + ("; OpenVINO " + str(ver.get("openvino")) + ": CPU plugin, LATENCY hint, one stream, precision hint "
           + ("f32" if args.openvino_precision == "f32" else "the model's own (f16 for float16 models, else f32)")
           if "OpenVINO" in peers else "")
        + f".  All with **{args.threads} thread(s)**, {args.rounds} rounds; in a round each strategy (one "
        f"`fissile bench` call) and each peer run {args.warmup} warm-up then {args.repeats} timed runs back to back, "
        "in an order balanced over the rounds (a Williams design: each entry in every position and after every "
        "other entry equally often over each full design); fresh random inputs every run (floats uniform in "
        "[-1, 1), integers in [0, 10)), same shapes.",
        "Times in milliseconds, medians over every round's runs; a *ratio* is fissile / the peer (below 1: "
        "fissile is faster), the median of the per-round ratios with their range (min-max) beside it; *peer* is "
        "the faster peer of each round, *best* the fastest strategy of each round; *opt/base* = optimal / the "
        "baseline (opfuse or greedy, named) with the lower median over all runs, per round (target <= 1 within the "
        "range; `=greedy` and the like: that baseline built the same plan, plan_hash).  *pred* is the roofline "
        "prediction of the optimal plan, *kernels* the kernel count "
        f"per strategy ({'/'.join(strategies)}), *arena* the planned memory for kernel outputs of the optimal plan.",
        "",
    ] + ([f"Note: {args.note}", ""] if args.note else []) + [
        "## Machine",
        "",
    ]
    for k, v in mach.items():
        lines.append(f"- {k}: {v}")
    lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in ver.items()))
    if result.get("isa"):
        lines.append(f"- ISA of the run: {result['isa']}")
    lines.append(f"- threads: {args.threads} (fissile `--threads`, OMP_NUM_THREADS; ORT intra_op_num_threads; "
                 "OpenVINO INFERENCE_NUM_THREADS)")
    lines.append("")
    for kind, title in [("subgraph", "Subgraph cases (bench/cases.py)"), ("model", "Real models (.cache/models)")]:
        rows = [r for r in result["rows"] if r["kind"] == kind]
        if not rows:
            continue
        lines += [f"## {title}", ""]
        head = (["case", "shape"] + [PEER_SHORT.get(p, p) for p in peers] + strategies
                + [f"optimal/{PEER_SHORT.get(p, p)}" for p in peers]
                + (["optimal/peer", "best/peer"] if len(peers) > 1 else ["best/" + PEER_SHORT.get(peers[0], peers[0])])
                + ["opt/base", "pred (opt)", "kernels", "arena MiB", "status"])
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for r in rows:
            by = {s.get("name", s["strategy"]): s for s in r["fissile"].get("strategies", [])}
            ok = {k: v for k, v in by.items() if v.get("status") == "ok"}
            pr, prr = row_peer_ratios(r)
            cells = [r["name"], r["shape"]] + [ms(row_peers(r).get(p, {}).get("median_s")) for p in peers]
            cells += [ms(ok[k]["median_s"]) if k in ok else ("err" if k in by else "-") for k in strategies]
            cells += [fmt_range(pr.get(p, {}).get("optimal"), prr.get(p, {}).get("optimal")) for p in peers]
            if len(peers) > 1:
                cells.append(fmt_range(pr.get("best peer", {}).get("optimal"), prr.get("best peer", {}).get("optimal")))
            last = "best peer" if len(peers) > 1 else peers[0]
            cells.append(fmt_range(pr.get(last, {}).get("best"), prr.get(last, {}).get("best")))
            ob = r.get("optimal_vs_baselines", {})
            cells.append(fmt_range(ob.get("median"), [ob["min"], ob["max"]] if ob else None)
                         + (" =" + ",".join(ob["same_plan"]) if ob.get("same_plan")
                            else f" vs {ob['baseline']}" if ob.get("baseline") else ""))
            opt = by.get("optimal", {})
            cells.append(ms(opt.get("predicted_s")))
            cells.append("/".join(str(by[k].get("kernels", "-")) if k in by else "-" for k in strategies))
            cells.append(f"{opt['peak_bytes'] / 2**20:.2f}" if "peak_bytes" in opt else "-")
            errs = [f"{k}: {v.get('error', '')[:100]}" for k, v in by.items() if v.get("status") != "ok"]
            status = r["fissile"].get("status", "?")
            for p in peers:
                if row_peers(r).get(p, {}).get("status") != "ok":
                    errs.append(f"{p}: {row_peers(r).get(p, {}).get('status', 'not run')[:100]}")
            cells.append((status + ("; " + "; ".join(errs) if errs else "")).replace("|", "/"))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    # geometric means of the ratios
    lines += ["## Summary", ""]
    for kind in ["subgraph", "model"]:
        rows = [r for r in result["rows"] if r["kind"] == kind]
        for p in peers + (["best peer"] if len(peers) > 1 else []):
            parts = []
            for s in strategies:
                rs = [row_peer_ratios(r)[0].get(p, {})[s] for r in rows if s in row_peer_ratios(r)[0].get(p, {})]
                if rs:
                    parts.append(f"{s} {float(np.exp(np.mean(np.log(rs)))):.2f} (n={len(rs)})")
            if parts:
                lines.append(f"- {kind}s, geometric mean of fissile/{PEER_TITLES.get(p, p)}: " + ", ".join(parts))
        for p in peers + (["best peer"] if len(peers) > 1 else []):
            pr = [(r, row_peer_ratios(r)) for r in rows]
            slower = [f"{r['name']} {a[p]['optimal']:.2f}" for r, (a, _) in pr if a.get(p, {}).get("optimal", 0) > 1]
            beyond = [r["name"] for r, (_, b) in pr if b.get(p, {}).get("optimal", [0])[0] > 1]
            if rows and "optimal" in strategies:
                lines.append(f"- {kind}s where optimal is slower than {PEER_TITLES.get(p, p)} (median ratio > 1): "
                             f"{', '.join(slower) or 'none'}; in every round: {', '.join(beyond) or 'none'}")
        lost = [f"{r['name']} {r['optimal_vs_baselines']['median']:.2f}" for r in rows
                if r.get("optimal_vs_baselines", {}).get("beyond_spread")]
        same = [r["name"] for r in rows if r.get("optimal_vs_baselines", {}).get("same_plan")]
        if rows and "optimal" in strategies:
            lines.append(f"- {kind}s where optimal is slower than the faster of opfuse and greedy beyond the "
                         f"spread (its 25th percentile above that baseline's 75th, with a plan of its own): "
                         f"{', '.join(lost) or 'none'}")
            lines.append(f"- {kind}s where a baseline built optimal's very plan (*opt/base* marked `=`, the "
                         f"same plan_hash; its ratio is the machine's drift): {', '.join(same) or 'none'}")
        # a kernel in the reference interpreter is a missing path in a backend,
        # not a measurement: name it beside the numbers it slows
        fell = [f"{r['name']} {s['name']} {s['fallback']} ({s.get('fallback_why', '')[:160]})".replace("|", "/")
                for r in rows for s in r["fissile"].get("strategies", []) if s.get("fallback")]
        if rows:
            lines.append(f"- {kind}s where a strategy ran kernels in the reference interpreter (fallback): "
                         f"{'; '.join(fell) or 'none'}")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=20)
    # 20, not 3: on a KVM guest the first ~100 runs of a 0.4 ms model in a new
    # process ran 20-30% slower than the rest (Zen 5, 2026-12-01); 20 covers
    # most of that for fissile and ORT alike at little cost on large models
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds per entry: each strategy and ORT back to back, in a balanced order (ratios per "
                         "round); default: one full design (round_orders), a multiple of it keeps the balance")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--cases", help="comma-separated case ids or pattern names (default: all)")
    ap.add_argument("--no-cases", action="store_true")
    ap.add_argument("--models", help="comma-separated model names (default: every bench model present)")
    ap.add_argument("--no-models", action="store_true")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per `fissile bench` call")
    ap.add_argument("--out", default=str(ROOT / "bench/results"))
    ap.add_argument("--note", default="", help="a remark printed under the title (e.g. machine load)")
    ap.add_argument("--fp16", action="store_true",
                    help="each model followed by its float16 variant (onnxconverter-common, float32 I/O kept); "
                         "writes cpu-fp16.json / .md")
    ap.add_argument("--int8", action="store_true",
                    help="each model followed by its int8 variants (onnxruntime.quantization: quantize_dynamic and "
                         "quantize_static QDQ per channel, calibrated on seeded random inputs); writes "
                         "cpu-int8.json / .md")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="comma-separated peers timed in the same rounds: ORT, OpenVINO (default: both; one whose "
                         "package is missing is left out with a note)")
    ap.add_argument("--openvino-precision", choices=["model", "f32"], default="model",
                    help="OpenVINO's INFERENCE_PRECISION_HINT: the model's own (f16 for float16 models, else f32; "
                         "issue 61) or f32 always")
    ap.add_argument("--hide-avx512", action="store_true",
                    help="run ORT and fissile with AVX-512 hidden from CPUID (an AVX2-only machine's code paths)")
    args = ap.parse_args()
    if args.hide_avx512 and not os.environ.get(HIDE_ENV):
        hide_avx512_reexec()
    if args.hide_avx512 and cpu_features().get("AVX512F"):
        print("bench: --hide-avx512: CPUID still reports AVX-512 in this process", file=sys.stderr)
        return 1
    args.strategies = [s for s in args.strategies.split(",") if s]
    args.peers = available_peers([p for p in args.peers.split(",") if p])
    design = len(round_orders(args.strategies + args.peers))
    if args.rounds is None:
        args.rounds = design
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.rounds % design:
        print(f"bench: note: {args.rounds} rounds is not a multiple of {design}: the order of the entries "
              "is not balanced", file=sys.stderr)
    if args.repeats < 20:
        print("bench: note: fewer than 20 repeats; the results are less stable", file=sys.stderr)
    exe = fsl_models.fissile_bin()
    if not exe.exists():
        print(f"bench: {exe} not found; run `make build` (or set FSL_BUILD_DIR)", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory(prefix="fsl_cases_") as tmp:
        rows = [bench_one(*e, args) for e in entries(Path(tmp), args.cases, args.no_cases, args.models, args.no_models,
                                                      fp16=args.fp16, int8=args.int8)]

    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "note": args.note, "machine": lscpu(), "versions": versions(),
              "isa": run_isa(), "threads": args.threads, "repeats": args.repeats, "rounds": args.rounds, "warmup": args.warmup, "backend": args.backend,
              "strategies": args.strategies, "peers": args.peers,
              "openvino_precision": args.openvino_precision, "rows": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "cpu-fp16" if args.fp16 else "cpu-int8" if args.int8 else "cpu"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1))
    (out / f"{stem}.md").write_text(markdown(result, args))
    print(f"bench: wrote {out / (stem + '.md')} and {out / (stem + '.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
