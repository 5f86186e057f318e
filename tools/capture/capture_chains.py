"""GEMM epilogues on the GPU, for chains (docs/algorithms/chains.md): a Triton GEMM with the epilogue fused (fp32
accumulator, optional scale, bias, relu, one store in fp16 or bf16), the same with planted bugs (the bias added
twice, relu before the bias), and torch running it unfused (torch.mm stored in the input format, then + bias, then
relu) and through addmm; then exact ties: small-integer operands (K = 8, the tile's other lanes masked) and a bias that
puts every sum in the range where the format's spacing is 2, so that half the stored values are rounding ties
(round to nearest even against a store rounding toward zero, a planted bug). Writes OUT/chains.npz (each group's inputs once, gNN__in__A, B, bias; each case's output
cNNNN__out__y) and OUT/chains.txt (id kernel dtype M N K alpha group). Run: OUT=/some/dir python3 capture_chains.py"""
import os

import torch
import triton
import triton.language as tl

from capture_common import new_group, store_case, torch_header, write_case_files
from triton_gemm import gemm_bias_inputs, gemm_tile

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


@triton.jit
def gemm_epilogue(A, B, BIAS, C, M, N, K, alpha, SCALE: tl.constexpr, BUG: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = gemm_tile(A, B, M, N, K, rm, rn, BM, BN, BK)
    bias = tl.load(BIAS + rn, mask=rn < N, other=0.0).to(tl.float32)
    if SCALE:
        acc = acc * alpha
    if BUG == 2:  # relu before the bias
        acc = tl.maximum(acc, 0.0)
    acc = acc + bias[None, :]
    if BUG == 1:  # the bias added twice
        acc = acc + bias[None, :]
    if BUG != 2:
        acc = tl.maximum(acc, 0.0)
    if BUG == 3:  # the store rounding toward zero instead of to nearest even
        y = acc.to(C.dtype.element_ty, fp_downcast_rounding="rtz")
    else:
        y = acc.to(C.dtype.element_ty)
    tl.store(C + rm[:, None] * N + rn[None, :], y, mask=(rm[:, None] < M) & (rn[None, :] < N))


def add(kind, dtype, gid, A, B, y, alpha):
    cid = "c%04d" % len(lines)
    store_case(arrays, cid, {}, {"y": y})
    lines.append("%s %s %s %d %d %d %r %s" % (cid, kind, dtype, A.shape[0], B.shape[1], A.shape[1], alpha, gid))


g = torch.Generator(device="cuda").manual_seed(2026)
for dt, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
    for (M, N, K), scale in (((64, 48, 256), 1.0), ((96, 80, 1000), 8.0), ((130, 72, 2051), 1.0)):
        A, B, bias = gemm_bias_inputs(g, dt, M, N, K, scale)
        gid = new_group(arrays, {"A": A, "B": B, "bias": bias})
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        for alpha, bug, kind in ((1.0, 0, "triton_fused"), (0.3, 0, "triton_fused_scaled"), (1.0, 1, "triton_bug_bias_twice"),
                                 (1.0, 2, "triton_bug_relu_first")):
            y = torch.empty(M, N, device="cuda", dtype=dt)
            gemm_epilogue[grid](A, B, bias, y, M, N, K, alpha, SCALE=alpha != 1.0, BUG=bug, BM=32, BN=32, BK=32)
            torch.cuda.synchronize()
            add(kind, name, gid, A, B, y, alpha)
        y = torch.relu(torch.mm(A, B) + bias)   # unfused: the product stored in dt, then the bias, then relu
        add("torch_unfused", name, gid, A, B, y, 1.0)
        y = torch.addmm(bias, A, B)             # cuBLAS's beta C epilogue
        add("torch_addmm", name, gid, A, B, y, 1.0)
# exact ties: A, B integers in [0, 3], K = 8: exact sums up to 72; bias 2048 (fp16: spacing 2 from 2048) or 256
# (bf16: spacing 2 from 256, 4 from 512): every odd sum is a tie of the store
for dt, name, base in ((torch.float16, "float16", 2048.0), (torch.bfloat16, "bfloat16", 256.0)):
    M, N, K = 32, 32, 8
    A = torch.randint(0, 4, (M, K), device="cuda", generator=g).to(dt)
    B = torch.randint(0, 4, (K, N), device="cuda", generator=g).to(dt)
    bias = (base + 2 * torch.randint(0, 40, (N,), device="cuda", generator=g)).to(dt)
    gid = new_group(arrays, {"A": A, "B": B, "bias": bias})
    for bug, kind in ((0, "triton_fused_ties"), (3, "triton_bug_store_rtz")):
        y = torch.empty(M, N, device="cuda", dtype=dt)
        gemm_epilogue[(1, 1)](A, B, bias, y, M, N, K, 1.0, SCALE=False, BUG=bug, BM=32, BN=32, BK=32)
        torch.cuda.synchronize()
        add(kind, name, gid, A, B, y, 1.0)
    add("torch_unfused_ties", name, gid, A, B, torch.relu(torch.mm(A, B) + bias), 1.0)
    add("torch_addmm_ties", name, gid, A, B, torch.addmm(bias, A, B), 1.0)
write_case_files(OUT, "chains", arrays, lines, torch_header(), compressed=True)
