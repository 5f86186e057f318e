"""exactref.attention with fp8 scales (Theorem A4): an fp8 flash-attention forward written here from cuDNN's and
FlashAttention-3's description in numpy's fp32 arithmetic (the descales folded into the score constant, the online
softmax, P times scale_s rounded to e4m3 before P V, P V times descale_s and descale_v, O times scale_o in its
format, amax_s and amax_o recorded), covered; planted bugs caught; bad scales refused."""
import numpy as np
import pytest

import exactref as er

ml_dtypes = pytest.importorskip("ml_dtypes")
f32 = np.float32
E4M3 = ml_dtypes.float8_e4m3fn
LOG2E = f32(1.4426950408889634)


def fp8_flash(q, k, v, dq, dk, dv, ss, so, out_dtype, block=64, amax_norm=False, bug=None):
    """O (out_dtype), LSE (fp32), amax_s and amax_o ([1] fp32) of an fp8 flash kernel, key blocks in order."""
    H, Sq, D = q.shape
    Sk, Dv = v.shape[1], v.shape[2]
    c = f32(f32(f32(1 / np.sqrt(D)) * f32(dq)) * f32(dk if bug != "no_descale_k" else 1)) * LOG2E
    ds = f32(1) / f32(ss)
    O = np.zeros((H, Sq, Dv), f32)
    L = np.zeros((H, Sq), f32)
    pmax, nmax = f32(0), f32(0)
    for h in range(H):
        Q, K, V = q[h].astype(f32), k[h].astype(f32), v[h].astype(f32)
        m = np.full(Sq, -np.inf, f32)
        lsum = np.zeros(Sq, f32)
        acc = np.zeros((Sq, Dv), f32)
        for b in range(0, Sk, block):
            s = (Q @ K[b:b + block].T).astype(f32) * c
            mn = np.maximum(m, s.max(1))
            alpha = np.exp2(m - mn).astype(f32)
            p = np.exp2(s - mn[:, None]).astype(f32)
            pmax = max(pmax, p.max())
            P = (p * f32(ss if bug != "no_scale_s" else 1)).astype(f32).astype(E4M3).astype(f32)
            if bug == "no_scale_s":
                P = P * f32(ss)
            lsum = lsum * alpha + p.sum(1, dtype=f32)
            acc = acc * alpha[:, None] + (P @ V[b:b + block]).astype(f32)
            m = mn
        o = (acc / lsum[:, None]).astype(f32) * ds * f32(dv if bug != "no_descale_v" else 1)
        O[h] = o
        L[h] = (m + np.log2(lsum).astype(f32)) / LOG2E
        nmax = max(nmax, (f32(1) / lsum).max())
    amax_o = f32(0) if bug == "amax_o_zero" else np.abs(O).max()
    amax_s = nmax if amax_norm else pmax
    if bug == "amax_s_scaled":
        amax_s = amax_s * f32(ss)
    return ((O * f32(so)).astype(out_dtype), L, np.array([amax_s], f32), np.array([amax_o], f32))


def data(seed, H=2, Sq=32, Sk=256, D=64, spread=4.0):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((H, Sq, D)) * spread).astype(E4M3)
    k = (rng.standard_normal((H, Sk, D)) * spread).astype(E4M3)
    v = (rng.standard_normal((H, Sk, D)) * 8).astype(E4M3)
    return q, k, v


SCALES = dict(descale_q=0.0625, descale_k=0.125, descale_v=0.25, scale_s=448.0, scale_o=2.0)


@pytest.mark.parametrize("out_dtype, amax_norm", [(E4M3, False), (ml_dtypes.bfloat16, True)])
def test_fp8_flash_kernel_is_covered(out_dtype, amax_norm):
    q, k, v = data(1)
    outs = fp8_flash(q, k, v, 0.0625, 0.125, 0.25, 448.0, 2.0, out_dtype, amax_norm=amax_norm)
    ref = er.attention(q, k, v, **SCALES)
    res = ref.covers(outs, standard="mma:sm90")
    assert res.all(), res
    assert res.out.counts["exact"] > 0 and res.lse.counts["exact"] > 0
    assert res.amax_s.counts["exact"] == res.amax_o.counts["exact"] == 0  # the amax outputs are never called exact
    # the descale tensors as one-element arrays, as cuDNN and torch hold them
    ref2 = er.attention(q, k, v, **{n: np.array([x], f32) for n, x in SCALES.items()})
    assert ref2.covers(outs, standard="mma:sm90").all()


@pytest.mark.parametrize("bug", ["amax_o_zero", "no_descale_v", "no_descale_k", "amax_s_scaled"])
def test_fp8_bugs_are_caught(bug):
    q, k, v = data(2)
    ref = er.attention(q, k, v, **SCALES)
    bad = fp8_flash(q, k, v, 0.0625, 0.125, 0.25, 448.0, 2.0, E4M3, bug=bug)
    assert not ref.covers(bad, standard="mma:sm90").all()


def test_p_quantised_without_scale_s_is_caught():
    """Rows of one key at the maximum and the rest where p is 1.5 of e4m3's least subnormal: unscaled, each rounds
    up by a third; scaled by 448, by 4% (any_order p_sum=fp32 holds this fp32-adding kernel)."""
    H, Sq, Sk, D = 1, 8, 512, 16
    q = np.zeros((H, Sq, D), f32)
    q[..., 0] = 1
    k = np.zeros((H, Sk, D), f32)
    k[:, 1:, 0] = -32
    v = np.full((H, Sk, D), 1.25, f32)
    v[:, 0, :] = 1
    q, k, v = q.astype(E4M3), k.astype(E4M3), v.astype(E4M3)
    dq = 5.827 * 4 / 32  # the scores: 0 and -5.827, p = 0.002946
    ref = er.attention(q, k, v, descale_q=dq, descale_k=1.0, descale_v=1.0, scale_s=448.0)
    good = fp8_flash(q, k, v, dq, 1.0, 1.0, 448.0, 1.0, f32)
    bad = fp8_flash(q, k, v, dq, 1.0, 1.0, 448.0, 1.0, f32, bug="no_scale_s")
    assert ref.covers(good, standard="any_order", p_sum="fp32").all()
    assert not ref.covers(bad, standard="any_order", p_sum="fp32").all()


def test_fp8_refusals():
    q, k, v = data(3, Sq=4, Sk=8, D=16)
    with pytest.raises(er.ExactrefValueError, match="descale_q must be positive"):
        er.attention(q, k, v, descale_q=-1.0)
    with pytest.raises(er.ExactrefValueError, match="scale_s must be one value"):
        er.attention(q, k, v, scale_s=np.ones(2, f32))
    with pytest.raises(er.ExactrefTypeError):
        er.attention(q, k, v, scale_o="2")
    ref = er.attention(q, k, v, scale_s=470.0)  # may round P past e4m3's 448: refused when checked
    with pytest.raises(er.ExactrefError, match="scale_s = 470"):
        ref.covers((np.zeros((2, 4, 16), f32), None, None, None))


def test_attention_fp8_captures():
    """H200 captures (tools/capture/capture_attention_fp8.py): a Triton fp8 flash-attention forward (fp8 tensor cores
    for Q K^T and P V, descales folded into exp2's constant, P times scale_s to e4m3, amax_s and amax_o by atomics) on
    three shapes, O in bf16 or e4m3 (times scale_o 64), scale_s 448 or 1, and the same kernel with planted bugs. Every
    correct case passes under mma:sm90. A bug is caught, or passes with a report that says why: where fp8's
    tensor-core bound lets a row claim nothing (head dimension 128 and scores of a few units: delta past 1/4), every
    set holds every value and the note says so; P quantised without scale_s moves O by less than mma:sm90's fp8
    resolution, which the report states. Two groups tell the models apart: q = 0 (every weight exactly 1, O the mean of
    small-integer v), where every O element of the correct kernel is exact; and scores in the hundreds over mostly
    subnormal v with a masked tail, where every row claims nothing under mma:sm90 and the note says so."""
    from conftest import captures
    z, rows = captures("attention_fp8")
    caught = noted = within = 0
    for cid, gid, bug, H, Sq, Sk, D, odt, dq, dk, dv, ss, so in rows:
        q, k, v = (z[gid + "__in__" + n].view(E4M3) for n in "qkv")
        o = z[cid + "__out__o"].view(ml_dtypes.bfloat16 if odt == "bfloat16" else E4M3)
        lse, ams, amo = (z[cid + "__out__" + n] for n in ("lse", "amax_s", "amax_o"))
        ref = er.attention(q, k, v, descale_q=float(dq), descale_k=float(dk), descale_v=float(dv),
                           scale_s=float(ss), scale_o=float(so))
        res = ref.covers((o, lse, ams, amo), standard="mma:sm90")
        unbounded = sum(r.json["unbounded"] for r in res.results.values())
        if bug == "none":
            assert res.all(), "%s: %s" % (cid, res)
            if gid == "g03":  # q = 0: the weights are exactly 1, and the mean's rounding is decided exactly
                assert res.out.counts["exact"] == o.size, cid
            continue
        if not res.all():
            caught += 1
        elif unbounded:
            assert "hold every value of the output's format" in res.out.report
            noted += 1
        else:
            assert bug == "no_scale_s" and res.out.json["resolution"] is not None, "%s %s passed silently" % (cid, bug)
            within += 1
    assert (caught, noted, within) == (20, 13, 4)
