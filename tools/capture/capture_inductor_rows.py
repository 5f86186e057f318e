"""Row ops compiled by torch.compile (Inductor) on an H200: softmax, log_softmax and rms_norm (F.rms_norm, no
weight, eps 1e-6), and two planted bugs compiled the same way (softmax whose denominator misses the row's last term;
rms_norm whose mean square divides by n - 1), on N(0, 1) rows times 3, fp32 and bf16, at 8 x 1024 and 8 x 8192, and in
fp32 at 2 x 131072 (past the length where Inductor splits a reduction or loops over the row). Each case is checked
here under the default standard and, for softmax, under online=yes, math=triton and exp_ulps=fast (log_softmax: the
last two), and the verdicts are printed;
the cases of up to 8192 are written to OUT/inductor_rows.npz (each group's x once, gNN__in__x; each case's y) and
OUT/inductor_rows.txt (id kernel dtype rows n group family), which test_resolution.py reads. At 8 x 1024 also
the wide, masked and subnormal families (family_rows).
Run: OUT=/some/dir EXACTREF_LIBRARY=... python3 capture_inductor_rows.py"""
import os

import torch
import torch.nn.functional as F

import exactref as er
from capture_common import host, new_group, store_case, torch_header, write_case_files

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
arrays, lines = {}, []


def softmax_missing_last(x):
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / (e.sum(-1, keepdim=True) - e[..., -1:])


def rms_n_minus_1(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) / (x.shape[-1] - 1) + 1e-6)


kernels = {
    "softmax": torch.compile(lambda x: torch.softmax(x, -1)),
    "log_softmax": torch.compile(lambda x: torch.log_softmax(x, -1)),
    "rms_norm": torch.compile(lambda x: F.rms_norm(x, (x.shape[-1],), eps=1e-6)),
    "bug_softmax_missing_last": torch.compile(softmax_missing_last),
    "bug_rms_n_minus_1": torch.compile(rms_n_minus_1),
}
STANDARDS = (("default", {}), ("online", {"online": "yes"}), ("triton", {"math": "triton"}),
             ("fast", {"exp_ulps": "fast"}))


def reference(kind, x, n):
    if "softmax" in kind and "log" not in kind:
        return er.softmax(x)
    if kind == "log_softmax":
        return er.log_softmax(x)
    return er.rmsnorm(x, eps=1e-6)


def as_numpy(t):
    a = host(t)
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return a.view(ml_dtypes.bfloat16)
    return a


def family_rows(fam, rows, n, g):
    """normal: N(0, 1) times 3; wide: times 100 (exps that underflow, |x| in the hundreds); masked: normal with a
    quarter of the lanes -inf (never the last); subnormal: N(0, 1) times 2^-130 (fp32's and bf16's subnormals)."""
    x = torch.randn(rows, n, device="cuda", generator=g)
    if fam == "wide":
        return x * 100
    if fam == "subnormal":
        return x * 2.0 ** -130
    x = x * 3
    if fam == "masked":
        drop = torch.rand(rows, n, device="cuda", generator=g) < 0.25
        drop[:, -1] = False
        x = x.masked_fill(drop, float("-inf"))
    return x


g = torch.Generator(device="cuda").manual_seed(43)
CASES = [("normal", 8, 1024, ("float32", "bfloat16")), ("normal", 8, 8192, ("float32", "bfloat16")),
         ("normal", 2, 131072, ("float32",))] + [(f, 8, 1024, ("float32", "bfloat16"))
                                               for f in ("wide", "masked", "subnormal")]
for fam, rows, n, dtypes in CASES:
    for dt in dtypes:
        x = family_rows(fam, rows, n, g).to(getattr(torch, dt))
        keep = n <= 8192
        gid = new_group(arrays, {"x": x}) if keep else None
        for kind, fn in kernels.items():
            if fam == "masked" and "rms" in kind:
                continue  # -inf lanes are softmax's masks
            y = fn(x)
            torch.cuda.synchronize()
            xs, ys = as_numpy(x), as_numpy(y)
            verdicts = []
            for name, opts in STANDARDS:
                if ("rms" in kind and name != "default") or ("log" in kind and name == "online"):
                    continue  # options those ops refuse
                ok = reference(kind, xs, n).covers(ys, **opts).all()
                verdicts.append("%s %s" % (name, "covered" if ok else "OUTSIDE"))
            print("%-26s %-8s %-9s %d x %-6d %s" % (kind, dt, fam, rows, n, "; ".join(verdicts)), flush=True)
            if keep:
                cid = "c%04d" % len(lines)
                store_case(arrays, cid, {}, {"y": y})
                lines.append("%s %s %s %d %d %s %s" % (cid, kind, dt, rows, n, gid, fam))
write_case_files(OUT, "inductor_rows", arrays, lines, torch_header(), compressed=True)
print("captured %d cases" % len(lines))
