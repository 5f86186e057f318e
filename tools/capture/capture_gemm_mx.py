"""GEMMs whose output is quantised to MX or NVFP4, for those recipes over a reference (docs/algorithms/quantize.md,
Lemmas Q8 and Q9): a Triton GEMM (fp16 operands, fp32 accumulators from tl.dot on the tensor cores) with an MXFP8
epilogue in the kernel (each block of 32 accumulators: X = 2^(floor(log2 amax) - 8) from amax's exponent bits, q =
(acc / X) saturated and converted to e4m3 by the hardware's cvt), and the same GEMM storing its fp32 accumulators
(kept as cNNNN__out__acc, for the recipes applied on the host), and cuBLAS's fp32 SGEMM of the same fp16 values (TF32
off; kept as acc). Families: normal (N(0, 1 / K) rows), cancel (two columns of A at +-2^10 on rows of B that
nearly cancel: accumulators that move with the order of the adds), ties (small integers: exact accumulators in the
hundreds, many of them on e4m3's midpoints once scaled, and every third row of A zero: all-zero blocks), tiny (fp16
subnormal operands: accumulators near 2^-40). Planted bug: the fused kernel's exponent one higher. Writes
OUT/gemm_mx.npz (each group's A and B once, gNN__in__A/B) and OUT/gemm_mx.txt (id kernel family M N K group).
Run: OUT=/some/dir python3 capture_gemm_mx.py"""
import os

import torch
import triton
import triton.language as tl

from capture_common import new_group, store_case, torch_header, write_case_files
from triton_gemm import gemm_tile

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


@triton.jit
def gemm_mxfp8(A, B, Q, X, M, N, K, BUG: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = gemm_tile(A, B, M, N, K, rm, rn, BM, BN, BK)
    blocks = tl.reshape(acc, (BM, BN // 32, 32))
    amax = tl.max(tl.abs(blocks), axis=2)
    # floor(log2 amax) from the exponent bits (amax normal, or 0: the block's scale is then 2^-127)
    ebits = (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF
    e = tl.where(ebits == 0, -127, ebits - 127 - 8 + BUG)
    e = tl.minimum(tl.maximum(e, -127), 127)
    inv = ((127 - e) << 23).to(tl.float32, bitcast=True)  # 1 / X = 2^-e, a normal fp32 (e <= 119 here)
    qv = tl.reshape(blocks * inv[:, :, None], (BM, BN))
    qv = tl.minimum(tl.maximum(qv, -448.0), 448.0)
    tl.store(Q + rm[:, None] * N + rn[None, :], qv.to(tl.float8e4nv), mask=(rm[:, None] < M) & (rn[None, :] < N))
    rb = tl.program_id(1) * (BN // 32) + tl.arange(0, BN // 32)
    tl.store(X + rm[:, None] * (N // 32) + rb[None, :], (e + 127).to(tl.uint8),
             mask=(rm[:, None] < M) & (rb[None, :] < N // 32))


@triton.jit
def gemm_store(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = gemm_tile(A, B, M, N, K, rm, rn, BM, BN, BK)
    tl.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def inputs(g, family, M, N, K):
    A = torch.randn(M, K, device="cuda", generator=g) / K ** 0.5
    B = torch.randn(K, N, device="cuda", generator=g)
    if family == "ties":  # integers |a| <= 8, |b| <= 8: exact sums, |acc| up to a few hundred
        A = torch.randint(-8, 9, (M, K), device="cuda", generator=g).float()
        B = torch.randint(-8, 9, (K, N), device="cuda", generator=g).float()
        A[::3] = 0
        if K > 64:
            A[:, 64:] = 0  # at most 64 terms: |acc| <= 4096, exact in fp32 and in any order
    if family == "tiny":  # fp16 subnormals (multiples of 2^-24 below 2^-14)
        A = torch.randint(-1023, 1024, (M, K), device="cuda", generator=g).float() * 2.0 ** -24
        B = torch.randint(-1023, 1024, (K, N), device="cuda", generator=g).float() * 2.0 ** -24
    if family == "cancel":  # columns 0 and 1 of A cancel on B's rows 0 and 1: 2^10 (b0 - b1) with b0 = b1 + tiny
        A[:, 0], A[:, 1] = 2.0 ** 10, -2.0 ** 10
        B[1] = B[0] + torch.randn(N, device="cuda", generator=g) * 2.0 ** -9
    return A.half(), B.half()


torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(31)
for family in ("normal", "cancel", "ties", "tiny"):
    for M, N, K in ((64, 128, 256), (48, 96, 1000), (40, 64, 77)):
        A, B = inputs(g, family, M, N, K)
        gid = new_group(arrays, {"A": A, "B": B})
        for bug, kind in ((0, "triton_mxfp8"), (1, "bug_exponent_up")):
            q = torch.empty(M, N, device="cuda", dtype=torch.float8_e4m3fn)
            x = torch.empty(M, N // 32, device="cuda", dtype=torch.uint8)
            gemm_mxfp8[(triton.cdiv(M, 16), N // 32)](A, B, q, x, M, N, K, BUG=bug, BM=16, BN=32, BK=32)
            torch.cuda.synchronize()
            cid = "c%04d" % len(lines)
            store_case(arrays, cid, {}, {"q": q, "scale": x})
            lines.append("%s %s %s %d %d %d %s" % (cid, kind, family, M, N, K, gid))
        acc = torch.empty(M, N, device="cuda")
        gemm_store[(triton.cdiv(M, 16), triton.cdiv(N, 32))](A, B, acc, M, N, K, BM=16, BN=32, BK=32)
        sg = torch.mm(A.float(), B.float())  # cuBLAS SGEMM, TF32 off: fp16 values' products exact in fp32
        torch.cuda.synchronize()
        for kind, c in (("triton_acc", acc), ("cublas_sgemm", sg)):
            cid = "c%04d" % len(lines)
            store_case(arrays, cid, {}, {"acc": c})
            lines.append("%s %s %s %d %d %d %s" % (cid, kind, family, M, N, K, gid))
write_case_files(OUT, "gemm_mx", arrays, lines, torch_header(), compressed=True)
print("captured %d cases" % len(lines))
