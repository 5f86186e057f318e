"""The OCP Microscaling formats and recipes: fp4 e2m1, fp6 e2m3 / e3m2 and the e8m0 scale as inputs and outputs, and
quantize's MX recipes judged against an implementation written here from the OCP MX v1.0 spec and torchao's scale
modes (numpy and ml_dtypes only: no code shared with the library). docs/algorithms/quantize.md, Lemma Q5."""
import numpy as np
import pytest

import exactref as er

ml_dtypes = pytest.importorskip("ml_dtypes")
E8M0 = ml_dtypes.float8_e8m0fnu
ELEMS = ("float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")
BLOCK = 32


def _dt(name):
    return np.dtype(getattr(ml_dtypes, name))


def _emax(name):
    """The exponent of the element format's largest power of two (8, 15, 2, 4, 2)."""
    return int(np.floor(np.log2(float(ml_dtypes.finfo(_dt(name)).max))))


def spec_mx(x, elem, mode="floor", block=BLOCK, saturate=True, wrong_block=False, scale_off=0):
    """MX quantisation of fp32 x along its last dimension, from the spec: X = 2^(floor(log2 amax) - emax_elem) held
    to e8m0's range (2^-127 for an all-zero block), NaN for a block holding an infinity or NaN; P = RN(x / X),
    saturated. mode "ceil" / "even" / "rceil" are torchao's other scale modes. The planted bugs: no saturation, the
    next block's scale, a scale exponent off by scale_off (q computed with the right one)."""
    qmax = float(ml_dtypes.finfo(_dt(elem)).max)
    xb = x.astype(np.float64).reshape(x.shape[:-1] + (-1, block))
    a = np.abs(xb).max(-1)
    finite = np.isfinite(a)
    a_safe = np.where(finite & (a > 0), a, 1.0)
    m, ex = np.frexp(a_safe)  # a = m 2^ex, m in [1/2, 1)
    k = ex - 1
    if mode == "ceil":
        k = k + (m != 0.5)
    elif mode == "even":  # amax rounded to the element's precision, ties up, before the floor
        p = int(ml_dtypes.finfo(_dt(elem)).nmant) + 1
        k = k + (m >= 1 - 2.0 ** -(p + 1))
    if mode == "rceil":  # torchao's RCEIL: descale = amax * (1 / qmax) in fp32, rounded up to a power of two
        d = (np.float32(a_safe) * np.float32(1.0 / qmax)).astype(np.float64)
        dm, dex = np.frexp(d)
        e = np.where(d <= 2.0 ** -127, -127, np.where(dm == 0.5, dex - 1, dex))
    else:
        e = k - _emax(elem)
    e = np.where(a == 0, -127, np.clip(e, -127, 127))
    if wrong_block:
        e = np.roll(e, 1, axis=-1)
    X = np.where(finite, np.exp2(e.astype(np.float64)), np.nan)
    v = xb / X[..., None]
    if saturate:
        v = np.clip(v, -qmax, qmax)
    q = v.astype(np.float32).astype(_dt(elem)).reshape(x.shape)
    Xs = np.where(finite, np.exp2((e + scale_off).astype(np.float64)), np.nan)
    return q, Xs.astype(E8M0)


def family(kind, rows=6, cols=4 * BLOCK, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-20, 20, (rows, cols // BLOCK)).repeat(BLOCK, -1))
    if kind == "zero_blocks":
        x[::2, :BLOCK] = 0
    elif kind == "huge":  # one element per block far above the rest
        x[:, ::BLOCK] *= 2.0 ** 12
    elif kind == "midpoints":  # x / X on the grid's midpoints (for e2m1: 0.25, 0.75, 1.25, 2.5, 3.5, 5): ties to even
        mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -2.5, -5.0, -0.75])
        x = rng.choice(mids, (rows, cols))
        x[:, ::BLOCK] = 6.0  # amax 6: X = 1 for e2m1
    elif kind == "subnormal":
        x = rng.standard_normal((rows, cols)) * 2.0 ** -140
    elif kind == "max_mantissa":  # block maxima just below a power of two: floor, ceil and even part ways
        x = rng.standard_normal((rows, cols))
        x[:, ::BLOCK] = 1.9990234375 * np.exp2(rng.integers(-8, 8, (rows, cols // BLOCK)))
    return x.astype(np.float32)


FAMILIES = ("normal", "zero_blocks", "huge", "midpoints", "subnormal", "max_mantissa")
RECIPES = {"floor": "mx", "ceil": "mx_ceil", "even": "mx_even", "rceil": "mx_rceil"}


@pytest.mark.parametrize("elem", ELEMS)
@pytest.mark.parametrize("mode", tuple(RECIPES))
def test_mx_spec_covered(elem, mode):
    for fam in FAMILIES:
        x = family(fam, seed=len(fam))
        q, X = spec_mx(x, elem, mode)
        res = er.quantize(x, elem, ("block", BLOCK), recipe=RECIPES[mode]).covers((q, None, X))
        assert res, (elem, mode, fam, res)
        # q is decided by the kernel's scale: every element the correct rounding, and the scale the exact one
        assert res.q.counts["exact"] == q.size, (elem, mode, fam)
        assert res.scale.counts["exact"] == X.size, (elem, mode, fam)


@pytest.mark.parametrize("elem", ELEMS)
def test_mx_bugs_caught(elem):
    x = family("max_mantissa", seed=3)
    ref = er.quantize(x, elem, ("block", BLOCK), recipe="mx")
    for bug in (dict(mode="ceil"), dict(wrong_block=True), dict(scale_off=1), dict(scale_off=-1)):
        q, X = spec_mx(x, elem, **bug)
        assert not ref.covers((q, None, X)), (elem, bug)
    # the spec's floor is not covered as rceil or ceil either where they differ
    q, X = spec_mx(x, elem)
    assert not er.quantize(x, elem, ("block", BLOCK), recipe="mx_ceil").covers((q, None, X))


@pytest.mark.parametrize("elem", ("float8_e4m3fn", "float8_e5m2"))
def test_mx_saturation_skipped_caught(elem):
    x = family("max_mantissa", seed=4)
    q, X = spec_mx(x, elem, saturate=False)
    bad = ~np.isfinite(q.astype(np.float64))
    assert bad.any()  # the family reaches the values beyond the element's largest
    res = er.quantize(x, elem, ("block", BLOCK), recipe="mx").covers((q, None, X))
    assert not res and res.q.counts["exact"] + res.q.counts["covered"] == q.size - bad.sum()


def test_mx_ties_round_to_even():
    x = family("midpoints", seed=5)
    q, X = spec_mx(x, "float4_e2m1fn")
    assert np.all(X.astype(np.float64) == 1.0)
    ref = er.quantize(x, "float4_e2m1fn", ("block", BLOCK), recipe="mx")
    assert ref.covers((q, None, X))
    # ties away from zero: 0.25 -> 0.5, 2.5 -> 3, 5 -> 6 (never the spec's rounding)
    away = (np.sign(x) * np.floor(np.abs(x) * 2 + 0.5) / 2).astype(np.float32)
    away = np.where(np.abs(away) > 4, np.sign(away) * np.minimum(np.round(np.abs(x) / 2 + 0.25) * 2, 6), away)
    qa = away.astype(np.float32).astype(_dt("float4_e2m1fn"))
    differs = qa.astype(np.float64) != q.astype(np.float64)
    assert differs.any()
    res = ref.covers((qa, None, X))
    assert res.q.counts["outside"] == differs.sum()


def test_mx_nan_block_and_zero_block():
    x = family("normal", rows=2, seed=6)
    x[0, 3] = np.nan
    x[1, BLOCK + 1] = np.inf
    x[1, 2 * BLOCK:3 * BLOCK] = 0
    q, X = spec_mx(x, "float8_e4m3fn")
    ref = er.quantize(x, "float8_e4m3fn", ("block", BLOCK), recipe="mx")
    assert ref.covers((q, None, X))
    Xf = X.astype(np.float64)
    assert np.isnan(Xf[0, 0]) and np.isnan(Xf[1, 1]) and Xf[1, 2] == 2.0 ** -127
    # a NaN block leaves q free; its scale must be NaN
    q2 = q.copy()
    q2[0, :BLOCK] = 0
    assert ref.covers((q2, None, X))
    X2 = X.copy()
    X2[0, 0] = 1.0
    assert not ref.covers((q, None, X2))
    # an all-zero block: every scale holds its zeros
    X3 = X.copy()
    X3[1, 2] = 2.0 ** 40
    assert ref.covers((q, None, X3))


def test_mx_scale_in_fp32_and_refusals():
    x = family("normal", rows=2, seed=7)
    q, X = spec_mx(x, "float6_e3m2fn")
    ref = er.quantize(x, "float6_e3m2fn", ("block", BLOCK), recipe="mx")
    assert ref.covers((q, None, X.astype(np.float32)))
    with pytest.raises(ValueError, match="recipe"):
        er.quantize(x, "float6_e3m2fn", ("block", BLOCK), recipe="mx_round")


def test_block_formats_as_inputs():
    rng = np.random.default_rng(8)
    for name in ("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"):
        A = (rng.standard_normal((5, 48)) * 3).astype(_dt(name))
        B = (rng.standard_normal((48, 4)) * 3).astype(_dt(name))
        C = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
        res = er.matmul(A, B).covers(C)
        assert res and res.counts["exact"] == C.size, name
    # a load reads the low 4 bits of an fp4 byte: bytes with the high bits set hold the same values
    clean = rng.integers(0, 16, (3, 40)).astype(np.uint8)
    dirty = clean | (rng.integers(1, 16, clean.shape).astype(np.uint8) << 4)
    want = clean.view(_dt("float4_e2m1fn")).astype(np.float64).sum(-1).astype(np.float32)
    assert er.sum(dirty.view(_dt("float4_e2m1fn")), dim=-1).covers(want)
    # e8m0 values: powers of two, checked as an input
    s = np.exp2(rng.integers(-127, 128, 16).astype(np.float64)).astype(E8M0)
    assert er.max(s, dim=0).covers(np.array(s.astype(np.float64).max(), np.float32))


def test_unpack_fp4_orders():
    b = np.array([[0x21, 0xF3]], np.uint8)  # nibbles: 1 = 0.5, 2 = 1, 3 = 1.5, 0xF = -6
    assert er.unpack_fp4(b, first="low").astype(np.float64).tolist() == [[0.5, 1.0, 1.5, -6.0]]
    assert er.unpack_fp4(b, first="high").astype(np.float64).tolist() == [[1.0, 0.5, -6.0, 1.5]]
    with pytest.raises(ValueError, match="first"):
        er.unpack_fp4(b, first=None)
    with pytest.raises(TypeError, match="uint8"):
        er.unpack_fp4(b.astype(np.int16), first="low")


def test_mx_captures():
    """H200 captures (tools/capture/capture_mx.py): a Triton MXFP8 kernel (floor and ceiling exponents, saturating
    conversions) and torch implementations of torchao's four scale modes for every MX element format, fp32 and bf16
    inputs with an all-zero block, block maxima just below a power of two, fp32 subnormals, a NaN and an infinity:
    covered; the ceiling claimed as the floor, the next block's scale, an exponent off by one and e4m3 without
    saturation caught. NVFP4: Transformer Engine's and torchao's forms in torch and a Triton kernel dividing with
    div.full.f32, covered; the per-tensor scale left out and q from the unrounded block scale caught."""
    from conftest import captures
    z, rows = captures("mx")
    seen = bugs = 0
    for cid, kind, mode, elem, r, c, gid in rows:
        x = z[gid + "__in__x"]
        qs = z[cid + "__out__q"]
        if qs.dtype == np.uint8:
            q = qs.view(_dt(elem))
        else:  # fp4 and fp6 as fp32 values: each a value of the format, or NaN / inf inside a NaN block
            q = qs.astype(_dt(elem))
            fin = np.isfinite(qs)
            assert np.array_equal(q.astype(np.float32)[fin], qs[fin]), cid
        nv = mode == "nvfp4"
        X = z[cid + "__out__scale"].view(E4M3 if nv else E8M0)
        recipe, block = ("nvfp4", 16) if nv else (RECIPES[mode], BLOCK)
        res = er.quantize(x, elem, ("block", block), recipe=recipe).covers((q, None, X))
        if nv:  # NVFP4's decode scales of 0 (blocks far below the tensor's amax) leave q free: covered, not exact
            seen += 1
            bugs += kind.startswith("bug")
            assert res.all() != kind.startswith("bug"), "%s %s %s: %s" % (cid, kind, mode, res)
            continue
        assert res.all() != kind.startswith("bug"), "%s %s %s %s: %s" % (cid, kind, mode, elem, res)
        if not kind.startswith("bug"):  # the recipe in fp32: every q outside a NaN block and every scale exact
            nan_blocks = int((~np.isfinite(x.reshape(-1, BLOCK))).any(-1).sum())
            assert res.q.counts["exact"] >= q.size - BLOCK * nan_blocks, (cid, kind, mode, elem)
            assert res.scale.counts["exact"] >= X.size - nan_blocks, (cid, kind, mode, elem)
        seen += 1
        bugs += kind.startswith("bug")
    assert seen == 94 and bugs == 40, (seen, bugs)


def test_nan_result_in_a_format_without_nan():
    """fp4 and fp6 have no NaN: where the exact result is NaN (a NaN x under the amax recipe, whose scale is NaN), the
    kernel's conversion gives a value of its own, and every value is in the set (fuzz_quantize found q sets that
    required NaN in fp6)."""
    x = np.ones((2, 8), np.float32)
    x[0, 3] = np.nan
    ref = er.quantize(x, "float6_e3m2fn", "row", recipe="amax")
    q = np.full(x.shape, 28.0).astype(_dt("float6_e3m2fn"))
    q[0, :] = 7.0  # the NaN row: whatever the conversion made of NaN times the scale
    res = ref.covers((q, None, np.array([np.nan, 28.0], np.float32)))
    assert res, res
    assert res.q.counts["covered"] == 8 and res.q.counts["exact"] == 8


def _mx_operand(x, elem, axis):
    """x quantised with the spec's MX recipe in blocks of 32 along `axis` (1: A's rows, 0: B's columns)."""
    xt = x if axis == 1 else x.T
    q, X = spec_mx(np.ascontiguousarray(xt), elem)
    return (q, X) if axis == 1 else (np.ascontiguousarray(q.T), np.ascontiguousarray(X.T))


def _mx_gemm(qa, sa, qb, sb, rng, bug=None):
    """An MX GEMM in fp32 as a Hopper kernel emulates one: each block's operands dequantised (exact), the products
    added in fp32 in a shuffled order per element; bugs: the next block's A scale, one block's B scale doubled, the
    last block dropped."""
    a = qa.astype(np.float64) * np.repeat(sa.astype(np.float64), BLOCK, axis=1)
    b = qb.astype(np.float64) * np.repeat(sb.astype(np.float64), BLOCK, axis=0)
    if bug == "next_block":
        a = qa.astype(np.float64) * np.repeat(np.roll(sa.astype(np.float64), 1, axis=1), BLOCK, axis=1)
    if bug == "b_scale_twice":
        b[:BLOCK, 0] *= 2
    K = a.shape[1]
    if bug == "last_block_dropped":
        K -= BLOCK
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = np.float32(0)
            for k in rng.permutation(K):
                acc = np.float32(acc + np.float32(a[i, k] * b[k, j]))
            out[i, j] = acc
    return out


@pytest.mark.parametrize("elem", ("float8_e4m3fn", "float4_e2m1fn"))
def test_block_scaled_matmul(elem):
    rng = np.random.default_rng(9)
    A = (rng.standard_normal((6, 4 * BLOCK)) * np.exp2(rng.integers(-6, 6, (6, 4)).repeat(BLOCK, 1))).astype(np.float32)
    B = rng.standard_normal((4 * BLOCK, 5)).astype(np.float32)
    qa, sa = _mx_operand(A, elem, 1)
    qb, sb = _mx_operand(B, elem, 0)
    assert sa.shape == (6, 4) and sb.shape == (4, 5)
    ref = er.scaled_matmul(qa, qb, sa, sb, block=BLOCK)
    assert ref.covers(_mx_gemm(qa, sa, qb, sb, rng))
    for bug in ("next_block", "b_scale_twice", "last_block_dropped"):
        assert not ref.covers(_mx_gemm(qa, sa, qb, sb, rng, bug)), (elem, bug)
    with pytest.raises(ValueError, match="scale_a"):
        er.scaled_matmul(qa, qb, sa[:, :3], sb, block=BLOCK)
    with pytest.raises(TypeError, match="scale_b"):
        er.scaled_matmul(qa, qb, sa, 2.0, block=BLOCK)
    with pytest.raises(TypeError, match="float64"):
        er.scaled_matmul(qa, qb, sa.astype(np.float64), sb, block=BLOCK)


def test_amax_floor_torchao_zero_rows():
    """torchao's float8 recipes divide by clamp(amax, 1e-12) in fp32, so an all-zero row has scale 448 / 1e-12:
    refused without amax_floor (the recipes' 1 or the plain quotient), covered with it, and exact with the floor as
    the kernel holds it (1e-12 rounded to fp32)."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    x[1] = 0
    x[2] *= np.float32(1e-15)  # amax below the floor
    f32 = np.float32(1e-12)
    amax = np.abs(x).max(-1)
    scale = np.float32(448.0) / np.maximum(amax, f32)
    q = np.clip(x * scale[:, None], -448, 448).astype(_dt("float8_e4m3fn"))
    ref = er.quantize(x, "float8_e4m3fn", "row")
    assert not ref.covers((q, amax, scale))
    assert ref.covers((q, amax, scale), amax_floor=1e-12)
    res = ref.covers((q, amax, scale), amax_floor=float(f32))
    assert res and res.scale.counts["exact"] == 4 and res.q.counts["exact"] == x.size
    # a floor of the wrong size is caught in the rows it governs
    assert not ref.covers((q, amax, scale), amax_floor=1e-10)
    with pytest.raises(er.ExactrefError, match="amax_floor"):
        er.quantize(x, "float8_e4m3fn", ("block", 32), recipe="mx").covers((q, None, None), amax_floor=1e-12)
    with pytest.raises(er.ExactrefError, match="amax_floor"):
        er.softmax(x).covers(x, amax_floor=1e-12)


# ---- NVFP4 (Lemma Q7): two implementations written here in numpy float32, from Transformer Engine's reference
# (S_enc = 448 * 6 / amax, S_dec_b = RN_e4m3(amax_b * (S_enc * (1 / 6))), q = RN(x * (1 / (S_dec_b * (1 / S_enc)))))
# and torchao's (per_tensor_scale = amax / (448 * 6), scale = RN_e4m3(clamp(amax_b / 6 / per_tensor_scale, 2^-6,
# 448)), q = RN(x / per_tensor_scale / scale)) ----

F32 = np.float32
E4M3 = ml_dtypes.float8_e4m3fn


def _fp4(v):
    return np.clip(v, -6, 6).astype(F32).astype(_dt("float4_e2m1fn"))


def te_nvfp4(x, bug=None):
    xb = x.reshape(x.shape[0], -1, 16)
    g = F32(np.abs(x).max())
    s_enc = F32(448.0 * 6.0) / g if g > 0 else F32(1.0)
    s_enc = F32(min(s_enc, np.finfo(F32).max))
    if bug == "no_global":
        s_enc = F32(1.0)
    amax_b = np.abs(xb).max(-1)
    dec = (amax_b * (s_enc * F32(1.0 / 6.0))).astype(F32)
    sf = np.minimum(dec, F32(448)).astype(E4M3)
    sff = sf.astype(F32)
    if bug == "unrounded_scale":
        sff = dec
    if bug == "next_block":
        sff = np.roll(sff, 1, axis=-1)
    with np.errstate(divide="ignore"):
        enc = np.where(sff > 0, F32(1.0) / (sff * (F32(1.0) / s_enc)), np.finfo(F32).max).astype(F32)
    with np.errstate(over="ignore"):  # a decode scale of 0: x times FLT_MAX, saturated
        q = _fp4((xb * enc[..., None]).astype(F32)).reshape(x.shape)
    return q, sf


def torchao_nvfp4(x):
    xb = x.reshape(x.shape[0], -1, 16)
    p = F32(np.abs(x).max()) / F32(448.0 * 6.0)
    scale = np.clip((np.abs(xb).max(-1) / F32(6.0)).astype(F32) / p, F32(2.0 ** -6), F32(448)).astype(E4M3)
    q = _fp4(((xb / p).astype(F32) / scale.astype(F32)[..., None]).astype(F32)).reshape(x.shape)
    return q, scale


def nv_family(kind, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 128)) * np.exp2(rng.integers(-8, 8, (8, 8)).repeat(16, 1))
    if kind == "zero_blocks":
        x[1, 16:48] = 0
    elif kind == "tiny_blocks":  # blocks far below the tensor's amax: decode scales on e4m3's subnormals and 0
        x[2:4] *= 2.0 ** -20
    elif kind == "one_huge":
        x[0, 0] = 2.0 ** 30
    elif kind == "zeros":
        x[:] = 0
    elif kind in ("near_midpoints", "near_midpoints_wide"):  # x S / scale within 3 (wide: 7) fp32 ulps of e2m1's
        # midpoints, where the fp32 chain decides
        x = np.zeros((8, 128))
        wide = kind == "near_midpoints_wide"
        # the tensor's amax G: S = 2688 / G, for "wide" just above a power of two (2048 (1 + 2^-22)), where an ulp of S
        # is 2^-23 of it; the decode scales exact in e4m3, one per row (powers of two for "wide": S / scale too)
        G = float(np.float32(1.3125 / (1 + 2.0 ** -22))) if wide else 1.0
        sf = np.array([0.5, 1.0, 2.0, 0.25, 0.5, 1.0, 2.0, 4.0] if wide
                      else [0.5, 0.625, 0.75, 1.0, 1.5, 2.0, 3.5, 0.4375])
        mids = rng.choice([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], (8, 128)) * rng.choice([-1, 1], (8, 128))
        k = rng.uniform(-7, 7, (8, 128)) if wide else rng.integers(-3, 4, (8, 128))
        x[:, :] = mids * sf[:, None] * G / 2688 * (1 + k * 2.0 ** -23)
        x[:, ::16] = 6 * sf[:, None] * G / 2688  # each block's amax: its decode scale sf exactly
        x[0, 0] = G
    return x.astype(F32)


@pytest.mark.parametrize("kind", ("normal", "zero_blocks", "tiny_blocks", "one_huge", "zeros", "near_midpoints"))
def test_nvfp4_te_and_torchao_covered(kind):
    x = nv_family(kind, 12)
    ref = er.quantize(x, "float4_e2m1fn", ("block", 16), recipe="nvfp4")
    for impl in (te_nvfp4, torchao_nvfp4):
        if impl is torchao_nvfp4 and kind == "zeros":
            continue  # torchao divides 0 by a per-tensor scale of 0
        q, sf = impl(x)
        res = ref.covers((q, None, sf))
        assert res, (kind, impl.__name__, res)
    q, sf = te_nvfp4(x)
    assert ref.covers((q, None, sf), div_ulps=0.5), kind  # TE divides 448 * 6 / amax correctly rounded
    res = ref.covers((q, None, sf))
    if kind in ("normal", "zero_blocks"):  # TE's recipe in fp32 is the exact one on these (elsewhere decode scales of
        # 0 leave q free: TE's q saturates there)
        assert res.scale.counts["exact"] == sf.size, res
        assert res.q.counts["exact"] == q.size, res


@pytest.mark.parametrize("bug", ("no_global", "unrounded_scale", "next_block"))
def test_nvfp4_bugs_caught(bug):
    x = nv_family("normal", 13)
    q, sf = te_nvfp4(x, bug)
    assert not er.quantize(x, "float4_e2m1fn", ("block", 16), recipe="nvfp4").covers((q, None, sf)), bug


def test_nvfp4_refusals():
    x = nv_family("normal", 14)
    with pytest.raises(er.ExactrefError, match="block"):
        er.quantize(x, "float4_e2m1fn", "row", recipe="nvfp4")
    with pytest.raises(er.ExactrefError, match="block"):
        er.matmul(x[:, :16], x[:, :16].T.copy()).quantize("float4_e2m1fn", "row", recipe="nvfp4").covers(
            (np.zeros((8, 8), _dt("float4_e2m1fn")), None, np.zeros((8, 1), E4M3)))


def _mxfp8(x, mode):
    """The spec's MXFP8 recipe in numpy (fp32 x or bfloat16 x), any row length (a last partial block)."""
    xf = np.asarray(x, np.float32)
    n = xf.shape[-1]
    pad = (-n) % BLOCK
    xp = np.concatenate([xf, np.zeros(xf.shape[:-1] + (pad,), np.float32)], -1)
    q, X = spec_mx(xp.reshape(-1, xp.shape[-1]), "float8_e4m3fn", mode=mode)
    return q.reshape(xp.shape)[..., :n], X.reshape(xf.shape[:-1] + (-1,))


def _mxfp8_kernel(x):
    return _mxfp8(x, "floor")


def _mxfp8_ceil_kernel(x):
    return _mxfp8(x, "ceil")


def test_testing_mx_ops_and_block_families(tmp_path):
    """exactref.testing's block-scaled ops: the spec's kernel passes every case of the fast tier over the block
    families; a kernel rounding the exponent up fails, and the rceil recipe named in the standard dict is used."""
    rec = er.testing.check(_mxfp8_kernel, op="mxfp8", runs_dir=str(tmp_path))
    assert not rec.failed() and len(rec.cases) == 16 * 5, [c.get("report") for c in rec.failed()][:1]
    bad = er.testing.check(_mxfp8_ceil_kernel, op="mxfp8", families=("normal",), runs_dir=str(tmp_path))
    assert len(bad.failed()) == 16 and all(c["verdict"] == "FAIL" for c in bad.failed())
    x = er.testing.family("e2m1_midpoints", (2, 64), "float32", seed=1)
    assert (x[:, ::32] == 6).all() and np.isin(np.abs(x[:, 1:32]), [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]).all()
    case = er.testing.cases("mxfp8", families=("zero_blocks",))[3]
    q, X = _mxfp8_kernel(case.inputs()[0])
    assert case.check((q, X), standard=dict(recipe="mx")).all()
    assert "huge_in_block" in er.testing.BLOCK_FAMILIES


def test_guide_output():
    """check-low-precision-kernels.md shows what examples/python/mx_check.py prints."""
    from test_exactref import _shows_output
    _shows_output("guides/check-low-precision-kernels.md", "mx_check.py")


def _div_edge(a, b, up):
    """a / b in fp32 moved 2 ulps toward +inf (up) or -inf: div.full.f32 at the edge of its budget."""
    q = (np.float32(a) / np.float32(b)).astype(F32)
    to = np.float32(np.inf if up else -np.inf)
    return np.nextafter(np.nextafter(q, to), to)


def triton_edge_nvfp4(x, up):
    """NVFP4 as a Triton kernel computes it (S = 2688 / amax, amax_b S / 6, S / scale with Triton's `/`), each
    division 2 ulps off in one direction."""
    xb = x.reshape(x.shape[0], -1, 16)
    s_enc = _div_edge(2688.0, np.abs(x).max(), up)
    dec = _div_edge((np.abs(xb).max(-1) * s_enc).astype(F32), 6.0, up)
    sf = np.minimum(dec, F32(448)).astype(E4M3)
    with np.errstate(divide="ignore"):
        enc = np.where(sf.astype(F32) > 0, _div_edge(s_enc, sf.astype(F32), up), np.finfo(F32).max).astype(F32)
    with np.errstate(over="ignore"):
        q = _fp4((xb * enc[..., None]).astype(F32)).reshape(x.shape)
    return q, sf


@pytest.mark.parametrize("up", (False, True))
def test_nvfp4_divisions_at_their_ulp_edge(up):
    """Triton's divisions (div.full.f32, 2 ulps) at the edge of their budget, near e2m1's midpoints: covered under the
    default div_ulps=2, each of the three divisions allowed its 2 ulps (not the half ulp of a correct rounding)."""
    x = nv_family("near_midpoints_wide", 15)
    q, sf = triton_edge_nvfp4(x, up)
    assert er.quantize(x, "float4_e2m1fn", ("block", 16), recipe="nvfp4").covers((q, None, sf))


def test_scaled_mm_rowwise_captures():
    """H200 captures (tools/capture/capture_scaled_rowwise.py): torch._scaled_mm with rowwise scales (A per row, B per
    column, e4m3, scale amax / 448), bf16 and fp32 outputs, use_fast_accum True and False, K 32 to 4096: all 16
    covered as er.scaled_matmul(A, B, sa, sb) under mma:sm90 outer=any (promote=4 without fast accumulation); scale_b
    reversed caught in 16 of 16, scale_a applied twice in 14 of 16 (the two left: fast accumulation at K = 4096, whose
    set without promotion spans the smaller value)."""
    from conftest import captures
    z, rows = captures("scaled_rowwise")
    seen, caught = 0, {}
    for cid, kind, M, K, N, odt, fast in rows:
        A, B = z[cid + "__in__A"].view(E4M3), z[cid + "__in__B"].view(E4M3)
        sa, sb = z[cid + "__in__sa"].reshape(-1, 1), z[cid + "__in__sb"].reshape(1, -1)
        C = z[cid + "__out__C"]
        if odt == "bfloat16":
            C = C.view(ml_dtypes.bfloat16)
        std = dict(standard="mma:sm90", outer="any")
        if fast == "0":
            std["promote"] = 4
        ok = er.scaled_matmul(A, B, sa, sb).covers(C, **std).all()
        if kind == "torch":
            assert ok, (cid, M, K, N, odt, fast)
        else:
            caught[kind] = caught.get(kind, 0) + (not ok)
        seen += 1
    assert seen == 48 and caught == {"bug_sb_reversed": 16, "bug_sa_twice": 14}, caught


def test_scaled_matmul_rowwise_refusals():
    A = np.ones((3, 4), np.float32)
    B = np.ones((4, 2), np.float32)
    sa, sb = np.ones((3, 1), np.float32), np.ones((1, 2), np.float32)
    assert er.scaled_matmul(A, B, sa, sb).covers(A @ B)
    with pytest.raises(ValueError, match="scale_a"):
        er.scaled_matmul(A, B, np.ones((2, 1), np.float32), sb)
    with pytest.raises(TypeError, match="scale_b"):
        er.scaled_matmul(A, B, sa, sb.astype(np.float64))
    with pytest.raises(TypeError, match="scale_b"):
        er.scaled_matmul(A, B, sa, 1.0)
    with pytest.raises(ValueError, match="finite"):
        er.scaled_matmul(A, B, np.full((3, 1), np.inf, np.float32), sb)


def test_div_ulps_half_catches_truncation_on_midpoints():
    """The inverse recipe (q = x / scale_inv) on exact e4m3 midpoints: a q truncated toward zero passes under the
    default div_ulps=2 (a 2-ulp division may land on either side of a midpoint) and is caught under div_ulps=0.5 (a
    correctly rounded division: q is one value)."""
    mids = np.array([1.0625, 1.1875, 2.375, 3.25, 13.0, 26.0, 208.0, 416.0])  # midpoints of e4m3's grid
    x = np.concatenate([[448.0], mids, -mids]).astype(np.float32).reshape(1, -1)  # amax 448: scale_inv = 1
    s = np.array([1.0], np.float32)
    q_rn = x.astype(_dt("float8_e4m3fn"))  # ties to even
    trunc = (np.sign(x) * np.floor(np.abs(x) * 8 / np.exp2(np.floor(np.log2(np.abs(x))))) *
             np.exp2(np.floor(np.log2(np.abs(x)))) / 8).astype(np.float32)
    q_tr = trunc.astype(_dt("float8_e4m3fn"))
    assert (q_tr.astype(np.float64) != q_rn.astype(np.float64)).any()
    ref = er.quantize(x, "float8_e4m3fn", "tensor", recipe="inverse")
    assert ref.covers((q_rn, None, s), div_ulps=0.5)
    assert ref.covers((q_tr, None, s))  # the default lets it through
    assert not ref.covers((q_tr, None, s), div_ulps=0.5)


def _gemm_fp32(A, B, order):
    """A kernel's fp32 GEMM of fp16 operands: products exact in fp32, added over k in the given order of k."""
    prods = A.astype(np.float32)[:, :, None] * B.astype(np.float32)[None, :, :]  # exact: 11-bit times 11-bit
    acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in order:
        acc = acc + prods[:, k, :]
    return acc


def _mx_gemm_case(seed):
    """fp16 operands whose products meet at block maxima on either side of 1: row r's first column adds 1,
    2^-25 and -2^-24 (exact sum 1 - 2^-25), which one order rounds to 1 - 2^-24 and another to 1 (the tie goes to
    even), so the MX exponent of the block differs between correct kernels; the other columns are small."""
    rng = np.random.default_rng(seed)
    K, N = 3, 2 * BLOCK
    A = (rng.standard_normal((4, K)) * 2.0 ** -3).astype(np.float16)
    B = (rng.standard_normal((K, N)) * 2.0 ** -3).astype(np.float16)
    A[:, :] = np.array([1.0, 2.0 ** -12, -2.0 ** -12], np.float16)
    B[:, 0] = np.array([1.0, 2.0 ** -13, 2.0 ** -12], np.float16)
    B[:, BLOCK] = np.array([0.5, 2.0 ** -13, 2.0 ** -13], np.float16)
    return A, B


@pytest.mark.parametrize("elem", ELEMS)
@pytest.mark.parametrize("mode", tuple(RECIPES))
def test_mx_of_a_gemm_output(elem, mode):
    """MX quantisation in a GEMM's epilogue (quantize.md, Lemma Q8): the spec's q and X from the fp32 accumulators of
    kernels adding in different orders are covered, where those orders put a block's maximum on either side of a
    power of two (two exponents); the planted bugs are caught."""
    A, B = _mx_gemm_case(1)
    ref = er.matmul(A, B).quantize(elem, ("block", BLOCK), recipe=RECIPES[mode])
    scales = set()
    for order in ((0, 1, 2), (0, 2, 1), (2, 1, 0)):
        C = _gemm_fp32(A, B, order)
        q, X = spec_mx(C, elem, mode)
        scales.add(float(X.astype(np.float64)[0, 0]))
        res = ref.covers((q, None, X))
        assert res, (elem, mode, order, res)
    # the orders' block maxima 1 - 2^-24 and 1: two exponents under the spec's floor, one under the others
    assert len(scales) == (2 if mode == "floor" else 1)
    rng = np.random.default_rng(2)
    A = (rng.standard_normal((8, 64)) * np.exp2(rng.integers(-6, 6, (8, 1)))).astype(np.float16)
    B = rng.standard_normal((64, 4 * BLOCK)).astype(np.float16)
    C = _gemm_fp32(A, B, range(64))
    ref = er.matmul(A, B).quantize(elem, ("block", BLOCK), recipe=RECIPES[mode])
    q, X = spec_mx(C, elem, mode)
    res = ref.covers((q, None, X))
    assert res and res.scale.counts["exact"] == X.size
    for bug in (dict(wrong_block=True), dict(scale_off=1), dict(scale_off=-1)):
        qb, Xb = spec_mx(C, elem, mode, **bug)
        assert not ref.covers((qb, None, Xb)), (elem, mode, bug)


def test_mx_of_a_gemm_output_exact_classes():
    """Where the kernel's accumulators are the exact results (few products, exact in fp32), its q and X are the
    exact ones: each element classed exact."""
    rng = np.random.default_rng(5)
    A = rng.integers(-8, 8, (6, 4)).astype(np.float16)
    B = rng.integers(-8, 8, (4, 2 * BLOCK)).astype(np.float16)
    C = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)  # exact: small integers
    for elem in ELEMS:
        q, X = spec_mx(C, elem)
        res = er.matmul(A, B).quantize(elem, ("block", BLOCK), recipe="mx").covers((q, None, X))
        assert res.q.counts["exact"] == q.size and res.scale.counts["exact"] == X.size, elem


@pytest.mark.parametrize("mode, sign", [("floor", -1), ("ceil", 1)])
def test_mx_of_a_gemm_output_exact_scale_beyond_double(mode, sign):
    """A block maximum 2^30 + sign 2^-48 (79 bits: no double holds it) whose every fp32 accumulation is 2^30: the
    kernel's scale, from 2^30, is in the set but is not the exact scale, whose exponent is that of the exact amax
    (floor(log2) 29 below 2^30, ceil 31 above): covered, never exact."""
    A = np.zeros((2, 2), np.float16)
    A[:, 0], A[:, 1] = 2.0 ** 15, sign * 2.0 ** -24
    B = np.full((2, BLOCK), 2.0 ** -10, np.float16)
    B[:, 0] = [2.0 ** 15, 2.0 ** -24]
    C = _gemm_fp32(A, B, (0, 1))
    assert C[0, 0] == 2.0 ** 30
    q, X = spec_mx(C, "float8_e4m3fn", mode)
    res = er.matmul(A, B).quantize("float8_e4m3fn", ("block", BLOCK), recipe=RECIPES[mode]).covers((q, None, X))
    assert res.all()
    assert [er.CLASSES[c] for c in np.asarray(res.scale.classes).ravel()] == ["covered", "covered"]


def _nv_gemm_case(seed, kind="normal"):
    """fp16 operands of a GEMM whose fp32 output is NVFP4-quantised: rows and blocks of varied magnitudes; "tie":
    the tensor's maximum, 1 + 2^-25 - 2^-24 (exact 1 - 2^-25), lands on 1 - 2^-24 or 1 by the order of its adds;
    "cancel": it is 1 or 0 by the order (the tensor's G and the block's amax move by more than the fp32 slack);
    "cancel_block": that element is a block's maximum or not, the tensor's G fixed at 64, above its set."""
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((8, 48)) * np.exp2(rng.integers(-4, 4, (8, 1)))).astype(np.float16)
    B = (rng.standard_normal((48, 64)) * np.exp2(rng.integers(-3, 3, (1, 64)))).astype(np.float16)
    if kind == "cancel":  # row 0, column 0: 2^25 - 2^25 + 1, which fp32 orders make 1 or 0 (the rest below 1)
        A = (rng.standard_normal((8, 3)) * 2.0 ** -3).astype(np.float16)
        B = (rng.standard_normal((3, 64)) * 2.0 ** -2).astype(np.float16)
        A[0] = [2.0 ** 13, -2.0 ** 13, 1.0]
        B[:2] = 0  # row 0's other outputs: its third product alone
        A[1:, :2] = 0  # column 0's other outputs too
        B[:, 0] = [2.0 ** 12, 2.0 ** 12, 1.0]
    if kind == "cancel_block":  # the same element in a block below the tensor's maximum, 64 in every order
        A, B = _nv_gemm_case(seed, "cancel")
        A[1, 2], B[2, 20] = 64.0, 1.0
    if kind == "tie":
        A = np.zeros((8, 3), np.float16)
        B = (rng.standard_normal((3, 64)) * 2.0 ** -6).astype(np.float16)
        A[:, :] = (rng.standard_normal((8, 3)) * 2.0 ** -3).astype(np.float16)
        A[0] = [1.0, 2.0 ** -12, -2.0 ** -12]
        B[:, 0] = [1.0, 2.0 ** -13, 2.0 ** -12]
    return A, B


@pytest.mark.parametrize("kind", ("normal", "tie", "cancel", "cancel_block"))
def test_nvfp4_of_a_gemm_output(kind):
    """NVFP4 in a GEMM's epilogue (quantize.md, Lemma Q9): TE's and torchao's forms on the fp32 accumulators of
    kernels adding in different orders are covered, the tensor's maximum on either side of a power of two among
    them; the planted bugs are caught."""
    A, B = _nv_gemm_case(3, kind)
    ref = er.matmul(A, B).quantize("float4_e2m1fn", ("block", 16), recipe="nvfp4")
    K = A.shape[1]
    maxima = set()
    for order in (range(K), range(K - 1, -1, -1), [i for i in range(K) if i % 2] + [i for i in range(K) if not i % 2]):
        C = _gemm_fp32(A, B, list(order))
        maxima.add(float(np.abs(C).max()))
        for impl in (te_nvfp4, torchao_nvfp4):
            q, sf = impl(C)
            res = ref.covers((q, None, sf))
            assert res, (kind, impl.__name__, res)
    if kind == "tie":
        assert maxima == {1 - 2.0 ** -24, 1.0}
    if kind == "cancel":
        assert len(maxima) == 2 and 1.0 in maxima
    if kind == "cancel_block":
        assert maxima == {64.0}
    if kind.startswith("cancel"):
        return  # a set wide enough for both orders' G (1 or 0.3) holds these bugs' outputs too
    C = _gemm_fp32(A, B, range(K))
    for bug in ("no_global", "unrounded_scale", "next_block"):
        q, sf = te_nvfp4(C, bug)
        assert not ref.covers((q, None, sf)), (kind, bug)


def test_nvfp4_of_a_gemm_output_exact_classes():
    """Exact accumulators (small integers): TE's form gives every decode scale and q the exact ones."""
    rng = np.random.default_rng(6)
    A = rng.integers(-8, 8, (8, 4)).astype(np.float16)
    B = rng.integers(-8, 8, (4, 64)).astype(np.float16)
    C = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    q, sf = te_nvfp4(C)
    res = er.matmul(A, B).quantize("float4_e2m1fn", ("block", 16), recipe="nvfp4").covers((q, None, sf))
    assert res.all() and res.scale.counts["exact"] == sf.size
    direct = er.quantize(C, "float4_e2m1fn", ("block", 16), recipe="nvfp4").covers((q, None, sf))
    assert res.q.counts == direct.q.counts  # the same classes as the tensor's own check of the same values


def te_nvfp4_2d(x, bug=None, t=16):
    """Transformer Engine's 2-D NVFP4 (weights): one e4m3 decode scale per t x t tile, the encode scale from the
    tensor's amax, in fp32 as te_nvfp4; x 2-D of any shape (partial tiles at the edges). bug "rows": 1 x t blocks
    instead of tiles; "tile_transposed": the scale grid read transposed."""
    R, C = x.shape
    tr, tc = -(-R // t), -(-C // t)
    g = F32(np.abs(x).max())
    s_enc = F32(min(F32(448.0 * 6.0) / g if g > 0 else F32(1.0), np.finfo(F32).max))
    pad = np.zeros((tr * t, tc * t), F32)
    pad[:R, :C] = np.abs(x)
    amax_t = pad.reshape(tr, t, tc, t).max(axis=(1, 3))
    if bug == "rows":
        amax_t = pad.reshape(tr * t, tc, t).max(-1)[::t]  # the tile's first row alone
    sf = np.minimum((amax_t * (s_enc * F32(1.0 / 6.0))).astype(F32), F32(448)).astype(E4M3)
    sff = sf.astype(F32)
    if bug == "tile_transposed":
        sff = sff.T.copy() if sff.shape[0] == sff.shape[1] else sff[::-1]
    with np.errstate(divide="ignore"):
        enc = np.where(sff > 0, F32(1.0) / (sff * (F32(1.0) / s_enc)), np.finfo(F32).max).astype(F32)
    encx = np.repeat(np.repeat(enc, t, 0), t, 1)[:R, :C]
    with np.errstate(over="ignore"):
        q = _fp4((x * encx).astype(F32))
    return q, sf


@pytest.mark.parametrize("shape", [(64, 64), (40, 72), (16, 16), (3, 5)])
def test_nvfp4_2d_tiles(shape):
    """granularity ("tile", 16): TE's 2-D NVFP4 recipe covered (partial tiles at the edges), its scale grid of shape
    (ceil(R / 16), ceil(C / 16)), every scale exact; 1 x 16 blocks and a transposed scale grid caught; a batch of
    matrices tiles each matrix; x of one dimension refused."""
    rng = np.random.default_rng(sum(shape))
    R, C = shape
    x = (rng.standard_normal((R, C)) * np.exp2(rng.integers(-6, 6, (R, 1)))).astype(F32)
    ref = er.quantize(x, "float4_e2m1fn", ("tile", 16), recipe="nvfp4")
    q, sf = te_nvfp4_2d(x)
    assert sf.shape == (-(-R // 16), -(-C // 16))
    res = ref.covers((q, None, sf))
    assert res and res.scale.counts["exact"] == sf.size, res
    for bug in ("rows", "tile_transposed"):
        qb, sb = te_nvfp4_2d(x, bug)
        if np.array_equal(sb.astype(F32), sf.astype(F32)):
            continue  # the bug changes nothing on this x (one tile)
        assert not ref.covers((qb, None, sb)), (shape, bug)
    if shape == (40, 72):  # two matrices of 40 rows: each tiled on its own, no tile across them
        xs = np.stack([x, x[::-1] * 2])

        def amax_tiles(m):  # the amax recipe per 16 x 16 tile of each matrix of m (3-D), in fp32
            out = []
            for a in m:
                pad = np.zeros((48, 80), F32)
                pad[:40, :72] = np.abs(a)
                am = pad.reshape(3, 16, 5, 16).max(axis=(1, 3))
                sc = (F32(448.0) / am).astype(F32)
                out.append((np.clip(a * np.repeat(np.repeat(sc, 16, 0), 16, 1)[:40, :72], -448, 448).astype(E4M3),
                            am, sc))
            return [np.stack(v) for v in zip(*out)]

        qs, am, sc = amax_tiles(xs)
        tiled = er.quantize(xs, "float8_e4m3fn", ("tile", 16), recipe="amax").covers((qs, am, sc))
        assert tiled and tiled.amax.counts["exact"] == am.size
        assert tiled.amax.classes.shape == (2, 3, 5)
        am_bad = am.copy()
        am_bad[0, 2], am_bad[1, 0] = np.maximum(am[0, 2], am[1, 0]), np.maximum(am[0, 2], am[1, 0])  # a tile across
        assert not er.quantize(xs, "float8_e4m3fn", ("tile", 16), recipe="amax").covers((qs, am_bad, sc)).amax.all()
    with pytest.raises(er.ExactrefError, match="2 or more dimensions"):
        er.quantize(x[0], "float4_e2m1fn", ("tile", 16), recipe="nvfp4")
    with pytest.raises(ValueError, match="tile size"):
        er.quantize(x, "float4_e2m1fn", ("tile", 0), recipe="nvfp4")


def test_scaled_matmul_rowwise_batched():
    """Rowwise scales on batched operands (a grouped fp8 GEMM): scale_a per row of each matrix of A, scale_b per
    column of each of B, B broadcast over A's batch or not; each batch's classes are those of its own 2-D reference;
    a scale taken from the next batch is caught; shapes that do not follow the operands' are refused."""
    rng = np.random.default_rng(21)
    A = (rng.standard_normal((3, 2, 8, 40)) * 4).astype(E4M3)
    for B, lead_b in (((rng.standard_normal((3, 2, 40, 6)) * 4).astype(E4M3), (3, 2)),
                      ((rng.standard_normal((40, 6)) * 4).astype(E4M3), ())):
        sa = np.exp2(rng.integers(-6, 6, (3, 2, 8))).astype(F32) * F32(1.25)
        sb = np.exp2(rng.integers(-6, 6, lead_b + (1, 6))).astype(F32) * F32(0.75)
        acc = (A.astype(np.float64) @ B.astype(np.float64)).astype(F32)  # exact products, one rounding
        sbb = np.broadcast_to(sb, (3, 2, 1, 6))
        C = ((acc * sa[..., None]).astype(F32) * sbb).astype(F32)
        ref = er.scaled_matmul(A, B, sa, sb)
        res = ref.covers(C)
        assert res and res.classes.shape == (3, 2, 8, 6)
        for i in range(3):
            for j in range(2):
                Bij = B[i, j] if lead_b else B
                one = er.scaled_matmul(A[i, j], Bij, sa[i, j], sbb[i, j]).covers(C[i, j])
                assert np.array_equal(np.asarray(one.classes), np.asarray(res.classes)[i, j])
        Cbad = ((acc * np.roll(sa, 1, axis=0)[..., None]).astype(F32) * sbb).astype(F32)
        assert not ref.covers(Cbad)
    with pytest.raises(ValueError, match="scale_a"):
        er.scaled_matmul(A, B, np.ones((3, 8), F32), np.ones((1, 6), F32))  # A's batch shape is (3, 2)
    with pytest.raises(ValueError, match="scale_b"):
        er.scaled_matmul(A, A.swapaxes(-1, -2).copy(), np.ones((3, 2, 8), F32), np.ones((3, 2, 8, 1), F32))


def _e4m3_ties_away(v):
    """v (float64) rounded to nearest onto e4m3's grid (saturated) with ties away from zero, and whether it lies on a
    midpoint of the grid."""
    grid = np.unique(np.abs(np.arange(256, dtype=np.uint8).view(E4M3).astype(np.float64)))
    grid = grid[np.isfinite(grid)]
    a = np.minimum(np.abs(v), 448.0)
    k = np.searchsorted(grid, a, side="right") - 1
    lo, hi = grid[k], grid[np.minimum(k + 1, len(grid) - 1)]
    return np.sign(v) * np.where(a - lo >= hi - a, hi, lo), (a > lo) & (a - lo == hi - a)


def test_gemm_mx_captures():
    """H200 captures (tools/capture/capture_gemm_mx.py): a Triton GEMM (tl.dot on the tensor cores) with an MXFP8
    epilogue, its q and e8m0 scale checked as er.matmul(A, B).quantize("float8_e4m3fn", ("block", 32), "mx") under
    mma:sm90 outer=any; the same GEMM's fp32 accumulators and cuBLAS's SGEMM of the same values, each quantised on the
    host by the spec's MX recipes (every element format) and by TE's and torchao's NVFP4, checked over the reference
    (any_order for the SGEMM). Families: normal, cancelling, ties (exact integer accumulators in the hundreds, on
    e4m3's midpoints once scaled, and all-zero blocks) and tiny (fp16 subnormal operands). The exponent one higher is
    caught; on the ties family, q with ties away from zero is caught on the stored accumulators exactly where that is
    not to even, and is inside the set over the reference, whose sums are enclosed by an error bound. (In the normal
    and cancelling families the two GEMMs' accumulators differ in 29,776 of 30,720 elements, no block's exponent
    between them.)"""
    from conftest import captures
    z, rows = captures("gemm_mx")
    seen, ties = {}, 0
    for cid, kind, family, M, N, K, gid in rows:
        A, B = z[gid + "__in__A"], z[gid + "__in__B"]
        ref = er.matmul(A, B)
        std = "any_order" if kind == "cublas_sgemm" else "mma:sm90 outer=any"
        if kind in ("triton_mxfp8", "bug_exponent_up"):
            q, X = z[cid + "__out__q"].view(E4M3), z[cid + "__out__scale"].view(E8M0)
            res = ref.quantize("float8_e4m3fn", ("block", BLOCK), recipe="mx").covers((q, None, X), standard=std)
            assert res.all() == (kind == "triton_mxfp8"), (cid, kind, family, res)
        else:
            C = z[cid + "__out__acc"]
            for elem in ELEMS:
                q, X = spec_mx(C, elem)
                res = ref.quantize(elem, ("block", BLOCK), recipe="mx").covers((q, None, X), standard=std)
                assert res, (cid, kind, family, elem, res)
            for impl in (te_nvfp4, torchao_nvfp4):
                q, sf = impl(C)
                res = ref.quantize("float4_e2m1fn", ("block", 16), recipe="nvfp4").covers((q, None, sf), standard=std)
                assert res, (cid, kind, family, impl.__name__, res)
            if family == "ties":  # exact accumulators: q is one value, so ties away from zero fail where not even
                q, X = spec_mx(C, "float8_e4m3fn")
                Xf = np.repeat(X.astype(np.float64), BLOCK, axis=-1)
                aw, mid = _e4m3_ties_away(C.astype(np.float64) / Xf)
                aw = aw.astype(np.float32).astype(E4M3)
                moved = aw.astype(np.float64) != q.astype(np.float64)
                ties += int(mid.sum())
                assert moved.any() and not (moved & ~mid).any(), (cid, kind)
                # on the stored accumulators (er.quantize of C) q is one value: caught exactly where it moved
                res = er.quantize(C, "float8_e4m3fn", ("block", BLOCK), recipe="mx").covers((aw, None, X))
                assert res.q.n_failed == moved.sum(), (cid, kind, res)
                # over the reference, x's set is the sum's enclosure (an error bound, though every order of these
                # small integers is exact): both neighbours of a midpoint are in q's set
                res = ref.quantize("float8_e4m3fn", ("block", BLOCK), recipe="mx").covers((aw, None, X), standard=std)
                assert res.all(), (cid, kind, res)
        seen[(kind, family)] = seen.get((kind, family), 0) + 1
    assert len(seen) == 16 and set(seen.values()) == {3} and ties > 100, (seen, ties)
