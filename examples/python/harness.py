"""A kernel checked across shapes and input families with exactref.testing.check: a matmul that drops the last
product of every row when K is above 1024 (a masked tail gone wrong) passes one random 1024 x 1024 test and fails
the fast tier; the minimal failing case comes with the call that re-runs it. The JSON record goes to a temporary
directory here. Run: PYTHONPATH=bindings/python python3 examples/python/harness.py"""
import tempfile

import numpy as np

import exactref as er


def my_matmul(A, B):
    """fp32 accumulation of fp16 products, the last K element dropped when K > 1024 (the bug)."""
    a, b = A.astype(np.float32), B.astype(np.float32)
    if a.shape[1] > 1024:
        a, b = a[:, :-1], b[:-1, :]
    return a @ b


def main():
    A = er.testing.family("normal", (1024, 1024), "float16", seed=1)
    B = er.testing.family("normal", (1024, 1024), "float16", seed=2)
    print("one 1024 x 1024 test:", "pass" if er.matmul(A, B).covers(my_matmul(A, B)).all() else "FAIL")
    record = er.testing.check(my_matmul, "matmul", dtypes=("float16",), families=("normal", "cancellation"),
                              runs_dir=tempfile.mkdtemp())
    print(record)
    print("re-run:", "pass" if er.testing.reproduce("my_matmul", shape=tuple(record.minimal["shape"]), dtype="float16",
                                                   family=record.minimal["family"], seed=record.minimal["seed"],
                                                   layout=record.minimal["layout"]).all() else "FAIL")


if __name__ == "__main__":   # the reproduce line loads this file for my_matmul without running the harness
    main()
