"""The GEMM tile the epilogue captures share (capture_chains.py, capture_activations.py): the fp32 accumulator of
C[rm, rn] = A[rm, :] B[:, rn] over K in blocks of BK, masked at the edges (tl.dot on the tensor cores)."""
import triton
import triton.language as tl


@triton.jit
def gemm_tile(A, B, M, N, K, rm, rn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(B + (k0 + rk)[:, None] * N + rn[None, :], mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    return acc
