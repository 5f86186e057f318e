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
