"""The pytest plugin (exactref.pytest_plugin) run by pytest itself (pytester): the marker parametrizes `case`, the
exactref_check fixture fails a buggy kernel with its summary and report, --exactref-tier and --exactref-records act,
and under pytest-xdist the workers' records are merged into one index."""
import json
import os
import re

import pytest

from exactref import testing

pytest_plugins = ["pytester"]

PKG = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

KERNELS = '''
import numpy as np
import pytest


def good_sum(x):
    """A sequential float32 sum over the last dimension."""
    acc = np.zeros(x.shape[:-1], np.float32)
    for k in range(x.shape[-1]):
        acc = acc + x[..., k].astype(np.float32)
    return acc


def bad_sum(x):
    """The same with its last element dropped."""
    return good_sum(x[..., :-1]) + np.float32(x.shape[-1] == 1)
'''


@pytest.fixture
def plugged(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", PKG + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # under `pytest -n`, this test runs in an xdist worker whose variables would make the inner session (in this
    # process) a worker too: it would write its records per worker and print no summary
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(var, raising=False)
    return pytester


def test_marker_parametrizes_case(plugged):
    plugged.makepyfile(KERNELS + '''

@pytest.mark.exactref("sum")
def test_good(case):
    x, = case.inputs()
    case.assert_covers(good_sum(x))


@pytest.mark.exactref("sum", families=("normal",))
def test_bad(case):
    x, = case.inputs()
    case.assert_covers(bad_sum(x))
''')
    r = plugged.runpytest("-p", "exactref.pytest_plugin", "-q")
    n_good, n_bad = len(testing.cases("sum")), len(testing.cases("sum", families=("normal",)))
    o = r.parseoutcomes()
    assert o["passed"] + o["failed"] == n_good + n_bad and o["failed"] >= 1
    assert o["passed"] >= n_good  # every case of the correct kernel
    r.stdout.fnmatch_lines(["*test_bad?(*)-float32-normal*", "*exactref: kernel failed on*", "*reproduce:*"])
    # the session's tier overrides the marker's default
    r = plugged.runpytest("-p", "exactref.pytest_plugin", "-q", "--exactref-tier", "canonical", "-k", "good")
    assert r.parseoutcomes()["passed"] == len(testing.cases("sum", "canonical"))


def test_failures_name_their_pictures(plugged, tmp_path):
    """With --exactref-records (and matplotlib), a failing marked case and a failing exactref_check name the failing
    output's picture in the failure; the check's picture is its minimal case's, also a test property."""
    pytest.importorskip("matplotlib")
    plugged.makepyfile(KERNELS + '''

@pytest.mark.exactref("sum", families=("normal",))
def test_bad(case):
    x, = case.inputs()
    case.assert_covers(bad_sum(x), name="bad_sum")


def test_check_bad(exactref_check, record_property):
    exactref_check(bad_sum, "sum")
''')
    d = tmp_path / "records"
    r = plugged.runpytest("-p", "exactref.pytest_plugin", "-q", "--exactref-records", str(d), "--junitxml",
                          str(tmp_path / "junit.xml"))
    named = [ln.split("picture: ", 1)[1].strip() for ln in r.outlines if re.match(r"E\s+picture: ", ln)]
    assert r.parseoutcomes()["failed"] == len(named) >= 2 and all(os.path.isfile(p) for p in named)
    marked = [p for p in named if os.path.dirname(p) == str(d / "pictures")]
    assert len(marked) == len(named) - 1 and all(os.path.basename(p).startswith("bad_sum-sum-_") for p in marked)
    rec = json.loads(next(d.glob("*bad_sum.json")).read_text())
    pic = [p for p in named if p not in marked][0]
    assert os.path.basename(pic) == rec["minimal_failing_case"]["picture"]
    assert 'name="exactref_picture" value="%s"' % pic in (tmp_path / "junit.xml").read_text()
    # without records nothing is drawn
    r = plugged.runpytest("-p", "exactref.pytest_plugin", "-q")
    assert r.parseoutcomes()["failed"] >= 2 and not any(re.match(r"E\s+picture: ", ln) for ln in r.outlines)


def test_marker_misuse_is_an_error(plugged):
    plugged.makepyfile(test_nocase='''
import pytest


@pytest.mark.exactref("sum")
def test_no_case():
    pass
''', test_typo='''
import pytest


@pytest.mark.exactref("sum", dtype="float16")
def test_typo(case):
    pass
''')
    r = plugged.runpytest("-p", "exactref.pytest_plugin", "-q", "test_nocase.py")
    assert r.ret != 0
    r.stdout.fnmatch_lines(["*takes no `case` argument*"])
    r = plugged.runpytest("-p", "exactref.pytest_plugin", "-q", "test_typo.py")
    assert r.ret != 0
    r.stdout.fnmatch_lines(["*unknown argument dtype*"])


def test_check_fixture_records_and_summary(plugged, tmp_path):
    plugged.makepyfile(KERNELS + '''

def test_check_good(exactref_check):
    rec = exactref_check(good_sum, "sum")
    assert rec.passed


def test_check_bad(exactref_check):
    exactref_check(bad_sum, "sum")
''')
    d = tmp_path / "records"
    r = plugged.runpytest("-p", "exactref.pytest_plugin", "-q", "--exactref-records", str(d))
    r.assert_outcomes(passed=1, failed=1)
    r.stdout.fnmatch_lines(["*FAIL  bad_sum*cases failed*", "*minimal failing case:*", "*reproduce:*",
                            "*exactref*", "PASS  good_sum*cases passed*", "*records indexed in*index.json*"])
    index = json.loads((d / "index.json").read_text())
    assert index["n_records"] == 2 and index["n_failed"] == 1
    assert sorted(e["kernel"] for e in index["records"]) == ["bad_sum", "good_sum"]
    for e in index["records"]:
        rec = json.loads((d / e["path"]).read_text())
        assert rec["passed"] == (e["kernel"] == "good_sum") and rec["tier"] == "fast"
    # without --exactref-records nothing is written
    r = plugged.runpytest("-p", "exactref.pytest_plugin", "-q", "-k", "good")
    r.assert_outcomes(passed=1)
    assert not list(plugged.path.glob("**/index.json"))


def test_records_merged_under_xdist(plugged, tmp_path):
    pytest.importorskip("xdist")
    plugged.makepyfile(KERNELS + '''

@pytest.mark.parametrize("i", range(4))
def test_checks(exactref_check, i):
    exactref_check(good_sum if i else bad_sum, "sum", name="sum%d" % i)
''')
    d = tmp_path / "records"
    r = plugged.runpytest_subprocess("-p", "exactref.pytest_plugin", "-q", "-n", "2", "--exactref-records", str(d))
    r.assert_outcomes(passed=3, failed=1)
    workers = sorted(p.name for p in d.iterdir() if p.is_dir())
    assert workers and all(w.startswith("gw") for w in workers)
    index = json.loads((d / "index.json").read_text())
    assert index["n_records"] == 4 and index["n_failed"] == 1
    assert sorted(e["kernel"] for e in index["records"]) == ["sum0", "sum1", "sum2", "sum3"]
    assert all(e["path"].split(os.sep)[0] in workers for e in index["records"])
