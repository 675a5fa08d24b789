/*
 * onednn_run.c — running a prepared linear op (fsl_onednn_linear_run):
 * run-time weights flipped and reordered, activations and residuals
 * reordered around the primitive unless chained, the scratchpad of the
 * calling thread, and the thread count the op was created for.
 */
#include "backend/cpu/onednn_impl.h"

#include <pthread.h>

#include <oneapi/dnnl/dnnl_debug.h>

/* The scratchpad of the calling thread: one buffer per thread that runs
 * linear ops, grown to the largest any of them needs and freed when the
 * thread ends.  A thread runs one primitive at a time, and a scratchpad
 * holds nothing between runs, so every op shares it: Winograd convolutions
 * need up to 10 MiB each (F(4x4,3x3), 128 channels over 28x28), which one
 * buffer per op multiplied by every such conv of a model (resnet18: 12). */
typedef struct scratch_buf {
  void *p;
  size_t n;
} scratch_buf;

static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static bool g_scratch_key_ok;

static void scratch_free(void *b) {
  scratch_buf *s = b;
  free(s->p);
  free(s);
}

static void scratch_init(void) { g_scratch_key_ok = pthread_key_create(&g_scratch_key, scratch_free) == 0; }

/* At least n bytes (64-byte aligned) for the calling thread; NULL when out
 * of memory. */
static void *thread_scratch(size_t n) {
  pthread_once(&g_scratch_once, scratch_init);
  if (!g_scratch_key_ok) return NULL;
  scratch_buf *s = pthread_getspecific(g_scratch_key);
  if (!s) {
    if (!(s = calloc(1, sizeof *s))) return NULL;
    if (pthread_setspecific(g_scratch_key, s) != 0) {
      free(s);
      return NULL;
    }
  }
  if (s->n < n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) return NULL;
    free(s->p);
    s->p = p, s->n = n;
  }
  return s->p;
}

/* Runs reorder r from `from` (its data handle set to from_data) into `to`. */
static dnnl_status_t exec_reorder(dnnl_primitive_t r, dnnl_memory_t from, const void *from_data, dnnl_memory_t to) {
  dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  dnnl_status_t s = dnnl_memory_set_data_handle(from, (void *)from_data);
  return s != dnnl_success ? s : dnnl_primitive_execute(r, fsl_onednn_stream, 2, ra);
}

/* Flips weights along the spatial axes: src is [outer, k...] row-major. */
void fsl_onednn_flip_weights(const float *src, float *dst, int64_t outer, int ns, const int64_t *k) {
  int64_t kn = 1;
  for (int i = 0; i < ns; i++) kn *= k[i];
  for (int64_t o = 0; o < outer; o++) {
    const float *s = src + o * kn;
    float *d = dst + o * kn;
    int64_t idx[3] = {0, 0, 0};
    for (int64_t f = 0; f < kn; f++) {
      int64_t off = 0;
      for (int i = 0; i < ns; i++) off = off * k[i] + (k[i] - 1 - idx[i]);
      d[off] = s[f];
      for (int i = ns - 1; i >= 0; i--) {
        if (++idx[i] < k[i]) break;
        idx[i] = 0;
      }
    }
  }
}

/* Split int8 weights (onednn_int8.c): the primitive again with the low
 * bits of the weights into acc2, then dst = 2 * dst + acc2 in s32 (in the
 * destination's layout, elementwise). */
static dnnl_status_t split_low_bits(fsl_onednn_linear *op, dnnl_exec_arg_t *args, int na) {
  void *d = NULL;
  dnnl_status_t s = dnnl_stream_wait(fsl_onednn_stream);
  if (s == dnnl_success) s = dnnl_memory_get_data_handle(op->dst_mem, &d);
  if (s != dnnl_success || !d) return s != dnnl_success ? s : dnnl_runtime_error;
  for (int i = 0; i < na; i++) {
    if (args[i].arg == DNNL_ARG_WEIGHTS) args[i].memory = op->wei2_mem;
    if (args[i].arg == DNNL_ARG_DST) args[i].memory = op->acc2_mem;
  }
  s = dnnl_primitive_execute(op->prim, fsl_onednn_stream, na, args);
  if (s == dnnl_success) s = dnnl_stream_wait(fsl_onednn_stream);
  if (s != dnnl_success) return s;
  int32_t *y = d;
  const int32_t *lo = op->acc2_buf;
  int64_t n = (int64_t)op->acc2_n;
  for (int64_t i = 0; i < n; i++) y[i] = (int32_t)(2 * (uint32_t)y[i] + (uint32_t)lo[i]);
  return dnnl_success;
}

fsl_status fsl_onednn_linear_run(fsl_onednn_linear *op, const void *src, const void *wei, const void *const *post,
                                 void *dst) {
  if (op && op->src_const) { /* CONV_MM_WX: w [M, C] times x [C, HW] */
    wei = src;
    src = op->src_const;
  }
  if (!op || !src || !dst || (!op->wei_const && !wei))
    return fsl_errorf(FSL_ERR_ARG, "fsl_onednn_linear_run: NULL argument");
  dnnl_exec_arg_t args[4 + MAX_POST];
  int na = 0;
  dnnl_status_t s;
  /* chained (or plain) activations are the primitive's memory itself */
  dnnl_memory_t src_in = op->src_user_mem && !op->src_chained ? op->src_user_mem : op->src_mem;
  dnnl_memory_t dst_out = op->dst_user_mem && !op->dst_chained ? op->dst_user_mem : op->dst_mem;
  if ((s = dnnl_memory_set_data_handle(src_in, (void *)src)) != dnnl_success ||
      (s = dnnl_memory_set_data_handle(dst_out, dst)) != dnnl_success)
    goto fail;
  int old_threads = fsl_onednn_threads_set(op->n_threads);
  if (!op->wei_const) {
    const void *w = wei;
    if (op->flip) {
      fsl_onednn_flip_weights(wei, op->flip_buf, op->flip_outer, op->n_spatial, op->flip_inner);
      w = op->flip_buf;
    }
    if (op->wei_reorder) {
      if ((s = dnnl_memory_set_data_handle(op->wei_user_mem, (void *)w)) != dnnl_success) goto restore;
      dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, op->wei_user_mem}, {DNNL_ARG_TO, op->wei_mem}};
      if ((s = dnnl_primitive_execute(op->wei_reorder, fsl_onednn_stream, 2, ra)) != dnnl_success) goto restore;
    } else if ((s = dnnl_memory_set_data_handle(op->wei_mem, (void *)w)) != dnnl_success) {
      goto restore;
    }
  }
  if (op->src_reorder && !op->src_chained) {
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, op->src_user_mem}, {DNNL_ARG_TO, op->src_mem}};
    if ((s = dnnl_primitive_execute(op->src_reorder, fsl_onednn_stream, 2, ra)) != dnnl_success) goto restore;
  }
  args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, op->src_mem};
  args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, op->wei_mem};
  args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, op->dst_mem};
  if (op->scratch_mem) {
    void *sp = thread_scratch(op->scratch_bytes);
    if (!sp) {
      fsl_onednn_threads_restore(old_threads);
      return fsl_errorf(FSL_ERR_NOMEM, "oneDNN scratchpad: out of memory (%zu bytes)", op->scratch_bytes);
    }
    if ((s = dnnl_memory_set_data_handle(op->scratch_mem, sp)) != dnnl_success) goto restore;
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, op->scratch_mem};
  }
  if (op->zp_mem) {
    const void *z = op->q8.zp_src ? (post ? post[0] : NULL) : &op->q8.zp;
    if (!z) {
      fsl_onednn_threads_restore(old_threads);
      return fsl_errorf(FSL_ERR_ARG, "fsl_onednn_linear_run: zero point is NULL");
    }
    op->zp_val = op->q8.zp_src ? fsl_onednn_int8_zero_point(&op->q8, z) : op->q8.zp;
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, op->zp_mem};
  }
  if (op->bias_entry >= 0) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, op->post_mem[op->bias_entry]};
  for (int i = 0, po = 0; i < op->n_entries; i++) {
    if (op->entries[i].reshape || i == op->bias_entry) continue;
    int po_index = po++;  /* index in the oneDNN post-op chain */
    if (!op->entries[i].binary) continue;
    if (!op->entries[i].cdata) {
      const void *p = post ? post[op->entries[i].node] : NULL;
      if (!p) {
        fsl_onednn_threads_restore(old_threads);
        return fsl_errorf(FSL_ERR_ARG, "fsl_onednn_linear_run: post-op operand %d is NULL", op->entries[i].node);
      }
      if (op->entries[i].sum) {
        /* the destination starts as the operand: reordered into it, or copied */
        void *d = NULL;
        if ((s = dnnl_memory_get_data_handle(op->dst_mem, &d)) != dnnl_success) goto restore;
        if (op->post_reorder[i] && !op->post_chained[i])
          s = exec_reorder(op->post_reorder[i], op->post_user_mem[i], p, op->dst_mem);
        else if (d != p)
          s = exec_reorder(op->post_copy[i], op->post_mem[i], p, op->dst_mem);
        if (s != dnnl_success) goto restore;
        continue;
      }
      s = op->post_reorder[i] && !op->post_chained[i]
              ? exec_reorder(op->post_reorder[i], op->post_user_mem[i], p, op->post_mem[i])
              : dnnl_memory_set_data_handle(op->post_mem[i], (void *)p);
      if (s != dnnl_success) goto restore;
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(po_index) | DNNL_ARG_SRC_1, op->post_mem[i]};
  }
  if (op->wino) {
    void *x = NULL, *y = NULL, *sp = thread_scratch(fsl_wino_scratch_bytes(op->wino));
    if (!sp) {
      fsl_onednn_threads_restore(old_threads);
      return fsl_errorf(FSL_ERR_NOMEM, "Winograd scratch: out of memory (%zu bytes)", fsl_wino_scratch_bytes(op->wino));
    }
    s = dnnl_memory_get_data_handle(op->src_mem, &x);
    if (s == dnnl_success) s = dnnl_memory_get_data_handle(op->dst_mem, &y);
    if (s == dnnl_success) s = fsl_wino_run(op->wino, x, y, sp, fsl_onednn_stream);
  } else {
    s = dnnl_primitive_execute(op->prim, fsl_onednn_stream, na, args);
  }
  if (s == dnnl_success && op->wei2_mem) s = split_low_bits(op, args, na);
  if (s == dnnl_success && op->dst_reorder && !op->dst_chained) {
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, op->dst_mem}, {DNNL_ARG_TO, op->dst_user_mem}};
    s = dnnl_primitive_execute(op->dst_reorder, fsl_onednn_stream, 2, ra);
  }
  if (s == dnnl_success) s = dnnl_stream_wait(fsl_onednn_stream);
restore:
  fsl_onednn_threads_restore(old_threads);
  if (s == dnnl_success) return FSL_OK;
fail:
  return fsl_errorf(FSL_ERR_RUNTIME, "oneDNN execute: %s", dnnl_status2str(s));
}
