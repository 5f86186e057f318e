"""GEMM epilogues with activations on the GPU, for chains (docs/algorithms/chains.md): a Triton GEMM with bias and
gelu (torch's erf form through tl.math.erf) fused before an fp16 or bf16 store; torch running bias then gelu or
silu unfused (torch.nn.functional on the stored product); a planted bug (the tanh approximation of gelu where the
erf form is claimed). Writes OUT/acts.npz (each group's inputs once, gNN__in__A, B, bias; each case's output
cNNNN__out__y) and OUT/acts.txt (id kernel dtype M N K group). Run: OUT=/some/dir python3 capture_activations.py"""
import os

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from capture_common import new_group, store_case, torch_header, write_case_files
from triton_gemm import gemm_bias_inputs, gemm_tile

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


@triton.jit
def gemm_bias_gelu(A, B, BIAS, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = gemm_tile(A, B, M, N, K, rm, rn, BM, BN, BK)
    acc = acc + tl.load(BIAS + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    y = acc * 0.5 * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    tl.store(C + rm[:, None] * N + rn[None, :], y.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def add(kind, dtype, gid, A, B, y):
    cid = "c%04d" % len(lines)
    store_case(arrays, cid, {}, {"y": y})
    lines.append("%s %s %s %d %d %d %s" % (cid, kind, dtype, A.shape[0], B.shape[1], A.shape[1], gid))


g = torch.Generator(device="cuda").manual_seed(7)
for dt, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
    for (M, N, K), scale in (((64, 48, 256), 3.0), ((96, 80, 1000), 6.0)):
        A, B, bias = gemm_bias_inputs(g, dt, M, N, K, scale)
        gid = new_group(arrays, {"A": A, "B": B, "bias": bias})
        y = torch.empty(M, N, device="cuda", dtype=dt)
        gemm_bias_gelu[(triton.cdiv(M, 32), triton.cdiv(N, 32))](A, B, bias, y, M, N, K, BM=32, BN=32, BK=32)
        torch.cuda.synchronize()
        add("triton_bias_gelu", name, gid, A, B, y)
        h = torch.mm(A, B) + bias               # stored in dt, as torch runs it
        add("torch_gelu", name, gid, A, B, F.gelu(h))
        add("torch_silu", name, gid, A, B, F.silu(h))
        add("torch_bug_gelu_tanh", name, gid, A, B, F.gelu(h, approximate="tanh"))
write_case_files(OUT, "acts", arrays, lines, torch_header(), compressed=True)
