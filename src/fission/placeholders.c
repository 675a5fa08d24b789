/* placeholders.c — TEMPORARY weak definitions so the library links while
 * decompositions are being written; a strong definition in a family file
 * overrides each.  Deleted before landing. */
#include "fission/fission.h"

#define PRIM(name, n_in, kind)
#define ONNX(name, min_in, max_in, kind)                                      \
  __attribute__((weak)) fsl_status fsl_fission_##name(fsl_fctx *fx) {          \
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "no decomposition yet");        \
  }
#include "ir/ops.def"
#undef PRIM
#undef ONNX
