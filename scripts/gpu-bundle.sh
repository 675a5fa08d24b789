#!/usr/bin/env bash
# gpu-bundle.sh — fissile for a GPU machine that cannot install this
# project's Debian packages (the device tool's H100/H200 machines: nothing
# can be fetched there; docs/gpu-backend.md, "Running on a lent GPU").
#
# Builds the CLI with the CUDA backend on and the CPU (oneDNN) and OpenCL
# backends off (build-gpu/), and copies it with the shared libraries it
# needs beyond glibc, libstdc++ and the CUDA toolkit (protobuf-c, CBC,
# SQLite, cJSON, libgomp, ...) into .gpu/ (.gitignore; a few MiB),
# which the device tool carries:
#
#   scripts/gpu-bundle.sh
#   run(carry=[".gpu"], command="export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
#       FSL_BUILD_DIR=$PWD/.gpu; .gpu/fissile run M --backend cuda; python3 -m pytest -q tests/python/test_cli_cuda.py")
#
# The bundle is checked here by running it with only .gpu/lib and the
# CUDA toolkit on the library path (`fissile --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build-gpu
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFSL_BACKEND_CPU=OFF -DFSL_BACKEND_OPENCL=OFF \
  -DFSL_CUDA_CODEGEN=ON > build-gpu/bundle.log
cmake --build build-gpu -j"$(nproc)" --target fissile_cli >> build-gpu/bundle.log
grep -q "CUDA backend and C dialect on" build-gpu/bundle.log ||
  { echo "gpu-bundle: the CUDA backend is off (see build-gpu/bundle.log)" >&2; exit 1; }
rm -rf .gpu
mkdir -p .gpu/lib
cp build-gpu/fissile .gpu/
# every library the binary loads from outside glibc, libstdc++/libgcc and CUDA
ldd .gpu/fissile | awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+)\.so|/usr/local/cuda' |
  while read -r lib; do cp -L "$lib" .gpu/lib/; done
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64" .gpu/fissile --help > /dev/null
echo "gpu-bundle: .gpu/ ($(du -sh .gpu | cut -f1)): $(ls .gpu/lib | tr '\n' ' ')"
