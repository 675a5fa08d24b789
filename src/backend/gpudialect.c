/*
 * gpudialect.c — loop headers of the GPU dialects (gpudialect.h).
 */
#include "backend/gpudialect.h"

#include <stdio.h>

void fsl_gpu_loop_header(const fsl_gpu_loops *t, const fsl_cg_loop *L, char *annot, size_t acap, char *head,
                         size_t hcap) {
  bool in_item = L->kind != FSL_CG_PARALLEL && L->kind != FSL_CG_GROUPS;
  snprintf(annot, acap, "%s", in_item && t->unroll ? t->unroll : "");
  char step[32];
  switch (L->kind) {
  case FSL_CG_PARALLEL: fsl_cg_grid_stride_line(L, t->item, t->items, head, hcap); break;
  case FSL_CG_GROUPS: fsl_cg_grid_stride_line(L, t->group, t->groups, head, hcap); break;
  case FSL_CG_LANES:
    snprintf(step, sizeof step, "%lld", L->step);
    fsl_cg_grid_stride_line(L, "l_", step, head, hcap);
    break;
  default: fsl_cg_for_line(L, head, hcap);
  }
}
