/*
 * dialect.h — what differs between the C-style languages the code
 * generator prints (tinygrad's renderer pattern): element type names, the
 * suffix of single-precision math functions, the kernel signature, loop
 * headers (parallel, SIMD, serial) and the prelude of helper functions.
 * Everything else (index lowering, expressions, loop structure,
 * reductions) is shared in src/codegen/.  The C/OpenMP dialect is
 * backend/cpu/dialect_c.c; a GPU backend adds its own (CUDA C, OpenCL C)
 * with the same helper names in its prelude.
 */
#ifndef FSL_CG_DIALECT_H
#define FSL_CG_DIALECT_H

#include "codegen/sbuf.h"

typedef enum fsl_cg_loop_kind {
  FSL_CG_SERIAL,     /* one thread runs the iterations in order */
  FSL_CG_PARALLEL,   /* iterations are independent: spread over threads (OpenMP
                        parallel for; a grid-stride loop on a GPU) */
  FSL_CG_SIMD,       /* the reductions below may be reassociated: vectorize */
  FSL_CG_GROUPS,     /* iterations spread over work-groups: the whole group runs
                        each iteration together (dialects with `group` only) */
  FSL_CG_LANES,      /* iterations spread over the work-items of one group
                        (inside a FSL_CG_GROUPS loop; dialects with `group` only) */
} fsl_cg_loop_kind;

/** One loop of generated code, as data; the dialect prints its header. */
typedef struct fsl_cg_loop {
  fsl_cg_loop_kind kind;
  const char *var;          /* the int64 loop variable */
  const char *lo, *hi;      /* bounds, as expressions: lo <= var < hi */
  long long step;           /* increment (<= 1: 1) */
  int collapse;             /* PARALLEL: perfectly nested loops sharing the parallelism (<= 1: this one) */
  int n_red;                /* reductions carried by the loop, "op:var" ("|:err_", "+:ps0", "max:a1") */
  const char *red[4];
} fsl_cg_loop;

/** Work-groups: what a dialect whose threads cooperate through local
 *  (shared) memory and barriers prints for REDUCE kernels with one group
 *  per kept-space row and tiled matmuls (OpenCL C; CUDA C, where a group
 *  is a thread block and local memory is __shared__).  The code generator
 *  emits the same structure in every such dialect; only these strings,
 *  the warp shuffle and the loop headers of FSL_CG_GROUPS / FSL_CG_LANES
 *  differ. */
typedef struct fsl_cg_group {
  int size;                 /* work-items per group of a REDUCE kernel (a power of two; shorter rows: fewer) */
  int tile;                 /* matmul tile edge: tile x tile work-items per group (a power of two; 0: no tiled matmul) */
  long long local_bytes;    /* local memory a kernel may use; more: the code falls back to one thread per row/element */
  const char *local_kw;     /* qualifier of local-memory arrays at kernel scope ("__local ") */
  const char *local_id;     /* this work-item's index in its group, as an int64 expression */
  const char *barrier;      /* a statement: every work-item of the group waits here, local memory then agrees */
  /** Work-items that run in lock-step and exchange registers without
   *  local memory or a barrier (CUDA: a warp of 32 lanes, the group's
   *  work-items 0..31, 32..63, ...; a power of two); 0 or 1: none, a
   *  REDUCE row's partial results meet in local memory only (OpenCL). */
  int warp;
  /** With warp > 1: the expression (into dst[cap]) of accumulator v as
   *  held by the work-item whose index in the group is this one's XOR
   *  `mask` (an int expression below `lanes`), exchanged among aligned
   *  runs of `lanes` work-items (a power of two, at most warp); the
   *  first `active` work-items of each warp (a power of two, at least
   *  `lanes`: the group's size when it is below a warp) evaluate the
   *  expression together (a convergence point).  v is a double, float,
   *  int64_t or uint64_t variable.  CUDA: __shfl_xor_sync. */
  void (*warp_xor)(char *dst, size_t cap, const char *v, const char *mask, int lanes, int active);
} fsl_cg_group;

typedef struct fsl_dialect {
  const char *name;                          /* "c", "cuda", "opencl" */
  const char *prelude;                       /* text every generated source starts with */
  /** Element type of dt, or NULL when the dialect cannot compute in it
   *  (the kernel is then FSL_ERR_UNSUPPORTED: a fallback). */
  const char *(*type_name)(fsl_dtype dt);
  /** The buffer element type of a dtype the dialect stores in one type
   *  and computes in float (f16, bf16: loaded into float, computed in
   *  float, rounded back to nearest even when stored), or NULL where dt is
   *  its own compute type (type_name).  NULL: no such dtypes. */
  const char *(*storage_name)(fsl_dtype dt);
  /** The prelude function converting such a dtype's storage to float
   *  (store false) or float to its storage (store true). */
  const char *(*convert)(fsl_dtype dt, bool store);
  const char *f32_math_suffix;               /* "f": expf, sqrtf for float ("" where overloaded) */
  const char *restrict_kw;                   /* "restrict " or "" */
  const char *ret_err;                       /* last statement: report the error bits in int err_ */
  const char *ret_ok;                        /* last statement of a kernel without error bits ("" for none) */
  /** Whether one kernel may run several parallel loops where a later one
   *  reads what an earlier one wrote (multi-pass REDUCE through scratch
   *  buffers): true where parallel loops end in a barrier (OpenMP); false
   *  refuses such kernels (a fallback) where threads of one launch cannot
   *  wait for each other. */
  bool multi_pass;
  /** Work (elements, or multiply-adds for a matmul) below which the
   *  outermost loop stays SERIAL: thread start-up outweighs the work on a
   *  CPU (8192 in C); 0 where every thread runs the kernel and only a
   *  PARALLEL loop divides the work among them (CUDA, OpenCL). */
  long long par_min;
  /** Address-space qualifier of the kernel's buffers in pointer types
   *  ("" in C and CUDA, "__global " in OpenCL C): the shared code declares
   *  `const <buf_space>T *in0 = (const <buf_space>T *)in[0];`. */
  const char *buf_space;
  /** Prints the start of kernel fsl_k<id> reading n_in buffers and writing
   *  n_out: the signature, and "{", after which `in[i]` and `out[j]` name
   *  the buffers as untyped pointers (C: the arguments themselves, arrays
   *  of pointers; OpenCL: a local array over one __global argument per
   *  buffer). */
  void (*kernel_open)(fsl_sbuf *b, int id, int n_in, int n_out);
  /** The header of loop L: an optional annotation line (pragma; "" for
   *  none) and the loop line itself, ending in "{". */
  void (*loop_header)(const fsl_cg_loop *L, char *annot, size_t annot_cap, char *head, size_t head_cap);
  /** A prelude function void f(float *dst, int64_t ld, const float *tb,
   * int64_t n0, int64_t n1) storing dst[i*ld + j] = tb[j*16 + i] (i < n0,
   * j < n1): a transposing nest's f32 tile into its output; NULL: the
   * nest copies element by element. */
  const char *tile16_store;
  /** Work-group cooperation, or NULL where every thread works alone (C):
   *  REDUCE rows then run one per thread, matmuls one output element per
   *  thread. */
  const fsl_cg_group *group;
} fsl_dialect;

/* ---- shared by the C-family dialects (cfamily.c) ---- */
/** C99 <stdint.h> names: float, double, int8_t..uint64_t, bool as uint8_t;
 *  NULL for f16/bf16. */
const char *fsl_cg_stdint_type(fsl_dtype dt);
/** "for (int64_t v = lo; v < hi; v++) {" (or "v += step") into head[cap]. */
void fsl_cg_for_line(const fsl_cg_loop *L, char *head, size_t cap);
/** The grid-stride loop of a GPU dialect (CUDA, OpenCL) into head[cap]:
 *  "for (int64_t v = lo + GID; v < hi; v += GSIZE) {" where gid is the
 *  expression of this thread's global index and gsize the number of
 *  threads of the launch (both as 64-bit expressions). */
void fsl_cg_grid_stride_line(const fsl_cg_loop *L, const char *gid, const char *gsize, char *head, size_t cap);

#endif
