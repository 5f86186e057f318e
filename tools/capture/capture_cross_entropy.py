"""Captures cross-entropy's loss and gradient on the GPU and judges them with exactref: torch's F.cross_entropy
forward and backward (autograd; for reduction "none" the gradient of the losses' sum), the same function compiled by
torch.compile (Inductor fuses log_softmax, nll_loss and the backward; four of the reduction and smoothing pairs,
compiled once each with dynamic shapes), a fused Triton kernel written as Liger's
cross-entropy kernel is (one program per row: an online pass for the maximum and the sum of exp, lse = m + log(d),
the loss lse - x_t with the smoothing terms, each row's loss divided by the rows not ignored for "mean"; a second
pass writing the gradient (exp(x - m) / d - eps / C) / n, and - (1 - eps) / n at the target), and planted bugs in that
kernel (the gradient not divided by n; eps instead of eps / C; the mean over every row, ignored ones included; the
sum of exp missing the row's last class). fp32 and bf16 logits, vocabularies of 1000, 32000 and 128256, reductions
mean, sum and none, label smoothing 0 and 0.1, a quarter of the rows ignored (-100), on five families: normal (2
randn), peaked (the target's logit 15 above: p_t near 1), wide (20 randn), flat (every logit equal) and masked (a
third of the logits -inf, never the target; smoothing 0). With EXACTREF_LIBRARY set it checks every case (loss and
dlogits) and prints the verdicts by kernel and family (a bug only where its outputs differ from the correct Triton
kernel's); torch's kernels under the default standard and products=compute (nothing rounded to the logits' format:
torch's bf16 composition stores its log-probabilities in bf16, so this one may fail it), the Triton kernel under
online=yes exp_ulps=fast div_ulps=2 (its exp is ex2.approx of a rounded product, its / is div.full.f32, its sum
online), and with products=compute. Cases that fail are written to OUT/cross_entropy.npz (cid__in__logits,
__in__target, __out__loss, __out__dlogits; bfloat16 as uint16) with OUT/cross_entropy.txt. Run: OUT=/some/dir
python3 capture_cross_entropy.py"""
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from capture_common import write_case_files

IGNORE = -100


@triton.jit
def _ce_kernel(X, DX, T, LOSS, C, n_div, eps, grad_div, smooth_c, BLOCK: tl.constexpr, TAIL_BUG: tl.constexpr):
    row = tl.program_id(0)
    X += row * C
    DX += row * C
    t = tl.load(T + row)
    if t == -100:
        for b in range(0, C, BLOCK):
            cols = b + tl.arange(0, BLOCK)
            tl.store(DX + cols, tl.zeros([BLOCK], tl.float32).to(DX.dtype.element_ty), mask=cols < C)
        tl.store(LOSS + row, 0.0)
        return
    m = float("-inf")
    d = 0.0
    sx = 0.0
    lim = C - 1 if TAIL_BUG else C
    for b in range(0, C, BLOCK):
        cols = b + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < lim, other=float("-inf")).to(tl.float32)
        bm = tl.max(x, 0)
        mn = tl.maximum(m, bm)
        d = d * tl.exp(m - mn) + tl.sum(tl.exp(x - mn), 0)
        m = mn
        sx += tl.sum(tl.where(cols < C, -smooth_c * tl.load(X + cols, mask=cols < C, other=0).to(tl.float32), 0.0),
                     0)
    lse = m + tl.log(d)
    xt = tl.load(X + t).to(tl.float32)
    loss = lse - xt
    if eps > 0:
        loss = loss * (1 - eps) + (sx + eps * lse)
    tl.store(LOSS + row, loss / n_div)
    for b in range(0, C, BLOCK):
        cols = b + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < C, other=float("-inf")).to(tl.float32)
        g = (tl.exp(x - m) / d - smooth_c) / grad_div
        g = tl.where(cols == t, g - (1 - eps) / grad_div, g)
        tl.store(DX + cols, g.to(DX.dtype.element_ty), mask=cols < C)


def triton_ce(bug=None):
    def run(x, t, reduction, eps):
        N, C = x.shape
        dx = torch.empty_like(x)
        rows = torch.empty(N, device=x.device, dtype=torch.float32)
        W = int((t != IGNORE).sum())
        n = float(W if reduction == "mean" and W > 0 else 1)
        if bug == "mean_over_N" and reduction == "mean":
            n = float(N)
        gd = 1.0 if bug == "grad_not_over_W" else n
        sc = eps if bug == "eps_not_over_C" else eps / C
        _ce_kernel[(N,)](x, dx, t, rows, C, n, eps, gd, sc, BLOCK=4096 if C > 4096 else triton.next_power_of_2(C),
                         TAIL_BUG=bug == "tail")
        loss = rows if reduction == "none" else rows.sum().reshape(())
        return loss, dx
    return run


def torch_ce(x, t, reduction, eps):
    xx = x.clone().requires_grad_(True)
    loss = F.cross_entropy(xx, t, reduction=reduction, ignore_index=IGNORE, label_smoothing=eps)
    (loss.sum() if reduction == "none" else loss).backward()
    return loss.detach(), xx.grad


_compiled = {}


def compiled_ce(x, t, reduction, eps):
    key = (reduction, eps)
    if key not in _compiled:
        def fn(xx, tt):
            loss = F.cross_entropy(xx, tt, reduction=reduction, ignore_index=IGNORE, label_smoothing=eps)
            return loss.sum() if reduction == "none" else loss, loss
        _compiled[key] = torch.compile(fn, dynamic=True)
    xx = x.clone().requires_grad_(True)
    s, loss = _compiled[key](xx, t)
    s.backward()
    return loss.detach(), xx.grad


def inputs(family, rows, C, dtype):
    x = 2 * torch.randn(rows, C, device="cuda")
    t = torch.randint(0, C, (rows,), device="cuda")
    if family == "peaked":
        x[torch.arange(rows), t] += 15
    elif family == "wide":
        x = 10 * x
    elif family == "flat":
        x = torch.full_like(x, 0.75)
    elif family == "masked":
        mask = torch.rand(rows, C, device="cuda") < 1 / 3
        mask[torch.arange(rows), t] = False
        x = x.masked_fill(mask, float("-inf"))
    t[torch.rand(rows, device="cuda") < 1 / 4] = IGNORE
    return x.to(dtype), t


def stored(t):
    a = t.detach().cpu().contiguous()
    return a.view(torch.int16).numpy().view(np.uint16) if a.dtype == torch.bfloat16 else a.numpy()


STANDARDS = {"torch": [("default", {}), ("products=compute", {"products": "compute"})],
             "inductor": [("default", {}), ("products=compute", {"products": "compute"})]}
# the configurations compiled by Inductor (each compiles once, for every shape: dynamic=True)
INDUCTOR = {("mean", 0.0), ("mean", 0.1), ("none", 0.1), ("sum", 0.0)}
TRITON_STD = ("online exp_ulps=fast div_ulps=2", {"online": "yes", "exp_ulps": "fast", "div_ulps": 2})


def main():
    out = os.environ.get("OUT", ".")
    torch.manual_seed(7)
    torch._dynamo.config.recompile_limit = 10000
    er = None
    if os.environ.get("EXACTREF_LIBRARY"):
        import ml_dtypes
        import exactref as er
    kernels = [("torch", torch_ce), ("inductor", compiled_ce), ("triton", triton_ce())] + [
        ("bug_" + b, triton_ce(b)) for b in ("grad_not_over_W", "eps_not_over_C", "mean_over_N", "tail")]
    verdicts, counts, arrays, lines, cid, total = {}, {}, {}, [], 0, 0
    t0 = time.time()
    # CE_DTYPES, CE_FAMILIES, CE_SHAPES (comma-separated: float32,bfloat16; normal,...; 8x1000,...) restrict the grid
    env = os.environ.get
    dtypes = [getattr(torch, d) for d in env("CE_DTYPES", "float32,bfloat16").split(",")]
    families = env("CE_FAMILIES", "normal,peaked,wide,flat,masked").split(",")
    shapes = [tuple(int(v) for v in s.split("x")) for s in env("CE_SHAPES", "8x1000,4x32000,2x128256").split(",")]
    for dtype in dtypes:
        for family in families:
            for rows, C in shapes:
                for reduction in ("mean", "sum", "none"):
                    for eps in (0.0, 0.1):
                        if family == "masked" and eps > 0:
                            continue
                        x, t = inputs(family, rows, C, dtype)
                        for name, fn in kernels:
                            if name == "inductor" and (reduction, eps) not in INDUCTOR:
                                continue
                            try:
                                loss, dx = fn(x, t, reduction, eps)
                            except Exception as e:  # said, never judged
                                print("skip %s %s: %s" % (name, dtype, str(e).splitlines()[0][:120]))
                                continue
                            torch.cuda.synchronize()
                            total += 1
                            if name == "triton":
                                good = (loss, dx)
                            # a bug is visible where its outputs differ from the correct Triton kernel's
                            visible = not name.startswith("bug") or not (torch.equal(loss, good[0]) and
                                                                         torch.equal(dx, good[1]))
                            if er is None:
                                continue
                            xh, lh, dh = stored(x), stored(loss), stored(dx)
                            xv = xh.view(ml_dtypes.bfloat16) if xh.dtype == np.uint16 else xh
                            lv = lh.view(ml_dtypes.bfloat16) if lh.dtype == np.uint16 else lh
                            dv = dh.view(ml_dtypes.bfloat16) if dh.dtype == np.uint16 else dh
                            th = t.cpu().numpy()
                            ref = er.cross_entropy(xv, th, reduction=reduction, label_smoothing=eps)
                            stds = STANDARDS.get(name, [TRITON_STD, (TRITON_STD[0] + " products=compute",
                                                                     dict(TRITON_STD[1], products="compute"))])
                            oks = []
                            for sname, kw in stds:
                                res = ref.covers((lv, dv), **kw)
                                ok = (bool(res.results["loss"].all()), bool(res.results["dlogits"].all()))
                                oks.append(ok)
                                if visible:
                                    verdicts.setdefault((name, sname, family), []).append(ok)
                                if not name.startswith("bug"):
                                    for o, r in res.results.items():
                                        c = counts.setdefault((name, sname, o), [0, 0])
                                        c[0] += r.counts["exact"]
                                        c[1] += r.classes.size
                            print("%s %s %s %s %dx%d eps %g: %s%s (%.0f s)" % (
                                name, str(dtype).split(".")[1], family, reduction, rows, C, eps,
                                " ".join("%d%d" % o for o in oks), "" if visible else " (invisible)",
                                time.time() - t0), flush=True)
                            if not name.startswith("bug") and not all(oks[0]):  # the first standard: the claim
                                if cid < 3:
                                    print("FALSE ALARM %s %s %s %s %dx%d eps %g\n%s" % (
                                        name, dtype, family, reduction, rows, C, eps, res))
                                key = "c%03d" % cid
                                arrays[key + "__in__logits"], arrays[key + "__in__target"] = xh, th
                                arrays[key + "__out__loss"], arrays[key + "__out__dlogits"] = lh, dh
                                lines.append("%s %s %s %s %s %d %d %g" % (key, name, str(dtype).split(".")[1],
                                                                         family, reduction, rows, C, eps))
                                cid += 1
    print("ran %d cases" % total)
    if lines:
        write_case_files(out, "cross_entropy", arrays, lines, "# id kernel dtype family reduction rows C eps")
    for (name, sname, family), v in sorted(verdicts.items()):
        print("%s [%s] %s: loss %d, dlogits %d, both %d of %d covered" % (
            name, sname, family, sum(a for a, _ in v), sum(b for _, b in v), sum(a and b for a, b in v), len(v)))
    for (name, sname, o), (e, n) in sorted(counts.items()):
        print("%s [%s] %s: %d of %d elements exact" % (name, sname, o, e, n))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
