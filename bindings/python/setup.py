"""Builds libexactref with CMake from the repository this package sits in and ships it inside the package, so that
`pip install ./bindings/python` (or a wheel built from it) imports with no environment variable.

EXACTREF_LIBRARY, when set at build time, names an already built library to ship instead; EXACTREF_CMAKE_ARGS adds
arguments to the CMake configuration, split as a shell would ("-DEXACTREF_CUDA=OFF -DCMAKE_CUDA_ARCHITECTURES=90")."""
import glob
import os
import shlex
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "exactref")
        os.makedirs(dest, exist_ok=True)
        lib = os.environ.get("EXACTREF_LIBRARY")
        if not lib:
            if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
                raise RuntimeError("exactref: no CMakeLists.txt at %s to build libexactref from; set EXACTREF_LIBRARY "
                                   "to a built libexactref.so" % ROOT)
            build = os.path.join(os.path.abspath(self.build_lib), "..", "exactref-cmake")
            extra = shlex.split(os.environ.get("EXACTREF_CMAKE_ARGS", ""))
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DEXACTREF_BUILD_TESTS=OFF", "-DEXACTREF_BUILD_EXAMPLES=OFF",
                                   "-DEXACTREF_BUILD_BENCH=OFF"] + extra)
            subprocess.check_call(["cmake", "--build", build, "--target", "exactref", "-j", str(os.cpu_count() or 2)])
            found = sorted(glob.glob(os.path.join(build, "libexactref.so.*")))
            if not found:
                raise RuntimeError("exactref: the CMake build made no libexactref.so.* in %s" % build)
            lib = found[0]
        # the loader's name for it (its SONAME), a real file, beside the package's modules
        shutil.copyfile(os.path.realpath(lib), os.path.join(dest, "libexactref.so.0"))


setup(cmdclass={"build_py": BuildWithLibrary})
