"""What the epilogue captures share (capture_chains.py, capture_activations.py, capture_act_forms.py,
capture_fused_forms.py): the GEMM tile, the fp32 accumulator of C[rm, rn] = A[rm, :] B[:, rn] over K in blocks of
BK, masked at the edges (tl.dot on the tensor cores), and the inputs they draw."""
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


def gemm_bias_inputs(g, dt, M, N, K, scale):
    """GEMM inputs drawn from the CUDA generator g, in this order: A (M x K, N(0, scale^2 / K)), B (K x N, N(0, 1)) and
    a bias of N (N(0, 4)), each rounded to dt."""
    import torch
    A = (torch.randn(M, K, device="cuda", generator=g) * scale / K ** 0.5).to(dt)
    B = torch.randn(K, N, device="cuda", generator=g).to(dt)
    bias = (torch.randn(N, device="cuda", generator=g) * 2).to(dt)
    return A, B, bias
