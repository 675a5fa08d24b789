#!/usr/bin/env bash
# fuzz.sh SAN_BUILD BUILD SECONDS — libFuzzer on the importer (fuzz_import)
# and on import + fission + compiled model files (fuzz_compile, which loads
# .fsl files through fsl_model_load_bytes), SECONDS each, from SAN_BUILD (the
# clang ASan+UBSan build with FSL_FUZZ=ON, `make stage-san-build`).  The
# corpus is seeded with a few ONNX node-test models and two compiled model
# files written by BUILD's fissile.  Exit status: non-zero when a fuzzer
# finds a crash, a leak, a timeout or a sanitizer report.
set -euo pipefail
san=$1 build=$2 secs=$3
node=/usr/share/libonnx-testdata/data/node
corpus=$san/corpus
rm -rf "$corpus" && mkdir -p "$corpus"
for t in abs add conv_with_strides_padding gemm_default_no_bias reshape_extended_dims \
         softmax_axis_1 transpose_default maxpool_2d_pads matmul_4d gather_0 \
         lstm_defaults batchnorm_example slice; do
  f=$node/test_$t/model.onnx
  if [ -f "$f" ]; then cp "$f" "$corpus/$t.onnx"; fi
done
for b in plan-ref cpu; do
  "$build/fissile" compile "$node/test_softmax_axis_1/model.onnx" --backend "$b" -o "$corpus/softmax_$b.fsl" 2>/dev/null
done
cd "$san"
for t in fuzz_import fuzz_compile; do
  "./$t" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -timeout=10 -print_final_stats=1 corpus
done
