"""compare(): the research question (how many kernels, how much time does
each fusion strategy give?) answered for one model, as a table.

A measurement helper, not a test: it reports what it measures on this
machine and checks nothing (outputs are compared with ONNX Runtime only to
report the error next to the times).
"""
from __future__ import annotations

import os
import time
from typing import Mapping, Sequence

import numpy as np

from .session import InferenceSession

STRATEGIES = ("unfused", "opfuse", "greedy", "optimal")
# compare()'s default rows: the strategies, then optimal without rewrites,
# so that the rewrites' contribution is told apart from fission's
COMPARE_ROWS = STRATEGIES + ("optimal-norewrite",)
NOREWRITE = "-norewrite"

# Columns of the printed table: (key, header, format).
_COLUMNS = [
    ("name", "name", "{}"), ("kernels", "kernels", "{}"), ("loop", "loop", "{}"), ("reduce", "reduce", "{}"),
    ("linear", "linear", "{}"), ("opaque", "opaque", "{}"), ("predicted_s", "predicted ms", "ms"),
    ("median_s", "median ms", "ms"), ("p10_s", "p10 ms", "ms"), ("p90_s", "p90 ms", "ms"),
    ("compile_s", "compile s", "{:.2f}"), ("optimal", "optimal", "{}"), ("arena_bytes", "arena MiB", "mib"),
    ("rel_l2_vs_ort", "rel L2 vs ORT", "{:.1e}"),
]


class Table(list):
    """A list of dicts (one row per strategy, plus "onnxruntime"), printed as
    an aligned text table; to_pandas() gives a DataFrame when pandas is
    installed (it is not required)."""

    def to_pandas(self):
        import pandas as pd  # optional dependency
        return pd.DataFrame(list(self))

    def __str__(self) -> str:
        def cell(row, key, fmt):
            v = row.get(key)
            if v is None:
                return "-"
            if fmt == "ms":
                return f"{v * 1e3:.3f}"
            if fmt == "mib":
                return f"{v / 2**20:.1f}"
            return fmt.format(v)
        rows = [[h for _, h, _ in _COLUMNS]] + [[cell(r, k, f) for k, _, f in _COLUMNS] for r in self]
        widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
        return "\n".join("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                         for r in rows)


def random_inputs(sess: InferenceSession, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fresh random inputs a compiled session can take: floats uniform in
    [-1, 1), bools 0/1, integers in the range fsl_model_input_int_range reads
    off the graph (an embedding's rows, 0/1 for a mask, else [0, 10))."""
    feeds = {}
    for i, arg in enumerate(sess.get_inputs()):
        shape = tuple(arg.shape)
        if not all(isinstance(d, int) for d in shape):
            raise ValueError(f"input '{arg.name}' has unbound dims {arg.shape}: pass shapes= or dims=")
        dt = arg.dtype
        if dt == np.bool_:
            feeds[arg.name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dt, np.integer):
            lo, hi, _ = sess._model.input_int_range(i)
            feeds[arg.name] = rng.integers(lo, max(hi, lo + 1), size=shape).astype(dt)
        else:
            feeds[arg.name] = rng.uniform(-1.0, 1.0, size=shape).astype(dt)
    return feeds


def _ort_session(path: str, threads: int | None):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads or 0
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _rel_l2(got: list, want: list) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        if not np.issubdtype(w.dtype, np.floating) or w.size == 0:
            continue
        g64, w64 = np.asarray(g, np.float64).ravel(), np.asarray(w, np.float64).ravel()
        denom = max(float(np.linalg.norm(w64)), 1e-6 * np.sqrt(w64.size))
        worst = max(worst, float(np.linalg.norm(g64 - w64) / denom))
    return worst


def compare(model: str | os.PathLike, strategies: Sequence[str] = COMPARE_ROWS, backend: str | None = None,
            repeats: int = 20, warmup: int = 3, shapes: Mapping[str, Sequence[int]] | None = None,
            dims: Mapping[str, int] | None = None, peer: bool = True, threads: int | None = None,
            seed: int | None = None) -> Table:
    """Compiles `model` with each strategy and times it, interleaved.

    model:      path of the ONNX model.
    strategies: fusion strategies to compare: names of fissile.STRATEGIES,
                each optionally ending in "-norewrite" (rewrites off); by
                default the four strategies and "optimal-norewrite".
    backend:    as InferenceSession (None: the best this build has).
    repeats:    timed runs per strategy; warmup: untimed runs first.
    shapes, dims: input shapes / dim_param sizes, as InferenceSession; every
                input shape must be known after them.
    peer:       add a row for ONNX Runtime (ORT_ENABLE_ALL, same threads,
                same inputs) when onnxruntime is importable.
    threads:    OpenMP threads for fissile, intra-op threads for ONNX Runtime.
    seed:       seed of the random inputs (None: fresh).

    Each repeat draws fresh random inputs (random_inputs) and runs every
    strategy (and ONNX Runtime) once on them, round robin, so drift in the
    machine's speed affects all alike.  Returns a Table: one dict per
    strategy with name, strategy, rewrite, n_rewrites, backend, kernels, loop/reduce/linear/opaque
    (kernels by kind), predicted_s, optimal, arena_bytes, compile_s (seconds
    to construct the session), median_s, min_s, max_s, p10_s, p90_s (wall
    seconds per run) and rel_l2_vs_ort (worst relative L2 error of a float
    output against ONNX Runtime on the first inputs, None without it); the
    ONNX Runtime row has the times and compile_s only.
    Raises what InferenceSession raises, and ValueError for repeats < 1 or no strategy.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    if not strategies:
        raise ValueError("compare needs at least one strategy")
    path = os.fspath(model)
    rows, runners, sessions = [], [], []
    for name in strategies:
        off = name.endswith(NOREWRITE)
        s = name[:-len(NOREWRITE)] if off else name
        t0 = time.perf_counter()
        sess = InferenceSession(path, strategy=s, backend=backend, threads=threads, shapes=shapes, dims=dims,
                                rewrite="off" if off else None)
        compile_s = time.perf_counter() - t0
        sessions.append(sess)
        plan = sess.plan
        by_kind = plan["kernels_by_kind"]
        rows.append({"name": name, "strategy": s, "rewrite": plan["rewrite"], "n_rewrites": plan["n_rewrites"],
                     "backend": sess.backend, "kernels": plan["n_kernels"],
                     "loop": by_kind["loop"], "reduce": by_kind["reduce"], "linear": by_kind["linear"],
                     "opaque": by_kind["opaque"], "predicted_s": plan["predicted_s"], "optimal": plan["optimal"],
                     "arena_bytes": plan["arena_bytes"], "compile_s": compile_s})
        runners.append(lambda feeds, sess=sess: sess.run(None, feeds))
    ort_names = None
    if peer:
        t0 = time.perf_counter()
        ort_sess = _ort_session(path, threads)
        if ort_sess is not None:
            ort_names = [o.name for o in ort_sess.get_outputs()]
            rows.append({"name": "onnxruntime", "strategy": None, "backend": "onnxruntime",
                         "compile_s": time.perf_counter() - t0})
            runners.append(lambda feeds, o=ort_sess: o.run(None, feeds))
    rng = np.random.default_rng(seed)
    times = [[] for _ in runners]
    for r in range(warmup + repeats):
        feeds = random_inputs(sessions[0], rng)
        outs = []
        for i, run in enumerate(runners):
            t0 = time.perf_counter()
            out = run(feeds)
            dt = time.perf_counter() - t0
            if r >= warmup:
                times[i].append(dt)
            if r == 0:
                outs.append(out)
        if r == 0:
            want = outs[-1] if ort_names is not None else None
            for i, row in enumerate(rows):
                if row["name"] != "onnxruntime":
                    row["rel_l2_vs_ort"] = _rel_l2(outs[i], want) if want is not None else None
    for row, ts in zip(rows, times):
        t = np.asarray(ts)
        row.update(median_s=float(np.median(t)), min_s=float(t.min()), max_s=float(t.max()),
                   p10_s=float(np.percentile(t, 10)), p90_s=float(np.percentile(t, 90)))
    return Table(rows)
