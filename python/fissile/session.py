"""InferenceSession: an onnxruntime-shaped session over libfissile.

Switching from ONNX Runtime is a one-line change::

    sess = fissile.InferenceSession("model.onnx")   # was: onnxruntime.InferenceSession(...)
    outputs = sess.run(None, {"x": x})

See docs/python.md for the full surface, zero-copy rules and threading.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from . import _fissile
from ._fissile import InvalidArgument

# ONNX element type names (fsl_dtype_name) -> NumPy dtypes.  bfloat16 has no
# NumPy dtype: such outputs come back as their uint16 bit patterns.
NUMPY_DTYPES = {
    "float": np.float32, "double": np.float64, "float16": np.float16,
    "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
    "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
    "bool": np.bool_, "bfloat16": np.uint16,
}

# At most this many shape specialisations per session (see InferenceSession.run).
MAX_SPECIALISATIONS = 4


def backends() -> list[str]:
    """Names of the backends this build has, best first after "ref" (fsl_backend_names)."""
    return [name for name, _ in _fissile.backend_names()]


def default_backend() -> str:
    """"cpu" when this build has the CPU backend, else "ref" (the reference interpreter)."""
    return "cpu" if "cpu" in backends() else "ref"


@dataclass(frozen=True)
class NodeArg:
    """A graph input or output as onnxruntime's NodeArg describes it.

    name:  the graph name.
    type:  ONNX Runtime's spelling of the tensor type, e.g. 'tensor(float)', 'tensor(int64)'.
    shape: one entry per dimension: an int where the size is known (bound by
           shapes=/dims=, fixed in the model, or inferred by compile), the
           dim_param string (e.g. 'batch') where it is still symbolic, None
           where it is unknown and unnamed; None as a whole where even the
           rank is unknown (an output before the first compile).
    """
    name: str
    type: str
    shape: list

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the tensor (bfloat16: uint16 bit patterns)."""
        return np.dtype(NUMPY_DTYPES[self.type[len("tensor("):-1]])


def _node_args(desc) -> list[NodeArg]:
    out = []
    for name, dtype, dims, params in desc:
        shape = None if dims is None else [d if d >= 0 else p for d, p in zip(dims, params)]
        out.append(NodeArg(name=name, type=f"tensor({dtype})", shape=shape))
    return out


class _DefaultStrategy(str):
    """The strategy a caller did not choose ("optimal"): a compiled model
    file keeps its own instead."""


_DEFAULT_STRATEGY = _DefaultStrategy("optimal")


class InferenceSession:
    """A compiled ONNX model, run like an onnxruntime.InferenceSession.

    path:      the model file, loaded with fsl_model_load: an ONNX ModelProto,
               or a compiled model file (.fsl, `fissile compile MODEL -o
               FILE.fsl`), which runs with the plan, backend and shapes it was
               compiled with (no compiler, no orchestration) unless strategy=
               or backend= name others.
    strategy:  how primitives are fused into kernels: "unfused", "opfuse",
               "greedy" or "optimal" (the default; the BLP of Korch); None:
               the backend's default (no plan at all for "ref", the
               whole-graph reference interpreter; "optimal" for the others).
    backend:   "cpu" (generated C + oneDNN), "plan-ref" or "ref"; None picks
               the best this build has (default_backend()).
    threads:   OpenMP threads for compile-time calibration and for every run
               (None: the OpenMP default, all cores or $OMP_NUM_THREADS).
    shapes:    {input name: tuple of ints}, full shapes of inputs (like
               `fissile run --shape`); each fixed dim of the model must agree.
    dims:      {dim_param: int}, sizes of symbolic dimensions (`--dim`).
    profile:   measure kernel costs instead of the roofline (slow the first
               time; cached in the profile cache, see fsl_model_set_profile).
    autotune:  with strategy "optimal": also build the greedy, opfuse and
               unfused plans, run them all end to end on random inputs and
               keep the fastest (fsl_model_set_autotune; the choice is
               cached in the profile cache, so only the first compile of a
               model on a machine pays for it).  plan["autotune"] says
               which plan was kept and the medians.
    rewrite:   "rules" (the default), "search" or "off": the verified
               rewrites of the primitive graph before orchestration
               (fsl_model_set_rewrite, docs/rewrite.md); None keeps a
               compiled model file's.
    providers, sess_options: accepted so that code written for onnxruntime
               runs unchanged; only "CPUExecutionProvider" is accepted (it is
               what fissile's backends are), and sess_options'
               intra_op_num_threads is used when threads is None.

    When every input shape is known after shapes=/dims=, the model compiles
    here (fission, orchestration, code generation: seconds for a real model,
    less when the kernel cache is warm).  Otherwise it compiles at the first
    run for the shapes of that run's inputs, and again for each new set of
    input shapes (up to MAX_SPECIALISATIONS kept).

    Raises: FileError (unreadable file), ParseError / InvalidModel (not a valid
    ONNX model), UnsupportedError (ops fissile cannot run, all listed),
    ShapeError (a shape disagrees with the model), InvalidArgument (unknown
    strategy, backend, input name or provider).
    """

    def __init__(self, path: str | os.PathLike, sess_options: Any = None, providers: Sequence | None = None,
                 provider_options: Any = None, *, strategy: str | None = _DEFAULT_STRATEGY, backend: str | None = None,
                 threads: int | None = None, shapes: Mapping[str, Sequence[int]] | None = None,
                 dims: Mapping[str, int] | None = None, profile: bool = False, rewrite: str | None = None,
                 autotune: bool = False):
        for p in providers or ():
            pname = p[0] if isinstance(p, tuple) else p
            if pname != "CPUExecutionProvider":
                raise InvalidArgument(f"execution provider '{pname}' is not available in fissile "
                                      f"(backends: {', '.join(backends())}); use backend=")
        if threads is None and sess_options is not None:
            threads = getattr(sess_options, "intra_op_num_threads", 0) or None
        if threads is not None and (not isinstance(threads, int) or threads < 0):
            raise InvalidArgument(f"threads must be a non-negative int, got {threads!r}")
        if strategy is not None and strategy not in _fissile.strategy_names():
            raise InvalidArgument(f"unknown strategy '{strategy}' (expected one of: "
                                  f"{', '.join(_fissile.strategy_names())})")
        self._path = os.fspath(path)
        self._strategy = strategy
        self._strategy_default = isinstance(strategy, _DefaultStrategy)
        self._backend = backend
        self._threads = threads or 0
        self._shapes = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}
        self._dims = {k: int(v) for k, v in (dims or {}).items()}
        self._profile = bool(profile)
        self._autotune = bool(autotune)
        if rewrite is not None and rewrite not in ("off", "rules", "search"):
            raise InvalidArgument(f"unknown rewrite mode '{rewrite}' (expected off, rules or search)")
        self._rewrite = rewrite
        self._lock = threading.Lock()          # guards _compiled
        self._compiled: dict[tuple, _fissile.Model] = {}
        self._last: _fissile.Model | None = None
        self._model = self._configured()       # bound, not compiled: describes the model
        # dims= bindings apply at compile: a dim is known when fixed or its dim_param is bound
        self._dynamic = any(d < 0 and p not in self._dims
                            for _, _, dims_, params in self._model.inputs()
                            for d, p in zip(dims_ or (-1,), params or (None,)))
        if not self._dynamic:
            self._model.compile()
            self._last = self._model
            self._compiled[()] = self._model

    def _configured(self) -> _fissile.Model:
        """A fresh fsl_model with this session's strategy, backend and bindings (not compiled)."""
        m = _fissile.Model(self._path)
        # a compiled model file (.fsl) keeps the backend and strategy it was
        # compiled with unless the caller names others
        precompiled = m.is_compiled()
        m.set_threads(self._threads)
        if self._strategy is not None and not (precompiled and self._strategy_default):
            m.set_strategy(self._strategy)
        if self._backend is not None or not precompiled:
            m.set_backend(self._backend if self._backend is not None else default_backend())
        m.set_profile(self._profile)
        if self._autotune:
            m.set_autotune(True)
        if self._rewrite is not None:
            m.set_rewrite(self._rewrite)
        for name, size in self._dims.items():
            m.bind_dim(name, size)
        for name, shape in self._shapes.items():
            m.bind_shape(name, shape)
        return m

    # ---- description ----

    def get_inputs(self) -> list[NodeArg]:
        """The graph inputs (initializers excluded), in graph order; shapes as
        compiled (after the last run's shapes for a dynamic session)."""
        return _node_args((self._last or self._model).inputs())

    def get_outputs(self) -> list[NodeArg]:
        """The graph outputs in graph order; shapes known once compiled."""
        return _node_args((self._last or self._model).outputs())

    def get_providers(self) -> list[str]:
        """["CPUExecutionProvider"], as onnxruntime reports it (fissile's backends run on the CPU)."""
        return ["CPUExecutionProvider"]

    @property
    def strategy(self) -> str | None:
        return self._strategy

    @property
    def backend(self) -> str:
        """The backend the session runs on (a compiled model file's own unless
        backend= named another)."""
        if self._backend is not None:
            return self._backend
        m = self._last or self._model
        return m.plan_info()["backend"] if m.is_compiled() else default_backend()

    @property
    def plan(self) -> dict:
        """The compiled plan (fsl_model_plan_info) as a dict:

        strategy, backend, device: names;
        n_primitives: nodes of the primitive graph; n_kernels: kernels of the plan;
        rewrite, n_rewrites: the rewrite mode and how many rewrites were applied;
        n_lut_tables: elementwise functions of an 8-bit tensor made 256-entry tables;
        n_qdq_lifted: QuantizeLinear nodes computed on the 8-bit integers (their input only moved,
            pooled or clamped DequantizeLinear values of the same scale and zero point);
        kernels_by_kind: {"loop", "reduce", "linear", "opaque"} -> kernel count;
        n_recomputed: node executions beyond one per node;
        predicted_s: predicted run time in seconds (roofline or measured costs);
        orchestrate_s, backend_s, profile_s: seconds spent planning, compiling, measuring;
        optimal: the solver proved the plan optimal (strategy "optimal");
        arena_bytes: bytes of the memory arena the backend allocates once;
        total_bytes: the same without buffer reuse;
        n_native, n_fallback, n_opaque, fallback_why: how the backend runs the kernels;
        n_library: linear ops it runs through its library (oneDNN on cpu: float32, and
        int8 for the integer ones of quantized models); n_library_int8: of those, the
        ones run on 8-bit data; n_library_requant: of those, the ones whose library
        call also requantizes (writes their 8-bit output);
        profiled, n_cost_cached, n_cost_measured, n_cost_analytic, n_plan_measured;
        plan_hash: a hash of the kernels in order (equal for strategies that built the same plan);
        autotune: None, or (autotune=True) {"kept": the strategy whose plan
        runs, "cached": medians read from the profile cache, "candidates":
        distinct plans compared, "rounds", "seconds", "median_s": {strategy:
        seconds or None}, "same_as": {strategy: the strategy whose identical
        plan stood for it}}.

        Raises InvalidArgument before the first compile of a dynamic session,
        and for backend "ref" with strategy=None (no plan is built).
        """
        m = self._last
        if m is None:
            raise InvalidArgument("the session is not compiled yet: its input shapes are bound at the first run "
                                  "(pass shapes= or dims= to compile at construction)")
        return m.plan_info()

    # ---- running ----

    def _model_for(self, arrays: dict[str, np.ndarray]) -> _fissile.Model:
        if not self._dynamic:
            return self._model
        key = tuple(sorted((k, a.shape) for k, a in arrays.items()))
        with self._lock:
            m = self._compiled.get(key)
            if m is None:
                m = self._model if not self._compiled else self._configured()
                known = {name for name, *_ in m.inputs()}
                for name, a in arrays.items():
                    if name in known and name not in self._shapes:
                        m.bind_shape(name, a.shape)
                m.compile()
                if len(self._compiled) >= MAX_SPECIALISATIONS:
                    self._compiled.pop(next(iter(self._compiled)))
                self._compiled[key] = m
            self._last = m
            return m

    def _feeds(self, input_feed: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Arrays the C layer takes without copying: C-contiguous NumPy arrays.
        A non-array (list, scalar) becomes an array of the input's dtype; an
        array that is not C-contiguous is copied; an array of another dtype is
        passed as is, and the run raises ShapeError."""
        if not isinstance(input_feed, Mapping):
            raise InvalidArgument(f"input_feed must be a dict of name -> array, got {type(input_feed).__name__}")
        expected = {a.name: a for a in _node_args(self._model.inputs())}
        out = {}
        for name, value in input_feed.items():
            if not isinstance(name, str):
                raise InvalidArgument(f"input names must be str, got {name!r}")
            if isinstance(value, np.ndarray):
                out[name] = value if value.flags.c_contiguous else np.ascontiguousarray(value)
            else:
                arg = expected.get(name)
                out[name] = np.asarray(value, dtype=arg.dtype if arg else None, order="C")
        return out

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
            run_options: Any = None) -> list[np.ndarray]:
        """Runs the model.

        output_names: the outputs to return, in that order (None: all, in graph order).
        input_feed:   {input name: array}; every graph input is needed, with
                      the dtype and shape the session was compiled for.
                      C-contiguous arrays of the input's dtype are read in place.
        Returns a list of NumPy arrays (they own their memory; no copy is made
        from fissile's output buffers).
        Raises InvalidArgument (unknown or missing input, unknown output
        name), ShapeError (wrong dtype or shape), ExecutionError (e.g. a gather
        index out of range).  The GIL is released while the model runs.
        """
        arrays = self._feeds(input_feed)
        outputs = self._model.outputs()
        names = [o[0] for o in outputs]
        if output_names is None:
            wanted = list(range(len(names)))
        else:
            if isinstance(output_names, str):
                raise InvalidArgument("output_names must be a list of names or None, not a str")
            index = {n: i for i, n in enumerate(names)}
            wanted = []
            for n in output_names:
                if n not in index:
                    raise InvalidArgument(f"the model has no output '{n}' (outputs: {', '.join(names)})")
                wanted.append(index[n])
        model = self._model_for(arrays)
        tensors = model.run(list(arrays.items()))
        return [np.asarray(tensors[i]) for i in wanted]

    def close(self) -> None:
        """Frees the compiled models now (otherwise when the session is collected)."""
        with self._lock:
            for m in self._compiled.values():
                m.close()
            self._model.close()
            self._compiled.clear()
            self._last = None

    def __repr__(self) -> str:
        return (f"fissile.InferenceSession({self._path!r}, strategy={self._strategy!r}, "
                f"backend={self._backend!r}, threads={self._threads or None})")
