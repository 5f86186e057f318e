"""A FlashAttention-style backward checked by exactref (docs/guides/check-a-backward-kernel.md): a numpy stand-in
for a fused backward kernel (fp16 q, k, v, o and dO; fp32 arithmetic, each product, row sum and exp rounded once to
fp32 from float64, so that it prints the same under every numpy and BLAS: P = exp(scale q k^T - lse) from the saved LSE,
D = rowsum(dO o) from the saved o, dS = P (dP - D), dQ accumulated over key blocks of 64, P and dS kept in fp32 and
the gradients returned in fp32), run correct and with three bugs, each judged by exactref (products="compute": the
kernel rounds neither P nor dS to fp16) and by FlashAttention's own test rule (each gradient's largest error against
a float64 backward at most twice that of a plain fp32 backward)."""
import numpy as np

import exactref as er

f32, f16 = np.float32, np.float16
rng = np.random.default_rng(3)
H, S, D = 4, 256, 64
q, k, v, do = (rng.standard_normal((H, S, D)).astype(f16) for _ in range(4))
causal = np.tril(np.ones((S, S), bool))
scale = 1 / np.sqrt(D)
# the forward's saved outputs: o in fp16, lse in fp32 (here from a float64 forward)
s64 = np.where(causal, q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1) * scale, -np.inf)
m = s64.max(-1, keepdims=True)
w = np.exp(s64 - m)
O = (w / w.sum(-1, keepdims=True)) @ v.astype(np.float64)  # unrounded
o = O.astype(f16)
lse = (m + np.log(w.sum(-1, keepdims=True)))[..., 0].astype(f32)


def mm(a, b, dt):
    """a @ b in float64, rounded once to dt."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(dt)


def backward(dt, bug=None):
    """The backward in dt (float32: the kernel and the fp32 reference; float64: the reference)."""
    qf, kf, vf, gf = (x.astype(dt) for x in (q, k, v, do))
    of = O.astype(dt) if bug == "D from the unrounded O" else o.astype(dt)
    s = np.where(causal, mm(qf, kf.transpose(0, 2, 1), dt) * dt(scale), -np.inf).astype(dt)
    p = np.exp((s - lse[..., None].astype(dt)).astype(np.float64)).astype(dt)
    dp = mm(gf, vf.transpose(0, 2, 1), dt)
    ds = p * (dp - (gf * of).astype(np.float64).sum(-1).astype(dt)[..., None])
    dq = np.zeros_like(qf)
    for j0 in range(0, S, 64):  # dQ over key blocks, as the kernel's atomics add them
        if bug == "one key block's dQ lost" and j0 == 64:
            continue
        dq += mm(ds[..., j0:j0 + 64], kf[:, j0:j0 + 64], dt)
    dk = mm(ds.transpose(0, 2, 1), qf, dt)
    if bug != "dK without its scale":
        dk = dk * dt(scale)
    return dq * dt(scale), dk, mm(p.transpose(0, 2, 1), gf, dt)


ref64, pt = backward(np.float64), backward(f32)


def fa_rule(grads):
    """FlashAttention's test rule: max |kernel - float64| <= 2 max |fp32 reference - float64|, per gradient."""
    ok = all(np.abs(g - r).max() <= 2 * np.abs(p - r).max() for g, p, r in zip(grads, pt, ref64))
    return "passes" if ok else "fails"


ref = er.attention_backward(q, k, v, o, lse, do, causal=True)
for title, bug in (("a correct kernel", None), ("dK without its scale", "dK without its scale"),
                   ("D from the unrounded O", "D from the unrounded O"),
                   ("one key block's dQ lost", "one key block's dQ lost")):
    grads = backward(f32, bug)
    res = ref.covers(grads, products="compute")
    print("-- %s: exactref %s, FlashAttention's rule %s" % (title, "PASS" if res.all() else "FAIL", fa_rule(grads)))
    for name in ref.OUTPUTS:
        r = res.results[name]
        print("   %-2s %s" % (name, r.report.splitlines()[0].split(": ")[-1] + "; " + r.report.splitlines()[1].strip()))
