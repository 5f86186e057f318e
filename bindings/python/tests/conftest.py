"""pytest setup: test the package in this tree against the library EXACTREF_LIBRARY names (make test sets it to
the fresh build; by default the repository's build/ folder)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..")))
os.environ.setdefault("EXACTREF_LIBRARY", os.path.join(ROOT, "build", "libexactref.so"))


def captures(name):
    """An H200 capture file (tools/capture/): its arrays and its cases, one list of fields a line (the header
    dropped)."""
    import numpy as np
    z = np.load(os.path.join(ROOT, "tests", "data", name + ".npz"))
    with open(os.path.join(ROOT, "tests", "data", name + ".txt")) as f:
        lines = f.read().split("\n")[1:]
    return z, [ln.split() for ln in lines if ln]


def arrays(z, dtype, *keys):
    """The capture's arrays of those keys, bfloat16 ones (stored as uint16 patterns) viewed as ml_dtypes.bfloat16."""
    if dtype == "bfloat16":
        import ml_dtypes
        return [z[k].view(ml_dtypes.bfloat16) for k in keys]
    return [z[k] for k in keys]
