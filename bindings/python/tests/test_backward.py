"""Backward passes from Python: softmax_backward against numpy kernels in fp32 (the factored and the expanded
forms, sums in two orders, rows along the last and another dimension), a planted bug, and argument checks."""
import numpy as np
import pytest

import exactref as er


def softmax_rows(x):
    y = np.exp(x - x.max(-1, keepdims=True))
    return (y / y.sum(-1, keepdims=True)).astype(np.float32)


def kernel(dy, y, expanded, reverse):
    f = np.float32
    dx = np.empty_like(y)
    for r in range(y.shape[0]):
        D = f(0)
        for j in (range(y.shape[1] - 1, -1, -1) if reverse else range(y.shape[1])):
            D = f(D + f(dy[r, j] * y[r, j]))
        if expanded:
            dx[r] = (dy[r] * y[r]).astype(f) - (y[r] * D).astype(f)
        else:
            dx[r] = y[r] * (dy[r] - D).astype(f)
    return dx


def test_softmax_backward():
    rng = np.random.default_rng(11)
    for K in (1, 5, 300):
        y = softmax_rows(rng.standard_normal((4, K)).astype(np.float32))
        dy = rng.standard_normal((4, K)).astype(np.float32)
        ref = er.softmax_backward(dy, y)
        assert ref.op == "softmax_backward" and ref.shape == (4, K)
        for expanded in (False, True):
            for reverse in (False, True):
                res = ref.covers(kernel(dy, y, expanded, reverse))
                assert res.all(), str(res)
        assert ref.covers(kernel(dy, y, False, False).astype(np.float16)).all()
        assert not ref.covers((dy * y).astype(np.float32)).all()   # the sum D dropped
        t = er.softmax_backward(dy.T.copy(), y.T.copy(), dim=0)
        assert t.covers(kernel(dy, y, False, False).T.copy()).all()
    with pytest.raises(ValueError, match="same"):
        er.softmax_backward(dy, y[:, :-1])
    with pytest.raises(ValueError, match="dim"):
        er.softmax_backward(dy, y, dim=2)
    with pytest.raises(er.ExactrefError, match="not to softmax_backward"):
        ref.covers(kernel(dy, y, False, False), exp_ulps=2)
    assert "softmax_backward takes depth=, products=." in " ".join(er.softmax_backward.__doc__.split())


def test_log_softmax_backward():
    rng = np.random.default_rng(12)
    f = np.float32
    x = rng.standard_normal((3, 200)).astype(np.float32) * 3
    m = x.max(1, keepdims=True)
    y = (x - m - np.log(np.exp(x - m).sum(1, keepdims=True))).astype(np.float32)
    dy = rng.standard_normal((3, 200)).astype(np.float32)
    S = np.array([np.float32(np.sum(row, dtype=np.float32)) for row in dy])  # numpy's pairwise order
    dx = (dy - (np.exp(y).astype(f) * S[:, None]).astype(f)).astype(f)
    ref = er.log_softmax_backward(dy, y)
    assert ref.op == "log_softmax_backward"
    res = ref.covers(dx)
    assert res.all() and res.counts["exact"] > 0, str(res)
    assert ref.covers(dx, exp_ulps="fast").all()
    assert not ref.covers((np.exp(y) * (dy - S[:, None])).astype(f)).all()  # softmax's formula
    with pytest.raises(er.ExactrefError, match="not to log_softmax_backward"):
        ref.covers(dx, rsqrt_ulps=2)


def layer_norm_case(rng, R, n, dtype=np.float32, centered=True):
    x = rng.standard_normal((R, n)).astype(dtype)
    dy = rng.standard_normal((R, n)).astype(dtype)
    w = (1 + 0.3 * rng.standard_normal(n)).astype(dtype)
    xf = x.astype(np.float32)
    m = xf.mean(1, dtype=np.float32) if centered else np.zeros(R, np.float32)
    v = ((xf - m[:, None]) ** 2).mean(1, dtype=np.float32)
    r = (np.float32(1) / np.sqrt(v + np.float32(1e-5))).astype(np.float32)
    return x, dy, w, m, r


def norm_kernel(x, dy, w, m, r, centered=True, order=1):
    """dx, dweight, dbias as Triton's tutorial computes them in fp32 (the sums in numpy's pairwise order, or
    sequentially with order=-1 over the reversed row)."""
    f = np.float32
    xf, dyf = x.astype(f), dy.astype(f)
    xh = ((xf - m[:, None]).astype(f) * r[:, None]).astype(f)
    g = (dyf * w.astype(f)).astype(f)
    n = f(x.shape[1])

    def rowsum(a):
        if order == 1:
            return a.sum(1, dtype=f)
        out = np.zeros(a.shape[0], f)
        for j in range(a.shape[1] - 1, -1, -1):
            out = (out + a[:, j]).astype(f)
        return out

    c1 = (rowsum((xh * g).astype(f)) / n).astype(f)
    c2 = (rowsum(g) / n).astype(f) if centered else np.zeros_like(c1)
    dx = ((g - ((xh * c1[:, None]).astype(f) + c2[:, None]).astype(f)).astype(f) * r[:, None]).astype(f)
    dw = (dyf * xh).astype(f).sum(0, dtype=f)
    db = dyf.sum(0, dtype=f)
    return dx, dw, db


def test_layer_norm_backward():
    rng = np.random.default_rng(13)
    for R, n in ((3, 1), (4, 37), (50, 300)):
        x, dy, w, m, r = layer_norm_case(rng, R, n)
        ref = er.layer_norm_backward(dy, x, m, r, w)
        assert ref.op == "layer_norm_backward" and ref.OUTPUTS == ("dx", "dweight", "dbias")
        for order in (1, -1):
            dx, dw, db = norm_kernel(x, dy, w, m, r, order=order)
            res = ref.covers((dx, dw, db))
            assert res.all(), str(res)
            assert ref.covers((dx.astype(np.float16), None, db.astype(np.float16))).all()
        # torch's saved statistics keep the normalised dimension: [R, 1]
        assert er.layer_norm_backward(dy, x, m[:, None], r[:, None], w).covers(dx).all()
        if n > 1:
            bad = dx.copy()
            bad[R // 2, n // 2] *= np.float32(1.001)
            assert not ref.covers(bad).all()  # one element moved by 0.1%
            assert not ref.covers((dx, (dy * x).sum(0, dtype=np.float32), db)).all()  # dweight from x, not xhat
    # bf16-like inputs: fp16 x, dy and weight, outputs rounded to fp16
    x, dy, w, m, r = layer_norm_case(rng, 8, 64, np.float16)
    dx, dw, db = norm_kernel(x, dy, w, m, r)
    res = er.layer_norm_backward(dy, x, m, r, w).covers(tuple(a.astype(np.float16) for a in (dx, dw, db)))
    assert res.all(), str(res)


def test_rmsnorm_backward():
    rng = np.random.default_rng(14)
    x, dy, w, m, r = layer_norm_case(rng, 6, 200, centered=False)
    ref = er.rmsnorm_backward(dy, x, r, w)
    assert ref.OUTPUTS == ("dx", "dweight")
    dx, dw, _ = norm_kernel(x, dy, w, m, r, centered=False)
    res = ref.covers((dx, dw))
    assert res.all(), str(res)
    ldx = norm_kernel(x, dy, w, x.mean(1, dtype=np.float32), r)[0]  # layer_norm's formula: the mean subtracted
    assert not ref.covers(ldx).all()
    assert er.rmsnorm_backward(dy, x, r).covers(norm_kernel(x, dy, np.ones_like(w), m, r, centered=False)[0]).all()


def test_rmsnorm_backward_own_rstd():
    """rstd=None: a kernel that computes its own rstd (fp32, numpy's pairwise sum of squares) is covered, and one
    whose rstd comes from the unbiased mean square is not; the options of the forward's rstd apply only then."""
    rng = np.random.default_rng(17)
    f = np.float32
    x, dy, w, _, _ = layer_norm_case(rng, 6, 300, centered=False)
    own = (f(1) / np.sqrt((x * x).sum(1, dtype=f) / f(300) + f(1e-6))).astype(f)
    ref = er.rmsnorm_backward(dy, x, weight=w, eps=1e-6)
    res = ref.covers(norm_kernel(x, dy, w, np.zeros(6, f), own, centered=False)[:2])
    assert res.all(), str(res)
    assert ref.covers(norm_kernel(x, dy, w, np.zeros(6, f), own, centered=False)[0], rsqrt_ulps=4).all()
    unbiased = (f(1) / np.sqrt((x * x).sum(1, dtype=f) / f(299) + f(1e-6))).astype(f)
    assert not ref.covers(norm_kernel(x, dy, w, np.zeros(6, f), unbiased, centered=False)[:2]).all()
    with pytest.raises(er.ExactrefError, match="without a saved rstd"):
        er.rmsnorm_backward(dy, x, own, w).covers(dy, rsqrt_ulps=4)
    with pytest.raises(ValueError, match="eps"):
        er.rmsnorm_backward(dy, x, weight=w, eps=-1.0)


def test_norm_backward_arguments():
    rng = np.random.default_rng(15)
    x, dy, w, m, r = layer_norm_case(rng, 4, 16)
    with pytest.raises(ValueError, match="same"):
        er.layer_norm_backward(dy[:, :-1], x, m, r, w)
    with pytest.raises(ValueError, match="weight's shape"):
        er.layer_norm_backward(dy, x, m, r, w[:-1])
    with pytest.raises(ValueError, match="bias has shape"):
        er.layer_norm_backward(dy, x, m, r, w, bias=w[:-1])
    with pytest.raises(er.ExactrefError, match="mean must hold one value per row"):
        er.layer_norm_backward(dy, x, m[:-1], r, w)
    with pytest.raises(er.ExactrefError, match="rstd must hold one value per row"):
        er.rmsnorm_backward(dy, x, r[:2], w)
    with pytest.raises(ValueError, match="normalized_shape"):
        er.layer_norm_backward(dy, x, m, r, normalized_shape=(5,))
    with pytest.raises(ValueError, match="has 3 outputs"):
        er.layer_norm_backward(dy, x, m, r, w).covers((dy, dy))
    with pytest.raises(er.ExactrefError, match="needs a compute format holding it"):
        er.layer_norm_backward(dy, x, m.astype(np.float64), r, w).covers(dy)
    with pytest.raises(er.ExactrefError, match="not to layer_norm_backward"):
        er.layer_norm_backward(dy, x, m, r, w).covers(dy, exp_ulps=2)
    assert "layer_norm_backward takes depth=." in " ".join(er.layer_norm_backward.__doc__.split())


def ce_kernel(x, t, eps, reduction, divide=True, ignore=-100):
    """A fused cross-entropy kernel in fp32 (Liger's formulas): lse = m + log(sum exp(x - m)); the row loss
    (1 - eps)(lse - x_t) + eps lse - sum (eps / C) x; the gradient (p - eps / C) / W, minus (1 - eps) / W at t."""
    f = np.float32
    N, C = x.shape
    keep = t != ignore
    W = f(keep.sum()) if reduction == "mean" and divide else f(1)
    Wl = f(keep.sum()) if reduction == "mean" else f(1)
    m = x.max(1, keepdims=True)
    e = np.exp(x - m).astype(f)
    d = e.sum(1, dtype=f, keepdims=True)
    lse = (m + np.log(d).astype(f)).astype(f)[:, 0]
    tt = np.where(keep, t, 0)
    xt = x[np.arange(N), tt]
    loss = (lse - xt).astype(f)
    if eps:
        loss = (loss * f(1 - eps) + (eps * lse).astype(f) - (f(eps / C) * x).sum(1, dtype=f)).astype(f)
    loss = np.where(keep, loss, f(0))
    g = ((e / d).astype(f) - f(eps / C)) / W
    g[np.arange(N), tt] -= f(1 - eps) / W
    g[~keep] = 0
    if reduction == "none":
        return loss.astype(f), g.astype(f)
    return np.array([(loss / Wl).astype(f).sum(dtype=f)]), g.astype(f)


def test_cross_entropy():
    rng = np.random.default_rng(5)
    for C in (1, 10, 1000):
        x = (3 * rng.standard_normal((6, C))).astype(np.float32)
        t = rng.integers(0, C, 6)
        t[2] = -100
        for reduction in ("mean", "sum", "none"):
            for eps in (0.0, 0.1):
                ref = er.cross_entropy(x, t, reduction=reduction, label_smoothing=eps)
                assert ref.op == "cross_entropy" and ref.shape == ((6,) if reduction == "none" else (1,))
                loss, g = ce_kernel(x, t, eps, reduction)
                res = ref.covers((loss, g))
                assert res.all(), str(res)
                assert ref.covers(loss).all()
                if reduction == "mean" and C > 1:   # the gradient not divided by W
                    assert not ref.covers((None, ce_kernel(x, t, eps, reduction, divide=False)[1])).all()
    # one row of C with a 0-d target; torch's 0-d loss
    ref = er.cross_entropy(x[0], np.int64(3), reduction="sum")
    loss, g = ce_kernel(x[:1], np.array([3]), 0.0, "sum")
    assert ref.covers((loss.reshape(()), g[0])).all()


def test_backward_sets_come_lazily():
    """layer_norm_backward, rmsnorm_backward and cross_entropy check a tuple of outputs without their sets (a pass
    asked for the sets would compute every element's, where dx and dlogits are otherwise decided from witnesses);
    each output's sets, read later, are the library's one pass with the sets, and the reports are the same."""
    rng = np.random.default_rng(23)
    x, dy, w, m, r = layer_norm_case(rng, 16, 300)
    xs, dys, ws, ms, rs = layer_norm_case(rng, 16, 300, centered=False)
    xc = (3 * rng.standard_normal((8, 500))).astype(np.float32)
    tc = rng.integers(0, 500, 8)
    cases = [(er.layer_norm_backward(dy, x, m, r, w), norm_kernel(x, dy, w, m, r)),
             (er.rmsnorm_backward(dys, xs, rs, ws), norm_kernel(xs, dys, ws, ms, rs, centered=False)[:2]),
             (er.cross_entropy(xc, tc), ce_kernel(xc, tc, 0.0, "mean"))]
    std = er._api._standard("any_order", None, {})
    for ref, outs in cases:
        outs = tuple(np.ascontiguousarray(o) for o in outs)
        res = ref.covers(outs)
        assert res.all(), str(res)
        arrays = [tuple(np.empty(o.shape, np.float64) for _ in range(3)) for o in outs]
        views = [ref._out_view(outs[0], ref.OUTPUTS[0])]
        views += [er._api.View(o, n) for o, n in zip(outs[1:], ref.OUTPUTS[1:])]
        reps = er._ffi.covers_outputs_sets(ref._ptr, [vw.buf for vw in views], std, arrays)
        for name, rep, (lo, hi, slack) in zip(ref.OUTPUTS, reps, arrays):
            got = res.results[name]
            assert got._lohi is None, (ref.op, name)  # the sets not computed by covers()
            full = er._api.Result(rep, lo.shape, None, (lo, hi, slack))
            assert got.counts == full.counts and np.array_equal(got.classes, full.classes), (ref.op, name)
            assert got.widest() == full.widest() and got.worst == full.worst, (ref.op, name)
            if ref.op != "cross_entropy":  # its fast decision's report names the widest of the sets it computed
                assert got.json.get("widest") == full.json.get("widest"), (ref.op, name)
            assert got.resolution == full.resolution or (np.isnan(got.resolution) and np.isnan(full.resolution))
            assert np.array_equal(got.lo, lo, equal_nan=True) and np.array_equal(got.hi, hi, equal_nan=True)
            assert np.array_equal(got.slack, slack, equal_nan=True)


def test_cross_entropy_open_tie_never_exact():
    """Equal logits: P = 1/3 exactly, but 1/S of an enclosure of S is never a point, and with label_smoothing =
    55/1024 the gradient (1 - eps)/3 = 0.3154296875 is a bf16 midpoint (ties to even: 0.31640625). The rounding
    stays open: both neighbours are covered and neither is called exact (an earlier version called the lower one,
    0.314453125, exact)."""
    import ml_dtypes
    x = np.zeros((1, 3), np.float32)
    ref = er.cross_entropy(x, np.array([0]), reduction="none", label_smoothing=55 / 1024)
    for y in (0.314453125, 0.31640625):
        g = np.array([[-2 * y, y, y]], dtype=ml_dtypes.bfloat16)
        r = ref.covers((None, g)).results["dlogits"]
        assert r.classes[0, 1:].tolist() == [1, 1], (y, r)


def test_cross_entropy_arguments():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(TypeError, match="integer class indices"):
        er.cross_entropy(x, np.array([0.0, 1.0, 2.0]))
    with pytest.raises(TypeError, match="integer class indices"):
        er.cross_entropy(x, np.array([True, False, True]))
    with pytest.raises(ValueError, match="one class per row"):
        er.cross_entropy(x, np.array([0, 1]))
    with pytest.raises(er.ExactrefValueError, match=r"target\[1\] = 4 is outside \[0, 4\)"):
        er.cross_entropy(x, np.array([0, 4, 1]))
    with pytest.raises(ValueError, match="beyond int64"):
        er.cross_entropy(x, np.array([0, 2 ** 64 - 1, 1], np.uint64))
    with pytest.raises(ValueError, match="N x C"):
        er.cross_entropy(np.zeros((2, 3, 4), np.float32), np.array([0, 1]))
    with pytest.raises(ValueError, match="label_smoothing"):
        er.cross_entropy(x, np.array([0, 1, 2]), label_smoothing=1.5)
    # targets by value, whatever their byte order or width
    xs = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    loss, g = ce_kernel(xs, np.array([0, 3, 1]), 0.0, "mean")
    for t in (np.array([0, 3, 1], ">i8"), np.array([0, 3, 1], np.uint8), np.array([0, 3, 1], np.int16)):
        assert er.cross_entropy(xs, t).covers((loss, g)).all()
    assert not er.cross_entropy(xs, np.array([0, 2, 1])).covers((loss, g)).all()
    # one row's class as a number, not a bool, not beyond int64
    l1, g1 = ce_kernel(xs[:1], np.array([3]), 0.0, "sum")
    assert er.cross_entropy(xs[0], 3, reduction="sum").covers((l1, g1[0])).all()
    with pytest.raises(TypeError):
        er.cross_entropy(xs[0], True)
    with pytest.raises(ValueError, match="target"):
        er.cross_entropy(xs[0], 2 ** 64)


def test_matmul_backward():
    rng = np.random.default_rng(16)
    f = np.float32
    A = rng.standard_normal((3, 4, 5)).astype(f)
    B = rng.standard_normal((5, 6)).astype(f)
    dC = rng.standard_normal((3, 4, 6)).astype(f)
    dA_ref, dB_ref = er.matmul(A, B).backward(dC)
    assert dA_ref.shape == (3, 4, 5) and dB_ref.shape == (5, 6)
    assert dA_ref.covers((dC @ B.T).astype(f)).all()
    parts = [(A[b].T @ dC[b]).astype(f) for b in range(3)]  # a wgrad kernel: one partial per batch, then summed
    dB = ((parts[0] + parts[1]).astype(f) + parts[2]).astype(f)
    res = dB_ref.covers(dB)
    assert res.all(), str(res)
    assert not dB_ref.covers(((parts[0] + parts[1])).astype(f)).all()  # the last batch's partial lost
    # A shared by a batched B; equal batches
    A2, B3, dC3 = A[0], rng.standard_normal((3, 5, 6)).astype(f), dC
    dA2, dB3 = er.matmul(A2, B3).backward(dC3)
    assert dA2.covers(sum((dC3[b] @ B3[b].T).astype(f) for b in range(3)).astype(f)).all()
    assert dB3.covers(np.einsum("mk,bmn->bkn", A2, dC3).astype(f)).all()
    dA, dB = er.matmul(A, B3).backward(dC)
    assert dA.covers((dC @ np.swapaxes(B3, 1, 2)).astype(f)).all() and dB.covers((np.swapaxes(A, 1, 2) @ dC)).all()
    with pytest.raises(ValueError, match="dC has shape"):
        er.matmul(A, B).backward(dC[:, :, :-1])
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        er.matmul(A[0, 0], B).backward(dC[0, 0])
    with pytest.raises(ValueError, match="applies to a matmul"):
        er.softmax(A).backward(A)


def _tk_layer_norm(dy, x, mean, rstd, w, centered=True):
    """Triton's tutorial's layer_norm backward in fp32 numpy, stored in dy's and w's dtypes."""
    f = np.float32
    dyf, xf, wf = dy.astype(f), x.astype(f), w.astype(f)
    xh = ((xf - mean[:, None]).astype(f) * rstd[:, None]).astype(f)
    g, n = (dyf * wf).astype(f), f(x.shape[1])
    c1 = ((xh * g).astype(f).sum(1, dtype=f) / n).astype(f)
    c2 = (g.sum(1, dtype=f) / n).astype(f) * f(centered)
    dx = ((g - ((xh * c1[:, None]).astype(f) + c2[:, None]).astype(f)).astype(f) * rstd[:, None]).astype(f)
    return (dx.astype(dy.dtype), (dyf * xh).astype(f).sum(0, dtype=f).astype(w.dtype),
            dyf.sum(0, dtype=f).astype(w.dtype))


def _tk_rmsnorm(dy, x, rstd, w):
    return _tk_layer_norm(dy, x, np.zeros_like(rstd), rstd, w, centered=False)[:2]


def _tk_softmax(dy, y):
    f = np.float32
    dyf, yf = dy.astype(f), y.astype(f)
    D = (dyf * yf).astype(f).sum(-1, dtype=f)
    return (yf * (dyf - D[:, None]).astype(f)).astype(dy.dtype)


def _tk_rmsnorm_as_layer_norm(dy, x, rstd, w):  # a bug: rmsnorm's gradient with layer_norm's mean term
    return _tk_layer_norm(dy, x, np.zeros_like(rstd), rstd, w)[:2]


def test_testing_backward_ops():
    et = er.testing
    c = et.cases("layer_norm_backward", dtypes=("bfloat16",))[2]
    dy, x, mean, rstd, w = c.inputs()
    assert dy.shape == x.shape == c.shape and mean.shape == rstd.shape == (c.shape[0],) and w.shape == (c.shape[1],)
    assert mean.dtype == np.float32 and str(w.dtype) == "bfloat16"
    assert len(et.cases("softmax_backward")[0].inputs()) == 2 and len(et.cases("rmsnorm_backward")[0].inputs()) == 4
    assert et.shapes("rmsnorm_backward") == et.shapes("rmsnorm")
    fams = ("normal", "wide", "ties")
    for kernel, op in ((_tk_layer_norm, "layer_norm_backward"), (_tk_rmsnorm, "rmsnorm_backward"),
                       (_tk_softmax, "softmax_backward")):
        rec = et.check(kernel, op=op, families=fams, record=False)
        assert rec.passed, str(rec) + "\n" + str(rec.minimal)
    ce = et.cases("cross_entropy")[3]
    logits, t = ce.inputs()
    assert logits.shape == ce.shape and t.shape == (ce.shape[0],) and t.dtype == np.int64
    rec = et.check(lambda x, t: ce_kernel(x, t, 0.0, "mean"), op="cross_entropy", families=fams, record=False)
    assert rec.passed, str(rec) + "\n" + str(rec.minimal)
    rec = et.check(lambda x, t: ce_kernel(x, t, 0.0, "mean", divide=False), op="cross_entropy", families=fams,
                   record=False)
    assert not rec.passed
    rec = et.check(_tk_rmsnorm_as_layer_norm, op="rmsnorm_backward", families=fams, record=False)
    assert not rec.passed and "rmsnorm_backward" in rec.minimal["reproduce"]
    with pytest.raises(ValueError, match="rmsnorm_backward"):
        et.shapes("conv_backward")


def test_guide_output():
    """docs/guides/check-a-backward-kernel.md shows what examples/python/norm_backward_check.py,
    cross_entropy_check.py and attention_backward_check.py print."""
    from test_exactref import _shows_output
    _shows_output("guides/check-a-backward-kernel.md", "norm_backward_check.py")
    _shows_output("guides/check-a-backward-kernel.md", "cross_entropy_check.py")
    _shows_output("guides/check-a-backward-kernel.md", "attention_backward_check.py")


def one_pass(ref, outs):
    """Results of the library's one pass with every output's sets (er_covers_outputs_sets), None outputs skipped."""
    std = er._api._standard("any_order", None, {})
    views, arrays = [], []
    for i, (o, name) in enumerate(zip(outs, ref.OUTPUTS)):
        views.append(None if o is None else ref._out_view(o, name) if i == 0 else er._api.View(o, name))
        arrays.append(None if o is None else tuple(np.empty(np.shape(o), np.float64) for _ in range(3)))
    reps = er._ffi.covers_outputs_sets(ref._ptr, [None if v is None else v.buf for v in views], std, arrays)
    return [None if o is None else er._api.Result(r, np.shape(o), o, a) for o, r, a in zip(outs, reps, arrays)]


def same_results(lazy, eager):
    assert str(lazy) == str(eager) and lazy.json == eager.json and (lazy.classes == eager.classes).all()
    for name in ("lo", "hi", "slack"):
        assert np.array_equal(getattr(lazy, name), getattr(eager, name), equal_nan=True), name


def test_sets_read_later_are_the_one_pass():
    """softmax_backward's and log_softmax_backward's dx and quantize's outputs are checked without their sets (rows
    decided in runs) and read them from a second pass: the report, classes and sets are the one pass's with the sets,
    on outputs with nudged elements, a NaN, a wrong row, and fp16 outputs."""
    rng = np.random.default_rng(13)
    f = np.float32
    y = softmax_rows(rng.standard_normal((6, 700)).astype(f))
    dy = rng.standard_normal((6, 700)).astype(f)
    lp = np.log(y).astype(f)
    cases = [(er.softmax_backward(dy, y), kernel(dy, y, False, False)),
             (er.log_softmax_backward(dy, lp), (dy - np.exp(lp) * dy.sum(1, dtype=f, keepdims=True)).astype(f))]
    for ref, dx in cases:
        for out in (dx.copy(), dx.astype(np.float16)):
            flat = out.reshape(-1)
            for i, at in enumerate(rng.choice(flat.size, 60, replace=False)):
                flat[at] = np.nextafter(flat[at], np.inf if i % 2 else -np.inf, dtype=out.dtype)
            flat[11] = np.nan
            out[3] *= 2  # a wrong row
            lazy = ref.covers(out)
            assert lazy._lohi is None and not lazy.all()
            same_results(lazy, one_pass(ref, (out,))[0])
    ml = pytest.importorskip("ml_dtypes")
    x = rng.standard_normal((40, 96)).astype(f)
    am = np.abs(x).max(1)
    sc = (f(448) / am).astype(f)
    q = (x * sc[:, None]).astype(ml.float8_e4m3fn)
    q.reshape(-1)[[3, 500, 1000]] = q.reshape(-1)[[4, 501, 1001]]
    ref = er.quantize(x, "float8_e4m3fn", "row")
    lazy = ref.covers((q, am, sc))
    assert lazy.q._lohi is None and not lazy.q.all() and lazy.amax.all()
    for got, want in zip((lazy.q, lazy.amax, lazy.scale), one_pass(ref, (q, am, sc))):
        same_results(got, want)
