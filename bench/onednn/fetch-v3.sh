#!/usr/bin/env bash
# fetch-v3.sh — download and unpack oneDNN 3.2 (PyPI onednn-cpu-gomp +
# onednn-devel-cpu-gomp 2023.2.0, GNU OpenMP) into $WORK/v3 (default
# /tmp/fsl-onednn) once, then print two lines: the include folder (holding
# oneapi/dnnl/dnnl.h) and the full path of libdnnl.so.3.  Used by
# versions.sh and to configure a fissile build against 3.2:
#   set -- $(bench/onednn/fetch-v3.sh)
#   cmake -S . -B build-v3 -DDNNL_INCLUDE=$1 -DDNNL_LIB=$2
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "${WORK:-/tmp/fsl-onednn}"
W=$(cd "${WORK:-/tmp/fsl-onednn}" && pwd) # absolute: the paths printed must hold from any folder
cd "$W"
if [ ! -d v3 ]; then
  "$here/../../.venv/bin/pip" download -q --no-deps -d wheels \
    onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0 >&2
  for w in wheels/*.whl; do python3 -m zipfile -e "$w" v3; done
fi
h=$(find "$W/v3" -name dnnl.h -path "*oneapi/dnnl/*" | head -1)
l=$(find "$W/v3" -name 'libdnnl.so.3' | head -1)
[ -n "$h" ] && [ -n "$l" ] || { echo "fetch-v3: no dnnl.h or libdnnl.so.3 under $W/v3" >&2; exit 1; }
dirname "$(dirname "$(dirname "$h")")"
echo "$l"
