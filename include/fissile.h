/*
 * fissile.h — public C API of libfissile.
 *
 * fissile imports an ONNX model, splits every operator into primitives
 * (operator fission), and executes the primitive graph.  This header is the
 * only one a user includes.  All functions return an fsl_status; on failure
 * fsl_last_error() gives a message that names the node, op and expectation.
 *
 * Semantics of ONNX ops follow the ONNX Operators specification
 * (https://onnx.ai/onnx/operators/), checked against the ONNX backend node
 * tests and ONNX Runtime.
 */
#ifndef FISSILE_H
#define FISSILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Status codes.  FSL_OK is 0; every other value is an error. */
typedef enum fsl_status {
  FSL_OK = 0,
  FSL_ERR_ARG,          /**< bad argument from the caller (NULL, unknown name) */
  FSL_ERR_IO,           /**< a file could not be read or written */
  FSL_ERR_PARSE,        /**< the model file is not a valid ONNX protobuf */
  FSL_ERR_INVALID,      /**< the model is malformed (dangling value, cycle, bad attribute) */
  FSL_ERR_UNSUPPORTED,  /**< an op, opset or dtype fissile does not support */
  FSL_ERR_SHAPE,        /**< shapes or dtypes do not agree, or a dim_param is unbound */
  FSL_ERR_NOMEM,        /**< out of memory, or a size that overflows */
  FSL_ERR_RUNTIME,      /**< an error while executing (e.g. gather index out of range) */
  FSL_STATUS_COUNT
} fsl_status;

/** Element types; the numeric values are ONNX's TensorProto.DataType. */
typedef enum fsl_dtype {
  FSL_DT_UNDEFINED = 0,
  FSL_DT_F32 = 1, FSL_DT_U8 = 2, FSL_DT_I8 = 3, FSL_DT_U16 = 4, FSL_DT_I16 = 5,
  FSL_DT_I32 = 6, FSL_DT_I64 = 7, FSL_DT_STRING = 8, FSL_DT_BOOL = 9,
  FSL_DT_F16 = 10, FSL_DT_F64 = 11, FSL_DT_U32 = 12, FSL_DT_U64 = 13,
  FSL_DT_BF16 = 16,
  FSL_DT_COUNT = 27
} fsl_dtype;

/** Maximum tensor rank fissile handles. */
#define FSL_MAX_RANK 12

/**
 * A dense tensor in row-major (C) order.  `data` holds numel * elem size
 * bytes; bool is one byte per element (0 or 1).  A tensor returned by the
 * library owns its data; free it with fsl_tensor_free().
 */
typedef struct fsl_tensor {
  char name[128];               /**< graph input/output name */
  fsl_dtype dtype;
  int rank;
  int64_t dims[FSL_MAX_RANK];
  void *data;
} fsl_tensor;

/** How primitives are grouped into kernels (the research question compares them). */
typedef enum fsl_strategy {
  FSL_STRATEGY_UNFUSED,  /**< one kernel per ONNX op (split where an op is not one legal kernel) */
  FSL_STRATEGY_OPFUSE,   /**< rule-based fusion at ONNX-op granularity (TVM FuseOps), no fission */
  FSL_STRATEGY_GREEDY,   /**< fission + the same rule-based fusion over primitives */
  FSL_STRATEGY_OPTIMAL,  /**< fission + BLP over candidate kernels (Korch); the default */
  FSL_STRATEGY_COUNT
} fsl_strategy;

typedef struct fsl_model fsl_model;

/** Message of the last error on this thread ("" if none). */
const char *fsl_last_error(void);
/** Short name of a status code, e.g. "unsupported". */
const char *fsl_status_name(fsl_status s);
/** ONNX spelling of a dtype ("float", "int64", ...). */
const char *fsl_dtype_name(fsl_dtype dt);
/** Size of one element in bytes (0 for string/undefined). */
size_t fsl_dtype_size(fsl_dtype dt);
/** Number of elements of t; 0 for an empty tensor. */
int64_t fsl_tensor_numel(const fsl_tensor *t);
/** Frees the data a library-returned tensor owns and clears it. */
void fsl_tensor_free(fsl_tensor *t);

/**
 * Loads an ONNX model file (ModelProto, protobuf binary).  External data is
 * resolved relative to the model's folder; a location that escapes it is
 * rejected.  A compiled model file (.fsl, fsl_model_save) is recognised by
 * its first bytes and loaded compiled.  The file is untrusted: a malformed one gives FSL_ERR_PARSE or
 * FSL_ERR_INVALID, never a crash.
 * Errors: FSL_ERR_IO, FSL_ERR_PARSE, FSL_ERR_INVALID, FSL_ERR_UNSUPPORTED,
 * FSL_ERR_NOMEM.
 */
fsl_status fsl_model_load(const char *path, fsl_model **out);
/** Same as fsl_model_load from bytes in memory; `dir` (may be NULL) is the
 *  folder external data is resolved against (NULL forbids external data). */
fsl_status fsl_model_load_bytes(const void *buf, size_t len, const char *dir, fsl_model **out);
void fsl_model_free(fsl_model *m);

/** Binds a symbolic dimension (ONNX dim_param) to a size, e.g. "batch"=1.
 *  Errors: FSL_ERR_ARG (size < 0). Must be called before fsl_model_compile. */
fsl_status fsl_model_bind_dim(fsl_model *m, const char *dim_param, int64_t size);
/** Binds the full shape of graph input `input` (overrides its dims; each
 *  fixed dim in the model must agree).  Errors: FSL_ERR_ARG (unknown input),
 *  FSL_ERR_SHAPE (rank or fixed dim disagrees). */
fsl_status fsl_model_bind_shape(fsl_model *m, const char *input, int rank, const int64_t *dims);
/** Freezes graph input `t->name` to the constant value t (copied), so that
 *  shape computations depending on it fold at compile time.
 *  Errors: FSL_ERR_ARG, FSL_ERR_SHAPE (dtype or shape disagree). */
fsl_status fsl_model_freeze_input(fsl_model *m, const fsl_tensor *t);

/**
 * Compiles the model: binds shapes, runs fission (which infers shapes and
 * folds constants as it lowers), then CSE and DCE.  Afterwards inputs and
 * outputs have static shapes.
 * Errors: FSL_ERR_SHAPE (unbound dim_param, named), FSL_ERR_UNSUPPORTED (lists
 * every unsupported (op, opset, node) of the model), FSL_ERR_INVALID.
 */
fsl_status fsl_model_compile(fsl_model *m);

/** Number of graph inputs (initializers excluded, frozen ones excluded). */
int fsl_model_num_inputs(const fsl_model *m);
int fsl_model_num_outputs(const fsl_model *m);
/** Describes input/output i (name, dtype, shape; data NULL).  Shapes are
 *  static after compile; before, unbound dims are -1. */
fsl_status fsl_model_input_info(const fsl_model *m, int i, fsl_tensor *info);
fsl_status fsl_model_output_info(const fsl_model *m, int i, fsl_tensor *info);

/** The symbolic name (ONNX dim_param) of dimension d of input i as written
 *  in the model, or NULL if that dimension is fixed or unnamed. */
const char *fsl_model_input_dim_param(const fsl_model *m, int i, int d);

/**
 * The half-open range [*lo, *hi) of values integer input i can take so that
 * the model is defined on it, read off the ONNX graph (for random inputs a
 * model can take, as `fissile run` and `bench` make): when the input (kept
 * through Identity, integer Cast, Reshape, Flatten, Squeeze, Unsqueeze,
 * Expand) indexes a Gather, GatherElements or GatherND, [0, s) with s the
 * smallest static length it indexes (an embedding table's rows: ONNX spec,
 * Gather: indices in [-s, s-1]); when it is only a mask (cast to float or
 * bool, compared, a Where condition), [0, 2); otherwise [0, 10).  Returns
 * the use found in *kind ("index", "mask" or "other") when kind is not
 * NULL.  Errors: FSL_ERR_ARG (NULL, index out of range).
 */
fsl_status fsl_model_input_int_range(const fsl_model *m, int i, int64_t *lo, int64_t *hi, const char **kind);

/**
 * Fresh random data for input i, as `fissile run`, `bench` and the measured
 * plan choice (fsl_model_set_autotune) make it: *out receives the input's
 * name, dtype and bound shape (fsl_model_input_info) and a malloc'd buffer
 * (free it with fsl_tensor_free) of elements drawn from a splitmix64 stream
 * seeded by (seed, i): floats uniform in [-1, 1), integers uniform in
 * fsl_model_input_int_range, bools 0/1; never all zeros where the range
 * allows another value.  The same (model, i, seed) gives the same data.
 * Errors: FSL_ERR_ARG (NULL, index out of range), FSL_ERR_UNSUPPORTED (a
 * type without a size, e.g. string), FSL_ERR_NOMEM.
 */
fsl_status fsl_model_random_input(const fsl_model *m, int i, uint64_t seed, fsl_tensor *out);

/**
 * Runs the compiled model: with the reference interpreter over the whole
 * primitive graph (float64 accumulation) unless a backend was chosen with
 * fsl_model_set_backend, else through that backend's compiled plan.
 * `inputs` are matched by name, and must cover every input with the exact
 * dtype and shape.  `outputs` (n_outputs == num_outputs) receive newly
 * allocated tensors in graph-output order; on error nothing is written to
 * them.
 * Errors: FSL_ERR_ARG (missing/unknown input), FSL_ERR_SHAPE (wrong
 * dtype/shape), FSL_ERR_RUNTIME.
 */
fsl_status fsl_model_run(fsl_model *m, const fsl_tensor *inputs, int n_inputs,
                         fsl_tensor *outputs, int n_outputs);


/* ---- orchestration and backends ---- */
/** Short name of a strategy ("unfused", "opfuse", "greedy", "optimal"; "?"
 *  for another value). */
const char *fsl_strategy_name(fsl_strategy s);
/** Strategy by name (as fsl_strategy_name spells it).
 *  Errors: FSL_ERR_ARG (unknown name; the message lists the names). */
fsl_status fsl_strategy_from_name(const char *name, fsl_strategy *out);

/**
 * Chooses how primitives are grouped into kernels (an fsl_strategy value).
 * Takes effect at the next fsl_model_compile, which then also builds the
 * plan (orchestration) of that strategy.  Without a strategy (and with the
 * "ref" backend) compile builds no plan, as before.
 * Errors: FSL_ERR_ARG (NULL model, value outside [0, FSL_STRATEGY_COUNT)).
 */
fsl_status fsl_model_set_strategy(fsl_model *m, fsl_strategy strategy);

/**
 * Chooses the backend that fsl_model_run uses (takes effect at the next
 * fsl_model_compile):
 *   "ref"       the reference interpreter over the whole primitive graph
 *               (the default; no plan needed);
 *   "plan-ref"  the reference interpreter executing the plan kernel by
 *               kernel (checks the plan);
 *   "cpu"       generated C per kernel compiled into one shared object,
 *               oneDNN for linear ops.
 * (fsl_backend_names lists what this build has.)
 * A plan backend without a strategy uses FSL_STRATEGY_OPTIMAL.
 * Errors: FSL_ERR_ARG (NULL, unknown name; the message lists the names).
 */
fsl_status fsl_model_set_backend(fsl_model *m, const char *name);

/**
 * The names fsl_model_set_backend accepts, NULL-terminated, in static
 * storage: every backend registered in this build (src/backend/registry.c),
 * "ref" (the whole-graph reference interpreter) first, then the plan
 * backends in order of preference, e.g. {"ref", "cpu", "plan-ref", NULL}.
 * If summary is not NULL, (*summary)[i] is a one-line description of
 * names[i].
 */
const char *const *fsl_backend_names(const char *const **summary);

/**
 * The backend a user gets when they name none (the fissile tool's `run`
 * and `bench`, the Python package): the most preferred backend of this
 * build that runs generated code on this machine ("cpu" when built), else
 * "ref".  Static storage.  Errors: none.
 */
const char *fsl_backend_default(void);

/** Algebraic rewrites of the primitive graph before orchestration. */
typedef enum fsl_rewrite_mode {
  FSL_REWRITE_OFF = 0,    /**< orchestrate the graph exactly as fission made it */
  FSL_REWRITE_RULES = 1,  /**< apply the verified rewrite rules wherever a match removes what it replaces */
  FSL_REWRITE_SEARCH = 2, /**< the rules, then the cost rules (sibling merges) where the predicted
                               plan gets faster: TASO's cost-guided search with alpha relaxation */
  FSL_REWRITE_MODE_COUNT
} fsl_rewrite_mode;

/**
 * Rewrites ("substitutions", TASO, SOSP'19): when FSL_REWRITE_RULES, the
 * next fsl_model_compile applies fissile's rewrite rules (src/rewrite/
 * core.rules: constant scales folded into conv/matmul weights, sibling
 * matmuls/convs over one input merged into one, view chains collapsed,
 * algebraic identities; docs/rewrite.md) to the primitive graph after
 * fission, each rule proved by random testing on every build, and moves
 * 1x1 convolutions over resampled (Resize linear/cubic) values before the
 * resampling ("conv1x1-before-resample");
 * FSL_REWRITE_SEARCH also tries the rules whose benefit depends on the plan
 * (sibling merges): TASO's backtracking search, which passes through
 * graphs up to alpha times costlier than the best (alpha 1.1, or
 * $FSL_REWRITE_ALPHA) and keeps the graph whose greedy plan's predicted
 * time on the default device is smallest (at most 256 graphs costed or
 * 10 s; docs/rewrite.md).  The
 * default is FSL_REWRITE_RULES.  The answer changes only by float rounding
 * (reassociation).  fsl_plan_info.n_rewrites and fsl_model_rewrite_fired
 * say what fired.  Errors: FSL_ERR_ARG (NULL model, unknown mode).
 */
fsl_status fsl_model_set_rewrite(fsl_model *m, fsl_rewrite_mode mode);
/** Name of a rewrite mode ("off", "rules"); NULL if out of range. */
const char *fsl_rewrite_mode_name(fsl_rewrite_mode mode);
/**
 * The i-th rewrite rule that fired in the last compile (0 <= i, in rule
 * order, conv1x1-before-resample last): *rule receives its name (static storage) and the return value is
 * how many times it was applied; -1 when i is past the last such rule or
 * the model is not compiled.
 */
int fsl_model_rewrite_fired(const fsl_model *m, int i, const char **rule);

/**
 * Measured costs ("profiling"): when on, the next fsl_model_compile that
 * builds a plan (a strategy or a plan backend is set) times
 * the kernels whose costs decide the plan (for optimal: every candidate
 * kernel of the solver's regions, and the greedy plan it is compared with;
 * for the other strategies: the plan's kernels) as the CPU backend runs them
 * (warm-up, median of at least 5 runs on fresh random inputs), compiling
 * them in batches of 128 into one shared object each, and uses the
 * measured times instead of the roofline.  Times are kept in the profile
 * cache, an SQLite database (profile.sqlite in $FSL_CACHE_DIR, else
 * $XDG_CACHE_HOME/fissile, else ~/.cache/fissile) keyed by a fingerprint of
 * the machine, thread count, compiler and oneDNN and by each kernel's
 * canonical hash, so a second compile of the same model measures nothing.
 * Progress goes to the fsl_set_progress receiver (task "profile").  A cache
 * that cannot be opened (corrupt, read-only or missing folder) gives a
 * warning on stderr and the analytic costs; one that cannot be written
 * (e.g. a full disk) gives a warning and the times serve this compile only;
 * kernels that cannot be measured keep their analytic cost.  Off by default.
 * Errors: FSL_ERR_ARG (NULL model).
 */
fsl_status fsl_model_set_profile(fsl_model *m, bool on);

/**
 * Measured plan choice ("autotuning"): when on, the next fsl_model_compile
 * with the optimal strategy (or none set) and a plan backend does not take
 * the solver's plan on trust.  It also builds the plans of the greedy,
 * opfuse and unfused strategies (each distinct plan once: a strategy whose
 * kernels are another's is not run again), compiles each with the backend,
 * runs them all end to end in interleaved rounds on the same fresh random
 * inputs (fsl_model_random_input; 2 warm-up rounds, then 7 to 31 timed
 * rounds, stopping after about 1 s of runs), and keeps the plan with the
 * smallest median time; the others are freed.  The plan's predicted cost
 * can be wrong where it cannot see what runs inside a plan (layouts kept
 * between oneDNN primitives, a kernel's cache behaviour): this makes the
 * kept plan never measured slower than a baseline's beyond the spread of
 * the measurement.  The medians are stored in the profile cache (see
 * fsl_model_set_profile; table plan_time) keyed by a fingerprint of the
 * backend, its machine and libraries, the thread count and the fissile
 * version, and by a hash of the primitive graph and of the candidate plans'
 * kernels, so a second compile of the same model runs nothing.
 * Progress goes to the fsl_set_progress receiver (task "autotune").
 * fsl_plan_info's tune fields say what was measured and which plan was
 * kept (fsl_plan_info.strategy is the kept plan's strategy).  A candidate
 * that fails to build or compile is left out; a run that fails (e.g. data
 * the model cannot take) ends the choice with a warning on stderr and keeps
 * the optimal plan; a cache that cannot be opened or written gives a
 * warning and the choice is made for this compile only.  Off by default.
 * Errors: FSL_ERR_ARG (NULL model).
 */
fsl_status fsl_model_set_autotune(fsl_model *m, bool on);

/**
 * Sets the number of threads for plan building (device calibration),
 * generated kernels and oneDNN: calls OpenMP's omp_set_num_threads for the
 * calling thread when an OpenMP runtime is loaded, else sets
 * OMP_NUM_THREADS for one loaded later.  n <= 0 restores the default.
 * Call it before fsl_model_compile.  Errors: none (FSL_OK).
 */
fsl_status fsl_set_num_threads(int n);
/** The thread count set with fsl_set_num_threads (0: the default). */
int fsl_num_threads(void);
/**
 * Sets the OpenMP thread count of the calling thread only: the parallel
 * regions of generated kernels (and oneDNN calls) that this thread runs
 * use n threads (OpenMP's omp_set_num_threads, whose nthreads-var ICV
 * belongs to the calling thread's data environment: OpenMP specification,
 * "Internal Control Variables").  Unlike fsl_set_num_threads it changes no
 * process-wide state (no global count, no environment variable), so it is
 * safe to call from several threads at once, each running its own model;
 * call it on the thread that calls fsl_model_run.  The runtime is found in
 * the global symbol scope or as an already loaded libgomp.so.1 (also when
 * libfissile sits in a module loaded RTLD_LOCAL, e.g. a Python extension).
 * n <= 0: nothing changes.  Errors: FSL_ERR_UNSUPPORTED (n > 0 and no
 * OpenMP runtime is loaded in the process).
 */
fsl_status fsl_set_thread_num_threads(int n);

/* ---- progress of long work ---- */
/** One progress event of long library work, given to the function set with
 *  fsl_set_progress. */
typedef struct fsl_progress {
  const char *task;    /**< "compile": the C compiler builds a plan's kernels (a cache
                            miss: the first compile of this plan on this machine);
                            "profile": kernels being measured (fsl_model_set_profile);
                            "autotune": candidate plans run end to end
                            (fsl_model_set_autotune; total 0: done counts timed rounds) */
  const char *detail;  /**< what is being done, e.g. "57 kernels, cpu backend" */
  int done, total;     /**< units finished out of total (total 0: not countable) */
  double elapsed_s;    /**< wall seconds since the task began */
  bool finished;       /**< the task's last event (done == total when countable) */
} fsl_progress;

/** Receives progress events; called on the thread doing the work: at the
 *  start of a task, as it advances (about once a second while the C
 *  compiler runs), and at its end. */
typedef void (*fsl_progress_fn)(const fsl_progress *event, void *ctx);

/**
 * Sets the process-wide progress receiver (NULL: none, the default; the
 * library then prints nothing for progress).  The fissile tool installs one
 * that draws a single updating line on a terminal and plain lines
 * otherwise.  Set it before starting work; not synchronised with work
 * running on other threads.  Errors: none.
 */
void fsl_set_progress(fsl_progress_fn fn, void *ctx);

/** Kernel kinds counted by fsl_plan_info.n_by_kind (loop, reduce, linear, opaque). */
#define FSL_PLAN_KINDS 4

/** Summary of the plan built by fsl_model_compile. */
typedef struct fsl_plan_info {
  fsl_strategy strategy;
  char backend[16];        /**< "ref", "plan-ref" or "cpu" */
  char device[128];        /**< the calibrated device the costs are for */
  double device_bandwidth; /**< that device's copy bandwidth, bytes/s (read + write counted; the
                                roofline's memory roof): a kernel moving fsl_kernel_info.bytes in t
                                seconds reaches bytes / t / device_bandwidth of it */
  double device_peak_flops; /**< its matmul peak, FLOP/s (the compute roof of linear kernels) */
  double device_launch_s;  /**< its fixed cost per kernel, seconds */
  int n_primitives;        /**< nodes of the primitive graph */
  fsl_rewrite_mode rewrite; /**< the rewrite mode the graph was compiled with */
  int n_rewrites;          /**< rewrites applied to the primitive graph (fsl_model_set_rewrite) */
  int n_lut_tables;        /**< elementwise functions of an 8-bit tensor turned into 256-entry
                                tables (cpu backend with oneDNN int8: docs/cpu-backend.md) */
  int n_qdq_lifted;        /**< QuantizeLinear nodes whose input only moved, pooled or clamped
                                DequantizeLinear values of the same scale and zero point,
                                computed on the 8-bit integers instead (src/passes/qdq_lift.c) */
  double rewrite_s;        /**< wall seconds spent rewriting (and searching) */
  int search_graphs;       /**< FSL_REWRITE_SEARCH: rewritten graphs costed by the search */
  int search_regions_solved; /**< FSL_REWRITE_SEARCH: region BLPs solved to cost them (each graph's
                                  optimal plan, region by region) */
  int search_regions_cached; /**< FSL_REWRITE_SEARCH: region costs reused from earlier graphs (by
                                  region hash) */
  int n_kernels;
  uint64_t plan_hash;      /**< a hash of the kernels in execution order (each one's kind and the
                                primitive nodes it runs): equal for two strategies that built the
                                same plan of the same primitive graph, whose times then differ
                                by noise alone */
  int n_by_kind[FSL_PLAN_KINDS];  /**< kernels per kind: loop, reduce, linear, opaque */
  int n_recomputed;        /**< node executions beyond one per node (recomputation) */
  double predicted_s;      /**< sum of the kernels' costs: roofline, or measured times when profiled */
  double orchestrate_s;    /**< wall seconds spent building the plan */
  double backend_s;        /**< wall seconds the backend spent compiling the plan */
  bool optimal;            /**< optimal strategy: the solver proved optimality */
  int64_t peak_bytes;      /**< bytes of the arena holding the kernels' outputs (liveness-based
                                reuse, in place where legal; graph outputs are returned in
                                buffers of their own): what the backend allocates once per
                                compiled model (runtime/memplan.h) */
  int64_t total_bytes;     /**< the same without reuse */
  /* measured costs (fsl_model_set_profile); kernels counted once per
   * canonical hash over every kernel whose cost the plan needed */
  bool profiled;           /**< costs were measured (profiling on and the cache usable) */
  int n_cost_cached;       /**< kernel times read from the profile cache */
  int n_cost_measured;     /**< kernel times measured during this compile */
  int n_cost_analytic;     /**< kernels left at the analytic cost (not measurable) */
  int n_plan_measured;     /**< kernels of the plan whose cost is a measured time */
  double profile_s;        /**< wall seconds spent measuring (compiling + timing) */
  /* measured plan choice (fsl_model_set_autotune) */
  bool tuned;              /**< the plan was chosen by timing the candidate plans end to end */
  bool tune_cached;        /**< their medians came from the profile cache (nothing was run) */
  int tune_candidates;     /**< distinct candidate plans compared */
  int tune_rounds;         /**< timed rounds each candidate ran (0 when cached) */
  double tune_s;           /**< wall seconds the choice took: building, compiling and running the
                                candidates other than the optimal plan */
  double tune_median_s[FSL_STRATEGY_COUNT]; /**< median seconds of one run of each strategy's plan,
                                indexed by fsl_strategy; NaN where the strategy has no plan of its own
                                (tune_same_as) or its plan failed to build */
  int tune_same_as[FSL_STRATEGY_COUNT]; /**< -1, or the strategy whose identical plan stood for it */
  /* what the backend made of the plan (0 for "ref", which runs no plan):
   * n_native + n_fallback + n_opaque == n_kernels */
  bool runs_plan;          /**< the backend runs the plan's kernels (false for "ref", which runs the
                                whole graph: the plan is built for its numbers alone) */
  int n_native;            /**< kernels run entirely by the backend's own code */
  int n_fallback;          /**< kernels with a part the backend cannot run, run by the
                                host reference interpreter instead (a gap to close) */
  int n_opaque;            /**< opaque kernels (TopK, CumSum): host reference by design */
  int n_library;           /**< linear ops (matmul, conv) the backend runs through its library: oneDNN
                                (float32, and int8 for integer ones) on cpu, cuBLASLt on cuda */
  int n_library_int8;      /**< of those, the integer matmuls/convs of quantized models run on 8-bit
                                data (oneDNN int8 primitives: docs/cpu-backend.md, "Integer linear ops") */
  int n_library_requant;   /**< of those, the ones that also requantize: the library writes their
                                8-bit output (scales, bias, activation, round, zero point, saturation) */
  char fallback_why[256];  /**< the first fallback: kernel, ONNX op and node, reason */
} fsl_plan_info;

/** Describes the compiled model's plan.  Errors: FSL_ERR_ARG (NULL, or no
 *  plan: compile after fsl_model_set_strategy or a plan backend). */
fsl_status fsl_model_plan_info(const fsl_model *m, fsl_plan_info *info);
/** Writes the plan as Graphviz DOT (each kernel a cluster labelled with its
 *  kind and predicted cost).  Errors: as fsl_model_plan_info. */
fsl_status fsl_model_write_plan_dot(const fsl_model *m, FILE *f);

/* ---- compiled model files (.fsl) ---- */
/**
 * Writes the compiled model to `path` as one self-contained compiled model
 * file (docs/aot.md): the source model (graph and initializers), inputs
 * frozen to constants, every input's bound shape, the plan (kernels as sets
 * of primitives), the backend's compiled kernels (CPU: the shared object)
 * and the fissile version and backend fingerprint (CPU model and flags,
 * target ISA, oneDNN version) it was built for.  fsl_model_load and
 * fsl_model_load_bytes read it back: the model runs without the ONNX file,
 * without a C compiler and without orchestrating again; a later setting
 * change (strategy, backend, shapes) compiles again from the embedded model.
 * The file is written under a temporary name and renamed, so `path` never
 * holds a partial file.  Loading checks every length and refuses a file
 * from another fissile version or machine (FSL_ERR_UNSUPPORTED, naming
 * both); the kernels inside are native code: load files you trust, as you
 * would a shared library.
 * Errors: FSL_ERR_ARG (NULL, model not compiled), FSL_ERR_IO (cannot
 * write; the ONNX file changed since it was loaded), FSL_ERR_UNSUPPORTED
 * (the model keeps tensors in external data files), FSL_ERR_NOMEM.
 */
fsl_status fsl_model_save(const fsl_model *m, const char *path);

/** Whether fsl_model_compile's result is current (compiled, and no setting
 *  nor the thread count of fsl_set_num_threads changed since): true right
 *  after loading a compiled model file, whose settings (backend, strategy,
 *  shapes) a caller should then keep (a file's plan stays current whatever
 *  the thread count).  A NULL model is not compiled. */
bool fsl_model_is_compiled(const fsl_model *m);

/** fissile's version ("0.1.0"), as written into compiled model files. */
const char *fsl_version(void);

/* ---- kernels of the plan (src/api_plan.c) ---- */
/** One kernel of the compiled plan (fsl_model_kernel_info). */
typedef struct fsl_kernel_info {
  int index;               /**< position in the plan's execution order */
  int kind;                /**< 0 loop, 1 reduce, 2 linear, 3 opaque (the order of fsl_plan_info.n_by_kind) */
  const char *kind_name;   /**< "loop", "reduce", "linear" or "opaque" (static storage) */
  int n_primitives;        /**< primitive nodes the kernel computes */
  double cost_s;           /**< the kernel's cost in the plan, seconds: its measured time when the plan
                                was profiled (fsl_model_set_profile) and the kernel could be measured,
                                else roofline_s; the plan's predicted_s is their sum */
  double roofline_s;       /**< roofline prediction on the plan's device, seconds:
                                max(bytes / bandwidth, flops / peak) + launch cost */
  bool cost_measured;      /**< cost_s is a measured time (profiled plan), not the roofline */
  double flops;            /**< arithmetic operations (FLOP; integer ops count too), 0 for pure movement */
  double bytes;            /**< bytes moved: inputs read (a broadcast source once) + outputs written */
  int n_onnx_nodes;        /**< distinct ONNX nodes the primitives came from (fsl_model_kernel_origin) */
} fsl_kernel_info;

/** Number of kernels of the compiled plan; 0 when there is none (NULL
 *  model, or compiled without a strategy or plan backend). */
int fsl_model_num_kernels(const fsl_model *m);
/** Describes kernel k, 0 <= k < fsl_model_num_kernels(m), of the plan in
 *  execution order.  Valid until the next compile or free.
 *  Errors: FSL_ERR_ARG (NULL, no plan, k out of range). */
fsl_status fsl_model_kernel_info(const fsl_model *m, int k, fsl_kernel_info *out);
/** The j-th distinct ONNX node (0 <= j < fsl_kernel_info.n_onnx_nodes, in
 *  the order of the kernel's primitives) whose fission made primitives of
 *  kernel k: its name as in the model ("" when unnamed; untrusted model
 *  data: escape it before showing it in markup) and op_type.  The strings
 *  live in the model until the next compile or free.
 *  Errors: FSL_ERR_ARG (NULL, no plan, k or j out of range). */
fsl_status fsl_model_kernel_origin(const fsl_model *m, int k, int j, const char **name, const char **op_type);
/**
 * Times every kernel of the compiled plan standalone, as the backend runs
 * it (the CPU backend's profiler, the one fsl_model_set_profile uses:
 * warm-up, then the median of at least 5 runs on fresh random inputs),
 * now, without the profile cache.  secs[k] receives seconds per run of
 * kernel k, or NaN when it cannot be measured (opaque kernels, kernels the
 * backend runs through the reference interpreter).  n must equal
 * fsl_model_num_kernels(m).  Takes about 10 ms per kernel plus compiling
 * the kernels (cached like the backend's).
 * Errors: FSL_ERR_ARG (NULL, no plan, n wrong), FSL_ERR_UNSUPPORTED (no
 * backend of this build can time kernels), FSL_ERR_RUNTIME (the C compiler
 * cannot build the kernels), FSL_ERR_NOMEM.
 */
fsl_status fsl_model_time_kernels(fsl_model *m, double *secs, int n);

/* ---- a plan's source in a dialect, compiled without a device (src/api_cuda.c) ---- */
/** Most targets one fsl_model_emit call compiles for. */
#define FSL_EMIT_MAX_TARGETS 4

/** What ptxas reports for one generated kernel on one architecture of the
 *  "cuda" dialect (docs/gpu-backend.md, "CUDA").  -1 where ptxas said
 *  nothing. */
typedef struct fsl_cuda_usage {
  int registers;             /**< 32-bit registers per thread */
  int barriers;              /**< barriers (bar.sync ids) used */
  int64_t stack_bytes;       /**< stack frame per thread, bytes: local memory for arrays and spills */
  int64_t spill_store_bytes; /**< bytes per thread that register spills store to local memory */
  int64_t spill_load_bytes;  /**< bytes per thread that register spills load back */
  int64_t shared_bytes;      /**< static shared memory per block, bytes */
  int64_t const_bytes;       /**< the kernel's constant banks in the CUBIN (bank 0: parameters), bytes */
} fsl_cuda_usage;

/** One generated function of a GPU dialect (a plan kernel is one, or a
 *  LINEAR kernel's prologue, matmul/conv and epilogue: up to three). */
typedef struct fsl_cuda_function {
  int kernel;                /**< the plan kernel it belongs to (execution order) */
  int id;                    /**< its name in the source: fsl_k<id> */
  const char *part;          /**< "loop", "reduce", "node" (a multi-pass reduction, one per node), "prologue", "matmul", "conv" or "epilogue" (static) */
  const char *onnx_op;       /**< op_type of the ONNX node of its first primitive ("?" if none) */
  const char *onnx_name;     /**< that node's name (untrusted model data); both live in the model
                                  until its next compile or free */
  int block_threads;         /**< threads per block the code assumes, one dimension (a REDUCE row or
                                  matmul/conv tile per block: blockDim.x must equal it); 0: any
                                  (grid-stride loops over threads) */
  int64_t blocks;            /**< block_threads > 0: blocks with work (rows or tiles; a grid-stride
                                  loop over blocks, so fewer are correct too and more idle); else 0 */
  fsl_cuda_usage usage[FSL_EMIT_MAX_TARGETS];  /**< per fsl_emit_result.targets ("cuda": ptxas's report) */
} fsl_cuda_function;

/** The result of fsl_model_emit (free with fsl_emit_result_free). */
typedef struct fsl_emit_result {
  char dialect[16];          /**< as given to fsl_model_emit, e.g. "cuda" */
  char *source;              /**< the plan in the dialect: prelude + every function, NUL-terminated
                                  ("cuda": CUDA C) */
  size_t source_len;         /**< bytes */
  int n_targets;
  char targets[FSL_EMIT_MAX_TARGETS][16];    /**< as given ("cuda": real architectures, e.g. "sm_90") */
  double compile_s[FSL_EMIT_MAX_TARGETS];    /**< compile wall seconds per target ("cuda": NVRTC, front end
                                                  + ptxas) */
  size_t binary_bytes[FSL_EMIT_MAX_TARGETS]; /**< bytes of the compiled binary per target ("cuda": CUBIN) */
  int n_functions;
  fsl_cuda_function *functions;
  int n_kernels;             /**< kernels of the plan */
  int n_generated;           /**< plan kernels generated entirely */
  int n_opaque;              /**< opaque kernels (TopK, CumSum: the host's by design), not generated */
  int n_refused;             /**< plan kernels the dialect refuses in whole or part (f16/bf16, scatters,
                                  multi-pass reductions, integer conv): not generated, not errors */
  char **refused;            /**< n_refused lines: "kernel K (OP 'NODE'): why" */
} fsl_emit_result;

/**
 * Generates the source of every kernel of m's compiled plan in `dialect`
 * (the shared code generator's dialects: "cuda", "opencl", "c") and
 * compiles it for each of the n_targets (1..FSL_EMIT_MAX_TARGETS) targets,
 * without a device.  Implemented for "cuda" (src/backend/cuda): CUDA C
 * compiled by NVRTC to a CUBIN for each real architecture in targets
 * ("sm_90", "sm_80", ...; no GPU or driver needed), with ptxas's resource
 * report (-v) read per function into usage[].  A compile that fails, or
 * whose log holds anything beyond ptxas's resource lines (a warning of the
 * front end or of ptxas), is an error.  *out is zeroed first and owned by
 * the caller (fsl_emit_result_free), also after an error (then source
 * holds what was generated, usage is partial).  Where there is an NVIDIA
 * driver, NVRTC may take a CUBIN it built before from the CUDA compute
 * cache without running ptxas, and so without its report: that is an
 * error naming CUDA_CACHE_DISABLE=1, which a caller sets before its first
 * CUDA call (the fissile CLI does for compile --emit-only and explain).
 * Errors: FSL_ERR_ARG (NULL, an unknown dialect, no plan: compile after
 * fsl_model_set_strategy; n_targets out of range), FSL_ERR_UNSUPPORTED (a
 * dialect whose output fsl_model_emit does not give: "opencl" and "c"
 * generate their source only when their backend compiles a plan; "cuda" in
 * a build without its dialect: NVRTC was not found at configure),
 * FSL_ERR_RUNTIME (NVRTC's error or warning, with its log, the
 * architecture, and the plan kernel, ONNX node and function of the first
 * source line the log names), FSL_ERR_NOMEM.
 */
fsl_status fsl_model_emit(const fsl_model *m, const char *dialect, const char *const *targets, int n_targets,
                          fsl_emit_result *out);
/** Frees what fsl_model_emit allocated in r and zeroes it (NULL: nothing). */
void fsl_emit_result_free(fsl_emit_result *r);

/* ---- tensors on disk ---- */
/** Reads an ONNX TensorProto file (.pb, as in the ONNX backend test data)
 *  into a newly allocated tensor (name from the proto, may be empty).
 *  Errors: FSL_ERR_IO, FSL_ERR_PARSE, FSL_ERR_UNSUPPORTED (string dtype). */
fsl_status fsl_tensor_load_pb(const char *path, fsl_tensor *out);
/** Reads a NumPy .npy file (format 1.0-3.0, C order, little endian). */
fsl_status fsl_tensor_load_npy(const char *path, fsl_tensor *out);
/** Writes t as a NumPy .npy file (format 1.0). */
fsl_status fsl_tensor_save_npy(const char *path, const fsl_tensor *t);

/* ---- looking inside a model ---- */
typedef enum fsl_stage {
  FSL_STAGE_ONNX,      /**< as imported: ONNX ops */
  FSL_STAGE_FISSION,   /**< after compile: primitives (and opaque ops) */
} fsl_stage;

/** Writes the graph of a stage as text (dot=false) or Graphviz DOT.
 *  Errors: FSL_ERR_ARG (FSL_STAGE_FISSION before a successful compile). */
fsl_status fsl_model_write_graph(const fsl_model *m, fsl_stage stage, bool dot, FILE *f);
/** Op histogram of a stage: fn(ctx, op_name, kind_name, count) per op. */
fsl_status fsl_model_op_histogram(const fsl_model *m, fsl_stage stage,
                                  void (*fn)(void *ctx, const char *op, const char *kind, int count),
                                  void *ctx);
/** Number of opset imports; fsl_model_opset gives domain ("" = ai.onnx) and version. */
int fsl_model_num_opsets(const fsl_model *m);
void fsl_model_opset(const fsl_model *m, int i, const char **domain, int64_t *version);
/** Lists every node whose (domain, op_type, opset) fissile cannot decompose:
 *  fn(ctx, op_type, domain, opset, node_name). Returns the count. */
int fsl_model_unsupported(const fsl_model *m,
                          void (*fn)(void *ctx, const char *op, const char *domain, int64_t opset, const char *node),
                          void *ctx);

#ifdef __cplusplus
}
#endif
#endif
