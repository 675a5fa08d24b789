/*
 * cg.h — internals of the neutral code generator (src/codegen/), shared by
 * its files; backends use codegen.h.
 *
 * The generator walks a kernel's nodes backwards from each output: the
 * element of value v at coordinates c (expressions over loop variables)
 * is computed by
 *   - a load in[i][flat(c)] when v is read from outside,
 *   - an inlined literal when v is a one-element constant,
 *   - the operands at the same coordinates, combined, for elementwise ops,
 *   - the input at mapped coordinates for movement ops (reshape, permute,
 *     expand, slice, pad, concat, window: docs/primitives.md),
 *   - the data at coordinates taken from the index operand for gathers,
 *   - a row accumulator (fused REDUCE) or a scratch buffer (multi-pass
 *     REDUCE) for reductions.
 * Values needed twice at the same coordinates in one scope are computed
 * once (memo); at other coordinates they are recomputed, as loop fusion
 * does.  Values that do not vary in the innermost loop are computed once
 * before it (loop_begin), and a flat index over decomposed coordinates
 * reuses the decomposed index.  Arithmetic follows docs/primitives.md: f32
 * in float (exp, tanh, erf through branch-free versions from the dialect's
 * prelude), f64 in double, integers through 64-bit wrapping arithmetic;
 * f32 sums add SIMD partial sums of short blocks in double, other float
 * sums and products accumulate in double.  What differs between target
 * languages (type and function names, kernel signature, loop headers) comes
 * from the dialect (dialect.h).  Layout of the generated code:
 * docs/cpu-backend.md.
 */
#ifndef FSL_CG_H
#define FSL_CG_H

#include "codegen/codegen.h"

#include <math.h>
#include <stdarg.h>

#define CLEN 48  /* a coordinate or result expression: an identifier or literal */

typedef struct coords {
  int rank;
  char c[FSL_MAX_RANK][CLEN];
} coords;

typedef struct memo_ent {
  int vid;
  int depth;
  char *key;
  char var[CLEN];
} memo_ent;

typedef enum { MODE_LOOP, MODE_FUSED, MODE_PASSES } emit_mode;

/* A flat index `x` split into coordinates <prefix><axis> (decompose), kept
 * so that a flat index over the same axes can use `x` again. */
typedef struct decomp {
  int depth;            /* scope it was declared in */
  char x[CLEN];
  char prefix[16];
  int n;                /* non-1 axes, outermost first */
  int axes[FSL_MAX_RANK];
  int64_t dims[FSL_MAX_RANK];
} decomp;

/* A coordinate that is composed: var == outer*unit + r with 0 <= r < unit
 * (map_reshape merging axes into one), so that a concat along it whose
 * boundaries are multiples of unit tests outer, which the inner loop does
 * not change (the compiler then unswitches the loop and vectorizes it). */
typedef struct quot {
  int depth;            /* scope it was declared in */
  char var[CLEN];
  char outer[CLEN];
  int64_t unit;
} quot;

/* The innermost loop split by an interleave factor f (loops.c): the
 * coordinate var == outer*f + k, k a literal in 0 <= k < f, so that a
 * reshape splitting that axis by f reads outer and k directly. */
typedef struct isplit {
  char var[CLEN];       /* "" when none */
  char outer[CLEN];
  int64_t f, k;
} isplit;

typedef struct em {
  const fsl_dialect *d;  /* the target language */
  const fsl_cg_spec *s;
  fsl_sbuf *b;
  int nv;               /* values in the graph (ids < nv) */
  int *in_idx;          /* value id -> index in s->in, -1 */
  bool *inside;         /* value id -> produced by a node of s->nodes */
  int *red_idx;         /* value id -> index of its reduce node among reductions, -1 */
  int tmp;              /* fresh-name counter */
  bool *tvar;           /* temporary number -> declared in a loop body (loop-variant) */
  int cap_tvar;
  int indent;
  int depth;            /* memo scope depth */
  memo_ent *memo;
  int n_memo, cap_memo;
  decomp *dec;
  int n_dec, cap_dec;
  quot quot[16];        /* composed coordinates in scope (no entry: no hint) */
  int n_quot;
  isplit split;         /* the interleaved inner loop being emitted */
  emit_mode mode;
  int n_red;            /* reductions emitted so far (fused: r<k> live) */
  bool red_cols;        /* r<k> are per column of the current loop (columns.c): loop variants */
  bool fused_fail;      /* a fused read left its row: retry with passes */
  /* the innermost loop being emitted (loop_begin): loop-invariant values
   * go to `pre`, which lands before the loop header */
  fsl_sbuf *pre;        /* NULL outside such a loop */
  int pre_indent, pre_depth, body_depth;
  char lv_prefix[4];    /* "j": j_ and j<axis> vary with the loop */
  char lv_exact[CLEN];  /* the loop variable itself (e.g. c3) */
  bool hoisting;        /* writing into `pre` */
  /* fused REDUCE: reduction input cache_vid was stored into output
   * cache_out at the row coordinates; the row-space loop reads it back */
  int cache_vid, cache_out;
  bool cache_on;
  coords cache_c;       /* the row coordinates of cache_vid */
  coords cache_oc;      /* the same element in output cache_out */
  /* a LOOP nest over one input of a concat along an outer axis (loops.c):
   * reads of concat node pin_node take input pin_k, with no test */
  const fsl_node *pin_node;
  int pin_k;
  /* a tile of a transposing nest within one part of the kernel's concats
   * along each of its two axes (loops.c): coordinate range[i].var lies in
   * [range[i].lo, range[i].hi), so a concat along it reads the one input
   * holding that range, with no test (var NULL: no such range) */
  struct {
    const char *var;
    int64_t lo, hi;
  } range[2];
  /* work-group REDUCE rows (dialect group, fused body): the launch */
  bool grp;
  int grp_lanes;        /* work-items per row */
  int grp_rows;         /* rows per group (q_: this work-item's; rv_: whether it is a row) */
  fsl_cg_launch launch;
  /* a matmul or convolution with an epilogue (epilogue.c): the store
   * evaluates epi->out with lin_out at the stored element taken from the
   * accumulator; e->s is epi_spec, over in = {a, b, epi->in..} (epi_in) */
  const fsl_cg_epilogue *epi;
  const fsl_value *lin_out;
  char lin_var[CLEN];   /* lin_out at the element being stored ("" outside the store) */
  fsl_cg_spec epi_spec;
  fsl_value **epi_in;
  int lay_windows;      /* window reductions read as columns along their source's layout (fsl_cg_layout_window_axis) */
  fsl_status st;
} em;

/* Loop-invariant hoisting: between loop_begin and loop_end the caller
 * writes the loop header and body; values evaluated at coordinates that do
 * not vary with the loop are written into a separate buffer that is placed
 * before the header (at the scope enclosing the loop). */
typedef struct loop_ctx {
  fsl_sbuf *outer;
  fsl_sbuf pre, body;
} loop_ctx;


/* Whether the dialect stores dt in one type and computes in float (f16,
 * bf16; dialect.h storage_name). */
static inline bool fsl_cg_half(const fsl_dialect *d, fsl_dtype dt) { return d->storage_name && d->storage_name(dt); }
/* The type values of dt are computed in (NULL: none): float for a stored
 * half type. */
static inline const char *fsl_cg_ctype(const fsl_dialect *d, fsl_dtype dt) {
  return d->type_name(fsl_cg_half(d, dt) ? FSL_DT_F32 : dt);
}
/* The element type of dt's buffers. */
static inline const char *fsl_cg_stype(const fsl_dialect *d, fsl_dtype dt) {
  return fsl_cg_half(d, dt) ? d->storage_name(dt) : d->type_name(dt);
}
/* dst = x as dt's storage ("x", or the dialect's conversion of it);
 * `load`: the other way, a buffer element x as its compute value. */
static inline void fsl_cg_conv(const fsl_dialect *d, fsl_dtype dt, bool load, const char *x, char *dst, size_t cap) {
  if (fsl_cg_half(d, dt)) snprintf(dst, cap, "%s(%s)", d->convert(dt, !load), x);
  else snprintf(dst, cap, "%s", x);
}

static inline bool is_f(fsl_dtype dt) {
  return dt == FSL_DT_F32 || dt == FSL_DT_F64 || dt == FSL_DT_F16 || dt == FSL_DT_BF16;
}
/* Whether dt computes in float (not double): f32, and f16/bf16 stored. */
static inline bool is_f32c(fsl_dtype dt) { return dt == FSL_DT_F32 || dt == FSL_DT_F16 || dt == FSL_DT_BF16; }

/* v through expand nodes: the value they broadcast. */
static inline const fsl_value *fsl_cg_unexpand(const fsl_value *v) {
  while (v->producer && v->producer->op == FSL_OP_expand) v = v->producer->in[0];
  return v;
}
static inline bool is_s(fsl_dtype dt) {
  return dt == FSL_DT_I8 || dt == FSL_DT_I16 || dt == FSL_DT_I32 || dt == FSL_DT_I64;
}

/* kernel.c — e's per-value tables for graph g (nv, in_idx and red_idx all
 * -1, inside all false); false on OOM (em_free releases what was made). */
bool fsl_cg_value_tables(em *e, const fsl_graph *g);

/* kernel.c — the start of a kernel written whole by one emitter (matmul,
 * conv): e zeroed, emitting into body at indent 1 after the dialect's
 * signature of kernel `id` (n_in inputs, n_out outputs). */
void fsl_cg_kernel_open(em *e, fsl_sbuf *body, const fsl_dialect *d, int id, int n_in, int n_out);
/* kernel.c — the end of a kernel written into body (the dialect's last
 * statement, "}"), appended to b; body and e are freed.  FSL_ERR_NOMEM. */
fsl_status fsl_cg_kernel_close(em *e, fsl_sbuf *body, fsl_sbuf *b);

/* epilogue.c — the store of a matmul or convolution (codegen.h,
 * fsl_cg_epilogue).  epi_open (after fsl_cg_kernel_open, before any loop):
 * sets e up to evaluate epi (NULL: none) of linear node lin and declares
 * its input pointers and error word; false (e->st set) when the generator
 * cannot take it.  epi_store: dst[idx] = the accumulator acc rounded to T,
 * or with an epilogue the value epi->out at coordinates c (the stored
 * element's, "0" for axes of one element; epi->out is read at the same
 * flat index) with every read of lin's output equal to that rounded
 * value.  A kernel with an epilogue returns its error
 * bits (fsl_cg_kernel_close). */
bool fsl_cg_epi_open(em *e, const fsl_cg_epilogue *epi, const fsl_node *lin);
void fsl_cg_epi_store(em *e, const char *T, const char *acc, const coords *c, const char *dst, const char *idx);

/* kernel.c — tiled products in a dialect with work-groups (matmul, and
 * convolution as an implicit matmul): C[m][n] = sum over k of A[m][k] *
 * B[k][n], a TL x TL tile of C per work-group (TL = group->tile).
 * tiles_fit: whether two TL x TL tiles of dt fit in the local memory.
 * tiles_open: the local tiles ta_/tb_, l_ and the work-item's row ly_ and
 * column lx_ in the tile, and a grid-stride loop over `tiles` tiles (t_)
 * whose scope the caller closes; sets e->launch.  tiles_kloop: `acc s`
 * and the loop over k0 = 0, TL, ... < K: load(e, ctx) writes
 * ta_[ly_][lx_] = A[row ly_][k0 + lx_] and tb_[ly_][lx_] = B[k0 + ly_][column
 * lx_] (zero outside), then the tile's TL multiply-adds into s in k order
 * between barriers. */
bool fsl_cg_tiles_fit(const fsl_dialect *d, fsl_dtype dt);
void fsl_cg_tiles_open(em *e, const char *T, int64_t tiles);
void fsl_cg_tiles_kloop(em *e, const char *acc, int64_t K, void (*load)(em *e, const void *ctx), const void *ctx);

/* scope.c — emitter state: scopes, temporaries, loop-invariant hoisting, memo */
bool fsl_cg_fail(em *e, fsl_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fsl_cg_line(em *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fsl_cg_open_scope(em *e);
void fsl_cg_close_scope(em *e);
int fsl_cg_new_tmp(em *e);
bool fsl_cg_ident_variant(const em *e, const char *s);
bool fsl_cg_coords_variant(const em *e, const coords *c);
void fsl_cg_loop_begin(em *e, loop_ctx *L, const char *lv_prefix, const char *lv_exact);
void fsl_cg_loop_end(em *e, loop_ctx *L);
const char *fsl_cg_memo_find(em *e, int vid, const coords *c);
void fsl_cg_memo_add(em *e, int vid, const coords *c, const char *var);
void fsl_cg_loop_open(em *e, const fsl_cg_loop *L);

/* expr.c — the elementwise expression printer */
void fsl_cg_literal(const fsl_dialect *d, fsl_dtype dt, const void *p, char *dst);
const char *fsl_cg_float_unary(fsl_op op);
bool fsl_cg_ew_expr(em *e, const fsl_node *n, char a[3][CLEN], char *ex, size_t cap);

/* index.c — coordinates, flat indices, movement views and gathers as index expressions */
void fsl_cg_flat_index(em *e, int rank, const int64_t *dims, const coords *c, char *dst);
/* The input layout of outside value v (spec in_layout), NULL when row-major. */
const fsl_cg_layout *fsl_cg_in_layout(const em *e, const fsl_value *v);
/* The layout of output j (spec out_layout), NULL when row-major. */
const fsl_cg_layout *fsl_cg_out_layout(const em *e, int j);
/* flat index of v at c in layout lay (NULL: row-major) into dst */
void fsl_cg_layout_index(em *e, const fsl_value *v, const fsl_cg_layout *lay, const coords *c, char *dst);
void fsl_cg_decompose(em *e, const char *x, int n, const int *axes, const int64_t *dims, const char *prefix, coords *c);
bool fsl_cg_ev_movement(em *e, const fsl_node *n, const coords *c, char *res);
bool fsl_cg_ev_gather(em *e, const fsl_node *n, const coords *c, char *res);

/* value.c — the element of a value at coordinates (loads, memo, hoisting) */
bool fsl_cg_supported_dtype(em *e, const fsl_value *v);
bool fsl_cg_ev(em *e, const fsl_value *v, const coords *c, char *res);

/* probe.c — tile_axis: for a LOOP nest over value v, an outer axis
 * (of 8 or more elements) along which some input read of v is contiguous
 * while it strides along v's innermost axis (a transpose), found by
 * following the kernel's elementwise and movement nodes and its gathers by
 * constant indices at concrete coordinates (neighbouring pairs in the
 * middle of the row); -1: none, or a node the probe does not follow. */
int fsl_cg_tile_axis(const em *e, const fsl_value *v);
/* Whether some outside read of v (inside the kernel or an input) strides
 * along v's innermost axis but is contiguous along axis a < rank - 1: v
 * is stored with a innermost (a channels-last input read as NCHW). */
bool fsl_cg_contig_along(const em *e, const fsl_value *v, int a);
/* Whether some outside read of v moves by more than one element as v's
 * coordinate a steps from 0 to 1 (false where the probe cannot tell). */
bool fsl_cg_strided_along(const em *e, const fsl_value *v, int a);
/* The largest step in bytes of such a strided read (0: none, or the
 * probe cannot tell). */
int64_t fsl_cg_stride_bytes_along(const em *e, const fsl_value *v, int a);
/* The interleave factor f in 2..8 of a LOOP nest over value v: some read
 * strides along v's innermost axis while every read is contiguous (or
 * broadcast) from innermost coordinate j to j + f for each j < f, as in a
 * depth-to-space (pixel shuffle) that interleaves f channel planes; the
 * nest then runs f contiguous streams per step (loops.c).  1: none. */
int fsl_cg_interleave(const em *e, const fsl_value *v);

/* loops.c — LOOP kernels: one loop nest per output shape */
bool fsl_cg_store_outputs(em *e, int n, const int *outs, const coords *c);
bool fsl_cg_output_loops(em *e, bool *done);

/* reduce.c — REDUCE kernels: fused rows or passes through scratch buffers.
 * red_mask: the reduced axes of reduce node n as a bit mask.  red_acc_of:
 * the accumulator type and initial value of n (double for float sums and
 * products, 64-bit for integers).  row_loop_open: the loop over `outer`
 * kept-space rows of `inner` elements each (parallel when the work is
 * large; one work-group per row in a group body) and the row's error flag
 * e_, whose scope the caller closes. */
typedef struct fsl_cg_red_acc {
  const char *type; /* accumulator type */
  char init[CLEN];
} fsl_cg_red_acc;
bool fsl_cg_fused_body(em *e, const fsl_node **red, int nr);
bool fsl_cg_passes_body(em *e, const fsl_node **red, int nr);
unsigned fsl_cg_red_mask(const fsl_node *n);
/* The innermost axis that reduce node n reduces among those of its input
 * longer than 1; -1 when none. */
int fsl_cg_red_last_axis(const fsl_node *n);
/* Whether value x (of reduce node n's input shape) is read 64 bytes (a
 * cache line) or more apart per step along n's innermost reduced axis
 * (fsl_cg_stride_bytes_along): a row of n over x read through an input
 * layout that keeps another axis innermost. */
bool fsl_cg_reads_across(const em *e, const fsl_value *x, const fsl_node *n);
void fsl_cg_red_acc_of(const fsl_dialect *d, const fsl_node *n, fsl_cg_red_acc *a);
void fsl_cg_row_loop_open(em *e, int64_t outer, int64_t inner);

/* nanflag.c — whether float max/min reduce node n must track NaN with a
 * flag beside its accumulator (its compare-and-select skips NaN): false
 * for other reductions, and for a max whose result only feeds a softmax
 * within this kernel (x - max(x) -> exp -> that row's sum and the quotient
 * by it, none of them but the sum and the quotient leaving the kernel),
 * where a NaN of the row reaches every output through the sum anyway. */
bool fsl_cg_tracks_nan(const em *e, const fsl_node *n);

/* window.c — REDUCE rows over sliding windows (pooling).  windowed:
 * whether v reads a window view through the kernel's elementwise and
 * movement nodes.  win_plan: whether reduce node n (reduced axes `axes`,
 * na of them; the row's kept coordinates oc) reads a window view and runs
 * as a window row: nested loops, one per reduced axis of more than one
 * element, outermost first (two or more; one is enough where the caller
 * runs a SIMD loop, simd_axis >= 0).  Where it reads window(pad(X)) and the pad's
 * constant is the reduction's identity, the loops are clamped to the
 * window positions inside X (their bounds declared at the current
 * position) and w->src is X; then win_ev reads X at the row's coordinates
 * with no bounds test.  simd_axis (-1: none) is an output axis of the row
 * the caller runs as a SIMD loop inside the window loops (the columns
 * form): its window loop stays [0, K) and w->simd_q names it; inside that
 * loop, win_simd_range declares the SIMD loop's clamped bounds. */
typedef struct fsl_cg_win_row {
  int nn;                                                               /* loops */
  int axis[FSL_MAX_RANK];                                               /* the reduced axis of each */
  char var[FSL_MAX_RANK][CLEN], lo[FSL_MAX_RANK][CLEN], hi[FSL_MAX_RANK][CLEN];
  const fsl_value *src; /* X, or NULL: the row reads through the views */
  /* with src: X's window axes are lead.. rank-1; window axis i reads X at
   * o*stride[i] + j*dil[i] - pad[i] (o: the row's coordinate lead + i, j:
   * the reduced axis rank(X) + i of the window) */
  int lead;
  int64_t stride[FSL_MAX_RANK], dil[FSL_MAX_RANK], pad[FSL_MAX_RANK];
  int simd_q; /* the loop whose output axis is the caller's SIMD axis, or -1 */
} fsl_cg_win_row;
bool fsl_cg_win_plan(em *e, const fsl_node *n, const int *axes, int na, const coords *oc, int simd_axis,
                     fsl_cg_win_row *w);
void fsl_cg_win_simd_range(em *e, const fsl_cg_win_row *w, int64_t L, char *lo, char *hi);
bool fsl_cg_win_ev(em *e, const fsl_cg_win_row *w, const coords *c, char *v);
/* fsl_cg_win_ev with X's coordinate on the SIMD loop's window axis
 * (w->simd_q) the expression col, whatever the window position on it
 * (col NULL: fsl_cg_win_ev): a column of X, as a separable window reads
 * it. */
bool fsl_cg_win_ev_col(em *e, const fsl_cg_win_row *w, const coords *c, const char *col, char *v);
bool fsl_cg_windowed(const em *e, const fsl_value *v, int depth);
/* For x, a window node's output inside the kernel over a kernel input X
 * (or over a pad of X) that the kernel reads in a layout (a oneDNN
 * convolution's channels-last result): the axis of x that is X's innermost
 * axis in memory, when that is a leading (unwindowed) axis, else -1.  A
 * SIMD loop along it reads each window tap contiguously. */
int fsl_cg_layout_window_axis(const em *e, const fsl_value *x);
/* The number of window nodes in the kernel that read an input in a layout
 * through any of its nodes.  Each must be read as columns along
 * fsl_cg_layout_window_axis (counted in em.lay_windows), else
 * fsl_codegen_kernel refuses the kernel. */
int fsl_cg_layout_windows(const em *e);

/* columns.c — REDUCE kernels as columns on dialects with SIMD loops
 * (par_min > 0): per row of the kept space without its innermost axis, an
 * accumulator per element of that axis, updated by a SIMD loop across it
 * inside the loops over the reduced axes, where that axis comes after
 * every reduced one (a column sum: rows would read with a stride) or the
 * reductions read sliding windows.  red: nr reductions over one space, no
 * one reading another.  cls/oc: the fused body's outputs, every one in the
 * kept space (fsl_cg_fused_body), written per element; cls NULL: a pass,
 * writing r<k> into scratch buffer s<s0 + k> (flat over the kept space).
 * *used false (and nothing emitted) where the kernel does not qualify. */
bool fsl_cg_cols(em *e, const fsl_node **red, int nr, const int *cls, const coords *oc, int s0, bool *used);

#endif
