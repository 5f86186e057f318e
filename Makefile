# The two set-up commands for a fresh Debian machine:
#   make demo   installs what is missing, builds, runs the main example
#   make test   installs what is missing, builds (plus an ASan+UBSan build), runs every test (C suites, then
#               the Python package's pytest suite against the fresh library)
BUILD ?= build
SAN_BUILD ?= build-san
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
APT_PACKAGES := gcc make cmake pkg-config libgmp-dev libmpfr-dev libmpc-dev libopenblas-dev check binutils python3 python3-pip
PY_PACKAGES := numpy pytest ml_dtypes wheel setuptools
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo san test test-fast bench clean

all: build

deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing missing packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@$(PYTHON) -c "import numpy, pytest, ml_dtypes, wheel, setuptools" 2>/dev/null || { \
	  echo "make: installing missing Python packages: $(PY_PACKAGES)"; \
	  $(PYTHON) -m pip install -q $(PY_PACKAGES) 2>/dev/null || \
	  $(PYTHON) -m pip install -q --break-system-packages $(PY_PACKAGES); }

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/examples/splitk_matmul

# The C suites again under AddressSanitizer and UndefinedBehaviorSanitizer (they must be clean).
san: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DEXACTREF_SANITIZE=ON -DEXACTREF_BUILD_BENCH=OFF -DEXACTREF_CUDA=OFF
	cmake --build $(SAN_BUILD) -j $(JOBS)

test: build san
	cd $(BUILD) && ctest --output-on-failure
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure
	EXACTREF_LIBRARY=$(CURDIR)/$(BUILD)/libexactref.so $(PYTHON) -m pytest -q bindings/python/tests

test-fast: build
	cd $(BUILD) && ctest --output-on-failure
	EXACTREF_LIBRARY=$(CURDIR)/$(BUILD)/libexactref.so $(PYTHON) -m pytest -q bindings/python/tests

bench: build
	./$(BUILD)/bench/bench_matmul
	./$(BUILD)/bench/bench_softmax
	./$(BUILD)/bench/bench_emulate
	EXACTREF_LIBRARY=$(CURDIR)/$(BUILD)/libexactref.so PYTHONPATH=bindings/python $(PYTHON) bench/bench_python.py
	EXACTREF_LIBRARY=$(CURDIR)/$(BUILD)/libexactref.so PYTHONPATH=bindings/python $(PYTHON) bench/bench_orders.py

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
