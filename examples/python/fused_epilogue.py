"""A fused GEMM epilogue checked as a chain: out = fp16(relu(A @ B + bias)) with the accumulator, the bias and relu
in fp32 (as a Triton or CUTLASS kernel computes it), then a version that adds the bias twice. Prints both reports.
Run: PYTHONPATH=bindings/python python3 examples/python/fused_epilogue.py"""
import numpy as np

import exactref as er

rng = np.random.default_rng(2026)
A = rng.standard_normal((64, 256)).astype(np.float16)
B = rng.standard_normal((256, 48)).astype(np.float16)
bias = rng.standard_normal(48).astype(np.float16)


def my_kernel(A, B, bias, bug=False):
    """The kernel under test: the fp32 accumulator of a loop over k (each product of fp16 values exact in fp32),
    the bias and relu in fp32, one store in fp16."""
    a, b = A.astype(np.float32), B.astype(np.float32)
    acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in range(A.shape[1]):
        acc += a[:, k:k + 1] * b[k:k + 1, :]
    acc = acc + bias.astype(np.float32)
    if bug:
        acc = acc + bias.astype(np.float32)
    return np.maximum(acc, np.float32(0)).astype(np.float16)


ref = er.matmul(A, B).add(bias).relu().cast("float16")
print(ref.covers(my_kernel(A, B, bias), standard="any_order"))
print(ref.covers(my_kernel(A, B, bias, bug=True), standard="any_order"))
