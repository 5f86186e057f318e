"""Captures layer_norm's and rmsnorm's backward passes on the GPU and judges them with exactref: torch's CUDA kernels
(aten.native_layer_norm_backward, aten._fused_rms_norm_backward), autograd through F.layer_norm, the same ops
compiled by torch.compile (Inductor decomposes them), a Triton kernel written as Triton's layer-norm tutorial writes
its backward (xhat = (x - mean) rstd, c1 = sum(xhat wdy) / N, c2 = sum(wdy) / N, dx = (wdy - (xhat c1 + c2)) rstd;
dweight and dbias summed by torch), and planted bugs (c2 dropped; dweight without rstd), in fp32, fp16 and bf16, rows
of 1 to 5000 and columns of up to 1000 rows, on six families: normal; offset (x = 100 + noise: the mean far from
0); wide (x and dy over many binades); ties (integers and eighths); masked (a third of dy zero, a quarter of the rows
constant: rstd = 1/sqrt(eps)); subnormal (dy at the bottom of its format). The saved mean and rstd are the forward kernel's
own (aten.native_layer_norm, aten._fused_rms_norm). With EXACTREF_LIBRARY set it checks every case (dx, dweight,
dbias; rmsnorm's also without the saved rstd, rstd=None) and prints the verdicts by op, kernel and family; cases that fail are written to OUT/norm_backward.npz
(cid__in__dy, __in__x, __in__mean, __in__rstd, __in__weight, __out__dx, __out__dweight, __out__dbias; bfloat16 as
uint16) with OUT/norm_backward.txt (id op kernel dtype family rows cols). Run: OUT=/some/dir python3
capture_norm_backward.py"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from capture_common import write_case_files

EPS = 1e-5


@triton.jit
def _norm_bwd_dx(DX, DY, X, W, Mean, Rstd, N, CENTERED: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + row * N + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0).to(tl.float32)
    rstd = tl.load(Rstd + row)
    if CENTERED:
        mean = tl.load(Mean + row)
        xhat = (x - mean) * rstd
    else:
        xhat = x * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.0)
    wdy = tl.where(mask, wdy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    if CENTERED:
        c2 = tl.sum(wdy, axis=0) / N
        dx = (wdy - (xhat * c1 + c2)) * rstd
    else:
        dx = (wdy - xhat * c1) * rstd
    tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), mask=mask)


def stored(t):
    a = t.detach().cpu().contiguous()
    return a.view(torch.int16).numpy().view(np.uint16) if a.dtype == torch.bfloat16 else a.numpy()


def forward_stats(op, x, w):
    n = x.shape[-1]
    if op == "layer_norm":
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, torch.zeros_like(w), EPS)
        return mean, rstd
    _, rstd = torch.ops.aten._fused_rms_norm(x, [n], w, EPS)
    return None, rstd


def xhat_of(x, mean, rstd):
    xf = x.float()
    return ((xf - mean) * rstd) if mean is not None else xf * rstd


def kernels(op):
    """(name, fn(dy, x, mean, rstd, w) -> (dx, dweight[, dbias]))."""
    if op == "layer_norm":
        def native(dy, x, mean, rstd, w):
            return torch.ops.aten.native_layer_norm_backward(dy, x, [x.shape[-1]], mean, rstd, w, torch.zeros_like(w),
                                                             [True, True, True])

        def autograd(dy, x, mean, rstd, w):
            xx, ww, bb = (t.clone().requires_grad_(True) for t in (x, w, torch.zeros_like(w)))
            out = F.layer_norm(xx, (x.shape[-1],), ww, bb, EPS)
            return torch.autograd.grad(out, (xx, ww, bb), dy)
    else:
        def native(dy, x, mean, rstd, w):
            return torch.ops.aten._fused_rms_norm_backward(dy, x, [x.shape[-1]], rstd, w, [True, True])
        autograd = None
    compiled = torch.compile(native, dynamic=False)

    def triton_tutorial(dy, x, mean, rstd, w):
        R, n = x.shape
        dx = torch.empty_like(x)
        _norm_bwd_dx[(R,)](dx, dy, x, w, mean if mean is not None else rstd, rstd, n, CENTERED=mean is not None,
                           BLOCK=triton.next_power_of_2(n))
        xh = xhat_of(x, mean, rstd)
        dw = (dy.float() * xh).sum(0).to(w.dtype)
        return (dx, dw) if mean is None else (dx, dw, dy.float().sum(0).to(w.dtype))

    def bug_mean_term(dy, x, mean, rstd, w):
        xh, g = xhat_of(x, mean, rstd), dy.float() * w.float()
        dx = (g - xh * (g * xh).mean(-1, keepdim=True)) * rstd  # c2 (layer_norm) or ... dropped
        if mean is None:
            dx = g * rstd  # rmsnorm: the xhat term dropped
        dw = (dy.float() * xh).sum(0).to(w.dtype)
        outs = (dx.to(x.dtype), dw)
        return outs if mean is None else outs + (dy.float().sum(0).to(w.dtype),)

    def bug_dw_no_rstd(dy, x, mean, rstd, w):
        outs = native(dy, x, mean, rstd, w)
        d = x.float() - (mean if mean is not None else 0)
        return (outs[0], (dy.float() * d).sum(0).to(w.dtype)) + tuple(outs[2:])
    ks = [("native", native), ("inductor", compiled), ("triton", triton_tutorial), ("bug_mean_term", bug_mean_term),
          ("bug_dw_no_rstd", bug_dw_no_rstd)]
    return ks + ([("autograd", autograd)] if autograd else [])


def inputs(family, rows, cols, dtype):
    x = torch.randn(rows, cols, device="cuda")
    dy = torch.randn(rows, cols, device="cuda")
    w = 1 + 0.3 * torch.randn(cols, device="cuda")
    if family == "offset":
        x = 100 + x
    elif family == "wide":
        x = x * torch.exp2(torch.randint(-8, 9, (rows, cols), device="cuda").float())
        dy = dy * 300
    elif family == "ties":
        x = torch.randint(-6, 7, (rows, cols), device="cuda").float()
        dy = torch.randint(-16, 17, (rows, cols), device="cuda").float() / 8
        w = torch.randint(1, 9, (cols,), device="cuda").float() / 4
    elif family == "masked":
        # padded positions: a third of dy zero; a quarter of the rows constant (variance 0: rstd = 1/sqrt(eps))
        dy = dy.masked_fill(torch.rand(rows, cols, device="cuda") < 1 / 3, 0.0)
        const = torch.rand(rows, 1, device="cuda") < 1 / 4
        x = torch.where(const, torch.full_like(x, 0.75), x)
    elif family == "subnormal":
        # gradients at the bottom of dy's format: subnormal products and sums
        tiny = {torch.float32: 2.0 ** -128, torch.float16: 2.0 ** -20, torch.bfloat16: 2.0 ** -128}[dtype]
        dy = dy * tiny
    return x.to(dtype), dy.to(dtype), w.to(dtype)


def judge(er, op, dy, x, mean, rstd, w, outs):
    if op == "layer_norm":
        ref = er.layer_norm_backward(dy, x, mean, rstd, w)
    else:
        ref = er.rmsnorm_backward(dy, x, rstd, w)
    res = ref.covers(tuple(outs), compute="float32")
    return [bool(res.results[name].all()) for name in ref.OUTPUTS], res


def main():
    out = os.environ.get("OUT", ".")
    torch.manual_seed(11)
    torch._dynamo.config.recompile_limit = 10000  # every shape compiled (past the limit dynamo runs eagerly)
    counts = {}
    er = None
    if os.environ.get("EXACTREF_LIBRARY"):
        import ml_dtypes
        import exactref as er
    verdicts, arrays, lines, cid, total = {}, {}, [], 0, 0
    for op in ("layer_norm", "rmsnorm"):
        ks = kernels(op)
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for family in ("normal", "offset", "wide", "ties", "masked", "subnormal"):
                for rows, cols in ((4, 1), (3, 7), (8, 128), (32, 1000), (4, 5000), (1000, 64)):
                    x, dy, w = inputs(family, rows, cols, dtype)
                    mean, rstd = forward_stats(op, x, w)
                    for name, fn in ks:
                        try:
                            outs = fn(dy, x, mean, rstd, w)
                        except Exception as e:  # an op this torch lacks: said, never judged
                            print("skip %s %s %s: %s" % (op, name, dtype, str(e).splitlines()[0][:100]))
                            continue
                        torch.cuda.synchronize()
                        total += 1
                        dt = str(dtype).split(".")[1]
                        ins = {"dy": dy, "x": x, "rstd": rstd, "weight": w}
                        if mean is not None:
                            ins["mean"] = mean
                        host = {k: stored(v) for k, v in ins.items()}
                        outh = [stored(t) for t in outs]
                        if er is None:
                            continue
                        view = {k: (a.view(ml_dtypes.bfloat16) if a.dtype == np.uint16 else a) for k, a in host.items()}
                        outv = [a.view(ml_dtypes.bfloat16) if a.dtype == np.uint16 else a for a in outh]
                        ok, res = judge(er, op, view["dy"], view["x"], view.get("mean"), view["rstd"], view["weight"],
                                        outv)
                        verdicts.setdefault((op, name, family), []).append(all(ok))
                        if op == "rmsnorm":  # judged again without the saved rstd: the forward's set of rstd
                            own = er.rmsnorm_backward(view["dy"], view["x"], None, view["weight"], eps=EPS)
                            verdicts.setdefault((op + "(rstd=None)", name, family), []).append(
                                bool(own.covers(tuple(outv), compute="float32").all()))
                        if not name.startswith("bug"):
                            for o, r in res.results.items():
                                c = counts.setdefault((op, name, o), {"exact": 0, "elements": 0})
                                c["exact"] += r.counts["exact"]
                                c["elements"] += r.classes.size
                        if not all(ok) and not name.startswith("bug"):
                            if cid < 3:
                                print("FALSE ALARM %s %s %s %s %dx%d\n%s" % (op, name, dt, family, rows, cols, res))
                            key = "c%03d" % cid
                            for k, a in host.items():
                                arrays[key + "__in__" + k] = a
                            for k, a in zip(("dx", "dweight", "dbias"), outh):
                                arrays[key + "__out__" + k] = a
                            lines.append("%s %s %s %s %s %d %d %s" % (key, op, name, dt, family, rows, cols,
                                                                       "".join("1" if v else "0" for v in ok)))
                            cid += 1
    print("ran %d cases" % total)
    if lines:
        write_case_files(out, "norm_backward", arrays, lines, "# id op kernel dtype family rows cols verdicts")
    for (op, name, family), v in sorted(verdicts.items()):
        print("%s %s %s: %d of %d covered" % (op, name, family, sum(v), len(v)))
    for (op, name, o), c in sorted(counts.items()):
        print("%s %s %s: %d of %d elements exact" % (op, name, o, c["exact"], c["elements"]))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
