"""Capture Triton row kernels at n = 256 .. 8192, correct and with planted bugs, for the depth= standards: a
two-pass layernorm (correct; the unbiased variance; the one-pass variance E[x^2] - m^2; eps outside the square
root; the mean's sum missing its last element), an rmsnorm (correct; eps outside the square root; the sum missing
its last element) and a softmax (correct; the sum missing its last element). fp32 and bf16 inputs; randn data, and
offset data (mean 300) for layernorm. Every kernel runs with 4 warps over BLOCK = next_power_of_2(n), so its
tl.sum has the depth er_depth_triton(BLOCK, 4, major, minor) gives.
Writes OUT/tcdepth.npz and OUT/tcdepth.txt, one case a line:  id op kernel verdict n eps block num_warps
(tests/ops/t-toolchain.c checks every line).

Run on a machine with an NVIDIA GPU, torch and Triton:  OUT=/some/dir python3 capture_depth.py
"""
import os

import torch
import triton
import triton.language as tl
from capture_common import store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


def add(op, kernel, verdict, n, eps, block, ins, outs):
    cid = "td%04d" % len(lines)
    store_case(arrays, cid, ins, outs)
    lines.append("%s %s %s %s %d %g %d 4" % (cid, op, kernel, verdict, n, eps, block))


@triton.jit
def layernorm_k(X, Y, Mean, Rstd, N, eps, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    if BUG == 4:  # the mean's sum misses the last element
        mean = tl.sum(tl.where(cols < N - 1, x, 0.0), axis=0) / N
    else:
        mean = tl.sum(x, axis=0) / N
    xm = tl.where(mask, x - mean, 0.0)
    if BUG == 1:
        var = tl.sum(xm * xm, axis=0) / (N - 1)
    elif BUG == 2:
        var = tl.sum(x * x, axis=0) / N - mean * mean
    else:
        var = tl.sum(xm * xm, axis=0) / N
    if BUG == 3:
        rstd = 1.0 / (tl.sqrt(var) + eps)
    else:
        rstd = tl.math.rsqrt(var + eps)
    tl.store(Y + row * N + cols, ((x - mean) * rstd).to(Y.dtype.element_ty), mask=mask)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)


@triton.jit
def rmsnorm_k(X, Y, N, eps, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    if BUG == 2:
        ms = tl.sum(tl.where(cols < N - 1, x * x, 0.0), axis=0) / N
    else:
        ms = tl.sum(x * x, axis=0) / N
    if BUG == 1:
        r = 1.0 / (tl.sqrt(ms) + eps)
    else:
        r = tl.math.rsqrt(ms + eps)
    tl.store(Y + row * N + cols, (x * r).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def softmax_k(X, Y, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    if BUG == 1:
        s = tl.sum(tl.where(cols < N - 1, e, 0.0), axis=0)
    else:
        s = tl.sum(e, axis=0)
    tl.store(Y + row * N + cols, e / s, mask=mask)


g = torch.Generator().manual_seed(2028)
R = 2
for n in (256, 1000, 1024, 4096, 8192):
    B = triton.next_power_of_2(n)
    for dt in (torch.float32, torch.bfloat16):
        for dist in ("randn", "offset"):
            x = (torch.randn(R, n, generator=g) * (0.5 if dist == "offset" else 1.0) + (300 if dist == "offset" else 0.0))
            x = x.to(dt).cuda()
            for bug, name in ((0, "correct"), (1, "unbiased"), (2, "one_pass"), (3, "eps_outside_sqrt"), (4, "mean_sum_missing_last")):
                if bug == 2 and dist != "offset":
                    continue
                y = torch.empty_like(x)
                mean = torch.empty(R, device="cuda", dtype=torch.float32)
                rstd = torch.empty(R, device="cuda", dtype=torch.float32)
                layernorm_k[(R,)](x, y, mean, rstd, n, 1e-5, BLOCK=B, BUG=bug, num_warps=4)
                add("layernorm", "triton_layernorm_%s_%s" % (name, dist), "correct" if bug == 0 else "bug", n, 1e-5, B,
                    {"x": x}, {"y": y, "mean": mean, "rstd": rstd})
        x = torch.randn(R, n, generator=g).to(dt).cuda()
        for bug, name in ((0, "correct"), (1, "eps_outside_sqrt"), (2, "sum_missing_last")):
            y = torch.empty_like(x)
            rmsnorm_k[(R,)](x, y, n, 1e-5, BLOCK=B, BUG=bug, num_warps=4)
            add("rmsnorm", "triton_rmsnorm_%s" % name, "correct" if bug == 0 else "bug", n, 1e-5, B, {"x": x}, {"y": y})
        x = (torch.randn(R, n, generator=g) * 3).to(dt).cuda()
        for bug, name in ((0, "correct"), (1, "sum_missing_last")):
            y = torch.empty(R, n, device="cuda", dtype=torch.float32)
            softmax_k[(R,)](x, y, n, BLOCK=B, BUG=bug, num_warps=4)
            add("softmax", "triton_softmax_%s" % name, "correct" if bug == 0 else "bug", n, 0, B, {"x": x}, {"y": y})
torch.cuda.synchronize()
write_case_files(OUT, "tcdepth", arrays, lines, torch_header())
print("tcdepth cases:", len(lines))
