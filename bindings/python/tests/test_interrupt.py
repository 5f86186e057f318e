"""Long calls: Ctrl-C on a long check (SIGINT to a process in the middle of a 10-second matmul check, blocked:64 on 512
x 4096 x 512 fp16, raises KeyboardInterrupt within 0.5 s; afterwards the library checks again and Python's own SIGINT
handler is back, a second SIGINT raising KeyboardInterrupt from Python itself), and progress on standard error."""
import os
import signal
import subprocess
import sys
import time

import pytest

PKG = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

SCRIPT = r'''
import os, signal, time
import numpy as np
import exactref as er
rng = np.random.default_rng(0)
A = rng.standard_normal((512, 4096)).astype(np.float16)
B = rng.standard_normal((4096, 512)).astype(np.float16)
C = A.astype(np.float32) @ B.astype(np.float32)
r = er.matmul(A, B)
print("start", flush=True)
try:
    r.covers(C, standard="blocked:64")
    print("finished %.3f" % time.time(), flush=True)
except KeyboardInterrupt:
    print("interrupted %.3f" % time.time(), flush=True)
a, b = A[:8, :64], B[:64, :8]
assert er.matmul(a, b).covers((a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)).all()
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    print("no KeyboardInterrupt from Python's handler", flush=True)
except KeyboardInterrupt:
    print("python's handler", flush=True)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the SIGINT handover is Linux's sigaction")
def test_ctrl_c_stops_a_long_check():
    env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # SIGINT at its default in the child, as under a terminal: a test run started in the background of a shell
    # without job control inherits SIGINT ignored, and Python then installs no handler for the library to take over
    p = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert p.stdout.readline().strip() == "start"
        time.sleep(1.0)
        sent = time.time()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    lines = out.split("\n")
    assert lines[0].startswith("interrupted "), (out, err)
    assert float(lines[0].split()[1]) - sent < 0.5, "KeyboardInterrupt %.3f s after SIGINT" % (
        float(lines[0].split()[1]) - sent)
    assert lines[1] == "python's handler" and p.returncode == 0, (out, err)


PROGRESS = r'''
import numpy as np
import exactref as er
rng = np.random.default_rng(0)
A = rng.standard_normal((128, 2048)).astype(np.float16)
B = rng.standard_normal((2048, 128)).astype(np.float16)
er.matmul(A, B).covers(A.astype(np.float32) @ B.astype(np.float32), standard="blocked:64")
print("done")
'''


def run_progress(value):
    env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + os.environ.get("PYTHONPATH", ""), EXACTREF_PROGRESS=value)
    r = subprocess.run([sys.executable, "-c", PROGRESS], capture_output=True, env=env, timeout=300)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())  # "\r" kept


def test_progress_on_standard_error():
    """EXACTREF_PROGRESS=0.1 shows a 0.4-second check's progress (a line rewritten in place, or tqdm's bar where tqdm
    is installed) ending at 100%; 0 shows none; a bad value is refused at import."""
    r = run_progress("0.1")
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    try:
        import tqdm  # noqa: F401
        assert "exactref" in r.stderr
    except ImportError:
        steps = r.stderr.split("\r")[1:]
        assert len(steps) >= 2 and steps[-1] == "exactref: 100% (16384 of 16384)\n", r.stderr
        pct = [int(x.split("%")[0].split()[-1]) for x in steps]
        assert pct == sorted(pct) and all(x.startswith("exactref: ") for x in steps)
    r = run_progress("0")
    assert r.returncode == 0 and "exactref" not in r.stderr
    r = run_progress("soon")
    assert r.returncode != 0 and "EXACTREF_PROGRESS='soon': expected 0 (off), 1 (on after 2 s)" in r.stderr
