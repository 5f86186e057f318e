"""GEMM epilogues in the other forms kernels write, for chains (docs/algorithms/chains.md, Lemmas C5 and C9): a
Triton GEMM with bias then gelu's tanh form (libdevice tanh, the cube as x * x * x), silu as acc * tl.sigmoid(acc),
and silu as acc / (1 + tl.exp(-acc)), fused before an fp16 or bf16 store; torch's F.gelu(approximate="tanh") on
the stored product plus bias; and a planted bug, the activation applied before the bias. Writes
OUT/act_forms.npz (each group's inputs once, gNN__in__A, B, bias; each case's output cNNNN__out__y) and
OUT/act_forms.txt (id kernel dtype M N K group). Run: OUT=/some/dir python3 capture_act_forms.py"""
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
def gemm_bias_act(A, B, BIAS, C, M, N, K, ACT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = gemm_tile(A, B, M, N, K, rm, rn, BM, BN, BK)
    bias = tl.load(BIAS + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if ACT == 3:    # planted bug: gelu (tanh form) before the bias
        acc = 0.5 * acc * (1.0 + tl.extra.cuda.libdevice.tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)))
        y = acc + bias
    else:
        acc = acc + bias
        if ACT == 0:
            y = 0.5 * acc * (1.0 + tl.extra.cuda.libdevice.tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)))
        elif ACT == 1:
            y = acc * tl.sigmoid(acc)
        else:
            y = acc / (1.0 + tl.exp(-acc))
    tl.store(C + rm[:, None] * N + rn[None, :], y.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def add(kind, dtype, gid, A, B, y):
    cid = "c%04d" % len(lines)
    store_case(arrays, cid, {}, {"y": y})
    lines.append("%s %s %s %d %d %d %s" % (cid, kind, dtype, A.shape[0], B.shape[1], A.shape[1], gid))


g = torch.Generator(device="cuda").manual_seed(11)
for dt, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
    for (M, N, K), scale in (((64, 48, 256), 3.0), ((96, 80, 1000), 8.0)):
        A, B, bias = gemm_bias_inputs(g, dt, M, N, K, scale)
        gid = new_group(arrays, {"A": A, "B": B, "bias": bias})
        for act, kind in ((0, "triton_gelu_tanh"), (1, "triton_silu_mul"), (2, "triton_silu_div"), (3, "triton_bug_act_before_bias")):
            y = torch.empty(M, N, device="cuda", dtype=dt)
            gemm_bias_act[(triton.cdiv(M, 32), triton.cdiv(N, 32))](A, B, bias, y, M, N, K, ACT=act, BM=32, BN=32, BK=32)
            torch.cuda.synchronize()
            add(kind, name, gid, A, B, y)
        h = torch.mm(A, B) + bias               # stored in dt, as torch runs it
        add("torch_gelu_tanh", name, gid, A, B, F.gelu(h, approximate="tanh"))
write_case_files(OUT, "act_forms", arrays, lines, torch_header(), compressed=True)
print("captured %d cases" % len(lines))
