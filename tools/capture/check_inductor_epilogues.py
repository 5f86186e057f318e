"""torch.compile (Inductor, default mode) GEMM epilogues checked where they run (docs/algorithms/chains.md, The
epilogue pass): F.linear then gelu's tanh form, silu or relu, fp16 and bf16, at 2048 x 2048 x 2048. Inductor lowers
the GEMM to cuBLAS (its fp16 or bf16 output stored) and fuses what follows into a Triton kernel in fp32, or keeps the
bias in cuBLAS's epilogue; each output is checked under those lowerings (mma:sm90 outer=any, math=triton), and a
planted bug (the bias added twice, fp16) against all of them. Prints which lowering covers each output and the
seconds of covers(); nothing is written. Run: EXACTREF_LIBRARY=... PYTHONPATH=bindings/python:tools/capture python3
check_inductor_epilogues.py"""
import time

import torch
import torch.nn.functional as F

import exactref as er
from check_epilogues import host

ACTS = {"gelu_tanh": lambda h: F.gelu(h, approximate="tanh"), "silu": F.silu, "relu": F.relu}


def stage(ref, act):
    return ref.gelu(approximate="tanh") if act == "gelu_tanh" else ref.silu() if act == "silu" else ref.relu()


def lowerings(mm, bias, act, name):
    """The chains of the lowerings Inductor may take: the bias in the fused kernel's fp32 after cuBLAS's stored
    product, the bias in cuBLAS's epilogue (stored with it), and everything fused in fp32."""
    return {"mm stored, bias and act in fp32": stage(mm.cast(name).add(bias), act).cast(name),
            "addmm stored, act in fp32": stage(mm.add(bias).cast(name), act).cast(name),
            "all in fp32": stage(mm.add(bias), act).cast(name)}


def verdicts(chains, y):
    out = {}
    for what, ch in chains.items():
        t0 = time.perf_counter()
        res = ch.covers(y, standard="mma:sm90 outer=any", math="triton")
        out[what] = (res.all(), time.perf_counter() - t0)
    return out


def report(case, out, bug):
    covering = [w for w, (ok, _) in out.items() if ok]
    good = not covering if bug else bool(covering)
    print("%s %s: %s  (%s)" % ("ok" if good else "FAIL", case,
                               ("caught by every lowering" if not covering else "PASSED " + ", ".join(covering)) if bug
                               else "covered by: " + (", ".join(covering) or "none"),
                               ", ".join("%.3f s" % t for _, t in out.values())), flush=True)
    return good


g = torch.Generator(device="cuda").manual_seed(31)
bad = 0
M = N = K = 2048
for dt, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
    x = (torch.randn(M, K, device="cuda", generator=g) * 2).to(dt)
    W = (torch.randn(N, K, device="cuda", generator=g) / K ** 0.5).to(dt)
    b = torch.randn(N, device="cuda", generator=g).to(dt)
    mm, bn = er.matmul(host(x), host(W.t().contiguous())), host(b)
    for act, f in ACTS.items():
        for bug in (False, True) if name == "float16" else (False,):
            torch._dynamo.reset()  # a fresh compile each (no recompile limit reached, no eager fallback)
            fn = torch.compile(lambda x, W, b, f=f, bug=bug: f(F.linear(x, W, b) + b) if bug else f(F.linear(x, W, b)))
            y = host(fn(x, W, b))
            torch.cuda.synchronize()
            bad += not report("%s%s %s %dx%dx%d" % ("bug_bias_twice_" if bug else "", act, name, M, N, K),
                              verdicts(lowerings(mm, bn, act, name), y), bug)
print("cases failing: %d" % bad)
