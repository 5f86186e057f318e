"""GEMM epilogues at the sizes people test, checked where they run (docs/algorithms/chains.md, The epilogue pass): a
Triton GEMM (fp16 or bf16 operands, fp32 accumulation) with a bias and gelu's tanh form (libdevice tanh, the sigmoid
form, the exp form), silu (tl.sigmoid, the exp form) or relu fused before an fp16 or bf16 store; torch's unfused
F.gelu(approximate="tanh") on the stored product plus bias; SwiGLU's silu(A B1) * (A B2) fused; three planted bugs
(the bias left out, the activation before the bias, the up projection left out). Each output is checked by exactref on this machine's cores (mma:sm90 outer=any, precise and triton
math models), with the epilogue pass and without it (EXACTREF_BATCH=0): the verdicts, counts and the seconds of
covers() and of the matmul's covers() alone, and whether both runs' classes agree element for element. Prints one
line a case; nothing is written. Run: EXACTREF_LIBRARY=... PYTHONPATH=bindings/python:tools/capture python3
check_epilogues.py [cuda] (cuda: the references made of the CUDA tensors themselves, er_matmul_device, and the
outputs checked as CUDA tensors)."""
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

import exactref as er
from triton_gemm import gemm_bias_inputs, gemm_tile

ACTS = {0: "gelu_tanh", 1: "gelu_sigmoid_form", 2: "gelu_exp_form", 3: "silu_mul", 4: "silu_div", 5: "relu",
        6: "bug_bias_left_out", 7: "bug_act_before_bias"}


@triton.jit
def gemm_bias_act(A, B, BIAS, C, M, N, K, ACT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = gemm_tile(A, B, M, N, K, rm, rn, BM, BN, BK)
    bias = tl.load(BIAS + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    x = acc if ACT == 6 or ACT == 7 else acc + bias
    if ACT == 0 or ACT == 6 or ACT == 7:
        y = 0.5 * x * (1.0 + tl.extra.cuda.libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
        if ACT == 7:
            y = y + bias
    elif ACT == 1:
        y = x * tl.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))
    elif ACT == 2:
        y = x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))
    elif ACT == 3:
        y = x * tl.sigmoid(x)
    elif ACT == 4:
        y = x / (1.0 + tl.exp(-x))
    else:
        y = tl.maximum(x, 0.0)
    tl.store(C + rm[:, None] * N + rn[None, :], y.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def gemm_swiglu(A, B1, B2, C, M, N, K, BUG: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """silu(A B1) * (A B2) before the store (SwiGLU's gate and up projections); BUG: the up projection's product
    left out."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    g = gemm_tile(A, B1, M, N, K, rm, rn, BM, BN, BK)
    u = gemm_tile(A, B2, M, N, K, rm, rn, BM, BN, BK)
    y = g * tl.sigmoid(g)
    if not BUG:
        y = y * u
    tl.store(C + rm[:, None] * N + rn[None, :], y.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def host(t):
    """A CUDA tensor as a numpy array exactref reads (bf16 through ml_dtypes)."""
    import ml_dtypes
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
    return t.cpu().numpy()


def timed(f):
    t0 = time.perf_counter()
    r = f()
    return r, time.perf_counter() - t0


def check(kind, ch, mm, y, acc, bug):
    """Both math models with the pass, and the precise one without: verdicts, seconds, the classes compared."""
    std = dict(standard="mma:sm90 outer=any")
    out = []
    for m in ("precise", "triton"):
        res, t = timed(lambda: ch.covers(y, math=m, **std))
        out.append((m, res, t))
    os.environ["EXACTREF_BATCH"] = "0"
    alone, t0 = timed(lambda: ch.covers(y, math="precise", **std))
    del os.environ["EXACTREF_BATCH"]
    same = np.array_equal(np.asarray(out[0][1].classes), np.asarray(alone.classes))
    _, tm = timed(lambda: mm.covers(acc, **std))
    ok = all(r.all() != bug for _, r, _ in out)
    c = out[0][1].counts
    print("%s %s: %s; precise %s (exact %d covered %d outside %d) %.3f s, triton %s %.3f s, without the pass %.3f s "
          "(classes %s); matmul covers %.3f s" % (
              "ok" if ok and same else "FAIL", kind, "bug caught" if bug else "covered",
              out[0][1].all(), c["exact"], c["covered"], c["outside"], out[0][2], out[1][1].all(), out[1][2], t0,
              "the same" if same else "DIFFER", tm), flush=True)
    return ok and same


def main(on_device=False):
    """on_device: the references made of the CUDA tensors themselves (er_matmul_device) and the outputs checked as
    CUDA tensors, instead of host copies."""
    if on_device:
        global host
        host = lambda t: t  # noqa: E731
    g = torch.Generator(device="cuda").manual_seed(29)
    bad = 0
    for dt, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
        for (M, N, K), scale in (((2048, 2048, 2048), 1.0), ((2048, 2048, 2048), 8.0), ((1024, 4096, 512), 3.0)):
            A, B, bias = gemm_bias_inputs(g, dt, M, N, K, scale)
            An, Bn, bn = host(A), host(B), host(bias)
            mm = er.matmul(An, Bn)
            acc = host(A.float() @ B.float())
            for act, kind in ACTS.items():
                y = torch.empty(M, N, device="cuda", dtype=dt)
                gemm_bias_act[(triton.cdiv(M, 64), triton.cdiv(N, 64))](A, B, bias, y, M, N, K, ACT=act, BM=64, BN=64,
                                                                        BK=32)
                torch.cuda.synchronize()
                fused = mm.add(bn)
                f = fused.relu() if kind == "relu" else fused.silu() if kind.startswith("silu") else \
                    fused.gelu(approximate="tanh")
                bad += not check("%s %s %dx%dx%d scale %g" % (kind, name, M, N, K, scale), f.cast(name), mm, host(y), acc,
                                 kind.startswith("bug"))
            B2 = torch.randn(K, N, device="cuda", generator=g).to(dt)
            mm2 = er.matmul(An, host(B2))
            for bug in (0, 1):
                y = torch.empty(M, N, device="cuda", dtype=dt)
                gemm_swiglu[(triton.cdiv(M, 64), triton.cdiv(N, 64))](A, B, B2, y, M, N, K, BUG=bug, BM=64, BN=64, BK=32)
                torch.cuda.synchronize()
                bad += not check("%sswiglu %s %dx%dx%d scale %g" % ("bug_up_left_out_" if bug else "", name, M, N, K, scale),
                                 mm.silu().mul(mm2).cast(name), mm, host(y), acc, bool(bug))
            h = torch.mm(A, B) + bias  # stored in dt, as torch runs it
            ch = mm.cast(name).add(bn).cast(name).gelu(approximate="tanh").cast(name)
            bad += not check("torch_gelu_tanh %s %dx%dx%d scale %g" % (name, M, N, K, scale), ch, mm,
                             host(F.gelu(h, approximate="tanh")), acc, False)
    print("cases failing: %d" % bad)


if __name__ == "__main__":
    main(sys.argv[1:2] == ["cuda"])
