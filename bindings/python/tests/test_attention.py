"""exactref.attention: a flash-attention forward in numpy's fp32 arithmetic (key blocks, the running maximum, the
rescaling, exp2 of the folded scale, P rounded to v's dtype) is covered with its masks and GQA; planted bugs are
caught; bad arguments are refused with messages."""
import numpy as np
import pytest

import exactref as er

f32 = np.float32
LOG2E = f32(1.4426950408889634)


def flash(q, k, v, scale=None, causal=False, bottom_right=False, window=None, block=32, bug=None):
    """O (v's dtype) and LSE (fp32) of a flash kernel in fp32: all queries of a head at once, key blocks in order."""
    H, Sq, D = q.shape
    Hkv, Sk, Dv = v.shape
    sc = 1.0 / np.sqrt(D) if scale is None else scale
    if bug == "scale_1_over_d":
        sc = 1.0 / D
    c = f32(f32(sc) * LOG2E)
    O = np.zeros((H, Sq, Dv), v.dtype)
    L = np.zeros((H, Sq), f32)
    i = np.arange(Sq)[:, None] + (Sk - Sq if bottom_right else 0)
    for h in range(H):
        g = h % Hkv if bug == "gqa_modulo" else h // (H // Hkv)
        Q, K, V = q[h].astype(f32), k[g].astype(f32), v[g].astype(f32)
        m = np.full(Sq, -np.inf, f32)
        l = np.zeros(Sq, f32)
        acc = np.zeros((Sq, Dv), f32)
        nblocks = (Sk + block - 1) // block
        for b in range(nblocks):
            j = np.arange(b * block, (b + 1) * block)[None, :]
            valid = j < Sk
            if causal:
                valid = valid & (j <= i + (1 if bug == "causal_off_by_one" else 0))
            if window is not None:
                valid = valid & (j >= i - window[0]) & (j <= i + window[1])
            if bug == "padded_keys":
                valid = valid | (j >= Sk)
            Kb = np.zeros((block, D), f32)
            Vb = np.zeros((block, Dv), f32)
            n = min(Sk - b * block, block)
            Kb[:n], Vb[:n] = K[b * block:b * block + n], V[b * block:b * block + n]
            t = (Q @ Kb.T).astype(f32) * c
            t = np.where(valid, t, -np.inf).astype(f32)
            mn = np.maximum(m, t.max(axis=1))
            safe = np.where(mn == -np.inf, f32(0), mn)
            p = np.exp2((t - safe[:, None]).astype(f32)).astype(f32)
            alpha = np.exp2((m - safe).astype(f32)).astype(f32)
            if bug == "no_rescale":
                alpha = np.where(m == -np.inf, f32(0), f32(1))
            l = (l * alpha + p.sum(axis=1, dtype=f32)).astype(f32)
            acc = (acc * alpha[:, None] + (p.astype(v.dtype).astype(f32) @ Vb).astype(f32)).astype(f32)
            m = mn
        empty = l == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            O[h] = np.where(empty[:, None], 0, acc / np.where(empty, 1, l)[:, None]).astype(v.dtype)
            lse2 = (m + np.log2(np.where(empty, 1, l))).astype(f32)
        L[h] = np.where(empty, -np.inf, lse2 if bug == "lse_base2" else (lse2 / LOG2E).astype(f32))
    return O, L


def qkv(rng, H=4, Hkv=4, Sq=40, Sk=70, D=32, Dv=32, dtype=np.float16):
    return (rng.standard_normal((H, Sq, D)).astype(dtype), rng.standard_normal((Hkv, Sk, D)).astype(dtype),
            rng.standard_normal((Hkv, Sk, Dv)).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("mask", [{}, {"causal": True}, {"causal": True, "bottom_right": True},
                                  {"window": (5, 3)}, {"causal": True, "window": (9, 0)}])
def test_flash_kernel_is_covered(dtype, mask):
    rng = np.random.default_rng(7)
    q, k, v = qkv(rng, Hkv=2, dtype=dtype)
    O, L = flash(q, k, v, **mask)
    align = "bottom_right" if mask.get("bottom_right") else "top_left"
    ref = er.attention(q, k, v, causal=mask.get("causal", False), causal_alignment=align, window=mask.get("window"),
                       enable_gqa=True)
    res = ref.covers((O, L))
    res.assert_all()
    assert res.out.counts["exact"] > 0
    assert ref.covers(O).all()


def test_fully_masked_rows_and_bottom_right():
    rng = np.random.default_rng(8)
    q, k, v = qkv(rng, Sq=50, Sk=30)
    O, L = flash(q, k, v, causal=True, bottom_right=True)
    assert np.isneginf(L[:, :20]).all()
    res = er.attention(q, k, v, causal=True, causal_alignment="bottom_right").covers((O, L))
    res.assert_all()
    # the same output read with top-left alignment: most rows lose or gain keys
    assert not er.attention(q, k, v, causal=True).covers((O, L)).all()


@pytest.mark.parametrize("bug", ["scale_1_over_d", "no_rescale", "causal_off_by_one", "gqa_modulo", "lse_base2",
                                 "padded_keys"])
def test_planted_bugs_are_caught(bug):
    rng = np.random.default_rng(9)
    q, k, v = qkv(rng, Hkv=2 if bug == "gqa_modulo" else 4)
    causal = bug == "causal_off_by_one"
    O, L = flash(q, k, v, causal=causal, bug=bug)
    res = er.attention(q, k, v, causal=causal, enable_gqa=True).covers((O, L))
    assert not res.all(), bug


def test_exact_output():
    """ref.exact(dtype): O correctly rounded (every element classed exact), the float64 attention rounded to the same
    values nearly everywhere; a fully masked row's O is 0."""
    rng = np.random.default_rng(12)
    q, k, v = qkv(rng, Sq=50, Sk=30)
    ref = er.attention(q, k, v, causal=True, causal_alignment="bottom_right")
    x = ref.exact(np.float16)
    assert x.dtype == np.float16 and x.shape == (4, 50, 32)
    assert ref.covers(x).counts["exact"] == x.size
    assert (x[:, :20] == 0).all()
    s = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), 1, 2) / np.sqrt(32)
    s = np.where(np.arange(30)[None, None, :] > np.arange(50)[None, :, None] - 20, -np.inf, s)[:, 20:]
    w = np.exp(s - s.max(-1, keepdims=True))
    o64 = (w @ v.astype(np.float64)) / w.sum(-1, keepdims=True)
    assert np.mean(o64.astype(np.float16) == x[:, 20:]) > 0.999
    y = ref.exact(np.float32)
    assert ref.covers(y).counts["exact"] == y.size


def test_open_tie_never_exact():
    """Equal scores through an irrational scale (D = 2, scale 1/sqrt(2)): P = 1/3 exactly, but each weight is exp of
    an enclosure, which no precision makes a point, and O = (3 + 9 2^-8 + 0) / 3 = 1 + 3 2^-8 is a bf16 midpoint
    (ties to even: 1 + 2^-6). The rounding stays open: both neighbours are covered and neither is called exact (an
    earlier version called the lower one, 1 + 2^-7, exact)."""
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    q = np.array([[[1.0, 0.0]]], dtype=bf)
    k = np.array([[[1.0, 0.0]] * 3], dtype=bf)
    v = np.array([[[3.0], [9 * 2.0 ** -8], [0.0]]], dtype=bf)
    ref = er.attention(q, k, v)
    for y in (1 + 2.0 ** -7, 1 + 2.0 ** -6):
        r = ref.covers(np.full((1, 1, 1), y, dtype=bf))
        assert r.all() and r.counts["exact"] == 0, (y, r)


def test_lse_alone_and_results():
    rng = np.random.default_rng(10)
    q, k, v = qkv(rng)
    O, L = flash(q, k, v)
    ref = er.attention(q, k, v)
    res = ref.covers((None, L))
    assert res.lse.all() and set(res.results) == {"lse"}
    bad = L.copy()
    bad[1, 3] += np.float32(0.6931)  # off by ln 2
    r = ref.covers((O, bad))
    assert r.out.all() and not r.lse.all()
    assert "[1, 3]" in str(r.lse)


def test_out_alone_reads_its_sets_later():
    """covers(out) alone checks O without its sets and computes them from a second pass when read: the report,
    classes and sets of the tuple form (out, None), which computes them with the report, with outputs moved."""
    rng = np.random.default_rng(12)
    q, k, v = qkv(rng, H=2, Hkv=1, Sq=30, Sk=90, D=24, Dv=40)
    O, _ = flash(q, k, v, causal=True)
    O = O.copy()
    flat = O.reshape(-1)
    for i, at in enumerate(rng.choice(flat.size, 40, replace=False)):
        flat[at] = np.nextafter(flat[at], np.inf if i % 2 else -np.inf, dtype=O.dtype)
    flat[7] = np.nan
    ref = er.attention(q, k, v, causal=True, enable_gqa=True)
    alone, both = ref.covers(O), ref.covers((O, None)).out
    assert alone._lohi is None and both._lohi is None  # no sets computed yet
    assert str(alone) == str(both) and alone.json == both.json and (alone.classes == both.classes).all()
    assert alone.n_failed >= 1
    for name in ("lo", "hi", "slack"):
        assert np.array_equal(getattr(alone, name), getattr(both, name), equal_nan=True), name
    # with LSE too: each output's sets from its own second pass, as the library's one pass with the sets gives them
    _, L = flash(q, k, v, causal=True)
    L = L.copy()
    L[1, 4] += np.float32(0.5)
    lazy = ref.covers((O, L))
    assert lazy.out._lohi is None and lazy.lse._lohi is None and not lazy.lse.all()
    arrays = [tuple(np.empty(a.shape, np.float64) for _ in range(3)) for a in (O, L)]
    views = [ref._out_view(O, "out"), er._api.View(L, "lse")]
    reps = er._ffi.covers_outputs_sets(ref._ptr, [vw.buf for vw in views], er._api._standard("any_order", None, {}),
                                       arrays)
    assert [r.numel() for r in reps] == [O.size, L.size]
    for res, (lo, hi, slack) in zip((lazy.out, lazy.lse), arrays):
        assert np.array_equal(res.lo, lo, equal_nan=True) and np.array_equal(res.hi, hi, equal_nan=True)
        assert np.array_equal(res.slack, slack, equal_nan=True)


def test_refusals():
    rng = np.random.default_rng(11)
    q, k, v = qkv(rng, Hkv=2)
    with pytest.raises(er.ExactrefError, match="enable_gqa"):
        er.attention(q, k, v)
    with pytest.raises(ValueError, match="causal_alignment"):
        er.attention(q, k, v, enable_gqa=True, causal_alignment="diagonal")
    with pytest.raises(ValueError, match="window"):
        er.attention(q, k, v, enable_gqa=True, window=(3,))
    with pytest.raises(ValueError, match="window sides"):
        er.attention(q, k, v, enable_gqa=True, window=(-2, 0))
    with pytest.raises(TypeError, match="scale"):
        er.attention(q, k, v, enable_gqa=True, scale=True)
    with pytest.raises(ValueError, match="scale=0"):
        er.attention(q, k, v, enable_gqa=True, scale=0.0)
    with pytest.raises(er.ExactrefError, match="24 significant bits"):
        er.attention(q.astype(np.float64), k, v, enable_gqa=True)
    ref = er.attention(q, k, v, enable_gqa=True)
    O, L = flash(q, k, v)
    with pytest.raises(er.ExactrefError, match="div= does not apply"):
        ref.covers((O, L), div="divide")
    with pytest.raises(er.ExactrefError, match="kv_block=, p_sum= and qk_scale= apply to attention"):
        er.matmul(q[0], k[0].T).covers(np.zeros((40, 70), np.float32), kv_block=4)
    with pytest.raises(er.ExactrefError, match="lse"):
        ref.covers((O, L[:, :-1]))


def test_attention_captures():
    """H200 captures (tools/capture/capture_attention.py): every correct output of torch's flash, efficient, cudnn and
    math backends (fp16, bf16, fp32; causal or not; Sq != Sk; decoding against 2048 keys; GQA) and of a Triton flash
    kernel (both alignments, fully masked rows) covered under any_order and, for fp16 and bf16, under mma:sm90, each
    also with p_sum=fp32 (every captured kernel sums the denominator before P's rounding).
    torch's aten flash op aligns is_causal bottom-right when Sq != Sk: covered there, outside top-left. The aten cudnn
    op's fp32 output (NaN in half of O) is caught. Every planted bug caught wherever it moves an output: no rescale
    moves nothing when the keys fit one 64-key block (Sk = 64)."""
    from conftest import arrays, captures
    pytest.importorskip("ml_dtypes")
    z, rows = captures("attention")
    seen = 0
    for cid, kind, dt, Sq, Sk, D, H, Hkv, causal, align, gid in rows:
        q, k, v, o = arrays(z, dt, gid + "__in__q", gid + "__in__k", gid + "__in__v", cid + "__out__o")
        lse = z[cid + "__out__lse"] if cid + "__out__lse" in z else None
        causal = causal == "1"
        shifted = kind == "torch_flash" and causal and Sq != Sk
        if shifted:
            res = er.attention(q, k, v, causal=True).covers((o, lse))
            assert not res.out.all() and not res.lse.all(), cid
            align = "bottom_right"
        ref = er.attention(q, k, v, causal=causal, causal_alignment=align, enable_gqa=H != Hkv)
        stds = ("any_order", "mma:sm90") if dt != "float32" else ("any_order",)
        for std in stds + tuple(s + " p_sum=fp32" for s in stds):
            res = ref.covers((o, lse), standard=std)
            if kind == "torch_cudnn" and dt == "float32":
                assert res.out.counts["nan_unexpected"] > 0, cid
            elif kind.startswith("bug") and not (kind == "bug_no_rescale" and Sk == "64"):
                assert not res.all(), "%s %s %s: %s" % (cid, kind, std, res)
            else:
                assert res.all(), "%s %s %s %s: %s" % (cid, kind, dt, std, res)
        seen += 1
    assert seen == 121


def test_guide_output():
    """docs/guides/check-attention.md shows what examples/python/attention_check.py prints."""
    from test_exactref import _shows_output
    _shows_output("guides/check-attention.md", "attention_check.py")


def _batched(causal, bottom_right, bug=None):
    """flash() over the batch dimension of the harness's 4-dimensional inputs: (O, LSE)."""
    def kernel(q, k, v):
        outs = [flash(q[b], k[b], v[b], causal=causal, bottom_right=bottom_right, bug=bug) for b in range(q.shape[0])]
        return np.stack([o for o, _ in outs]), np.stack([lse for _, lse in outs])
    return kernel


def test_harness_attention():
    """exactref.testing on attention: the flash kernel passes every fast case of attention_causal_bottom_right in
    fp16 (decoding, key lengths past a block, Sq above Sk, GQA); the same kernel masking top-left fails exactly the
    cases with Sq != Sk, and a causal mask off by one fails every case with a query that has a later key, the
    minimal one the smallest such."""
    from exactref import testing
    rec = testing.check(_batched(True, True), "attention_causal_bottom_right", dtypes=("float16",), record=False)
    assert rec.passed, rec
    assert len(rec.cases) == 48
    rec = testing.check(_batched(True, False), "attention_causal_bottom_right", dtypes=("float16",), record=False)
    for e in rec.cases:
        b, h, hkv, sq, sk, d = e["shape"]
        assert (e["verdict"] == "pass") == (sq == sk or sk == 1 and sq == 1), e
    rec = testing.check(
        _batched(True, False, bug="causal_off_by_one"), "attention_causal", dtypes=("float16",), record=False
    )
    for e in rec.cases:
        b, h, hkv, sq, sk, d = e["shape"]
        assert (e["verdict"] == "pass") == (sk == 1), e  # with one key no query has a later one
    failing = [tuple(e["shape"]) for e in rec.cases if e["verdict"] != "pass"]
    assert tuple(rec.minimal["shape"]) == min(failing, key=lambda shp: int(np.prod(shp))) == (1, 4, 1, 1, 257, 128)


def test_attention_edge_captures():
    """H200 captures (tools/capture/capture_attention_edges.py) on the inputs that tell the standards apart: q = 0
    (every weight exactly 1, O the mean of v on midpoints of fp16 and bf16), small-integer q and k with the scale ln 2
    (exp2 arguments on integers), scores in the hundreds, subnormal v; torch's four backends and the Triton kernel, fp16
    and bf16, causal or not. Every case covered under any_order, mma:sm90 and p_sum=fp32; on q = 0 every O element of
    flash, efficient, cudnn and Triton is the correctly rounded mean (class exact: the midpoints rounded to even)."""
    from conftest import arrays, captures
    pytest.importorskip("ml_dtypes")
    z, rows = captures("attention_edges")
    seen = 0
    for cid, kind, dt, fam, causal, scale, gid in rows:
        q, k, v, o = arrays(z, dt, gid + "__in__q", gid + "__in__k", gid + "__in__v", cid + "__out__o")
        lse = z[cid + "__out__lse"] if cid + "__out__lse" in z else None
        causal = causal == "1"
        align = "bottom_right" if kind == "flash" and causal else "top_left"  # the aten flash op's alignment, Sq < Sk
        ref = er.attention(q, k, v, causal=causal, causal_alignment=align, scale=float(scale) or None)
        for std in ("any_order", "mma:sm90", "any_order p_sum=fp32"):
            res = ref.covers((o, lse), standard=std)
            assert res.all(), "%s %s %s %s causal=%s %s: %s" % (cid, kind, dt, fam, causal, std, res)
        if fam == "zero_q" and kind != "math":
            assert ref.covers(o).counts["exact"] == o.size, (cid, kind, dt)
        seen += 1
    assert seen == 80
