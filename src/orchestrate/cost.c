/*
 * cost.c — the analytic roofline cost of a kernel (DESIGN.md section 5).
 *
 *   time = max(bytes / bandwidth, linear_flops / peak_flops
 *                                 + other_flops / elem_flops) + launch_s
 *
 * Linear flops are those of the kernel's matmul/conv node (recomputed here
 * from its shapes: 2 * M * N * K per matmul, 2 * out * (C_in/group * kernel
 * volume) per conv); the rest of k->flops (elementwise, reductions,
 * gathers) runs at the elementwise rate of generated loops.  Device numbers
 * come from fsl_device_default or fsl_device_calibrate (calibrate.h).
 */
#include "orchestrate/orchestrate.h"

/* Default device: a modest, fixed machine so that tests and uncalibrated
 * runs are deterministic.  10 GB/s copy bandwidth (one DDR4 channel, read +
 * write counted), 50 GFLOP/s sgemm (a few AVX2 cores), 2 G elementwise
 * ops/s, 5 us per kernel (call + OpenMP fork/join). */
void fsl_device_default(fsl_device *d) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "default (uncalibrated)");
  d->bandwidth = 10e9;
  d->peak_flops = 50e9;
  d->elem_flops = 2e9;
  d->launch_s = 5e-6;
}

/* FLOPs of one matmul or conv node (multiply and add counted separately);
 * 0 for other ops or unknown shapes. */
static double linear_flops(const fsl_node *n) {
  if (n->n_in < 2 || n->n_out < 1 || !n->in[0] || !n->in[1] || !n->out[0]) return 0;
  const fsl_value *x = n->in[0], *w = n->in[1], *y = n->out[0];
  int64_t out = fsl_value_numel(y);
  if (out <= 0) return 0;
  if (n->op == FSL_OP_matmul) {
    if (x->rank < 1) return 0;
    int64_t k = x->dims[x->rank - 1];
    return k > 0 ? 2.0 * (double)out * (double)k : 0;
  }
  if (n->op == FSL_OP_conv) {
    /* w: [C_out, C_in/group, k...]: one output element reads numel(w)/C_out weights */
    int64_t wn = fsl_value_numel(w);
    if (w->rank < 1 || w->dims[0] <= 0 || wn <= 0) return 0;
    return 2.0 * (double)out * ((double)wn / (double)w->dims[0]);
  }
  return 0;
}

double fsl_kernel_cost(fsl_kernel *k, const fsl_device *d) {
  if (!k) return 0;
  fsl_device def;
  if (!d) {
    fsl_device_default(&def);
    d = &def;
  }
  double lin = 0;
  for (int i = 0; i < k->n_nodes; i++)
    if (k->nodes[i] && fsl_op_get(k->nodes[i]->op)->kind == FSL_KIND_LINEAR) lin += linear_flops(k->nodes[i]);
  double other = k->flops > lin ? k->flops - lin : 0;
  double mem = d->bandwidth > 0 ? k->bytes / d->bandwidth : 0;
  double compute = (d->peak_flops > 0 ? lin / d->peak_flops : 0) + (d->elem_flops > 0 ? other / d->elem_flops : 0);
  double t = (mem > compute ? mem : compute) + (d->launch_s > 0 ? d->launch_s : 0);
  k->cost_s = t;
  return t;
}
