/*
 * cuda_emit.c — `fissile compile MODEL --backend cuda --emit-only` and
 * `fissile explain MODEL --backend cuda`: the CUDA C of a plan compiled by
 * NVRTC (fsl_model_emit, dialect "cuda"), its summary and the resources of every
 * generated kernel.  docs/cli.md, docs/gpu-backend.md.
 */
#include "cli.h"

#include <errno.h>
#include <string.h>

static const char *const k_cuda_archs[] = {"sm_90", "sm_80"};

/* A resource figure, or "-" where ptxas said nothing. */
static void num(char *buf, size_t len, long long v) {
  if (v < 0) snprintf(buf, len, "-");
  else snprintf(buf, len, "%lld", v);
}

static void print_table(FILE *f, const fsl_emit_result *r) {
  fprintf(f, "%-7s %-9s %-9s %5s %8s %-28s", "kernel", "function", "part", "block", "grid", "onnx node");
  for (int a = 0; a < r->n_targets; a++)
    fprintf(f, " | %-5s %4s %5s %5s %6s %6s %5s", r->targets[a], "regs", "spst", "spld", "stack", "smem", "cmem");
  fprintf(f, "\n");
  for (int i = 0; i < r->n_functions; i++) {
    const fsl_cuda_function *fn = &r->functions[i];
    char name[24], node[29];
    snprintf(name, sizeof name, "fsl_k%d", fn->id);
    snprintf(node, sizeof node, "%s %s", fn->onnx_op, fn->onnx_name);
    for (char *p = node; *p; p++)
      if ((unsigned char)*p < 32) *p = '?';
    char block[16], grid[24];
    if (fn->block_threads > 0) {
      snprintf(block, sizeof block, "%d", fn->block_threads);
      snprintf(grid, sizeof grid, "%lld", (long long)fn->blocks);
    } else {
      snprintf(block, sizeof block, "any");
      snprintf(grid, sizeof grid, "-");
    }
    fprintf(f, "%-7d %-9s %-9s %5s %8s %-28s", fn->kernel, name, fn->part, block, grid, node);
    for (int a = 0; a < r->n_targets; a++) {
      const fsl_cuda_usage *u = &fn->usage[a];
      char c[6][24];
      num(c[0], sizeof c[0], u->registers);
      num(c[1], sizeof c[1], u->spill_store_bytes);
      num(c[2], sizeof c[2], u->spill_load_bytes);
      num(c[3], sizeof c[3], u->stack_bytes);
      num(c[4], sizeof c[4], u->shared_bytes);
      num(c[5], sizeof c[5], u->const_bytes);
      fprintf(f, " | %-5s %4s %5s %5s %6s %6s %5s", "", c[0], c[1], c[2], c[3], c[4], c[5]);
    }
    fprintf(f, "\n");
  }
}

static void print_summary(FILE *f, const fsl_emit_result *r) {
  fprintf(f, "cuda: %d kernels: %d generated as %d functions, %d opaque (host), %d refused by the dialect\n",
          r->n_kernels, r->n_generated, r->n_functions, r->n_opaque, r->n_refused);
  fprintf(f, "cuda: %zu bytes of CUDA C; NVRTC", r->source_len);
  for (int a = 0; a < r->n_targets; a++)
    fprintf(f, "%s %s %.3f s (CUBIN %zu bytes)", a ? "," : "", r->targets[a], r->compile_s[a], r->binary_bytes[a]);
  fprintf(f, ": no errors, no warnings\n");
  for (int i = 0; i < r->n_refused; i++) fprintf(f, "refused: %s\n", r->refused[i]);
  if (r->n_functions == 0) return;
  fprintf(f, "launch and resources per generated function: threads per block the code assumes (any: grid-stride "
             "over threads) and blocks with work; ptxas -v: registers per thread, spill stores/loads and stack "
             "(bytes per thread), static shared memory per block and constant banks (bytes):\n");
  print_table(f, r);
}

int cuda_emit(const options *o, const fsl_model *m, FILE *f) {
  fsl_emit_result r;
  fsl_status st = fsl_model_emit(m, "cuda", k_cuda_archs, (int)(sizeof k_cuda_archs / sizeof *k_cuda_archs), &r);
  int rc = EXIT_OK;
  /* the source is written also when NVRTC fails: it is what to look at */
  if (o->plan_out && r.source) {
    FILE *out = fopen(o->plan_out, "w");
    bool ok = out && fwrite(r.source, 1, r.source_len, out) == r.source_len;
    if (out && fclose(out) != 0) ok = false;
    if (!ok) {
      fprintf(stderr, "fissile: error: cannot write '%s': %s\n", o->plan_out, strerror(errno));
      rc = EXIT_MODEL;
    } else {
      fprintf(stderr, "fissile: wrote %s (CUDA C of the plan)\n", o->plan_out);
    }
  }
  if (st != FSL_OK) rc = report(st);
  else if (rc == EXIT_OK) print_summary(f, &r);
  fsl_emit_result_free(&r);
  return rc;
}
