#!/usr/bin/env bash
# setup.sh — installs what fissile needs to build and test, idempotently.
#
#   1. Debian packages (only when one is missing; apt-get update first).
#   2. .venv: a virtual environment from Debian's /usr/bin/python3 with
#      --system-site-packages (so Debian's torch/torchvision/numpy are
#      visible), plus onnx 1.22, onnxruntime, openvino and pytest from PyPI.
#   3. The Python package `fissile` (python/fissile, pyproject.toml) into
#      .venv: `pip install .` without build isolation (scikit-build-core
#      comes from step 2), building libfissile and the extension with the
#      project's CMake incrementally in build/python/<wheel tag>; about 2 s
#      when nothing changed, so every `make` target that runs setup tests
#      the current sources.  FSL_SETUP_PACKAGE=0 skips it.
#   4. (optional, FSL_SETUP_MODELS=1) the real models in .cache/models.
#
# Running it again when everything is present takes about 3 seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(build-essential cmake clang libclang-rt-14-dev protobuf-c-compiler
          libprotobuf-c-dev libonnx-dev libonnx-testdata libcmocka-dev
          python3-venv python3-torch python3-torchvision python3-numpy
          pkg-config coinor-libcbc-dev libdnnl-dev libsqlite3-dev libcjson-dev
          python3-dev ninja-build pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers clinfo
          graphviz)
# graphviz: `dot` renders the plan graph of `fissile report` (optional at run
# time; installed so that tests/python/test_report.py checks it).
# numpy<2: Debian's torch 1.13 is built against NumPy 1.x.
# scikit-build-core: the build backend of the fissile package (pyproject.toml).
# onnxconverter-common: the float16 converter users run (tests/python/test_variants.py).
# openvino: the second CPU peer of bench/bench.py (tests/python/test_bench.py).
PIP_PKGS=("onnx==1.22.*" "onnxruntime" "pytest" "numpy<2" "scikit-build-core>=0.10" "onnxconverter-common"
          "openvino")

missing=()
for p in "${APT_PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

VENV=.venv
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
  echo "setup: creating $VENV"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi

# Are the pip packages there (right onnx version)?  Checking is much faster
# than asking pip.
if ! "$PY" - <<'EOF' 2>/dev/null
import onnx, onnxruntime, pytest, numpy, torch, scikit_build_core, onnxconverter_common, openvino  # noqa: F401
assert onnx.__version__.startswith("1.22."), onnx.__version__
assert numpy.__version__.startswith("1."), numpy.__version__
EOF
then
  echo "setup: installing Python packages into $VENV: ${PIP_PKGS[*]}"
  "$PY" -m pip install -q --disable-pip-version-check "${PIP_PKGS[@]}"
  "$PY" -c 'import onnx, onnxruntime, numpy, torch; import openvino; print("setup: onnx", onnx.__version__, "onnxruntime", onnxruntime.__version__, "openvino", openvino.__version__, "numpy", numpy.__version__, "torch", torch.__version__)'
fi

if [ "${FSL_SETUP_PACKAGE:-1}" = 1 ]; then
  # --no-deps: numpy is already there (Debian's, pinned <2 above)
  "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps . \
    || { echo "setup: building the fissile Python package failed (pip install . above)" >&2; exit 1; }
fi

if [ "${FSL_SETUP_MODELS:-0}" = 1 ]; then
  "$PY" python/fetch_models.py
fi
echo "setup: ok"
