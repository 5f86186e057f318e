"""Result.resolution (docs/reference/classes.md, "Resolution"): from the report where it saw every set, from the sets
on the matmul fast path, the same either way; and the row ops' note that their classic bug may pass, given where every
set is at least as wide as the bug moves an element (the n - 1 variance at n = 4096 under the default standard) and
not where a set is finer (n = 256, or a stated tree)."""
import numpy as np
import pytest

import exactref as er
from exactref import _ffi


def from_sets(res):
    """The resolution written out from the Result's sets: c / (1 - c) for the widest relative set away from 0."""
    lo, hi = res.lo, res.hi
    away = (lo <= hi) & ((lo > 0) | (hi < 0))
    c = np.max((hi[away] - lo[away]) / np.maximum(np.abs(lo[away]), np.abs(hi[away])))
    return c / (1 - c)


def rows(n, r=32, seed=0):
    return np.random.default_rng(seed).standard_normal((r, n)).astype(np.float32)


def softmax64(x, drop_last=False):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return (e / (e[:, :-1] if drop_last else e).sum(-1, keepdims=True)).astype(np.float32)


def layer_norm64(x, ddof=0):
    x64 = x.astype(np.float64)
    rstd = 1 / np.sqrt(x64.var(-1, ddof=ddof, keepdims=True) + 1e-5)
    return ((x64 - x64.mean(-1, keepdims=True)) * rstd).astype(np.float32), rstd.ravel().astype(np.float32)


def rmsnorm64(x, ddof=0):
    x64 = x.astype(np.float64)
    ms = (x64 * x64).sum(-1, keepdims=True) / (x.shape[-1] - ddof)
    return (x64 / np.sqrt(ms + 1e-6)).astype(np.float32)


def test_resolution_from_the_report_is_the_sets():
    x = rows(1000)
    res = er.softmax(x).covers(softmax64(x))
    assert res.resolution == from_sets(res) and res.json["resolution"] == res.resolution
    y, rstd = layer_norm64(x)
    ln = er.layer_norm(x, 1000).covers((y, None, rstd))
    for r in (ln.y, ln.rstd):
        assert r.resolution == from_sets(r) and r.json["sets_away_from_0"] == np.sum((r.lo > 0) | (r.hi < 0))
    assert "  resolution %.3g: an output off by more than that" % ln.rstd.resolution in str(ln.rstd)


def test_resolution_on_the_fast_path_is_the_exact_paths(monkeypatch):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((48, 300)).astype(np.float16)
    B = rng.standard_normal((300, 40)).astype(np.float16)
    C = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    got = {}
    for fast in ("0", "1"):
        monkeypatch.setenv("EXACTREF_FAST", fast)
        ref = er.matmul(A, B)
        res = ref.covers(C)
        if fast == "1" and not _ffi.ref_fast(ref._ptr):
            pytest.skip("no fast path in this build (no BLAS)")
        assert (res.json["resolution"] is None) == (fast == "1")  # the report saw every set only off the fast path
        got[fast] = res.resolution
    assert got["0"] == got["1"] > 0


@pytest.mark.parametrize("n, note", [(256, False), (4096, True)])
def test_row_ops_say_when_their_classic_bug_may_pass(n, note):
    x = rows(n)
    y, rstd = layer_norm64(x)
    yb, rstdb = layer_norm64(x, ddof=1)  # the variance divided by n - 1
    ref = er.layer_norm(x, n)
    mean = x.astype(np.float64).mean(-1).astype(np.float32)
    ok, bug = ref.covers((y, mean, rstd)), ref.covers((yb, mean, rstdb))
    assert ok.y.all() and ok.rstd.all()
    for good, bad in ((ok.y, bug.y), (ok.rstd, bug.rstd)):
        said = good.json["may_pass"]
        assert (said is not None) == note and ("  note: every set is at least" in str(good)) == note
        if note:
            assert said["bug"] == "a variance divided by n - 1"
            assert said["relative_error"] == pytest.approx(1 - np.sqrt((n - 1) / n), rel=1e-12)
            assert good.json["finest"] >= said["relative_error"]
        assert bad.all() == note  # the bug passes exactly where the note says it may (here)
    assert ok.mean.json["may_pass"] is None  # the mean has no classic bug named
    sm = er.softmax(x).covers(softmax64(x))
    assert (sm.json["may_pass"] is not None) == note
    if note:
        assert sm.json["may_pass"]["relative_error"] == pytest.approx(1 / (n - 1), rel=1e-15)
    else:
        assert not er.softmax(x).covers(softmax64(x, drop_last=True)).all()
    rm = er.rmsnorm(x).covers(rmsnorm64(x))
    assert rm.all() and (rm.json["may_pass"] is not None) == note
    assert (rm.json["may_pass"] or {}).get("bug", "a mean square divided by n - 1") == "a mean square divided by n - 1"
    assert er.rmsnorm(x).covers(rmsnorm64(x, ddof=1)).all() == note
    x64 = x.astype(np.float64)
    lsm = (x64 - x64.max(-1, keepdims=True))
    lsm = (lsm - np.log(np.exp(lsm).sum(-1, keepdims=True))).astype(np.float32)
    assert er.log_softmax(x).covers(lsm).json["may_pass"] is None  # log_softmax names no classic bug


def test_a_stated_tree_narrows_the_sets_and_drops_the_note():
    n = 4096
    x = rows(n)
    yb, rstdb = layer_norm64(x, ddof=1)
    y, rstd = layer_norm64(x)
    opts = dict(depth=12, variance="two_pass")
    ref = er.layer_norm(x, n)
    ok = ref.covers((y, None, rstd), **opts)
    assert ok.y.all() and ok.y.json["may_pass"] is None and ok.rstd.json["may_pass"] is None
    bad = ref.covers((yb, None, rstdb), **opts)
    assert not bad.y.all() and not bad.rstd.all()


def test_the_reports_classes_md_shows():
    """docs/reference/classes.md's two reports under "Resolution", produced here."""
    import os
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "reference", "classes.md")).read()
    x = rows(4096, 16)
    sm = str(er.softmax(x).covers(softmax64(x))).strip()
    x = rows(4096, 64)
    y, _ = layer_norm64(x)
    ln = str(er.layer_norm(x, 4096).covers((y, None, None)).y).strip()
    for text in (sm, ln):
        assert "```text\n%s\n```" % text in doc, text


def test_check_notes_the_cases_where_a_classic_bug_may_pass():
    """check() keeps each case's may_pass and its summary counts them, passing or failing: on the fast tier, every case
    where the n - 1 variance passed (n > 1, where it moves anything) is one the correct kernel's record notes."""
    def ln(x, ddof=0):
        x64 = x.astype(np.float64)
        v = x64.var(-1, ddof=ddof if x.shape[-1] > 1 else 0, keepdims=True)
        r = 1 / np.sqrt(v + 1e-5)
        return ((x64 - x64.mean(-1, keepdims=True)) * r).astype(np.float32), \
            x64.mean(-1).astype(np.float32), r.ravel().astype(np.float32)

    good = er.testing.check(ln, "layer_norm", record=False)
    bug = er.testing.check(lambda x: ln(x, 1), "layer_norm", name="ln_n1", record=False)
    noted = [bool(c.get("may_pass")) for c in good.cases]
    assert good.passed and 0 < sum(noted) < len(noted)
    missed = [c["verdict"] == "pass" and c["shape"][-1] > 1 for c in bug.cases]
    assert any(missed) and all(n for n, m in zip(noted, missed) if m)
    line = "      note: a variance divided by n - 1 may pass in %d of %d cases" % (sum(noted), len(noted))
    assert line in str(good) and line in str(bug) and str(bug).startswith("FAIL")


def test_inductor_layer_norm_captures():
    """H200 captures (tools/capture/capture_ln_blind.py): layer_norm compiled by Inductor (F.layer_norm and a two-pass
    decomposition) covered under the default standard; the variance over n - 1, compiled the same way, passes that
    standard at n = 768 to 8192, and in every such case the report of the same rows says it may (no silent pass)."""
    from conftest import captures
    z, rows = captures("ln_blind")
    noted = {}
    for cid, kind, family, n, gid in rows:
        x, y = z[gid + "__in__x"], z[cid + "__out__y"]
        res = er.layer_norm(x, int(n)).covers((y, None, None)).y
        if kind.startswith("bug"):
            if res.all():  # the bug passed: the report must say such a bug may pass
                assert res.json["may_pass"]["bug"] == "a variance divided by n - 1", (cid, n, family)
                noted[gid] = True
        else:
            assert res.all(), (cid, kind, family, n, res)
            assert (res.json["may_pass"] is not None) == (res.json["finest"] >= 1 - np.sqrt((int(n) - 1) / int(n)))
    assert len(noted) == 6  # every bug passed here, each one noted


def test_inductor_row_op_captures():
    """H200 captures (tools/capture/capture_inductor_rows.py): softmax, log_softmax and rms_norm compiled by Inductor,
    fp32 and bf16, 8 rows of 1024 and 8192 (normal rows) and of 1024 (wide, masked and subnormal rows), covered under
    the default standard; the planted bugs compiled the same way (softmax's denominator without its last term,
    rms_norm's mean square over n - 1) are caught, or pass with a report that says such a bug may, or left the
    output as the correct kernel's (rows where the bug changes nothing): never a visible bug passing silently."""
    from conftest import arrays, captures
    z, rows = captures("inductor_rows")
    caught = passed_noted = unchanged = 0
    correct = {}
    for cid, kind, dtype, nrows, n, gid, fam in rows:
        if not kind.startswith("bug"):
            correct[(gid, "softmax" if "softmax" in kind and "log" not in kind else kind)] = cid
    for cid, kind, dtype, nrows, n, gid, fam in rows:
        x, = arrays(z, dtype, gid + "__in__x")
        y, = arrays(z, dtype, cid + "__out__y")
        ref = er.log_softmax(x) if kind == "log_softmax" else er.softmax(x) if "softmax" in kind else er.rmsnorm(x)
        res = ref.covers(y)
        if not kind.startswith("bug"):
            assert res.all(), (cid, kind, dtype, n, fam, res)
        elif not res.all():
            caught += 1
        else:
            twin, = arrays(z, dtype, correct[(gid, "softmax" if "softmax" in kind else "rms_norm")] + "__out__y")
            if np.array_equal(np.asarray(y).view(np.uint8), np.asarray(twin).view(np.uint8)):
                unchanged += 1
                continue
            assert res.json["may_pass"] is not None, (cid, kind, dtype, n, fam)
            if dtype == "bfloat16" and res.json["finest"] == 0:  # the note of the bug's own output
                assert "every element's set holds its exact value moved by" in res.report, res.report
            passed_noted += 1
    assert len(rows) == 46 and caught + passed_noted + unchanged == 18 and caught >= 8 and passed_noted >= 4, (
        caught, passed_noted, unchanged)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "rmsnorm", "rmsnorm_weight", "rmsnorm_long", "softmax_dim0",
                                "layer_norm", "layer_norm_affine"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_row_ops_record_passing_outputs_as_their_sets_would(monkeypatch, op, dtype):
    """The row ops and layer_norm's y keep the record of each output inside its set as a tally and its widest set
    (EXACTREF_FAST unset) or put every set into the report (EXACTREF_FAST=0): the same report either way, on rows of
    equal values (equal sets: the first of the widest wins), rows with outputs moved 1 to 3 ulps, set to NaN or
    infinity, and rmsnorm's classic bug's test (at 4096, where it may pass: the report's note counts the tests)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((8, 4096) if op == "rmsnorm_long" else (24, 96)).astype(np.float32)
    x[3] = x[3, 0]  # a row of one value
    x[7, ::2] = x[7, 1]  # half a row equal
    w = (1 + rng.standard_normal(x.shape[1]) / 4).astype(np.float32)
    x64 = x.astype(np.float64)
    m = x64.max(-1, keepdims=True)
    e = np.exp(x64 - m)
    if op.startswith("softmax"):
        dim = 0 if op == "softmax_dim0" else -1
        mm = x64.max(dim, keepdims=True)
        ee = np.exp(x64 - mm)
        y, ref = ee / ee.sum(dim, keepdims=True), er.softmax(x, dim)
    elif op == "log_softmax":
        y, ref = x64 - m - np.log(e.sum(-1, keepdims=True)), er.log_softmax(x)
    elif op.startswith("layer_norm"):
        wt, bt = (w, w / 2) if op == "layer_norm_affine" else (None, None)
        mu = x64.mean(-1, keepdims=True)
        y = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
        y = y if wt is None else y * wt + bt
        ref = er.layer_norm(x, x.shape[-1], wt, bt)
    else:
        wt = w if op == "rmsnorm_weight" else None
        y = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * (1 if wt is None else wt)
        ref = er.rmsnorm(x, wt, eps=1e-6)
    out = y.astype(dtype)
    flat = out.reshape(-1)
    picks = rng.choice(flat.size, 60, replace=False)
    for k, i in enumerate(picks):
        if k < 40:
            flat[i] = np.nextafter(flat[i], np.inf if k % 2 else -np.inf, dtype=dtype)
            if k % 3 == 0:
                flat[i] = np.nextafter(flat[i], np.inf if k % 2 else -np.inf, dtype=dtype)
        elif k < 50:
            flat[i] = np.nan
        else:
            flat[i] = np.inf if k % 2 else -np.inf
    got = {}
    for fast in ("0", "1"):
        monkeypatch.setenv("EXACTREF_FAST", fast)
        r = ref.covers(out)
        got[fast] = (r.json, str(r), r.classes.copy())
    if op == "rmsnorm_long":
        assert got["1"][0]["may_pass"] is not None
    assert got["0"][0] == got["1"][0] and got["0"][1] == got["1"][1]
    assert (got["0"][2] == got["1"][2]).all()
    counts = got["1"][0]["counts"]
    assert counts["exact"] > 0 and got["1"][0]["n_failed"] > 0
    assert counts["covered"] > 0 or dtype == np.float16  # fp16 sets are mostly one value: moved outputs leave them
