"""Result.plot: the class grid drawn is the Result's classes (read back from the figure's images), outside
elements shaded by their distance, small multiples for a batch, tiles outlined, a file written, and a clear refusal
without matplotlib."""
import sys

import numpy as np
import pytest

import exactref as er

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from exactref import _plot  # noqa: E402


def matmul_case():
    rng = np.random.default_rng(11)
    A = rng.standard_normal((40, 64)).astype(np.float16)
    B = rng.standard_normal((64, 24)).astype(np.float16)
    C = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    C[:, 16:] = (A[:, :48].astype(np.float64) @ B[:48, 16:].astype(np.float64)).astype(np.float32)  # a stripe
    hi = er.matmul(A, B).covers(C).hi
    for (i, j), k in (((5, 3), 1), ((6, 3), 8)):  # k ulps beyond the set's upper end
        v = np.float32(hi[i, j])
        for _ in range(k):
            v = np.nextafter(v, np.float32(np.inf))
        C[i, j] = v
    C[7, 7] = np.nan
    return A, B, C


def expected(res):
    """The picture's codes, written out independently of _plot: by class, outside by -slack (< 2, 2 to 16, > 16)."""
    names = np.array(er.CLASSES)[np.asarray(res.classes)]
    d = -res.slack
    want = np.full(names.shape, 6)
    want[names == "exact"], want[names == "covered"], want[names == "overflow"] = 0, 1, 2
    out = names == "outside"
    with np.errstate(invalid="ignore"):
        want[out & (d < 2)], want[out & (d >= 2) & (d <= 16)], want[out & (d > 16)] = 3, 4, 5
    want[np.isin(names, ("nan_unexpected", "inf_unexpected"))] = 7
    want[np.isin(names, ("nan_missing", "inf_missing"))] = 8
    return want


def test_plot_draws_the_classes(tmp_path):
    A, B, C = matmul_case()
    res = er.matmul(A, B).covers(C)
    fig = res.plot(tmp_path / "mm.png", tiles=(16, 16), title="matmul")
    img = np.asarray(fig.axes[0].images[0].get_array())
    assert img.shape == C.shape and np.array_equal(img, expected(res))
    assert img[5, 3] == _plot.CODES.index("outside, < 2 ulps")
    assert img[6, 3] == _plot.CODES.index("outside, 2 to 16 ulps")
    assert img[7, 7] == _plot.CODES.index("NaN or inf where not allowed")
    assert (img[:, 16:] == _plot.CODES.index("outside, > 16 ulps")).sum() > 100  # the dropped tail
    assert (tmp_path / "mm.png").stat().st_size > 1000
    # the tiles' outlines: one line every 16 rows and columns inside the image
    assert len(fig.axes[0].lines) == len(range(16, 40, 16)) + len(range(16, 24, 16))


def test_plot_small_multiples_and_vectors():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((4, 3, 4, 5, 6)).astype(np.float32)
    y = x.sum(-1, dtype=np.float32)
    y[1, 2, 3, 4] += 1
    res = er.sum(x, -1).covers(y)
    fig = res.plot(max_panels=5)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 5
    flat = np.asarray(res.classes).reshape(12, 4, 5)
    for k, im in enumerate(images):
        assert np.array_equal(np.asarray(im.get_array()), expected(res).reshape(12, 4, 5)[k])
    assert images[1].axes.get_title() == "(0, 1)"
    assert "the first 5 of 12 panels" in fig._suptitle.get_text()
    v = er.sum(x[0, 0, 0], -1).covers(y[0, 0, 0])
    assert np.asarray(v.plot().axes[0].images[0].get_array()).shape == (1, 5)


def test_plot_refusals(monkeypatch):
    A, B, C = matmul_case()
    res = er.matmul(A, B).covers(C)
    for bad in ((16,), (0, 16), (16.0, 16), "16x16"):
        with pytest.raises(ValueError, match="tiles must be two positive integers"):
            res.plot(tiles=bad)
    with pytest.raises(ValueError):
        res.plot(max_panels=0)
    ln = er.layer_norm(np.ones((2, 8), np.float32), 8)
    with pytest.raises(ValueError, match="the checked outputs are"):
        ln.covers((np.zeros((2, 8), np.float32), None, None)).plot("mean")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'exactref\[plot\]'"):
        res.plot()
