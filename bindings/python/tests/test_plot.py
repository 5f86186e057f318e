"""Result.plot: the class grid drawn is the Result's classes (read back from the figure's images), outside
elements shaded by their distance, small multiples for a batch, tiles outlined, a file written, and a clear refusal
without matplotlib."""
import os
import re
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


def test_plot_reads_tiles_from_a_config():
    """tiles= a kernel config: BLOCK_M-style names give the rows, BLOCK_N-style the columns, either alone one axis;
    a config naming neither is refused with the names looked for."""
    A, B, C = matmul_case()
    res = er.matmul(A, B).covers(C)

    def lines(fig):  # ("h", y) for a horizontal outline, ("v", x) for a vertical one
        out = []
        for ln in fig.axes[0].lines:
            (x0, y0), (x1, y1) = ln.get_xydata()[:2]
            out.append(("h", y0) if y0 == y1 else ("v", x0))
        return sorted(out)

    both = res.plot(tiles={"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 8, "GROUP_SIZE_M": 8})
    assert lines(both) == sorted([("h", 15.5), ("h", 31.5), ("v", 7.5), ("v", 15.5)])
    rows = res.plot(tiles={"bm": 32, "BK": 64})  # names without regard to case; K blocks are not output tiles
    assert lines(rows) == [("h", 31.5)]
    with pytest.raises(ValueError, match=r"names no output tile .*BLOCK_M.*\['BK', 'num_stages'\]"):
        res.plot(tiles={"BK": 64, "num_stages": 3})
    with pytest.raises(ValueError, match="the config's BLOCK_M is 0; a tile's size must be a positive integer"):
        res.plot(tiles={"BLOCK_M": 0})
    triton = pytest.importorskip("triton")
    cfg = triton.Config({"BLOCK_M": 8, "BLOCK_N": 16}, num_warps=4)
    assert lines(res.plot(tiles=cfg)) == sorted([("h", 7.5), ("h", 15.5), ("h", 23.5), ("h", 31.5), ("v", 15.5)])


def _tile_edge_kernel(triton, tl):
    """An autotuned Triton matmul (run by Triton's interpreter on the CPU) whose second config doubles the last
    column of each output tile (a planted tile-edge bug)."""
    @triton.autotune(configs=[triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "EDGE": 1}),
                              triton.Config({"BLOCK_M": 32, "BLOCK_N": 16, "EDGE": 0})], key=["M", "N", "K"])
    @triton.jit
    def mm_kernel(A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EDGE: tl.constexpr,
                  BLOCK_K: tl.constexpr):
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        a = tl.load(A + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(B + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, input_precision="ieee")
        if EDGE == 0:
            acc = tl.where((tl.arange(0, BLOCK_N) == BLOCK_N - 1)[None, :], acc * 2, acc)
        tl.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
    return mm_kernel


def test_check_outlines_the_tiles_of_each_config(tmp_path, monkeypatch):
    """check(configs=) draws each failing case with its config's output tiles (BLOCK_M x BLOCK_N) and records them;
    the planted bug's failures lie on the tiles' last columns."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    triton = pytest.importorskip("triton")
    import triton.language as tl
    mm_kernel = _tile_edge_kernel(triton, tl)

    def my_mm(A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty(M, N, dtype=torch.float32)
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))  # noqa: E731
        mm_kernel[grid](A.contiguous(), B.contiguous(), C, M, N, K, BLOCK_K=triton.next_power_of_2(K))
        return C

    rec = er.testing.check(my_mm, "matmul", families=("normal",), standard="any_order", device="cpu",
                           runs_dir=str(tmp_path), configs=mm_kernel)
    bad = rec.failed()
    assert bad and all("EDGE=0" in c["config"] for c in bad)
    assert [c["shape"][2] >= 16 for c in rec.cases if "EDGE=0" in c["config"]] == \
        [c["verdict"] == "FAIL" for c in rec.cases if "EDGE=0" in c["config"]]
    assert all(c["tiles"] == [32, 16] and (tmp_path / c["picture"]).is_file() for c in bad)
    m = rec.minimal
    res = er.testing.reproduce(my_mm, tuple(m["shape"]), m["dtype"], m["family"], m["seed"], m["layout"],
                               op="matmul", standard="any_order", device="cpu", config=1, configs=mm_kernel)
    # the picture check() drew is this result's, with the tiles outlined
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt
    title = "%s: %s %s %s" % (rec.name, tuple(m["shape"]), m["dtype"], m["family"])
    for tiles, same in (((32, 16), True), (None, False)):
        plt.close(res.plot(tmp_path / "again.png", tiles=tiles, title=title))
        assert np.array_equal(mpimg.imread(tmp_path / m["picture"]), mpimg.imread(tmp_path / "again.png")) == same
    outside = np.asarray(res.classes) == er.CLASSES.index("outside")
    cols = np.nonzero(outside.any(axis=0))[0]
    assert list(cols) == list(range(15, m["shape"][2], 16))


def test_check_draws_the_minimal_case_beyond_the_first_sixteen(tmp_path):
    """check() draws the first 16 failing cases and the minimal one wherever it comes; assert_passed names its
    picture."""
    def bad_sum(x):  # wrong on every case over 100 elements, and on the 2 x 3 rows, which the tier holds late
        y = x.sum(-1, dtype=np.float32)
        return y * np.float32(2) if x.size > 100 or x.shape == (2, 3) else y

    rec = er.testing.check(bad_sum, "sum", runs_dir=str(tmp_path))
    bad = rec.failed()
    drawn = [c for c in bad if "picture" in c]
    assert len(bad) > 17 and bad.index(rec.minimal) >= 16 and rec.minimal["shape"] == [2, 3]
    assert drawn == bad[:16] + [rec.minimal]
    assert rec.picture() == str(tmp_path / rec.minimal["picture"]) and os.path.isfile(rec.picture())
    with pytest.raises(AssertionError, match="picture: %s" % re.escape(rec.picture())):
        rec.assert_passed()
