#!/usr/bin/env bash
# versions.sh [THREADS] — oneDNN 2.6 (Debian's libdnnl-dev) against 3.2 (the
# PyPI wheels onednn-cpu-gomp + onednn-devel-cpu-gomp 2023.2.0) on the conv
# and matmul shapes of bench/onednn/versions.c: three rounds, the versions
# interleaved, then the median of the round medians with their spread
# (bench/onednn/aggregate.py).  Work folder: $WORK (default /tmp/fsl-onednn).
# ISA=AVX2 limits both versions to AVX2 (DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
T=${1:-2}
W=${WORK:-/tmp/fsl-onednn}
{ read -r inc; read -r libso; } < <("$here/fetch-v3.sh")
lib=$(dirname "$libso")
mkdir -p "$W/out" && cd "$W"
cc -O2 -o bench26 "$here/versions.c" -ldnnl
cc -O2 -I"$inc" -o bench32 "$here/versions.c" -L"$lib" -Wl,-rpath,"$(cd "$lib" && pwd)" -ldnnl
echo "before: $(uptime)" > out/run.load
for r in 1 2 3; do
  for v in 26 32; do
    OMP_NUM_THREADS=$T DNNL_MAX_CPU_ISA=${ISA:-ALL} ONEDNN_MAX_CPU_ISA=${ISA:-ALL} ./bench$v > out/run.v$v.r$r.txt
    echo "after v$v r$r: $(uptime)" >> out/run.load
  done
done
python3 "$here/aggregate.py" run
cat out/run.load
