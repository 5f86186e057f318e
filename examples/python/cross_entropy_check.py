"""A fused cross-entropy kernel checked by exactref (docs/guides/check-a-backward-kernel.md): a numpy stand-in for
Liger's kernel (bf16 logits, fp32 arithmetic: the maximum, the sum of exp, lse = m + log(sum), the smoothed row loss
over the rows counted; dlogits = (softmax - eps / C) / W, minus (1 - eps) / W at the target, stored in bf16), run
correct and with three bugs, each judged by exactref (products="compute": a fused kernel rounds nothing to the
logits' format) and by torch.testing.assert_close's tolerances (fp32 for the loss, bf16 for dlogits) against a float64
reference."""
import ml_dtypes
import numpy as np

import exactref as er

bf16, f32 = ml_dtypes.bfloat16, np.float32
rng = np.random.default_rng(7)
N, C, eps = 256, 4096, 0.1
x = (2 * rng.standard_normal((N, C))).astype(bf16)
t = rng.integers(0, C, N)
t[rng.random(N) < 0.25] = -100  # ignored rows
keep = t != -100
W = int(keep.sum())


def kernel(bug=None):
    xf = x.astype(f32)
    m = xf.max(1, keepdims=True)
    e = np.exp(xf - m).astype(f32)
    cols = C - 1 if bug == "tail" else C  # the bug: the sum of exp misses the last class
    s = e[:, :cols].sum(1, dtype=f32, keepdims=True)
    lse = (m + np.log(s).astype(f32))[:, 0]
    tt = np.where(keep, t, 0)
    rows = np.arange(N)
    loss = (lse - xf[rows, tt]) * f32(1 - eps) + (f32(eps) * lse - (f32(eps / C) * xf).sum(1, dtype=f32))
    loss = np.where(keep, loss / f32(W), f32(0)).sum(dtype=f32)
    g = ((e / s).astype(f32) - f32(eps / C)) / f32(W)
    g[rows, tt] -= f32(1 - eps) / f32(W) if bug != "target_eps" else f32(1) / f32(W)  # the bug: 1, not 1 - eps
    if bug != "ignored":  # the bug: the ignored rows' gradient left as the softmax's
        g[~keep] = 0
    return np.array([loss]), g.astype(bf16)


def tolerance_verdict(loss, g):
    """torch.testing.assert_close's rules (fp32: rtol 1.3e-6, atol 1e-5; bf16: rtol 1.6e-2, atol 1e-5) against a
    float64 cross-entropy."""
    xd = x.astype(np.float64)
    m = xd.max(1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(xd - m).sum(1))
    tt = np.where(keep, t, 0)
    rows = np.arange(N)
    want_loss = np.where(keep, lse - (1 - eps) * xd[rows, tt] - eps / C * xd.sum(1), 0).sum() / W
    want_g = np.exp(xd - lse[:, None]) - eps / C
    want_g[rows, tt] -= 1 - eps
    want_g[~keep] = 0
    want_g /= W
    ok = abs(float(loss[0]) - want_loss) <= 1e-5 + 1.3e-6 * abs(want_loss)
    ok = ok and np.all(np.abs(g.astype(np.float64) - want_g) <= 1e-5 + 1.6e-2 * np.abs(want_g))
    return "passes" if ok else "fails"


ref = er.cross_entropy(x, t, label_smoothing=eps)
for title, bug in (("a correct kernel", None), ("the sum of exp misses the last class", "tail"),
                   ("the target's gradient without its smoothing", "target_eps"),
                   ("the ignored rows' gradient not zeroed", "ignored")):
    loss, g = kernel(bug)
    res = ref.covers((loss, g), products="compute")
    print("-- %s: exactref %s, the tolerances %s" % (title, "PASS" if res.all() else "FAIL",
                                                       tolerance_verdict(loss, g)))
    for name in ref.OUTPUTS:
        r = res.results[name]
        print("   %-7s %s" % (name, r.report.splitlines()[0].split(": ")[-1] + "; " + r.report.splitlines()[1].strip()))
