# fissile — top-level commands.  The build itself is CMake; this file only
# strings the steps together.  docs/testing.md says which target a change
# calls for.
#
#   make setup      Debian packages + .venv (onnx 1.22, onnxruntime, pytest) and the
#                   Python package `fissile` installed into it from the current
#                   sources (pip install ., incremental in build/python/)
#   make build      release build in build/ (warnings are errors), the Python
#                   extension module included (-DFSL_PYTHON=ON: compiled with -Werror,
#                   for Debian's /usr/bin/python3, the interpreter of .venv)
#   make test       what CI runs (.ci/run), within 30 min on 2 cores from a clean
#                   clone; nothing in it runs twice; prints each stage's time:
#                     setup, build, models, unit (ctest -L unit), unit-avx2 (the
#                     ISA-dependent unit tests, ctest -L isa, again with
#                     FSL_CPU_ISA=avx2 where the CPU has AVX-512), conformance
#                     (ctest -L ci: reference and cpu/optimal on both data sets,
#                     opencl/optimal on Debian's), pytest (-m "not slow"), one
#                     clang ASan+UBSan build with libFuzzer instrumentation
#                     (san-build), its unit tests and a conformance sample
#                     (sanitize), FUZZ_SECONDS (20) of each fuzzer (fuzz)
#   make test-full  everything make test leaves out: every strategy x data set x
#                   backend (ctest -L full), the AVX2 conformance and strategy
#                   tests, pytest -m slow, every conformance case and pytest
#                   under the sanitizers, the minimal build, FUZZ_SECONDS_FULL
#                   (300) of each fuzzer
#   make ctest / pytest / test-opencl / test-avx2 / test-minimal / asan / fuzz
#                   one part alone (each runs setup and build first)
#   make demo       fetch a real trained model, inspect it and run it, bench it and
#                   write the HTML report (build/report.html)
#   make bench      front-end (import + compile) timings -> bench/results/
#   make rules      regenerate src/rewrite/generated.rules (tools/rulegen.c)
#
# Variables: JOBS (default 2), FUZZ_SECONDS (20), FUZZ_SECONDS_FULL (300),
# PYTEST_ARGS.

SHELL := /bin/bash
JOBS ?= 2
FUZZ_SECONDS ?= 20
FUZZ_SECONDS_FULL ?= 300
PYTEST_ARGS ?=
BUILD := build
MIN_BUILD := build-min
SAN_BUILD := build-san
PY := .venv/bin/python
DEBIAN_NODE := /usr/share/libonnx-testdata/data/node
ONNX_NODE = $$($(PY) -c 'import onnx,os;print(os.path.dirname(onnx.__file__))')/backend/test/data/node
CONF_LIST_DEBIAN := tests/conformance/pass_debian.txt
CONF_LIST_ONNX122 := tests/conformance/pass_onnx122.txt
CONF_FALLBACK_DEBIAN := tests/conformance/fallback_debian.txt
CONF_FALLBACK_ONNX122 := tests/conformance/fallback_onnx122.txt
CONF_FALLBACK_OPENCL_DEBIAN := tests/conformance/fallback_opencl_debian.txt
CONF_FALLBACK_OPENCL_ONNX122 := tests/conformance/fallback_opencl_onnx122.txt
STRATEGIES := unfused opfuse greedy optimal
# The sanitizer build's environment: leaks checked, known library leaks suppressed.
SAN_ENV := ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
           UBSAN_OPTIONS=print_stacktrace=1 FSL_CACHE_DIR=$(CURDIR)/$(SAN_BUILD)/kernel-cache
SAN_CONFORMANCE := $(SAN_BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --timeout 180 --fail-on-crash
# The conformance runs under the sanitizers, one recipe for both tiers:
# Debian's and onnx 1.22's cases on the reference interpreter, Debian's on
# cpu/optimal; $(1), $(2), $(3): each run's --sample option (empty: every case).
define san-conformance
	set -o pipefail; $(SAN_ENV) $(SAN_CONFORMANCE) $(1) --list $(CONF_LIST_DEBIAN) $(DEBIAN_NODE) | grep -v '^PASS '
	set -o pipefail; $(SAN_ENV) $(SAN_CONFORMANCE) $(2) --list $(CONF_LIST_ONNX122) $(ONNX_NODE) | grep -v '^PASS '
	set -o pipefail; $(SAN_ENV) $(SAN_CONFORMANCE) $(3) --backend cpu --strategy optimal \
	  --list $(CONF_LIST_DEBIAN) $(DEBIAN_NODE) | grep -v '^PASS '
endef
# Does this CPU have AVX-512?  Then the AVX2 target is a second ISA to test.
HAS_AVX512 := $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo 1)
export FSL_BUILD_DIR := $(CURDIR)/$(BUILD)

TEST_STAGES := setup build models unit unit-avx2 conformance pytest san-build sanitize fuzz
FULL_STAGES := setup build models conformance-full avx2-full pytest-slow san-build sanitize-full minimal fuzz-full

.PHONY: all setup build models test test-full ctest pytest test-avx2 test-minimal test-opencl asan fuzz demo \
        bench rules conformance-lists clean $(addprefix stage-,$(TEST_STAGES) $(FULL_STAGES))

all: build

setup:
	scripts/setup.sh

build:
	cmake -S . -B $(BUILD) -DFSL_WERROR=ON -DFSL_PYTHON=ON -DPython_EXECUTABLE=/usr/bin/python3
	cmake --build $(BUILD) -j$(JOBS)

models: setup
	$(MAKE) --no-print-directory stage-models

# ---- the two tiers (scripts/stages.sh times each stage and prints a table) ----
test:
	@bash scripts/stages.sh test $(TEST_STAGES)

test-full:
	@bash scripts/stages.sh test-full $(FULL_STAGES)

# ---- stages: each assumes the stages before it in its tier have run ----
stage-setup:
	scripts/setup.sh

stage-build: build

stage-models:
	$(PY) python/fetch_models.py
	$(PY) python/export_models.py

# Every unit test once, natively.
stage-unit:
	cd $(BUILD) && ctest --output-on-failure -L '^unit$$'

# The unit tests whose code depends on the CPU ISA (label isa: they run
# generated C or oneDNN) again for AVX2 (src/backend/cpu/isa.h): what an
# AVX2-only machine runs.  On a machine without AVX-512 the native run
# already was that, so nothing runs twice.
stage-unit-avx2:
ifeq ($(HAS_AVX512),1)
	cd $(BUILD) && FSL_CPU_ISA=avx2 ctest --output-on-failure -L '^isa$$'
else
	@echo "unit-avx2: this CPU has no AVX-512; stage unit already ran the AVX2 code"
endif

# Reference and cpu/optimal on both data sets, opencl/optimal on Debian's,
# the conformance runner's self-tests (ctest label ci).
stage-conformance:
	cd $(BUILD) && ctest --output-on-failure -L '^ci$$'

stage-pytest:
	$(PY) -m pytest -q -m "not slow" tests/python $(PYTEST_ARGS)

# One clang build with ASan + UBSan (leaks checked) and libFuzzer's
# coverage instrumentation: the sanitizer stages and the fuzzers share it.
stage-san-build:
	CC=clang cmake -S . -B $(SAN_BUILD) -DFSL_FUZZ=ON -DFSL_SANITIZE=ON -DFSL_WERROR=ON \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(SAN_BUILD) -j$(JOBS)

# Under the sanitizers: every unit test but the two whose time goes to
# NVRTC and PoCL compiling generated code (uninstrumented; 5 of the unit
# stage's 7.5 minutes: in sanitize-full), and a fixed sample (every 8th
# case) of each data set on the reference interpreter and of Debian's on
# cpu/optimal; a crash, a timeout or a sanitizer report in any sampled
# case fails, listed or not.
SAN_UNIT_HEAVY := '^unit\.test_(cuda_codegen|opencl)$$'
stage-sanitize:
	cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -L '^unit$$' -E $(SAN_UNIT_HEAVY)
	$(call san-conformance,--sample 0/8,--sample 1/8,--sample 2/8)

stage-fuzz:
	scripts/fuzz.sh $(SAN_BUILD) $(BUILD) $(FUZZ_SECONDS)

# ---- test-full's stages ----
# Every other strategy x data set x backend: cpu unfused/opfuse/greedy on
# both data sets, opencl on both (ctest label full).
stage-conformance-full:
	cd $(BUILD) && ctest --output-on-failure -L '^full$$'

# The CPU-backend conformance (unfused and optimal: every primitive's code
# alone, and the fused kernels) and strategy tests built for AVX2.
stage-avx2-full:
	cd $(BUILD) && FSL_CPU_ISA=avx2 ctest --output-on-failure -R '\.cpu\.(unfused|optimal)$$'
	FSL_CPU_ISA=avx2 $(PY) -m pytest -q tests/python/test_strategies.py -k cpu $(PYTEST_ARGS)

stage-pytest-slow:
	$(PY) -m pytest -q -m slow tests/python $(PYTEST_ARGS)

# Every conformance case of both data sets under the sanitizers, Debian's on
# cpu/optimal, and the Python tests against the sanitized CLI
# (test_python_api.py runs the installed package, which is not sanitized).
stage-sanitize-full:
	cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -L '^unit$$'
	$(call san-conformance,,,)
	$(SAN_ENV) FSL_BUILD_DIR=$(CURDIR)/$(SAN_BUILD) $(PY) -m pytest -q tests/python \
	  --ignore=tests/python/test_strategies.py --ignore=tests/python/test_python_api.py $(PYTEST_ARGS)

# The library with no optional backend (-DFSL_BACKEND_CPU=OFF: what a
# machine without oneDNN builds): unit tests and the reference entries.
stage-minimal:
	cmake -S . -B $(MIN_BUILD) -DFSL_WERROR=ON -DFSL_BACKEND_CPU=OFF -DFSL_CUDA_CODEGEN=OFF -DFSL_BACKEND_OPENCL=OFF
	cmake --build $(MIN_BUILD) -j$(JOBS)
	cd $(MIN_BUILD) && ctest --output-on-failure -L '^(unit|ci)$$'

stage-fuzz-full:
	scripts/fuzz.sh $(SAN_BUILD) $(BUILD) $(FUZZ_SECONDS_FULL)

# ---- one part alone ----
ctest: setup build
	cd $(BUILD) && ctest --output-on-failure

pytest: setup build models
	$(MAKE) --no-print-directory stage-pytest

test-avx2: setup build models
	$(MAKE) --no-print-directory stage-unit-avx2 stage-avx2-full

test-minimal: setup
	$(MAKE) --no-print-directory stage-minimal

test-opencl: setup build
	cd $(BUILD) && ctest --output-on-failure -R '\.opencl\.'

asan: setup build models
	$(MAKE) --no-print-directory stage-san-build stage-sanitize-full

fuzz: setup build
	$(MAKE) --no-print-directory stage-san-build stage-fuzz

demo: setup build
	$(PY) python/fetch_models.py --only minilm_l3
	$(PY) python/demo.py

bench: setup build
	$(PY) python/fetch_models.py
	$(PY) python/export_models.py --bench
	$(PY) bench/frontend.py
	$(PY) bench/bench.py --threads $(JOBS)

# The TASO-style generated rewrite rules (checked in; docs/rewrite.md).
rules: build
	$(BUILD)/fissile_rulegen src/rewrite/generated.rules.tmp && mv src/rewrite/generated.rules.tmp src/rewrite/generated.rules
	$(MAKE) build

# Regenerate the checked-in expected-pass lists from the current build, and
# the CPU and OpenCL backends' expected-fallback lists (the union over the
# strategies of the passing cases that run a kernel through the reference
# fallback).
conformance-lists: build
	$(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --write-list $(CONF_LIST_DEBIAN) $(DEBIAN_NODE) | tail -3
	$(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --write-list $(CONF_LIST_ONNX122) $(ONNX_NODE) | tail -3
	set -e; tmp=$$(mktemp -d); onnx_node=$(ONNX_NODE); \
	for s in $(STRATEGIES); do \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend cpu \
	    --strategy $$s --write-fallback-list $$tmp/debian.$$s $(DEBIAN_NODE) | tail -2; \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend cpu \
	    --strategy $$s --write-fallback-list $$tmp/onnx122.$$s $$onnx_node | tail -2; \
	done; \
	sort -u $$tmp/debian.* > $(CONF_FALLBACK_DEBIAN); sort -u $$tmp/onnx122.* > $(CONF_FALLBACK_ONNX122); rm -rf $$tmp
	set -e; tmp=$$(mktemp -d); onnx_node=$(ONNX_NODE); \
	for s in $(STRATEGIES); do \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend opencl \
	    --strategy $$s --write-fallback-list $$tmp/debian.$$s $(DEBIAN_NODE) | tail -2; \
	  FSL_CACHE_DIR=$(CURDIR)/$(BUILD)/kernel-cache $(BUILD)/tests/conformance/fsl_conformance -j $(JOBS) --backend opencl \
	    --strategy $$s --write-fallback-list $$tmp/onnx122.$$s $$onnx_node | tail -2; \
	done; \
	sort -u $$tmp/debian.* > $(CONF_FALLBACK_OPENCL_DEBIAN); sort -u $$tmp/onnx122.* > $(CONF_FALLBACK_OPENCL_ONNX122); rm -rf $$tmp

clean:
	rm -rf $(BUILD) $(MIN_BUILD) $(SAN_BUILD)
