"""attention_backward from Python: a numpy FlashAttention-style backward in fp32 on fp16 inputs, correct and with
planted bugs, and the arguments' checks (docs/algorithms/attention-backward.md)."""
import numpy as np
import pytest

import exactref as er
from exactref import ExactrefError

RNG = np.random.default_rng(11)
F = np.float32


def _problem(H=2, Hkv=2, Sq=24, Sk=40, D=16, causal=False):
    q = RNG.standard_normal((H, Sq, D)).astype(np.float16)
    k = RNG.standard_normal((Hkv, Sk, D)).astype(np.float16)
    v = RNG.standard_normal((Hkv, Sk, D)).astype(np.float16)
    do = RNG.standard_normal((H, Sq, D)).astype(np.float16)
    rep = H // Hkv
    kk, vv = np.repeat(k, rep, 0).astype(np.float64), np.repeat(v, rep, 0).astype(np.float64)
    s = q.astype(np.float64) @ kk.transpose(0, 2, 1) / np.sqrt(D)
    if causal:
        s = np.where(np.tril(np.ones((Sq, Sk), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    O = (p / l) @ vv
    return dict(q=q, k=k, v=v, do=do, o=O.astype(np.float16), O=O, lse=(m + np.log(l))[..., 0].astype(F),
                causal=causal)


def flash_backward(pb, round_p=True, round_ds=True, bug=None):
    """FlashAttention-2's backward in fp32: P from the saved lse, D = rowsum(dO o), dS = P (dP - D), P and dS rounded
    to fp16 for their products (or not), dQ accumulated over key blocks of 16."""
    q, k, v, do, lse = (pb[n] for n in ("q", "k", "v", "do", "lse"))
    H, Sq, D = q.shape
    rep = H // k.shape[0]
    kk, vv = np.repeat(k, rep, 0).astype(F), np.repeat(v, rep, 0).astype(F)
    sc = F(1 / np.sqrt(D))
    S = (q.astype(F) @ kk.transpose(0, 2, 1)) * sc
    if pb["causal"]:
        S = np.where(np.tril(np.ones(S.shape[1:], bool)), S, F(-np.inf))
    P = np.exp(S - lse[..., None])
    dP = do.astype(F) @ vv.transpose(0, 2, 1)
    o = pb["O"].astype(F) if bug == "D from the unrounded O" else pb["o"].astype(F)
    Dd = (do.astype(F) * o).sum(-1)
    dS = P * (dP - Dd[..., None])
    Pr = P.astype(np.float16).astype(F) if round_p else P
    dSr = dS.astype(np.float16).astype(F) if round_ds else dS
    dV = Pr.transpose(0, 2, 1) @ do.astype(F)
    dq = np.zeros((H, Sq, D), F)
    for j0 in range(0, kk.shape[1], 16):
        if bug == "a key block's dQ lost" and j0 == 16:
            continue
        dq += dSr[:, :, j0:j0 + 16] @ kk[:, j0:j0 + 16]
    dQ = dq * sc
    dK = (dSr.transpose(0, 2, 1) @ q.astype(F)) * (F(1) if bug == "dK without its scale" else sc)
    Hkv = k.shape[0]
    dK = dK.reshape(Hkv, rep, *dK.shape[1:]).sum(1)
    dV = dV.reshape(Hkv, rep, *dV.shape[1:]).sum(1)
    out = np.float16 if round_p or round_ds else F
    return dQ.astype(out), dK.astype(out), dV.astype(out)


def _ref(pb, lse=True):
    return er.attention_backward(pb["q"], pb["k"], pb["v"], pb["o"], pb["lse"] if lse else None, pb["do"],
                                 causal=pb["causal"], enable_gqa=pb["q"].shape[0] != pb["k"].shape[0])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("gqa", [False, True])
def test_flash_backward_is_covered(causal, gqa):
    pb = _problem(H=4, Hkv=2 if gqa else 4, causal=causal)
    ref = _ref(pb)
    for rp, rd in ((True, True), (False, True), (True, False)):
        res = ref.covers(flash_backward(pb, rp, rd))
        assert res, str(res)
        assert res.dq.counts["exact"] > 0
    res = ref.covers(flash_backward(pb, False, False), options="products=compute")
    assert res, str(res)
    # without the saved lse: a kernel that recomputes it
    assert _ref(pb, lse=False).covers(flash_backward(pb)), "lse=None"


@pytest.mark.parametrize("bug", ["dK without its scale", "a key block's dQ lost", "D from the unrounded O"])
def test_planted_bugs_are_caught(bug):
    pb = _problem(causal=True)
    compute = bug == "D from the unrounded O"
    outs = flash_backward(pb, not compute, not compute, bug=bug)
    res = _ref(pb).covers(outs, options="products=compute" if compute else None)
    assert not res, bug
    assert _ref(pb).covers(flash_backward(pb, not compute, not compute),
                           options="products=compute" if compute else None)


def test_results_name_the_outputs():
    pb = _problem()
    dq, dk, dv = flash_backward(pb)
    res = _ref(pb).covers((dq, None, dv))
    assert set(res.results) == {"dq", "dv"}
    assert _ref(pb).covers(dq)


def test_bad_arguments_are_refused_by_name():
    pb = _problem()
    q, k, v, o, do, lse = (pb[n] for n in ("q", "k", "v", "o", "do", "lse"))
    with pytest.raises(ExactrefError, match="o and dout"):
        er.attention_backward(q, k, v, o[:, :-1], lse, do)
    with pytest.raises(ExactrefError, match="lse"):
        er.attention_backward(q, k, v, o, lse[:, :-1], do)
    with pytest.raises(TypeError, match="lse"):
        er.attention_backward(q, k, v, o, lse.astype(np.int32), do)
    with pytest.raises(TypeError, match="do"):
        er.attention_backward(q, k, v, o, lse, do.astype(np.int16))
    with pytest.raises(ExactrefError, match="enable_gqa"):
        er.attention_backward(q, k[:1], v[:1], o, lse, do)
    with pytest.raises(ExactrefError):
        _ref(pb).covers(flash_backward(pb), options="depth=4")


def _np_backward(q, k, v, o, lse, do, causal):
    """A fp32 backward of [B, H, S, D] arrays (GQA's kv heads repeated, top-left causal mask), P and dS rounded to
    the inputs' dtype for their products, the gradients in that dtype."""
    f, dt = np.float32, q.dtype
    B, H, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    rep = H // Hkv
    kk, vv = (np.repeat(np.ascontiguousarray(t).astype(f), rep, 1) for t in (k, v))
    s = (np.ascontiguousarray(q).astype(f) @ np.swapaxes(kk, -1, -2)) * f(1 / np.sqrt(D))
    if causal:
        s = np.where(np.arange(Sk)[None, :] <= np.arange(Sq)[:, None], s, f(-np.inf))
    with np.errstate(invalid="ignore"):
        p = np.exp(s - np.asarray(lse, f)[..., None])
    p = np.where(np.isfinite(p), p, f(0))
    g = np.ascontiguousarray(do).astype(f)
    ds = p * (g @ np.swapaxes(vv, -1, -2) - (g * np.ascontiguousarray(o).astype(f)).sum(-1)[..., None])
    pr, dsr = p.astype(dt).astype(f), ds.astype(dt).astype(f)
    sc = f(1 / np.sqrt(D))
    dq = dsr @ kk * sc
    dk = (np.swapaxes(dsr, -1, -2) @ np.ascontiguousarray(q).astype(f) * sc).reshape(B, Hkv, rep, Sk, D).sum(2)
    dv = (np.swapaxes(pr, -1, -2) @ g).reshape(B, Hkv, rep, Sk, D).sum(2)
    return dq.astype(dt), dk.astype(dt), dv.astype(dt)


@pytest.mark.parametrize("op", ["attention_backward", "attention_backward_causal"])
def test_testing_cases_of_attention_backward(op):
    import exactref.testing as et
    n = 0
    for case in et.cases(op, tier="fast", dtypes=("float16",), families=("normal", "cancellation")):
        ins = case.inputs()
        res = case.check(_np_backward(*ins, causal=op.endswith("causal")), ins)
        assert res, "%s: %s" % (case.id, res)
        n += 1
    assert n == 32
