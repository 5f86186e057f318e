"""Ctrl-C on a long check: SIGINT to a process in the middle of a 10-second matmul check (blocked:64 on 512 x 4096 x
512 fp16) raises KeyboardInterrupt within 0.5 s; afterwards the library checks again and Python's own SIGINT handler
is back (a second SIGINT raises KeyboardInterrupt from Python itself)."""
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
    p = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
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
