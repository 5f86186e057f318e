"""A GEMM whose epilogue quantises to fp8 per row, for quantize over a reference (docs/algorithms/quantize.md): a
Triton kernel (the row's accumulators in one tile, amax = tl.max(tl.abs(acc)), scale = 448.0 / amax, q =
(acc * scale).to(tl.float8e4nv)), and torch unfused (torch.mm in fp16, then the per-row recipe on the stored fp16
product, kept as cNNNN__in__h); planted bugs: the scale inverted, q from the fp16-rounded product where the fused
kernel's fp32 accumulator is claimed. Writes OUT/gemm_quant.npz (each group's A and B once, gNN__in__A/B; each
case's q, amax, scale) and OUT/gemm_quant.txt (id kernel M N K group). Run: OUT=/some/dir python3 capture_gemm_quant.py"""
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
def gemm_quant(A, B, Q, AMAX, SCALE, M, N, K, INV: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    acc = gemm_tile(A, B, M, N, K, rm, rn, BM, BN, BK)
    amax = tl.max(tl.abs(acc), axis=1)
    scale = amax / 448.0 if INV else 448.0 / amax
    tl.store(AMAX + rm, amax, mask=rm < M)
    tl.store(SCALE + rm, scale, mask=rm < M)
    q = (acc * scale[:, None]).to(tl.float8e4nv)
    tl.store(Q + rm[:, None] * N + rn[None, :], q, mask=(rm[:, None] < M) & (rn[None, :] < N))


def add(kind, gid, A, B, q, amax, scale, h=None):
    cid = "c%04d" % len(lines)
    store_case(arrays, cid, {} if h is None else {"h": h}, {"q": q, "amax": amax.reshape(-1), "scale": scale.reshape(-1)})
    lines.append("%s %s %d %d %d %s" % (cid, kind, A.shape[0], B.shape[1], A.shape[1], gid))


g = torch.Generator(device="cuda").manual_seed(9)
for M, N, K in ((64, 64, 256), (48, 64, 1000), (40, 32, 77)):
    A = (torch.randn(M, K, device="cuda", generator=g) / K ** 0.5).half()
    B = torch.randn(K, N, device="cuda", generator=g).half()
    gid = new_group(arrays, {"A": A, "B": B})
    for inv, kind in ((0, "triton"), (1, "bug_triton_inverted")):
        q = torch.empty(M, N, device="cuda", dtype=torch.float8_e4m3fn)
        am = torch.empty(M, device="cuda")
        sc = torch.empty(M, device="cuda")
        gemm_quant[(triton.cdiv(M, 16),)](A, B, q, am, sc, M, N, K, INV=inv, BM=16, BN=N, BK=32)
        torch.cuda.synchronize()
        add(kind, gid, A, B, q, am, sc)
    h16 = torch.mm(A, B)                           # torch: the product stored in fp16, kept as the quantised input
    h = h16.float()
    am = h.abs().amax(dim=1)
    sc = 448.0 / am
    q = (h * sc[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    add("torch_unfused", gid, A, B, q, am, sc, h16)
    add("bug_unfused_as_fused", gid, A, B, q, am, sc)
write_case_files(OUT, "gemm_quant", arrays, lines, torch_header(), compressed=True)
print("captured %d cases" % len(lines))
