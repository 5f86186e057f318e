"""A layer_norm backward kernel checked by exactref (docs/guides/check-a-backward-kernel.md): a numpy stand-in for
Triton's tutorial kernel (bf16 inputs, fp32 arithmetic, dx, dweight and dbias stored in bf16), run correct and with
three bugs, each judged by exactref and by a tolerance (torch.testing.assert_close's for bf16: rtol 1.6e-2, atol 1e-5,
against a float64 reference)."""
import ml_dtypes
import numpy as np

import exactref as er

bf16, f32 = ml_dtypes.bfloat16, np.float32
rng = np.random.default_rng(2024)
R, n = 64, 512
x = rng.standard_normal((R, n)).astype(bf16)
dy = rng.standard_normal((R, n)).astype(bf16)
w = (1 + 0.25 * rng.standard_normal(n)).astype(bf16)
# what the forward kernel saved: mean and rstd in fp32
xd = x.astype(np.float64)
mean = xd.mean(1).astype(f32)
rstd = (1 / np.sqrt(((xd - mean[:, None]) ** 2).mean(1) + 1e-5)).astype(f32)


def kernel(bug=None):
    """dx = (wdy - (xhat c1 + c2)) rstd per row, c1 = sum(xhat wdy) / n, c2 = sum(wdy) / n; dweight = sum over rows of
    dy xhat, dbias = sum over rows of dy, in fp32."""
    xf, dyf, wf = x.astype(f32), dy.astype(f32), w.astype(f32)
    r = rstd
    if bug == "unbiased":  # the bug: rstd recomputed with the unbiased variance, not read from the forward pass
        r = (f32(1) / np.sqrt(((xf - mean[:, None]) ** 2).sum(1, dtype=f32) / f32(n - 1) + f32(1e-5))).astype(f32)
    xhat = (xf - mean[:, None]) * r[:, None]
    wdy = wf * dyf
    cols = n - 1 if bug == "mask" else n  # the bug: the row sums miss the last column
    c1 = (xhat[:, :cols] * wdy[:, :cols]).sum(1, dtype=f32) / f32(n)
    c2 = wdy[:, :cols].sum(1, dtype=f32) / f32(n)
    dx = (wdy - (xhat * c1[:, None] + c2[:, None])) * r[:, None]
    if bug == "bf16_partials":  # the bug: dweight's partial sums over blocks of 16 rows kept in bf16
        dw = np.zeros(n, bf16)
        for r0 in range(0, R, 16):
            dw = (dw.astype(f32) + (dyf[r0:r0 + 16] * xhat[r0:r0 + 16]).sum(0, dtype=f32)).astype(bf16)
    else:
        dw = (dyf * xhat).sum(0, dtype=f32).astype(bf16)
    return dx.astype(bf16), dw, dyf.sum(0, dtype=f32).astype(bf16)


def tolerance_verdict(outs):
    """torch.testing.assert_close's rule for bf16 against a float64 reference."""
    xh = (xd - mean[:, None].astype(np.float64)) * rstd[:, None].astype(np.float64)
    g = dy.astype(np.float64) * w.astype(np.float64)
    want = (rstd[:, None] * (g - g.mean(1, keepdims=True) - xh * (g * xh).mean(1, keepdims=True)),
            (dy.astype(np.float64) * xh).sum(0), dy.astype(np.float64).sum(0))
    ok = all(np.all(np.abs(o.astype(np.float64) - t) <= 1e-5 + 1.6e-2 * np.abs(t)) for o, t in zip(outs, want))
    return "passes" if ok else "fails"


ref = er.layer_norm_backward(dy, x, mean, rstd, w)
for title, bug in (("a correct kernel", None), ("the row sums miss the last column", "mask"),
                   ("dweight's partial sums kept in bf16", "bf16_partials"),
                   ("rstd recomputed with the unbiased variance", "unbiased")):
    outs = kernel(bug)
    res = ref.covers(outs)
    print("-- %s: exactref %s, the bf16 tolerance %s" % (title, "PASS" if res.all() else "FAIL",
                                                          tolerance_verdict(outs)))
    for name in ref.OUTPUTS:
        r = res.results[name]
        print("   %-7s %s" % (name, r.report.splitlines()[0].split(": ")[-1] + "; " + r.report.splitlines()[1].strip()))
