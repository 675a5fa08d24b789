/*
 * orchestrate.h — kernel orchestration: which primitives run together in
 * one generated kernel (DESIGN.md section 5; Korch, ASPLOS'24).
 *
 *   candidates (candidates.c) -> cost (cost.c) -> solve (solve.c, CBC BLP)
 *   or a rule-based baseline (baselines.c) -> plan (plan.c: order, verify)
 *
 * A kernel is a convex set of primitive nodes of one primitive graph that
 * one generated kernel can compute.  Its inputs are the values it reads that
 * no node of the set produces (constants included); its outputs are the
 * values its nodes produce that a node outside the set reads or that are
 * graph outputs.  Kernels of a plan may overlap (recomputation, as in Korch).
 */
#ifndef FSL_ORCHESTRATE_H
#define FSL_ORCHESTRATE_H

#include "ir/ir.h"

/** Legal kernel shapes (after XLA loop/input fusion and TVM pattern kinds). */
typedef enum fsl_kernel_kind {
  FSL_KERNEL_LOOP,    /**< elementwise + movement (+ gather) over one output space */
  FSL_KERNEL_REDUCE,  /**< reductions sharing their kept space, elementwise before/between/after */
  FSL_KERNEL_LINEAR,  /**< one matmul or conv + elementwise epilogue over its output */
  FSL_KERNEL_OPAQUE,  /**< one opaque op, alone */
  FSL_KERNEL_KIND_COUNT
} fsl_kernel_kind;

typedef struct fsl_kernel {
  int id;                  /* index in its candidate set or plan */
  fsl_kernel_kind kind;
  int n_nodes;
  fsl_node **nodes;        /* in the graph's topological order */
  int n_in;
  fsl_value **in;          /* read from outside (graph inputs, constants, other kernels' outputs) */
  int n_out;
  fsl_value **out;         /* written: read outside the kernel or graph outputs */
  uint64_t hash;           /* canonical hash: ops, attributes, shapes and internal wiring, not value identities */
  double flops;            /* floating-point (or integer) operations */
  double bytes;            /* bytes moved: inputs read (a broadcast source once) + outputs written */
  double cost_s;           /* predicted seconds (cost.c), or measured when profiled */
} fsl_kernel;

/** A set of kernels over one graph (candidates, or a plan's choice).  Owns
 *  its kernels' arrays (malloc), not the graph. */
typedef struct fsl_kernel_set {
  const fsl_graph *g;
  int n, cap;
  fsl_kernel **k;
} fsl_kernel_set;

void fsl_kernel_set_free(fsl_kernel_set *s);

/**
 * Builds a kernel from a node set of g (any order; duplicates ignored):
 * sorts the nodes topologically, computes inputs/outputs, checks that the
 * set is convex (no path leaves the set and re-enters it) and legal
 * (fsl_kernel_kind; LINEAR prologue views of every kind, as in a plan for
 * any device), and computes hash, flops and bytes.  *out is NULL and
 * FSL_OK is returned when the set is not a legal kernel (why in *why if
 * given).  Errors: FSL_ERR_NOMEM; FSL_ERR_ARG (missing argument, a node not
 * in g).  `topo` gives every node's position in
 * g->nodes, indexed by node id (fsl_graph_topo_index).
 */
fsl_status fsl_kernel_make(const fsl_graph *g, const int *topo, fsl_node *const *nodes, int n,
                           fsl_kernel **out, const char **why);
void fsl_kernel_free(fsl_kernel *k);
/** Position of every node in g->nodes, indexed by node id (malloc'd). */
int *fsl_graph_topo_index(const fsl_graph *g);

/* ---- candidates (candidates.c) ---- */
typedef struct fsl_candidate_options {
  int max_nodes;         /* size cap of one candidate (default 24) */
  int max_per_seed;      /* candidates grown from one seed node (default 64) */
  unsigned prologue;     /* what LINEAR candidates may take as a prologue besides reshapes
                            (FSL_PROLOGUE_* of fsl_device_prologue) */
  const bool *seeds;     /* NULL, or by node position in g->nodes: grow candidates only from the
                            nodes marked (singletons and whole ONNX ops are enumerated for all) */
} fsl_candidate_options;

/** Enumerates candidate kernels of a primitive graph: every single node,
 *  plus convex, legal, connected sets grown from each node, deduplicated
 *  by node set.  Every node is covered by at least its singleton. */
fsl_status fsl_candidates(const fsl_graph *g, const fsl_candidate_options *opt, fsl_kernel_set *out);

/* ---- cost (cost.c) and device (device.c) ---- */
/** The machine, as the roofline sees it. */
typedef struct fsl_device {
  char name[128];        /* e.g. "cpu: Intel Xeon ..., 2 threads" */
  double bandwidth;      /* bytes/s, memory copy bandwidth */
  double peak_flops;     /* FLOP/s, sgemm */
  double elem_flops;     /* units of elementwise work per second (cost.c: one multiply or add) */
  double launch_s;       /* fixed cost per kernel (call, thread fork/join), seconds */
  double busy;           /* the share of the calibration's CPUs that other work (other processes, the
                            hypervisor's steal) took while it was measured, 0..1; set by the CPU
                            calibration, 0 where the host's load does not matter (CUDA) */
  int measurements;      /* calibrations merged into the record (fsl_device_calibrate) */
  bool linear_views;     /* the backend's generated matmul reads permute, expand and slice views of
                            its operands in place (a tiled matmul on the GPU dialects:
                            fsl_linear_split_views), so LINEAR kernels may take them as a prologue;
                            set by the OpenCL and CUDA calibrations, false on the CPU (oneDNN reads
                            plain operands) and in the default device; not part of the record */
  bool linear_int8;      /* the backend's library runs an int32 matmul/conv whose operands are 8-bit
                            values cast to int32, minus a per-tensor zero point, on the 8-bit data
                            (the CPU's oneDNN int8 primitives: backend/cpu/onednn_int8.c), so LINEAR
                            kernels may take those casts and subtractions (and the zero point's
                            one-element reshapes, expands and casts) as a prologue; set from the
                            backend's caps, false in the default device; not part of the record */
  bool winograd_3x3;     /* the backend runs dense 3x3 stride-1 convolutions with constant weights,
                            FSL_WINOGRAD_MIN_CHANNELS or more channels on each side (C x K >=
                            FSL_WINOGRAD_MIN_CK) and FSL_WINOGRAD_MIN_FLOP or more as Winograd
                            F(2x2,3x3) (16 products per 2x2 output tile instead of 36: cost.c); set by the
                            CPU backend (oneDNN's Winograd with AVX-512, fissile's without:
                            backend/cpu/winograd.h), false in the default device; not part of the record */
} fsl_device;

/** What LINEAR kernels may take as a prologue besides reshapes: views
 *  (fsl_device.linear_views) and int8 operand widening
 *  (fsl_device.linear_int8). */
enum { FSL_PROLOGUE_VIEWS = 1u, FSL_PROLOGUE_INT8 = 2u };
static inline unsigned fsl_device_prologue(const fsl_device *d) {
  return d ? (d->linear_views ? FSL_PROLOGUE_VIEWS : 0u) | (d->linear_int8 ? FSL_PROLOGUE_INT8 : 0u) : 0u;
}

/** The channels a convolution needs on each side, and their product, for
 *  fissile's Winograd (backend/cpu/winograd.h) and its cost (cost.c).  With
 *  fewer the transforms, which move 16 x tiles x (C + K) floats through the
 *  cache for 16 x tiles x C x K multiply-adds, cost more than the smaller
 *  GEMMs save whenever the host's other guests contend for the caches
 *  (bench/results/winograd-avx2-zen4.md: 2 Zen 4 threads, Winograd / direct
 *  quiet and contended: 32->64 over 56x56 0.85 and 1.80, 64->64 0.78 and
 *  1.39, 64->128 over 28x28 0.62 and 1.09, 128->128 0.57 and 0.96). */
#define FSL_WINOGRAD_MIN_CHANNELS 64
#define FSL_WINOGRAD_MIN_CK 8192
/** The FLOPs (as a direct convolution) below which no Winograd is asked for
 *  (onednn.c wino_pays) nor charged (cost.c). */
#define FSL_WINOGRAD_MIN_FLOP 24e6

/** A fixed, documented default device (for tests and when uncalibrated). */
void fsl_device_default(fsl_device *d);
/** Whether d's four numbers (bandwidth, peak_flops, elem_flops, launch_s)
 *  are all positive and finite: what a calibration must measure and a
 *  device record must hold. */
bool fsl_device_valid(const fsl_device *d);
/** Reads a device record (a backend's calibration cache file, written by
 *  fsl_device_write): true when its first line is "# <version>" and it
 *  holds all four numbers, positive and finite; *d is untouched otherwise. */
bool fsl_device_read(const char *path, const char *version, fsl_device *d);
/** Writes d to path as "# <version>" and key=value lines, through a
 *  temporary file and rename (never a partial file); failing to write is
 *  not an error (the numbers are measured again next time). */
void fsl_device_write(const char *path, const char *version, const fsl_device *d);
/** Above this share of busy CPUs (fsl_device.busy) a calibration is
 *  provisional: measured again by later processes, up to
 *  FSL_DEVICE_MEASUREMENTS times in all, until one runs on a quiet machine. */
#define FSL_DEVICE_BUSY_MAX 0.25
#define FSL_DEVICE_MEASUREMENTS 4
/** Merges a new measurement into an earlier record of the same device:
 *  the higher bandwidth, peak_flops and elem_flops, the lower launch_s
 *  (load only slows a machine down, so the better number is the nearer to
 *  the quiet machine's), the new name and busy, measurements summed. */
void fsl_device_merge(fsl_device *rec, const fsl_device *m);
/** A backend's calibration, measured once per machine: the record
 *  `file` (a name such as "device-cuda-<hash>.txt") in fissile's cache
 *  folder (fsl_cache_folder, root) when it is valid and holds `version`
 *  and force is false, else measure(ctx, m) on an m that starts as
 *  fsl_device_default and sets the name and the numbers it measures (and
 *  busy, where the host's load matters); the result is written as the new
 *  record.  A record measured while the machine was busy (busy >
 *  FSL_DEVICE_BUSY_MAX: a build or a test run beside it) would price every
 *  later plan with numbers too low, and not uniformly so (memory bandwidth
 *  suffers more than arithmetic): while it holds fewer than
 *  FSL_DEVICE_MEASUREMENTS measurements, a later call measures again and
 *  merges (fsl_device_merge); a failed re-measurement keeps the record.
 *  Reading, measuring and writing
 *  happen under an exclusive flock(2) on "<file>.lock", so processes that
 *  start together (a parallel test run) measure one at a time and the
 *  later ones read the first one's record: measured side by side, each
 *  would see a fraction of the machine and cache numbers that are too low.
 *  A lock that cannot be had (read-only folder) or is held past 120 s is
 *  not waited for; without a cache folder the device is measured and not
 *  cached.  *d: the record or measurement, fsl_device_default on error.
 *  Errors: measure's; FSL_ERR_RUNTIME "WHAT calibration gave a
 *  non-positive number (...)" when a measured number is not positive and
 *  finite (fsl_device_valid); FSL_ERR_ARG for a NULL argument. */
fsl_status fsl_device_calibrate(const char *file, const char *version, bool force, const char *what,
                                fsl_status (*measure)(void *ctx, fsl_device *m), void *ctx, fsl_device *d);
/* ---- the epilogue chain of a LINEAR kernel (linchain.c) ---- */
/** Index in k->nodes of k's one matmul/conv node; -1 when k has none or
 *  several. */
int fsl_linear_node_index(const fsl_kernel *k);
/** The epilogue chain of LINEAR kernel k whose matmul/conv is k->nodes[li]:
 *  the kernel's elementwise, reshape or permute nodes after it, in
 *  topological order, that read its output or an earlier chain node's, up
 *  to the first node that reads one and is none of these (nodes reading
 *  none of them are passed over).  A chain value may have several
 *  consumers (x * sigmoid(x) reads x twice).  Writes at most cap nodes to
 *  chain and returns their number (0 for a bad li). */
int fsl_linear_chain(const fsl_kernel *k, int li, fsl_node **chain, int cap);
/** Whether chain[0 .. n) can be computed inside the linear op without
 *  materialising anything but its last value: lin's output and every chain
 *  value but the last are read only by chain[0 .. n) and are no graph
 *  outputs.  True for n = 0. */
bool fsl_linear_chain_closed(const fsl_node *lin, fsl_node *const *chain, int n);

/** Units of elementwise work per tap of a reduction over a window view
 *  (pooling), beyond its op's weight (cost.c). */
#define FSL_COST_WINDOW_TAP 7.0
/** Predicted seconds of k on d: the roofline max(bytes/bw, linear
 *  flops/peak + elementwise work/elem_flops) + launch (cost.c, DESIGN.md
 *  section 5).  A LINEAR kernel that computes more than its linear op and
 *  the closed prefix of its epilogue chain (a second output: y and
 *  sigmoid(y)) is two passes, each with its own roofline and launch: the
 *  linear op writing the prefix's value, then the rest reading it.  Also
 *  stores the result in k->cost_s. */
double fsl_kernel_cost(fsl_kernel *k, const fsl_device *d);

/* ---- solve (solve.c) ---- */
typedef struct fsl_solve_options {
  double time_limit_s;   /* CBC time limit (default 30 s) */
  int max_cuts;          /* cycle-cut rounds before giving up (default 100) */
  /* Optional, indexed by value id, for solving one region of a graph:
   * values to treat as available (written before the region), and the
   * values that must be written (replacing the graph outputs). */
  const bool *avail;
  const bool *need;
  /* Each node depending on a runtime value in at most one chosen kernel (no
   * recomputation): a set-partitioning row per node, which makes the LP
   * relaxation tight enough for CBC to prove optimality on real models. */
  bool no_recompute;
  /* CBC branch-and-bound nodes per solve (0: no limit).  Unlike the time
   * limit it stops CBC at the same point on every machine and run. */
  int max_bb_nodes;
} fsl_solve_options;

typedef struct fsl_solve_result {
  bool optimal;          /* false: time limit hit, best solution found so far */
  int rounds;            /* solves (1 + cycle cuts) */
  double objective_s;    /* total predicted seconds */
} fsl_solve_result;

/**
 * Chooses kernels from `cands` (costs set) minimising total cost such that
 * every graph output is produced, every chosen kernel's non-constant,
 * non-graph-input inputs are produced by some chosen kernel, and the chosen
 * kernels can be ordered (cycles among multi-output kernels are cut and the
 * BLP re-solved).  Solved with CBC (Cbc_C_Interface.h), seeded with a
 * greedy orderable selection; when the time limit (wall clock, all rounds
 * together) or the cut rounds run out, the best orderable selection found
 * is returned with res->optimal false.  `chosen` receives copies of the
 * chosen kernels in an executable order.
 * Errors: FSL_ERR_ARG (NULL argument), FSL_ERR_RUNTIME (a graph output or a
 * value it needs that no candidate writes; a negative cost), FSL_ERR_NOMEM.
 */
fsl_status fsl_solve(const fsl_kernel_set *cands, const fsl_solve_options *opt,
                     fsl_kernel_set *chosen, fsl_solve_result *res);

/* ---- regions (regions.c) ---- */
/** Cuts g into the regions whose BLPs the optimal strategy solves one by
 *  one (Korch, ASPLOS'24: a whole model's LP relaxation is weak): a cut
 *  follows a fan-out point read by a matmul/conv where at most 3 computed
 *  values are live.  topo: fsl_graph_topo_index(g).  *region (malloc'd,
 *  by node id) gets each node's region in [0, *n_regions), in topological
 *  order.  Errors: FSL_ERR_NOMEM. */
fsl_status fsl_regions_cut(const fsl_graph *g, const int *topo, int **region, int *n_regions);
/** For region r of the cut `region`: avail[v] (value id) when an earlier
 *  region writes v, need[v] when r writes v and a later region or the
 *  graph's outputs read it.  avail and need hold g->n_values + 1 entries. */
void fsl_region_io(const fsl_graph *g, const int *region, int r, bool *avail, bool *need);
/** A structural hash of each region (hash[n_regions]): its nodes in graph
 *  order (op, attributes, output types, whether later regions read each
 *  output), their operands by position inside the region or, for values
 *  from outside, by type, constness (with the bytes of constants up to
 *  64 bytes) and first use; blind to node and value ids, so equal regions
 *  of two graphs (a graph and its rewritten clone) hash equal.
 *  Errors: FSL_ERR_NOMEM. */
fsl_status fsl_region_hashes(const fsl_graph *g, const int *region, int n_regions, uint64_t *hash);

/** Region costs by region hash (seconds): for one device. */
typedef struct fsl_region_cache fsl_region_cache;
/** A new, empty cache (NULL on out of memory). */
fsl_region_cache *fsl_region_cache_new(void);
void fsl_region_cache_free(fsl_region_cache *c);
/** Regions held. */
size_t fsl_region_cache_size(const fsl_region_cache *c);
/** The cost stored for hash h into *cost_s: false when none. */
bool fsl_region_cache_get(const fsl_region_cache *c, uint64_t h, double *cost_s);
/** Stores (or replaces) h's cost; false on out of memory. */
bool fsl_region_cache_put(fsl_region_cache *c, uint64_t h, double cost_s);

/* ---- plans (plan.c, baselines.c) ---- */
/* fsl_strategy (unfused, opfuse, greedy, optimal) is public: include/fissile.h */
const char *fsl_strategy_name(fsl_strategy s);

typedef struct fsl_plan {
  const fsl_graph *g;
  fsl_strategy strategy;
  fsl_kernel_set kernels;    /* in execution order */
  double predicted_s;        /* sum of kernel costs */
  bool optimal;              /* optimal strategy: solver proved optimality */
  double orchestrate_s;      /* wall time to build the plan */
  /* measured costs (fsl_plan_build_opt with a profiler); kernels counted
   * once per canonical hash, over every kernel whose cost was needed */
  bool profiled;             /* a profiler was given and the cache opened */
  int n_cost_cached;         /* times read from the profile cache */
  int n_cost_measured;       /* times measured while building this plan */
  int n_cost_analytic;       /* left at the analytic cost (not measurable, or profiling failed) */
  int n_plan_measured;       /* kernels of the plan whose cost is a measured time */
  double profile_s;          /* wall seconds spent measuring (compile + timing) */
} fsl_plan;

/** A hash of the plan's kernels in execution order (each kernel's kind and
 *  the ids of its primitive nodes): equal for two strategies that built the
 *  same plan over the same primitive graph. */
uint64_t fsl_plan_hash(const fsl_plan *p);

/** Moves the views of constants that a kernel of ks writes for other
 *  kernels into each reader (a movement primitive whose inputs are all
 *  constants, as long as the reader stays legal and of its kind under the
 *  device's LINEAR `prologue` flags); the writer drops a view no kernel
 *  reads any more, and leaves the set when that was all it computed
 *  (constviews.c).  *n_sunk: readers that took a view.  Costs are not
 *  updated.  FSL_ERR_NOMEM. */
fsl_status fsl_plan_sink_const_views(const fsl_graph *g, unsigned prologue, fsl_kernel_set *ks, int *n_sunk);

/** Builds the plan of a strategy for a primitive graph (analytic costs). */
fsl_status fsl_plan_build(const fsl_graph *g, fsl_strategy s, const fsl_device *d, fsl_plan *out);

/* ---- measured costs (plan.c, profcache.h) ---- */
/**
 * How a backend times kernels.  The orchestration layer knows no backend:
 * the caller (src/api.c) passes the CPU backend's profiler
 * (src/backend/cpu/profile.h).
 */
typedef struct fsl_profiler {
  /** Times the kernels ks[0..n) of graph g as the backend would run them
   *  inside a plan: secs[i] receives the median seconds per run, or NaN
   *  when kernel i cannot be measured (it keeps its analytic cost).  An
   *  error means the whole batch failed: none of it is cached, and no
   *  further batch is tried. */
  fsl_status (*measure)(void *ctx, const fsl_graph *g, fsl_kernel *const *ks, int n, double *secs);
  void *ctx;
  uint64_t device;           /* fingerprint: machine, thread count, compiler, libraries */
  char device_name[256];     /* its description (stored with the times) */
  int batch;                 /* kernels per measure call (<= 0: 128) */
  const char *cache_path;    /* the profile database (NULL: profcache.h's default) */
} fsl_profiler;

typedef struct fsl_plan_options {
  /* NULL: analytic costs only.  Else the costs of the kernels that matter
   * (for optimal: every candidate of a region, plus the greedy plan it is
   * compared with; otherwise the plan's kernels) come from the profile
   * cache or are measured, batch by batch, and stored.  A profile cache
   * that cannot be opened (corrupt file, read-only or missing folder) or
   * written gives a warning on stderr, never an error: costs not measured
   * stay analytic. */
  const fsl_profiler *profiler;
} fsl_plan_options;

/** fsl_plan_build with options (opt may be NULL). */
fsl_status fsl_plan_build_opt(const fsl_graph *g, fsl_strategy s, const fsl_device *d, const fsl_plan_options *opt,
                              fsl_plan *out);

typedef struct fsl_region_cost_stats {
  int regions;            /* regions costed (summed over calls) */
  int solved;             /* of those, BLPs solved */
  int cached;             /* of those, taken from the cache */
} fsl_region_cost_stats;

/**
 * The optimal strategy's predicted seconds for g on d (NULL: the default
 * device) with analytic (roofline) costs, region by region: g is cut
 * (fsl_regions_cut), each region whose hash (fsl_region_hashes) is in
 * `cache` costs what is stored, the others get their candidates (grown
 * from their nodes only, plus the opfuse and greedy kernels) and their
 * BLP solved as fsl_plan_build's optimal strategy does, and the optimum
 * stored.  *cost_s is the sum over regions (without the plan's final
 * comparison with the whole-graph baselines).  The BLPs stop after 2000
 * branch-and-bound nodes (or 30 s), so the result does not depend on the
 * machine's speed; this is the rewrite search's cost (TASO's cost of a
 * graph, here the orchestrated plan's), where a rewrite changes one or
 * two regions and the rest come from the cache.  stats (may be NULL) is
 * added to.  Errors: FSL_ERR_ARG, FSL_ERR_NOMEM, fsl_candidates' and
 * fsl_solve's.
 */
fsl_status fsl_plan_region_cost(const fsl_graph *g, const fsl_device *d, fsl_region_cache *cache, double *cost_s,
                                fsl_region_cost_stats *stats);
void fsl_plan_free(fsl_plan *p);
/** Checks a plan: every value a kernel reads is a graph input, a constant or
 *  written by an earlier kernel; every graph output is written; every kernel
 *  is legal.  FSL_ERR_INVALID naming the kernel and value otherwise. */
fsl_status fsl_plan_verify(const fsl_plan *p);
/** Graphviz DOT of a plan: each kernel a cluster labelled with its kind and
 *  predicted cost. */
void fsl_plan_print_dot(const fsl_plan *p, FILE *f);

#endif
