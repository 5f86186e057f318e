"""exactref's pytest plugin: kernel checks as pytest tests.

Installed with the package, pytest loads it through the ``pytest11`` entry point; from a source tree, load it with
``-p exactref.pytest_plugin`` or ``pytest_plugins = ["exactref.pytest_plugin"]`` in a conftest.py. It adds:

- the marker ``@pytest.mark.exactref(op, dtypes=..., families=..., tier=..., seed=...)``: the test's ``case``
  argument runs over ``exactref.testing.cases(...)``, one test id per case (as ``exactref.testing.parametrize``);
- the fixture ``exactref_check``: ``exactref_check(kernel, op, **options)`` runs ``exactref.testing.check`` with the
  session's tier and records folder, fails the test with the summary and the minimal failing case's report (and,
  with records and matplotlib, its picture's path, also kept as the test's ``exactref_picture`` property), and
  returns the ``CheckRecord``;
- the options ``--exactref-tier`` (fast, exhaustive or canonical: every marker's and check's tier in the session) and
  ``--exactref-records DIR`` (each check's JSON record under DIR; under pytest-xdist each worker writes under
  DIR/<worker>, and the session's end merges every record's summary into DIR/index.json; a marked test's failing
  case draws its picture under DIR/pictures and names it in the failure);
- a line per check in the terminal summary.
"""
import glob
import json
import os

import pytest

_TIERS = ("fast", "exhaustive", "canonical")
_STASH = "exactref_checks"


def pytest_addoption(parser):
    g = parser.getgroup("exactref", "exactref kernel checks")
    g.addoption("--exactref-tier", default=None, choices=_TIERS,
                help="the tier of every @pytest.mark.exactref test and exactref_check call (default: each one's own, "
                     "else fast)")
    g.addoption("--exactref-records", default=None, metavar="DIR",
                help="write each check's JSON record under DIR (per worker under pytest-xdist) and their index to "
                     "DIR/index.json")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "exactref(op, dtypes=('float32',), families=None, tier='fast', seed=0): run the test's `case` argument over "
        "exactref.testing.cases(op, ...), one test id per case",
    )
    setattr(config, "_" + _STASH, [])


def _worker():
    return os.environ.get("PYTEST_XDIST_WORKER")


def _records_dir(config):
    d = config.getoption("exactref_records")
    if d is None:
        return None
    d = os.path.abspath(d)
    return os.path.join(d, _worker()) if _worker() else d


def pytest_generate_tests(metafunc):
    m = metafunc.definition.get_closest_marker("exactref")
    if m is None:
        return
    if "case" not in metafunc.fixturenames:
        raise pytest.UsageError("exactref: @pytest.mark.exactref on %s: the test takes no `case` argument"
                                % metafunc.definition.nodeid)
    from .testing import cases
    kw = dict(m.kwargs)
    if m.args:
        if "op" in kw or len(m.args) > 1:
            raise pytest.UsageError("exactref: @pytest.mark.exactref takes the op once, as its one positional argument "
                                    "or as op=")
        kw["op"] = m.args[0]
    if "op" not in kw:
        raise pytest.UsageError("exactref: @pytest.mark.exactref needs the op, e.g. @pytest.mark.exactref('matmul')")
    unknown = sorted(set(kw) - {"op", "dtypes", "families", "tier", "seed"})
    if unknown:
        raise pytest.UsageError("exactref: @pytest.mark.exactref: unknown argument%s %s (it takes op, dtypes, "
                                "families, tier, seed)" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)))
    kw["tier"] = metafunc.config.getoption("exactref_tier") or kw.get("tier", "fast")
    cs = cases(**kw)
    d = _records_dir(metafunc.config)
    for c in cs:  # a failing case's picture beside the records
        c.pictures = None if d is None else os.path.join(d, "pictures")
    metafunc.parametrize("case", cs, ids=[c.id for c in cs])


@pytest.fixture
def exactref_check(request):
    """exactref_check(kernel, op="matmul", **options): exactref.testing.check(kernel, op, **options) with the session's
    --exactref-tier (unless tier= is given and no --exactref-tier) and --exactref-records; fails the test with the
    summary and the minimal failing case's report; returns the CheckRecord."""
    from .testing import check
    config = request.config

    def run(kernel, op="matmul", **options):
        if config.getoption("exactref_tier"):
            options["tier"] = config.getoption("exactref_tier")
        d = _records_dir(config)
        if d is not None:
            options.setdefault("runs_dir", d)
            options.setdefault("record", True)
        else:
            options.setdefault("record", False)
        rec = check(kernel, op, **options)
        getattr(config, "_" + _STASH).append((request.node.nodeid, str(rec).splitlines()[0]))
        if rec.path:
            request.node.user_properties.append(("exactref_record", rec.path))
        if rec.picture():
            request.node.user_properties.append(("exactref_picture", rec.picture()))
        rec.assert_passed()
        return rec

    return run


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    lines = getattr(config, "_" + _STASH, [])
    if lines:
        terminalreporter.section("exactref")
        for nodeid, line in lines:
            terminalreporter.write_line("%s  (%s)" % (line, nodeid))
    d = config.getoption("exactref_records")
    if d and not _worker() and os.path.isfile(os.path.join(d, "index.json")):
        terminalreporter.write_line("exactref: records indexed in %s" % os.path.join(os.path.abspath(d), "index.json"))


def pytest_sessionfinish(session, exitstatus):
    """On the controller (or a run without xdist): every record under the records folder, a worker's included,
    summarised in DIR/index.json, ordered by path."""
    config = session.config
    d = config.getoption("exactref_records")
    if d is None or _worker():
        return
    d = os.path.abspath(d)
    entries = []
    for path in sorted(glob.glob(os.path.join(d, "**", "*.json"), recursive=True)):
        if os.path.basename(path) == "index.json":
            continue
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(r, dict) or "kernel" not in r:
            continue
        entries.append({"path": os.path.relpath(path, d), "kernel": r.get("kernel"), "op": r.get("op"),
                        "tier": r.get("tier"), "passed": r.get("passed"), "n_cases": r.get("n_cases"),
                        "n_failed": r.get("n_failed")})
    if entries or os.path.isdir(d):
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "index.json"), "w") as f:
            json.dump({"records": entries, "n_records": len(entries),
                       "n_failed": sum(1 for e in entries if not e["passed"])}, f, indent=1)
