/*
 * fuzz_compile.c — libFuzzer target for import + fission.
 *
 * Loads arbitrary bytes as a model, binds every unknown input dimension to
 * 2, and compiles (fission with shape inference and constant folding, CSE,
 * DCE, verifier).  A malformed or unsupported model must only ever produce
 * an error status: any crash, sanitizer report or leak is a bug.  The model
 * is not run (a fuzzed shape may ask for arbitrarily large buffers).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fissile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/** libFuzzer entry point: one load + compile attempt per input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fsl_model *m = NULL;
  if (fsl_model_load_bytes(data, size, NULL, &m) != FSL_OK) return 0;
  for (int i = 0; i < fsl_model_num_inputs(m); i++) {
    fsl_tensor t;
    if (fsl_model_input_info(m, i, &t) != FSL_OK || t.rank < 0) continue;
    for (int d = 0; d < t.rank; d++)
      if (t.dims[d] < 0) t.dims[d] = 2;
    fsl_model_bind_shape(m, t.name, t.rank, t.dims);
  }
  fsl_model_compile(m);
  fsl_model_free(m);
  return 0;
}
