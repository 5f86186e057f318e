"""softmax, log_softmax and rmsnorm orders on an H200 (exactref.testing.reveal_order's triplet probes, reveal.md
Lemma V3): Triton softmax and rmsnorm kernels (one row a program, tl.sum over one block), torch.compile'd
(Inductor) softmax, log_softmax, F.rms_norm and an rmsnorm formula, and torch's CUDA kernels; with planted bugs (a
softmax denominator without its last term, rmsnorm over n - 1, eps outside the square root). Each line is the Order,
then the kernel's outputs on fresh rows of the probes' shape (the `normal` family, and `wide`) checked under the
default standard and under the revealed one (Triton's with math=triton). Needs a CUDA device, torch and Triton;
run with EXACTREF_LIBRARY pointing at a built library.

    python3 tools/capture/reveal_row_ops.py > reveal_row_ops.txt
"""
import sys

import torch
import triton
import triton.language as tl

import exactref as er
from exactref.testing import family, reveal_order


@triton.jit
def _softmax(X, Y, n, BLOCK: tl.constexpr, DROP_LAST: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * n + cols, mask=cols < n, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    s = tl.sum(tl.where(cols < n - 1, e, 0.0) if DROP_LAST else e, axis=0)
    tl.store(Y + row * n + cols, e / s, mask=cols < n)


@triton.jit
def _rmsnorm(X, Y, n, eps, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * n + cols, mask=cols < n, other=0.0)
    ss = tl.sum(x * x, axis=0)
    if BUG == 1:  # the mean square over n - 1
        r = 1 / tl.sqrt(ss / (n - 1) + eps)
    elif BUG == 2:  # eps outside the square root
        r = 1 / (tl.sqrt(ss / n) + eps)
    else:
        r = 1 / tl.sqrt(ss / n + eps)
    tl.store(Y + row * n + cols, x * r, mask=cols < n)


def triton_softmax(drop_last=False):
    def kernel(x):
        y = torch.empty_like(x)
        _softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]), DROP_LAST=drop_last,
                                num_warps=8)
        return y
    return kernel


def triton_rmsnorm(bug=0):
    def kernel(x):
        y = torch.empty_like(x)
        _rmsnorm[(x.shape[0],)](x, y, x.shape[1], 1e-6, BLOCK=triton.next_power_of_2(x.shape[1]), BUG=bug,
                                num_warps=8)
        return y
    return kernel


def softmax_drop_last(x):
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e[:, :-1].sum(-1, keepdim=True)


def rms(x, ddof=0):
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - ddof) + 1e-6)


def kernels():
    c = torch.compile
    return [
        ("triton softmax (tl.exp, 8 warps)", "softmax", triton_softmax(), True),
        ("triton softmax without its last term (bug)", "softmax", triton_softmax(True), True),
        ("triton rmsnorm (8 warps)", "rmsnorm", triton_rmsnorm(), True),
        ("triton rmsnorm over n - 1 (bug)", "rmsnorm", triton_rmsnorm(1), True),
        ("triton rmsnorm, eps outside the sqrt (bug)", "rmsnorm", triton_rmsnorm(2), True),
        ("inductor softmax", "softmax", c(lambda x: torch.softmax(x, -1)), False),
        ("inductor log_softmax", "log_softmax", c(lambda x: torch.log_softmax(x, -1)), False),
        ("inductor softmax without its last term (bug)", "softmax", c(softmax_drop_last), False),
        ("inductor F.rms_norm", "rmsnorm", c(lambda x: torch.nn.functional.rms_norm(x, (x.shape[1],), eps=1e-6)),
         False),
        ("inductor rmsnorm formula", "rmsnorm", c(lambda x: rms(x)), False),
        ("inductor rmsnorm formula over n - 1 (bug)", "rmsnorm", c(lambda x: rms(x, 1)), False),
        ("torch softmax (CUDA)", "softmax", lambda x: torch.softmax(x, -1), False),
        ("torch log_softmax (CUDA)", "log_softmax", lambda x: torch.log_softmax(x, -1), False),
        ("torch F.rms_norm (CUDA)", "rmsnorm", lambda x: torch.nn.functional.rms_norm(x, (x.shape[1],), eps=1e-6),
         False),
    ]


def reference(op, x):
    return er.rmsnorm(x, eps=1e-6) if op == "rmsnorm" else getattr(er, op)(x)


def main(sizes=(1024, 4096, 8192), rows=64):
    for n in sizes:
        for name, op, kernel, triton_math in kernels():
            try:
                o = reveal_order(kernel, op, n=n, rows=rows, device="cuda", max_calls=8000,
                                 eps=1e-6 if op == "rmsnorm" else None)
            except Exception as e:  # a refusal is printed, the run goes on
                print("%s, n=%d: %s: %s" % (name, n, type(e).__name__, e))
                continue
            extra = {"math": "triton"} if triton_math else {}
            verdicts = []
            for fam in ("normal", "wide"):
                x = family(fam, (rows, n), "float32", seed=5)
                y = kernel(torch.from_numpy(x).cuda()).cpu().numpy()
                ref = reference(op, x)
                d = ref.covers(y, **extra)
                v = "%s: default %s" % (fam, "pass" if d.all() else "FAIL (%d)" % d.n_failed)
                if o.depth is not None:
                    r = ref.covers(y, **dict(o.standard, **extra))
                    v += ", revealed %s" % ("pass" if r.all() else "FAIL (%d of %d outside)"
                                            % (r.n_failed, r.classes.size))
                verdicts.append(v)
            print("%s, n=%d: %s%s\n  %s" % (name, n, o, "  [wrong on its probe rows]" if o.wrong is not None else "",
                                            "; ".join(verdicts)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
