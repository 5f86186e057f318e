"""Captures softmax's and log_softmax's backward passes on the GPU: torch's CUDA kernels
(torch._softmax_backward_data, torch._log_softmax_backward_data), autograd through F.softmax / F.log_softmax, the
decomposition dy * y - y * sum(dy * y) compiled by torch.compile (Inductor) and its log_softmax form, and a planted
bug (the sum dropped), in fp32, fp16 and bf16, rows of 1 to 5000, on four families of inputs: normal logits and
gradients; masked lanes (a third of the logits -inf: y = 0, log y = -inf); wide (logits and gradients in the
hundreds: y down to subnormals and zeros, products far apart); ties (integer logits, gradients on a grid of eighths:
exact products, sums on rounding ties). Each case stores y (the forward output the kernel reads), dy and dx. Writes
OUT/softmax_backward.npz (cid__in__y, cid__in__dy, cid__out__dx; bfloat16 as uint16) and OUT/softmax_backward.txt
(id op kernel dtype family rows cols). With EXACTREF_LIBRARY set it also checks every case with
exactref and prints the verdicts (with EXACTREF_DEVICE=1, every case as CUDA tensors: the GPU paths). Run:
OUT=/some/dir python3 capture_softmax_backward.py"""
import os

import numpy as np
import torch
import torch.nn.functional as F

from capture_common import write_case_files


def stored(t):
    a = t.detach().cpu()
    return a.view(torch.int16).numpy().view(np.uint16) if a.dtype == torch.bfloat16 else a.numpy()


def kernels(op):
    """(name, fn(dy, y, x)) for op softmax or log_softmax; x is the forward input (autograd recomputes y from it)."""
    data = torch._softmax_backward_data if op == "softmax" else torch._log_softmax_backward_data
    fwd = F.softmax if op == "softmax" else F.log_softmax

    def native(dy, y, x):
        return data(dy, y, -1, y.dtype)

    def autograd(dy, y, x):
        xx = x.clone().requires_grad_(True)
        out = fwd(xx, dim=-1)
        (g,) = torch.autograd.grad(out, xx, dy)
        return g

    if op == "softmax":
        def decomposed(dy, y, x):
            p = dy * y
            return p - y * p.sum(-1, keepdim=True)
    else:
        def decomposed(dy, y, x):
            return dy - torch.exp(y) * dy.sum(-1, keepdim=True)
    compiled = torch.compile(decomposed)

    def bug(dy, y, x):
        return dy * y if op == "softmax" else dy
    return [("native", native), ("autograd", autograd), ("inductor", compiled), ("bug_no_sum", bug)]


def inputs(family, rows, cols, dtype):
    """The logits x and the gradient dy of a family (on the GPU, in dtype)."""
    x = torch.randn(rows, cols, device="cuda") * 3
    dy = torch.randn(rows, cols, device="cuda")
    if family == "masked":
        mask = torch.rand(rows, cols, device="cuda") < 1 / 3
        mask[:, 0] = False
        x = x.masked_fill(mask, float("-inf"))
    elif family == "wide":
        x, dy = x * 40, dy * 300
    elif family == "ties":
        x = torch.randint(-6, 7, (rows, cols), device="cuda").float()
        dy = torch.randint(-16, 17, (rows, cols), device="cuda").float() / 8
    return x.to(dtype), dy.to(dtype)


def main():
    out = os.environ.get("OUT", ".")
    torch.manual_seed(7)
    arrays, lines = {}, []
    cid = 0
    for op in ("softmax", "log_softmax"):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for family, rows, cols in [(f, r, c) for f in ("normal", "masked", "wide", "ties")
                                       for r, c in ((4, 1), (3, 7), (8, 128), (4, 1000), (2, 5000))]:
                x, dy = inputs(family, rows, cols, dtype)
                y = (F.softmax if op == "softmax" else F.log_softmax)(x, dim=-1)
                for name, fn in kernels(op):
                    dx = fn(dy, y, x)
                    torch.cuda.synchronize()
                    key = "c%03d" % cid
                    arrays[key + "__in__y"] = stored(y)
                    arrays[key + "__in__dy"] = stored(dy)
                    arrays[key + "__out__dx"] = stored(dx.to(dtype))
                    lines.append("%s %s %s %s %s %d %d" % (key, op, name, str(dtype).split(".")[1], family, rows, cols))
                    cid += 1
    write_case_files(out, "softmax_backward", arrays, lines, "# id op kernel dtype family rows cols")
    print("wrote %d cases" % cid)
    if os.environ.get("EXACTREF_LIBRARY"):
        import exactref as er
        import ml_dtypes

        verdicts = {}
        for ln in lines:
            key, op, name, dt, family, rows, cols = ln.split()
            y, dy, dx = (arrays[key + s] for s in ("__in__y", "__in__dy", "__out__dx"))
            if dt == "bfloat16":
                y, dy, dx = (a.view(ml_dtypes.bfloat16) for a in (y, dy, dx))
            if os.environ.get("EXACTREF_DEVICE") == "1":  # CUDA tensors: the GPU paths
                y, dy, dx = (torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda() if dt == "bfloat16"
                             else torch.from_numpy(a).cuda() for a in (arrays[key + s] for s in
                                                                      ("__in__y", "__in__dy", "__out__dx")))
            ref = (er.softmax_backward if op == "softmax" else er.log_softmax_backward)(dy, y)
            ok = bool(ref.covers(dx, compute="float32").all())
            verdicts.setdefault((op, name, family), []).append(ok)
        for (op, name, family), v in sorted(verdicts.items()):
            print("%s %s %s: %d of %d covered" % (op, name, family, sum(v), len(v)))


if __name__ == "__main__":
    main()
