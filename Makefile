# fissile — top-level commands.  The build itself is CMake; this file only
# strings the steps together.
#
#   make setup   Debian packages + .venv (onnx 1.22, onnxruntime, pytest) and the
#                Python package `fissile` installed into it from the current
#                sources (pip install ., incremental in build/python/)
#   make build   release build in build/ (warnings are errors), the Python
#                extension module included (-DFSL_PYTHON=ON: compiled with -Werror,
#                for Debian's /usr/bin/python3, the interpreter of .venv)
#   make test    everything CI runs: unit + conformance (ctest), pytest, then
#                the same again on an ASan/UBSan build, 60 s of fuzzing each
#                for the importer (fuzz_import) and import + fission (fuzz_compile)
#   make test-avx2  the unit tests, the CPU-backend conformance lists and the
#                CPU-backend strategy tests again with the CPU backend
#                targeting AVX2 (FSL_CPU_ISA=avx2: -march=haswell, oneDNN
#                limited to AVX2), so an AVX-512 machine sees what an
#                AVX2-only one would (part of make test)
#   make test-minimal  the library built without optional backends
#                (-DFSL_BACKEND_CPU=OFF -DFSL_BACKEND_OPENCL=OFF): unit tests
#                and reference conformance
#   make test-opencl  the OpenCL backend (PoCL on the CPU) on both data sets
#                under all four strategies against the pass and fallback
#                lists (not part of make test; on 2 cores about 12 min with
#                an empty program cache, under 5 min with a warm one)
#   make demo    fetch a real trained model, inspect it and run it, bench it and
#                write the HTML report (build/report.html)
#   make bench   front-end (import + compile) timings -> bench/results/
#   make rules   regenerate src/rewrite/generated.rules (tools/rulegen.c)
#
# Variables: JOBS (default 2), FUZZ_SECONDS (default 60), PYTEST_ARGS.

SHELL := /bin/bash
JOBS ?= 2
FUZZ_SECONDS ?= 60
PYTEST_ARGS ?=
BUILD := build
MIN_BUILD := build-min
ASAN_BUILD := build-asan
FUZZ_BUILD := build-fuzz
PY := .venv/bin/python
DEBIAN_NODE := /usr/share/libonnx-testdata/data/node
CONF_LIST_DEBIAN := tests/conformance/pass_debian.txt
CONF_LIST_ONNX122 := tests/conformance/pass_onnx122.txt
CONF_FALLBACK_DEBIAN := tests/conformance/fallback_debian.txt
CONF_FALLBACK_ONNX122 := tests/conformance/fallback_onnx122.txt
CONF_FALLBACK_OPENCL_DEBIAN := tests/conformance/fallback_opencl_debian.txt
CONF_FALLBACK_OPENCL_ONNX122 := tests/conformance/fallback_opencl_onnx122.txt
STRATEGIES := unfused opfuse greedy optimal
export FSL_BUILD_DIR := $(CURDIR)/$(BUILD)

.PHONY: all setup build test ctest pytest test-avx2 test-minimal test-opencl asan fuzz demo bench models rules conformance-lists clean

all: build

setup:
	scripts/setup.sh

build:
	cmake -S . -B $(BUILD) -DFSL_WERROR=ON -DFSL_PYTHON=ON -DPython_EXECUTABLE=/usr/bin/python3
	cmake --build $(BUILD) -j$(JOBS)

test: setup build ctest pytest test-avx2 test-minimal asan fuzz
	@echo "make test: all passed"

ctest: build
	cd $(BUILD) && ctest --output-on-failure

models: setup
	$(PY) python/fetch_models.py
	$(PY) python/export_models.py

pytest: setup build models
	$(PY) -m pytest -q tests/python $(PYTEST_ARGS)

# The CPU backend built for AVX2 whatever the machine has (src/backend/cpu/isa.h).
# The CUDA unit tests build their code for CUDA's emulation, not for the CPU
# ISA, so they run once, in ctest (7.5 of this stage's 22 minutes in a slow
# CI run).  The conformance lists run under unfused (every primitive's code
# alone) and optimal (the fused kernels); opfuse and greedy, whose kernels
# lie between, run natively in ctest (270 of this stage's 1155 s in a slow
# CI run, which took 5129 s of its 5400).
test-avx2: setup build models
	cd $(BUILD) && FSL_CPU_ISA=avx2 ctest --output-on-failure -R '^unit\.|\.cpu\.(unfused|optimal)$$' -E '^unit\.test_cuda_'
	FSL_CPU_ISA=avx2 $(PY) -m pytest -q tests/python/test_strategies.py -k cpu $(PYTEST_ARGS)

# The library with no optional backend (-DFSL_BACKEND_CPU=OFF: what a
# machine without oneDNN builds): unit tests and the reference entries.
test-minimal: setup
	cmake -S . -B $(MIN_BUILD) -DFSL_WERROR=ON -DFSL_BACKEND_CPU=OFF -DFSL_CUDA_CODEGEN=OFF -DFSL_BACKEND_OPENCL=OFF
	cmake --build $(MIN_BUILD) -j$(JOBS)
	cd $(MIN_BUILD) && ctest --output-on-failure

# The OpenCL backend (PoCL on this machine's CPU) under every strategy on
# both data sets; make test runs Debian's set under unfused and optimal only
# (ctest entries *.opencl.*).  Programs are cached in the build's kernel cache.
test-opencl: setup build
	set -eo pipefail; onnx_node=$$($(PY) -c 'import onnx,os;print(os.path.dirname(onnx.__file__))')/backend/test/data/node; \
	for s in $(STRATEGIES); do \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend opencl \
	    --strategy $$s --list $(CONF_LIST_DEBIAN) --fallback-list $(CONF_FALLBACK_OPENCL_DEBIAN) $(DEBIAN_NODE) | tail -4; \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend opencl \
	    --strategy $$s --list $(CONF_LIST_ONNX122) --fallback-list $(CONF_FALLBACK_OPENCL_ONNX122) $$onnx_node | tail -4; \
	done

# Sanitizers (ASan + UBSan + leaks): unit tests, every conformance case of
# both data sets (a crash, a timeout or a sanitizer report in any case fails,
# listed or not), Debian's cases once more on the CPU backend (optimal
# strategy; about 2.5 min), and all Python tests against the sanitizer build
# (the CLI's; test_python_api.py runs the installed package, which is not
# sanitized: it runs again there, as in `make pytest`).
asan: setup models
	cmake -S . -B $(ASAN_BUILD) -DFSL_SANITIZE=ON -DFSL_WERROR=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp ctest --output-on-failure -R '^unit\.'
	set -o pipefail; ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
	  $(ASAN_BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --timeout 120 --fail-on-crash \
	  --list $(CONF_LIST_DEBIAN) $(DEBIAN_NODE) | grep -v '^PASS '
	set -o pipefail; ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
	  $(ASAN_BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --timeout 120 --fail-on-crash \
	  --list $(CONF_LIST_ONNX122) $$($(PY) -c 'import onnx,os;print(os.path.dirname(onnx.__file__))')/backend/test/data/node \
	  | grep -v '^PASS '
	set -o pipefail; ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
	  FSL_CACHE_DIR=$(CURDIR)/$(ASAN_BUILD)/kernel-cache \
	  $(ASAN_BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --timeout 120 --fail-on-crash \
	  --backend cpu --strategy optimal --list $(CONF_LIST_DEBIAN) $(DEBIAN_NODE) | grep -v '^PASS '
	ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp FSL_BUILD_DIR=$(CURDIR)/$(ASAN_BUILD) $(PY) -m pytest -q tests/python \
	  --ignore=tests/python/test_strategies.py $(PYTEST_ARGS)

# libFuzzer on the importer, seeded with a few test models and compiled
# model files (.fsl: fuzz_compile loads them through fsl_model_load_bytes).
fuzz: setup build
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DFSL_FUZZ=ON -DFSL_SANITIZE=ON \
	  -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_import fuzz_compile
	rm -rf $(FUZZ_BUILD)/corpus && mkdir -p $(FUZZ_BUILD)/corpus
	for t in abs add conv_with_strides_padding gemm_default_no_bias reshape_extended_dims \
	         softmax_axis_1 transpose_default maxpool_2d_pads matmul_4d gather_0 \
	         lstm_defaults batchnorm_example slice; do \
	  f=$(DEBIAN_NODE)/test_$$t/model.onnx; [ -f $$f ] && cp $$f $(FUZZ_BUILD)/corpus/$$t.onnx || true; \
	done
	for b in plan-ref cpu; do \
	  $(BUILD)/fissile compile $(DEBIAN_NODE)/test_softmax_axis_1/model.onnx --backend $$b \
	    -o $(FUZZ_BUILD)/corpus/softmax_$$b.fsl 2>/dev/null || exit 1; \
	done
	cd $(FUZZ_BUILD) && for t in fuzz_import fuzz_compile; do \
	  ./$$t -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 \
	    -max_len=65536 -timeout=10 -print_final_stats=1 corpus || exit 1; \
	done

demo: setup build
	$(PY) python/fetch_models.py --only minilm_l3
	$(PY) python/demo.py

bench: setup build
	$(PY) python/fetch_models.py
	$(PY) python/export_models.py --bench
	$(PY) bench/frontend.py
	$(PY) bench/bench.py --threads $(JOBS)

# Regenerate the checked-in expected-pass lists from the current build, and
# the CPU backend's expected-fallback lists (the union over the strategies
# of the passing cases that run a kernel through the reference fallback).
# the TASO-style generated rewrite rules (checked in; docs/rewrite.md)
rules: build
	$(BUILD)/fissile_rulegen src/rewrite/generated.rules.tmp && mv src/rewrite/generated.rules.tmp src/rewrite/generated.rules
	$(MAKE) build

conformance-lists: build
	$(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --write-list $(CONF_LIST_DEBIAN) $(DEBIAN_NODE) | tail -3
	$(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --write-list $(CONF_LIST_ONNX122) \
	  $$($(PY) -c 'import onnx,os;print(os.path.dirname(onnx.__file__))')/backend/test/data/node | tail -3
	set -e; tmp=$$(mktemp -d); onnx_node=$$($(PY) -c 'import onnx,os;print(os.path.dirname(onnx.__file__))')/backend/test/data/node; \
	for s in $(STRATEGIES); do \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend cpu \
	    --strategy $$s --write-fallback-list $$tmp/debian.$$s $(DEBIAN_NODE) | tail -2; \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend cpu \
	    --strategy $$s --write-fallback-list $$tmp/onnx122.$$s $$onnx_node | tail -2; \
	done; \
	sort -u $$tmp/debian.* > $(CONF_FALLBACK_DEBIAN); sort -u $$tmp/onnx122.* > $(CONF_FALLBACK_ONNX122); rm -rf $$tmp
	set -e; tmp=$$(mktemp -d); onnx_node=$$($(PY) -c 'import onnx,os;print(os.path.dirname(onnx.__file__))')/backend/test/data/node; \
	for s in $(STRATEGIES); do \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend opencl \
	    --strategy $$s --write-fallback-list $$tmp/debian.$$s $(DEBIAN_NODE) | tail -2; \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend opencl \
	    --strategy $$s --write-fallback-list $$tmp/onnx122.$$s $$onnx_node | tail -2; \
	done; \
	sort -u $$tmp/debian.* > $(CONF_FALLBACK_OPENCL_DEBIAN); sort -u $$tmp/onnx122.* > $(CONF_FALLBACK_OPENCL_ONNX122); rm -rf $$tmp

clean:
	rm -rf $(BUILD) $(MIN_BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
