"""GEMM epilogues on the GPU, for chains (docs/algorithms/chains.md): a Triton GEMM with the epilogue fused (fp32
accumulator, optional scale, bias, relu, one store in fp16 or bf16), the same with planted bugs (the bias added
twice, relu before the bias), and torch running it unfused (torch.mm stored in the input format, then + bias, then
relu) and through addmm. Writes OUT/chains.npz (each group's inputs once, gNN__in__A, B, bias; each case's output
cNNNN__out__y) and OUT/chains.txt (id kernel dtype M N K alpha group). Run: OUT=/some/dir python3 capture_chains.py"""
import os

import torch
import triton
import triton.language as tl

from capture_common import store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


@triton.jit
def gemm_epilogue(A, B, BIAS, C, M, N, K, alpha, SCALE: tl.constexpr, BUG: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(B + (k0 + rk)[:, None] * N + rn[None, :], mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
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
    tl.store(C + rm[:, None] * N + rn[None, :], acc.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def add(kind, dtype, gid, A, B, y, alpha):
    cid = "c%04d" % len(lines)
    store_case(arrays, cid, {}, {"y": y})
    lines.append("%s %s %s %d %d %d %r %s" % (cid, kind, dtype, A.shape[0], B.shape[1], A.shape[1], alpha, gid))


g = torch.Generator(device="cuda").manual_seed(2026)
for dt, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
    for (M, N, K), scale in (((64, 48, 256), 1.0), ((96, 80, 1000), 8.0), ((130, 72, 2051), 1.0)):
        A = (torch.randn(M, K, device="cuda", generator=g) * scale / K ** 0.5).to(dt)
        B = torch.randn(K, N, device="cuda", generator=g).to(dt)
        bias = (torch.randn(N, device="cuda", generator=g) * 2).to(dt)
        gid = "g%02d" % len({k.split("__")[0] for k in arrays if k.startswith("g")})
        store_case(arrays, gid, {"A": A, "B": B, "bias": bias}, {})
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
write_case_files(OUT, "chains", arrays, lines, torch_header())
