"""The `exactref` command (python -m exactref): check on saved arrays, show and report on check() records, the
version, and each bad argument refused with exit status 2 and one line, no traceback."""
import html.parser
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import exactref as er

PKG = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def run(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "exactref"] + [str(a) for a in args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == "exactref %s (libexactref %s)" % (er.__version__, er.version())


@pytest.fixture
def saved(tmp_path):
    rng = np.random.default_rng(9)
    A = rng.standard_normal((33, 70)).astype(np.float16)
    B = rng.standard_normal((70, 17)).astype(np.float16)
    C = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    bad = C.copy()
    bad[:, -1] = (A[:, :-6].astype(np.float64) @ B[:-6, -1].astype(np.float64)).astype(np.float32)  # a dropped tail
    x = rng.standard_normal((4, 50)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    y = (e / e.sum(-1, keepdims=True)).astype(np.float32)
    path = tmp_path / "case.npz"
    np.savez(path, A=A, B=B, C=C, bad=bad, x=x, y=y)
    return path


def test_check_saved_arrays(saved):
    r = run("check", saved, "--op", "matmul", "--inputs", "A,B", "--output", "C")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(str(er.matmul(*[np.load(saved)[k] for k in "AB"]).covers(np.load(saved)["C"])))
    r = run("check", saved, "--op", "matmul", "--inputs", "A,B", "--output", "bad")
    assert r.returncode == 1 and "outside" in r.stdout
    r = run("check", saved, "--op", "matmul", "--inputs", "A,B", "--output", "C", "--standard", "sequential",
            "--option", "fma=never")
    assert r.returncode in (0, 1) and r.stdout  # a fixed order: judged, whatever the verdict
    r = run("check", saved, "--op", "softmax", "--inputs", "x", "--output", "y")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("args, message", [
    (("--op", "nosuch", "--inputs", "A,B", "--output", "C"), "--op nosuch: expected one of matmul"),
    (("--op", "matmul", "--inputs", "A,Z", "--output", "C"), "holds no array named Z (it holds: A, B, C, bad, x, y)"),
    (("--op", "matmul", "--inputs", "A,,B", "--output", "C"), "--inputs: expected array names"),
    (("--op", "matmul", "--inputs", "A,B", "--output", "C", "--option", "fma"), "--option: expected KEY=VALUE"),
    (("--op", "matmul", "--inputs", "A,B", "--output", "C", "--option", "fma=sometimes"), "fma"),
    (("--op", "matmul", "--inputs", "A,B", "--output", "C,bad"), "matmul has 1 output (out); 2 given"),
    (("--op", "matmul", "--inputs", "A,x", "--output", "C"), "exactref"),
    (("--op", "max", "--inputs", "x", "--output", "y", "--option", "compute=fp32"), "max adds and multiplies nothing"),
])
def test_check_refusals(saved, args, message):
    r = run("check", saved, *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_files_refused(tmp_path):
    r = run("check", tmp_path / "none.npz", "--op", "sum", "--inputs", "x", "--output", "y")
    assert r.returncode == 2 and "no such file" in r.stderr
    (tmp_path / "a.txt").write_text("1 2 3")
    r = run("check", tmp_path / "a.txt", "--op", "sum", "--inputs", "x", "--output", "y")
    assert r.returncode == 2 and "expected a .npz, .pt or .safetensors file" in r.stderr
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    r = run("check", tmp_path / "broken.npz", "--op", "sum", "--inputs", "x", "--output", "y")
    assert r.returncode == 2 and "not a readable .npz file" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "r.json").write_text('{"a": 1}')
    for cmd in ("show", "report"):
        r = run(cmd, tmp_path / "r.json")
        assert r.returncode == 2 and "not a record of exactref.testing.check" in r.stderr
    r = run()
    assert r.returncode == 2 and "a command is needed" in r.stderr


def dropped_last(x):
    """A sum over the last dimension that drops its last element."""
    return x[..., :-1].astype(np.float64).sum(-1).astype(np.float32) if x.shape[-1] > 1 else x[..., 0] + 1


class _Page(html.parser.HTMLParser):
    """Collects the rows' verdicts and checks that every element opened is closed."""

    def __init__(self):
        super().__init__()
        self.stack, self.verdicts, self.pre, self.images = [], [], 0, []

    def handle_starttag(self, tag, attrs):
        if tag not in ("meta", "br", "img"):
            self.stack.append(tag)
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))
        if tag == "tr" and dict(attrs).get("class"):
            self.verdicts.append(dict(attrs)["class"])
        self.pre += tag == "pre"

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, (tag, self.stack)


def test_show_and_report_a_record(tmp_path):
    rec = er.testing.check(dropped_last, "sum", runs_dir=tmp_path)
    assert not rec.passed and rec.path
    r = run("show", rec.path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    n, bad = len(rec.cases), len(rec.failed())
    assert lines[0].startswith("FAIL  dropped_last  op sum") and lines[1].startswith("%d of %d cases failed" % (bad, n))
    assert len([ln for ln in lines if ln.startswith("  FAIL ") or ln.startswith("  pass ")]) == n
    assert "minimal failing case: %s" % "x".join(str(d) for d in rec.minimal["shape"]) in r.stdout
    assert "reproduce: " + rec.minimal["reproduce"] in r.stdout
    out = tmp_path / "page.html"
    r = run("report", rec.path, "-o", out)
    assert r.returncode == 0 and r.stdout.strip() == "wrote %s" % out
    page = _Page()
    page.feed(out.read_text())
    assert not page.stack
    assert page.verdicts == [c["verdict"] for c in rec.cases] and page.pre == bad
    # the failing cases' pictures (the first 16), drawn by check() beside the record, embedded in the page
    drawn = [c for c in rec.cases if "picture" in c]
    assert len(drawn) == min(16, bad) and all(c["verdict"] != "pass" for c in drawn)
    assert all(os.path.isfile(os.path.join(os.path.dirname(rec.path), c["picture"])) for c in drawn)
    assert len(page.images) == len(drawn) and all(i.startswith("data:image/png;base64,iVBOR") for i in page.images)
    # the default path: the record's, .html
    r = run("report", rec.path)
    assert r.returncode == 0 and os.path.isfile(os.path.splitext(rec.path)[0] + ".html")


def _chromium(p):
    """Playwright's own Chromium, else the system's (Debian's `chromium` package)."""
    try:
        return p.chromium.launch()
    except Exception:
        system = shutil.which("chromium") or shutil.which("chromium-browser")
        if system is None:
            raise
        return p.chromium.launch(executable_path=system)


def test_report_in_a_browser(tmp_path):
    """The page opened in a real headless browser (skipped where Playwright and no Chromium are installed)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    rec = er.testing.check(dropped_last, "sum", runs_dir=tmp_path)
    out = tmp_path / "page.html"
    assert run("report", rec.path, "-o", out).returncode == 0
    try:
        with sync_api.sync_playwright() as p:
            browser = _chromium(p)
            pg = browser.new_page()
            pg.goto(out.as_uri())
            rows = pg.locator("tr.FAIL").count()
            title = pg.title()
            browser.close()
    except Exception as e:  # no browser binary installed
        pytest.skip("no headless browser: %s" % e)
    assert rows == len(rec.failed()) and title == "exactref: dropped_last"
