#!/bin/sh
# t-pip.sh: `pip install ./bindings/python` into a fresh virtual environment ships libexactref inside the package:
# `import exactref` works there with no environment variable, from the installed copy, and checks a matmul; the
# `exactref` command runs, and the pytest plugin is registered (pytest11) and pytest loads it.
# Usage: t-pip.sh SOURCE_DIR PYTHON
set -eu
src=$1
py=${2:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the system's numpy and setuptools stay visible (no download); exactref itself is not installed there
"$py" -m venv --system-site-packages "$work/venv"
# no variable of the caller's points elsewhere: PYTHONPATH would import another copy of the package first
unset EXACTREF_LIBRARY PYTHONPATH || true
# the package builds the library from the repository it sits in: a copy of the tree without build outputs
mkdir -p "$work/repo"
(cd "$src" && tar --exclude=./build --exclude='./build-*' --exclude=./.git --exclude=./tests/data \
   --exclude=./bindings/python/build --exclude='*.egg-info' -cf - .) | tar -xf - -C "$work/repo"
# the CUDA helpers and the AVX2 and AVX-512 copies of the row loops left out, and the library compiled at -O0
# (EXACTREF_CMAKE_ARGS): none of it is the packaging's to test, the ctest runs that hold this test have built and
# checked the optimised library already, and the copies at -O3 were two thirds of the package's compile time (96 s of
# CPU against 32 s without them); -O0 takes this test from 46.5 s to 16.7 s of CPU
EXACTREF_CMAKE_ARGS="-DEXACTREF_CUDA=OFF -DEXACTREF_SIMD_BUILDS=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0" "$work/venv/bin/python" -m pip install -q --no-build-isolation --no-deps \
  "$work/repo/bindings/python" > "$work/pip.log" 2>&1 || {
  echo "pip install failed:"; tail -30 "$work/pip.log"; exit 1; }
cd "$work"
"$work/venv/bin/python" - <<'EOP'
import os, numpy as np
import exactref as er
from exactref import _ffi as _lib
site = os.path.dirname(os.path.dirname(er.__file__))
assert "venv" in er.__file__ and _lib.path.startswith(os.path.dirname(er.__file__)), (er.__file__, _lib.path)
A = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
B = np.arange(8, dtype=np.float32).reshape(4, 2) - 3
er.matmul(A, B).covers(A @ B).assert_all()
assert not er.cuda_available(), "EXACTREF_CMAKE_ARGS=-DEXACTREF_CUDA=OFF did not reach the package's CMake build"
print("imported exactref %s from %s" % (er.version(), _lib.path))
from importlib.metadata import entry_points
eps = entry_points()
eps = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
assert [e.value for e in eps if e.name == "exactref"] == ["exactref.pytest_plugin"], list(eps)
EOP
# the command is installed
"$work/venv/bin/exactref" --version | grep -q "^exactref " || { echo "the exactref command did not run"; exit 1; }
# the installed plugin loads by itself: its options are in pytest's help
"$work/venv/bin/python" -m pytest --help | grep -q -- "--exactref-records" || { echo "pytest did not load exactref's plugin"; exit 1; }
echo "pip: 1 passed, 0 failed"
