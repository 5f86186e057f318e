# The two set-up commands for a fresh Debian machine:
#   make demo   installs what is missing, builds, runs the main example
#   make test   installs what is missing, builds (plus ASan+UBSan and ThreadSanitizer builds), runs every test (C
#               suites in the three builds, the fuzz smoke, then the Python package's pytest suite against the
#               fresh library)
BUILD ?= build
SAN_BUILD ?= build-san
FUZZ_BUILD ?= build-fuzz
TSAN_BUILD ?= build-tsan
FUZZ_SECONDS ?= 60
# The sanitizer runs' share of each suite's random trials and fixed cases (ER_TEST_MULTIPLIER; tests/common/er_test.h):
# they look for memory errors and races on the same code paths the plain build's full count checks the numbers of
# (and the fuzzers search for memory errors on their own); 1 runs them all there too.
SAN_MULTIPLIER ?= 0.25
FUZZ_TARGETS := standard ops report quantize attention chain
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
APT_PACKAGES := gcc make cmake pkg-config libgmp-dev libmpfr-dev libmpc-dev libopenblas-dev check zlib1g-dev binutils python3 python3-pip \
                clang libclang-rt-14-dev
PY_PACKAGES := numpy pytest pytest-xdist ml_dtypes matplotlib wheel setuptools hypothesis ruff torch
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo san tsan test test-fast bench clean fuzz-build fuzz-smoke fuzz pytest-san

all: build

deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing missing packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@$(PYTHON) -c "import numpy, pytest, xdist, ml_dtypes, matplotlib, wheel, setuptools, hypothesis, ruff, torch" 2>/dev/null || { \
	  echo "make: installing missing Python packages: $(PY_PACKAGES)"; \
	  $(PYTHON) -m pip install -q $(PY_PACKAGES) 2>/dev/null || \
	  $(PYTHON) -m pip install -q --break-system-packages $(PY_PACKAGES); }

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/examples/splitk_matmul

# The sanitizer builds compile at -O1 (AddressSanitizer's advice): the suites run in about three quarters of the -O0
# time, every check still in place.
SAN_FLAGS := -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g1 -O1" -DEXACTREF_SANITIZE=ON -DEXACTREF_SIMD_BUILDS=OFF

# The C suites again under AddressSanitizer and UndefinedBehaviorSanitizer (they must be clean).
san: deps
	cmake -S . -B $(SAN_BUILD) $(SAN_FLAGS) -DEXACTREF_BUILD_BENCH=OFF -DEXACTREF_CUDA=OFF
	cmake --build $(SAN_BUILD) -j $(JOBS)

# The C suites under ThreadSanitizer (every op on several threads: tests/api/t-threads.c), but for those in which the
# library starts no thread (label one-thread in tests/CMakeLists.txt): those have no race to find. OpenBLAS runs
# single-threaded there: its own threads are not instrumented, and their writes would read as races.
tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
	  -DEXACTREF_SIMD_BUILDS=OFF -DEXACTREF_TSAN=ON -DEXACTREF_BUILD_BENCH=OFF \
	  -DEXACTREF_BUILD_EXAMPLES=OFF -DEXACTREF_CUDA=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS)

# Each suite's last line is kept in $(BUILD)/suites.txt (tee, with bash's pipefail: a failing suite still stops the
# run) and printed together at the end, one line per suite.
SUMMARY = $(CURDIR)/$(BUILD)/suites.txt
KEEP = bash -o pipefail -c '{ "$$@"; } 2>&1 | tee $(CURDIR)/$(BUILD)/suite.log' _
LAST = { printf '%-24s ' "$(1)"; grep -E "$(2)" $(CURDIR)/$(BUILD)/suite.log | tail -1; } >> $(SUMMARY)

test: build san tsan fuzz-build
	@rm -f $(SUMMARY)
	cd $(BUILD) && $(KEEP) ctest --output-on-failure -j $(JOBS)
	@$(call LAST,C suites,tests passed)
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ER_TEST_MULTIPLIER=$(SAN_MULTIPLIER) \
	  $(KEEP) ctest --output-on-failure -j $(JOBS)
	@$(call LAST,C suites (ASan+UBSan),tests passed)
	cd $(TSAN_BUILD) && OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 ER_TEST_MULTIPLIER=$(SAN_MULTIPLIER) \
	  $(KEEP) ctest --output-on-failure -j $(JOBS) -LE one-thread
	@$(call LAST,C suites (TSan),tests passed)
	$(KEEP) $(MAKE) --no-print-directory fuzz-smoke
	@$(call LAST,fuzz smoke,^fuzz smoke:)
	$(KEEP) $(MAKE) --no-print-directory pytest-san
	@$(call LAST,pytest (boundary; ASan),passed)
	EXACTREF_LIBRARY=$(CURDIR)/$(BUILD)/libexactref.so $(KEEP) $(PYTHON) -m pytest -q -n $(JOBS) bindings/python/tests
	@$(call LAST,pytest,passed)
	@echo; echo "make test: every suite passed"; cat $(SUMMARY)

# The Python boundary's tests against the ASan+UBSan library (Python's allocator off, so that AddressSanitizer sees
# the buffers the package hands to C).
pytest-san: san
	PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0 \
	  LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	  EXACTREF_LIBRARY=$(CURDIR)/$(SAN_BUILD)/libexactref.so $(PYTHON) -m pytest -q -p no:cacheprovider bindings/python/tests/test_boundary.py

# libFuzzer targets (tests/fuzz): built with clang, AddressSanitizer and UndefinedBehaviorSanitizer.
fuzz-build: deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang $(SAN_FLAGS) -DEXACTREF_FUZZ=ON \
	  -DEXACTREF_BUILD_TESTS=OFF -DEXACTREF_BUILD_BENCH=OFF -DEXACTREF_BUILD_EXAMPLES=OFF -DEXACTREF_CUDA=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

# Each target a fixed number of runs from its seed corpus (new inputs go to a temporary folder; JOBS targets side by
# side), and the share of its inputs that reach a call of the code it is for held to the stated minimum (TARGET:RUNS:MIN_PERCENT;
# tests/fuzz/smoke.sh, docs/reliability.md): part of `make test`.
FUZZ_SMOKE := standard:100000:90 ops:15000:50 report:3000:80 quantize:20000:70 attention:5000:90 chain:10000:90

fuzz-smoke: fuzz-build
	@JOBS=$(JOBS) tests/fuzz/smoke.sh $(FUZZ_BUILD) $(FUZZ_SMOKE)

# Long runs: each target for FUZZ_SECONDS seconds; findings are kept in fuzz-findings/ and fail the run.
fuzz: fuzz-build
	@mkdir -p fuzz-findings; fail=0; for t in $(FUZZ_TARGETS); do \
	  tmp=$$(mktemp -d); \
	  ./$(FUZZ_BUILD)/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=1024 -timeout=10 -artifact_prefix=fuzz-findings/$$t- \
	    $$tmp tests/fuzz/corpus/$$t 2>&1 | grep -E "^#[0-9]+ +DONE|Done|ERROR|SUMMARY" || true; \
	  ls fuzz-findings/$$t-* >/dev/null 2>&1 && fail=1; rm -rf $$tmp; \
	done; exit $$fail

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	EXACTREF_LIBRARY=$(CURDIR)/$(BUILD)/libexactref.so $(PYTHON) -m pytest -q bindings/python/tests

bench: build
	./$(BUILD)/bench/bench_matmul
	./$(BUILD)/bench/bench_softmax
	./$(BUILD)/bench/bench_emulate
	EXACTREF_LIBRARY=$(CURDIR)/$(BUILD)/libexactref.so PYTHONPATH=bindings/python $(PYTHON) bench/bench_python.py
	EXACTREF_LIBRARY=$(CURDIR)/$(BUILD)/libexactref.so PYTHONPATH=bindings/python $(PYTHON) bench/bench_orders.py

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
