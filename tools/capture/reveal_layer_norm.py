"""layer_norm orders on an H200 (exactref.testing.reveal_order, op "layer_norm"): Triton's tutorial layer_norm (a
two-pass kernel: mean and variance by tl.sum over one block), the same kernel dividing the variance by n - 1 (a
planted bug), torch.compile'd F.layer_norm (Inductor) and torch's CUDA F.layer_norm. Each line is the Order, then
the kernel's outputs on fresh rows of the probes' shape checked under the default standard and under the revealed
one. Then capture_ln_blind.py's Inductor kernels (F.layer_norm, a two-pass formula over n and over n - 1, compiled)
at 16 rows of 768, 2048 and 8192, normal and shifted by 3: the order each reveals and its fresh rows' verdicts. Needs a CUDA device, torch and Triton; run with EXACTREF_LIBRARY pointing at a built library.

    python3 tools/capture/reveal_layer_norm.py > reveal_layer_norm.txt
"""
import sys

import numpy as np
import torch
import triton
import triton.language as tl

import exactref as er
from exactref.testing import family, reveal_order


@triton.jit
def _ln(X, Y, MEAN, RSTD, n, eps, BLOCK: tl.constexpr, NM1: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * n + cols, mask=cols < n, other=0.0)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(cols < n, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / (n - 1 if NM1 else n)
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Y + row * n + cols, d * rstd, mask=cols < n)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


def triton_ln(nm1=False, stats=True):
    def kernel(x):
        rows, n = x.shape
        y = torch.empty_like(x)
        mean = torch.empty(rows, device=x.device, dtype=torch.float32)
        rstd = torch.empty(rows, device=x.device, dtype=torch.float32)
        _ln[(rows,)](x, y, mean, rstd, n, 1e-5, BLOCK=triton.next_power_of_2(n), NM1=nm1, num_warps=8)
        return (y, mean, rstd) if stats else y
    return kernel


def main():
    compiled = torch.compile(lambda x: torch.nn.functional.layer_norm(x, (x.shape[1],)))
    eager = lambda x: torch.nn.functional.layer_norm(x, (x.shape[1],))  # noqa: E731
    for n in (1024, 4096, 8192):
        rows = 64
        for name, kernel in (("triton two-pass (y, mean, rstd)", triton_ln()),
                             ("triton two-pass, y alone", triton_ln(stats=False)),
                             ("triton two-pass over n - 1 (bug)", triton_ln(nm1=True)),
                             ("torch.compile F.layer_norm (Inductor)", compiled),
                             ("torch F.layer_norm (CUDA)", eager)):
            try:
                o = reveal_order(kernel, "layer_norm", n=n, rows=rows, device="cuda", max_calls=4000)
            except Exception as e:  # a refusal is printed, the run goes on
                print("%s, n=%d: %s: %s" % (name, n, type(e).__name__, e))
                continue
            x = family("normal", (rows, n), "float32", seed=5)
            res = kernel(torch.from_numpy(x).cuda())
            got = tuple(t.cpu().numpy() for t in res) if isinstance(res, tuple) else (res.cpu().numpy(),)
            ref = er.layer_norm(x, n)
            outs = got + (None,) * (3 - len(got))
            d = ref.covers(outs)
            line = "%s, n=%d: %s\n  fresh rows: default %s" % (name, n, o, "pass" if d.all() else "FAIL")
            if o.depth is not None:
                r = ref.covers(outs, **o.standard)
                line += ", revealed %s" % ("pass" if r.all() else "FAIL (%d of y's %d elements outside)"
                                           % (r.y.n_failed, r.y.classes.size))
            print(line)
            sys.stdout.flush()



def two_pass(x, ddof):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).sum(-1, keepdim=True) / (x.shape[-1] - ddof)
    return (x - m) * torch.rsqrt(v + 1e-5)


def inductor_blind():
    kernels = {"inductor F.layer_norm": torch.compile(lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],))),
               "inductor two-pass": torch.compile(lambda x: two_pass(x, 0)),
               "inductor two-pass over n - 1 (bug)": torch.compile(lambda x: two_pass(x, 1))}
    for n in (768, 2048, 8192):
        for name, kernel in kernels.items():
            try:
                o = reveal_order(kernel, "layer_norm", n=n, rows=16, device="cuda", max_calls=6000)
            except Exception as e:
                print("%s, n=%d: %s: %s" % (name, n, type(e).__name__, e))
                continue
            verdicts = []
            for fam, shift in (("normal", 0.0), ("shifted", 3.0)):
                x = (family("normal", (16, n), "float32", seed=7) + np.float32(shift)).astype(np.float32)
                y = kernel(torch.from_numpy(x).cuda()).cpu().numpy()
                ref = er.layer_norm(x, n)
                d = ref.covers((y, None, None)).all()
                r = ref.covers((y, None, None), **o.standard).all() if o.depth is not None else None
                verdicts.append("%s: default %s%s" % (fam, "pass" if d else "FAIL",
                                                       "" if r is None else ", revealed %s" % ("pass" if r else "FAIL")))
            print("%s, n=%d: %s\n  %s" % (name, n, o, "; ".join(verdicts)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
    inductor_blind()
