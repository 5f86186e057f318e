"""Checking a flash-attention kernel's O and LSE with exactref (docs/guides/check-attention.md).

The kernel is a numpy stand-in for a Triton or CUDA one: fp32 arithmetic, key blocks of 32, the running maximum
and the rescaling, exp2 of the folded scale, P rounded to fp16 before P V, each block's P V summed exactly and
rounded once to fp32 (as a tensor core's wide accumulation may). Its inputs are multiples of 1/8, so that its scores
and its blocks' P V come out the same on every machine, whatever order the BLAS adds them in (exact in fp32 and in
float64).
Run: PYTHONPATH=bindings/python python3 examples/python/attention_check.py"""

import numpy as np

import exactref as er

f32 = np.float32


def flash(q, k, v, causal=False, off_by_one=0, lse_base2=False, block=32):
    H, Sq, D = q.shape
    Sk = k.shape[1]
    c = f32(f32(1 / np.sqrt(D)) * f32(1.4426950408889634))   # the scale folded into exp2's argument
    exp2 = lambda x: np.exp2(x.astype(np.float64)).astype(f32)  # noqa: E731 - within an ulp, the same everywhere
    O = np.zeros((H, Sq, D), np.float16)
    L = np.zeros((H, Sq), f32)
    rows = np.arange(Sq)[:, None]
    for h in range(H):
        m, l, acc = np.full(Sq, -np.inf, f32), np.zeros(Sq, f32), np.zeros((Sq, D), f32)
        for b0 in range(0, Sk, block):
            cols = np.arange(b0, min(b0 + block, Sk))[None, :]
            t = (q[h].astype(f32) @ k[h, b0:b0 + block].astype(f32).T) * c
            if causal:
                t = np.where(cols <= rows + off_by_one, t, -np.inf).astype(f32)
            mn = np.maximum(m, t.max(axis=1))
            p = exp2(t - mn[:, None])
            alpha = exp2(m - mn)
            ps = np.zeros(Sq, f32)
            for j in range(p.shape[1]):  # the block's p added in key order (numpy's own sums vary with the machine)
                ps += p[:, j]
            l = l * alpha + ps
            pv = p.astype(np.float16).astype(np.float64) @ v[h, b0:b0 + block].astype(np.float64)  # exact
            acc = acc * alpha[:, None] + pv.astype(f32)
            m = mn
        O[h] = (acc / l[:, None]).astype(np.float16)
        lg = np.log2(l.astype(np.float64)).astype(f32)  # within an ulp, the same everywhere, as exp2
        L[h] = (m + lg) if lse_base2 else (m + lg) * f32(0.6931471805599453)
    return O, L


rng = np.random.default_rng(0)
q, k, v = ((rng.integers(-16, 17, (2, 100, 64)) / 8).astype(np.float16) for _ in range(3))
ref = er.attention(q, k, v, causal=True)

print("-- a correct kernel")
good = flash(q, k, v, causal=True)
print(ref.covers(good))
print("-- its LSE under p_sum=fp32 (the denominator sums p before its rounding to fp16, as this kernel does)")
print(ref.covers(good, p_sum="fp32").lse)
print("-- causal off by one: each query also sees the next key")
print(ref.covers(flash(q, k, v, causal=True, off_by_one=1)))
print("-- LSE left in base 2 (O is right)")
res = ref.covers(flash(q, k, v, causal=True, lse_base2=True))
print("out passes: %s, lse passes: %s" % (res.out.all(), res.lse.all()))
print(res.lse)
