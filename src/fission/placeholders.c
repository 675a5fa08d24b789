/* placeholders.c — TEMPORARY weak definitions for ops being added; a strong
 * definition in a family file overrides each.  Deleted before landing. */
#include "fission/fission.h"

#define P(name)                                                               \
  __attribute__((weak)) fsl_status fsl_fission_##name(fsl_fctx *fx) {          \
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "no decomposition yet");        \
  }
P(Attention) P(RotaryEmbedding) P(NegativeLogLikelihoodLoss) P(SoftmaxCrossEntropyLoss)
P(CumProd) P(CenterCropPad) P(HannWindow) P(HammingWindow) P(BlackmanWindow) P(MelWeightMatrix)
P(ReverseSequence) P(QLinearMatMul) P(QLinearConv) P(MaxUnpool) P(Col2Im) P(AffineGrid)
P(GridSample) P(DFT) P(Det)
