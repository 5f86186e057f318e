"""Block-scaled formats: an MXFP8 quantisation kernel, an NVFP4 one and an MXFP8 GEMM, each correct and with a bug,
checked with exactref (docs/guides/check-low-precision-kernels.md shows this output)."""
import ml_dtypes
import numpy as np

import exactref as er

F32, E4M3, E2M1, E8M0 = np.float32, ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu
rng = np.random.default_rng(0)
x = (rng.standard_normal((4, 128)) * np.exp2(rng.integers(-8, 8, (4, 4)).repeat(32, 1))).astype(F32)


def mxfp8(x, round_up=False):
    """OCP MX: per block of 32, X = 2^(floor(log2 amax) - 8) (the bug: the ceiling), q = RN_e4m3(x / X) saturated."""
    xb = x.reshape(x.shape[0], -1, 32).astype(np.float64)
    m, ex = np.frexp(np.abs(xb).max(-1))
    e = ex - 1 - 8 + (round_up & (m != 0.5))
    X = np.exp2(np.clip(e, -127, 127).astype(np.float64))
    q = np.clip(xb / X[..., None], -448, 448).astype(F32).astype(E4M3).reshape(x.shape)
    return q, X.astype(E8M0)


def nvfp4(x, unrounded_scale=False):
    """Transformer Engine's NVFP4 in fp32: S = 2688 / amax, per block of 16 an e4m3 scale RN(amax_b S / 6), q =
    RN_e2m1(x S / scale) saturated (the bug: q encoded with the scale before its rounding to e4m3)."""
    xb = x.reshape(x.shape[0], -1, 16)
    s_enc = F32(2688.0) / np.abs(x).max()
    dec = (np.abs(xb).max(-1) * (s_enc * F32(1 / 6))).astype(F32)
    sf = dec.astype(E4M3)
    enc = F32(1.0) / ((dec if unrounded_scale else sf.astype(F32)) * (F32(1.0) / s_enc))
    q = np.clip(xb * enc[..., None], -6, 6).astype(F32).astype(E2M1).reshape(x.shape)
    return q, sf


ref = er.quantize(x, "float8_e4m3fn", ("block", 32), recipe="mx")
for name, bug in (("MXFP8 quantize", False), ("MXFP8, exponent rounded up", True)):
    q, X = mxfp8(x, bug)
    print("%-32s %s" % (name, repr(ref.covers((q, None, X)))))
ref = er.quantize(x, "float4_e2m1fn", ("block", 16), recipe="nvfp4")
for name, bug in (("NVFP4 quantize (TE's form)", False), ("NVFP4, unrounded block scale", True)):
    q, sf = nvfp4(x, bug)
    print("%-32s %s" % (name, repr(ref.covers((q, None, sf)))))

# an MXFP8 GEMM: A's blocks along its rows, B's along its columns; the kernel adds the dequantised products in fp32
# in a shuffled order (the bug: column 0 of B dequantised with twice its first block's scale)
qa, sa = mxfp8(x)
qb, sb = (np.ascontiguousarray(t.T) for t in mxfp8(rng.standard_normal((16, 128)).astype(F32)))
a = qa.astype(np.float64) * np.repeat(sa.astype(np.float64), 32, 1)
mm = er.scaled_matmul(qa, qb, sa, sb, block=32)
for name, bug in (("MXFP8 GEMM", False), ("MXFP8 GEMM, one scale doubled", True)):
    b = qb.astype(np.float64) * np.repeat(sb.astype(np.float64), 32, 0)
    if bug:
        b[:32, 0] *= 2
    out = np.zeros((4, 16), F32)
    for k in rng.permutation(128):
        out += (a[:, k:k + 1] * b[k:k + 1, :]).astype(F32)
    res = mm.covers(out)
    print("%-32s %s" % (name, "pass" if res.all() else "FAIL: " + res.report.splitlines()[1].strip()))
