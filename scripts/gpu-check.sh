#!/usr/bin/env bash
# gpu-check.sh — everything a lent GPU machine is for, in one call
# (docs/gpu-backend.md, "Running on a lent GPU"): the machine, a first run
# of the CUDA backend on a real driver (graphs on and off; it also
# calibrates the device once for the later steps), the GPU tests (every
# strategy x graphs on/off against ONNX Runtime: the small models of
# test_cli_cuda.py and every real model carried in .cache/models), then
# bench/gpu.py against PyTorch eager / torch.compile on the models carried.
#
# Here, first:  scripts/gpu-bundle.sh   (.gpu/: the CLI and its libraries)
#               pip download --no-deps onnx2torch==1.5.15 -d .whl
# Then, through the device tool (carry .gpu, .whl and the model files):
#               bash scripts/gpu-check.sh [BENCH_SECONDS] [BENCH_MODELS]
# Logs and results go to $OUT (the device tool's folder; else out/gpu-check).
# Stops after the first contact when that fails: the later steps would only
# repeat its error.
set -u
out=${OUT:-out/gpu-check}
mkdir -p "$out"
bench_s=${1:-240}
bench_models=${2:-yolox_nano,segformer_b0,style_transfer_small,transformer_encoder,ppocr_cls,ppocr_det}
site=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)
nvlibs=$(find "$site/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${nvlibs}${LD_LIBRARY_PATH:-}"
export FSL_BUILD_DIR="$PWD/.gpu" FSL_CACHE_DIR=/tmp/fsl-cache PYTHONUNBUFFERED=1
t0=$SECONDS
step() { echo "== $1 ($((SECONDS - t0)) s)"; }

step machine
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  echo "cpus: $(nproc)"
  python3 -c 'import torch, onnxruntime; print("torch", torch.__version__, "onnxruntime", onnxruntime.__version__)'
  ls /usr/local/cuda/lib64 2>/dev/null | grep -E '^lib(nvrtc|cublasLt)\.so\.[0-9]+$'
  ldd .gpu/fissile | grep -E 'nvrtc|not found'
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site
fi

step "first contact"
ok=1
for g in 1 0; do
  echo "-- FSL_CUDA_GRAPHS=$g"
  FSL_CUDA_GRAPHS=$g timeout 180 .gpu/fissile run .cache/models/ppocr_cls.onnx --shape x=1x3x48x192 --backend cuda --time || ok=0
done > "$out/first.log" 2>&1
cat "$out/first.log"
cp "$FSL_CACHE_DIR"/device-cuda-*.txt "$out/" 2>/dev/null
[ $ok = 1 ] || { step "first contact failed: stopping"; exit 1; }

step tests
# GPU_TESTS: the test files (default: both)
timeout 300 python3 -m pytest -q -p xdist -n 8 -rs ${GPU_TESTS:-tests/python/test_cli_cuda.py tests/python/test_real_models.py} \
  -k cuda > "$out/tests.log" 2>&1
tail -30 "$out/tests.log"

step bench
timeout "$bench_s" python3 bench/gpu.py --no-cases --models "$bench_models" --repeats 20 --warmup 3 \
  --out "$out" > "$out/bench.log" 2>&1
tail -5 "$out/bench.log"
[ -f "$out/gpu.md" ] && grep '^|' "$out/gpu.md"
step done
