/*
 * fuzz_import.c — libFuzzer target for the ONNX importer.
 *
 * Feeds arbitrary bytes to fsl_onnx_import (no folder, so external data is
 * refused) and frees whatever comes back.  Any crash, sanitizer report or
 * leak is a bug: a malformed model must only ever produce an error status.
 *
 *   CC=clang cmake -S . -B build-fuzz -DFSL_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_import
 *   ./build-fuzz/fuzz_import -max_total_time=60 corpus/
 */
#include <stddef.h>
#include <stdint.h>

#include "onnx/onnx_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/** libFuzzer entry point: one import attempt per input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fsl_graph *g = NULL;
  fsl_status st = fsl_onnx_import(data, size, NULL, &g);
  FSL_ASSERT((st == FSL_OK) == (g != NULL));
  if (g) {
    /* touch what consumers read first, so bad pointers show up here */
    for (int i = 0; i < g->n_nodes; i++) {
      const fsl_node *n = g->nodes[i];
      FSL_ASSERT(n->op_type && n->domain && n->name);
      for (int k = 0; k < n->n_in; k++)
        if (n->in[k]) FSL_ASSERT(n->in[k]->name != NULL);
      for (int k = 0; k < n->n_out; k++) FSL_ASSERT(n->out[k] && n->out[k]->producer == n);
    }
    fsl_graph_free(g);
  }
  return 0;
}
