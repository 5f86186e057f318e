"""covers() from Python next to the same C call (er_covers through ctypes on the same reference, view and
standard), for a 1024 x 1024 output. Prints `name: X s vs baseline Y s = Rx`. Run: make bench."""
import ctypes
import os
import time

# numpy's own BLAS threads keep spinning after the products that build the inputs and take the cores from the
# code measured here: one BLAS thread (exactref's fast path GEMMs included) keeps the ratios steady
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import exactref as er
from exactref import _ffi as _lib
from exactref._arrays import View


class one_thread:
    """exactref on one thread inside the block (EXACTREF_THREADS is read at each call), as numpy's BLAS runs here
    (OPENBLAS_NUM_THREADS=1): a baseline and exactref on the same threads."""

    def __enter__(self):
        self.saved = os.environ.get("EXACTREF_THREADS")
        os.environ["EXACTREF_THREADS"] = "1"

    def __exit__(self, *exc):
        if self.saved is None:
            del os.environ["EXACTREF_THREADS"]
        else:
            os.environ["EXACTREF_THREADS"] = self.saved
        return False


def best(fn, reps=9):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def main():
    rng = np.random.default_rng(0)
    M = N = 1024
    K = 64
    A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    out = A.astype(np.float32) @ B.astype(np.float32)
    ref = er.matmul(A, B)
    view = View(out, "out")
    std = ctypes.create_string_buffer(_lib.STANDARD_SIZE)
    _lib.lib.er_standard_parse(std, b"any_order", b"compute=fp32")
    rep = ctypes.create_string_buffer(_lib.REPORT_SIZE)

    def c_call():
        assert _lib.lib.er_covers(rep, ref._ptr, view.buf, std) == 0
        _lib.lib.er_report_clear(rep)

    def py_call():
        assert ref.covers(out, standard="any_order", compute="float32").all()

    c_call(); py_call()
    tc, tp = best(c_call), best(py_call)
    print("python_covers_%dx%d: %.4f s vs baseline %.4f s = %.3fx  (baseline: er_covers called directly through "
          "ctypes on the same reference; Python overhead %.1f%%)" % (M, N, tp, tc, tp / tc, 100 * (tp / tc - 1)))

    # Result.lo / hi / slack. A softmax: its report keeps no set of an output inside it, so they come from a second
    # pass when first asked for, against er_covers without them. A matmul on the fast path: likewise (its decisions
    # need no sets), against covers() without them; and that pass, er_covers_sets, against er_covers, both through
    # ctypes.
    x = (rng.standard_normal((M, N)) * 3).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    y = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    sm = er.softmax(x)
    yview = View(y, "out")
    std_sm = ctypes.create_string_buffer(_lib.STANDARD_SIZE)
    _lib.lib.er_standard_parse(std_sm, b"any_order", None)

    def sm_c():
        assert _lib.lib.er_covers(rep, sm._ptr, yview.buf, std_sm) == 0
        _lib.lib.er_report_clear(rep)
    for name, plain, with_sets, base in (
        ("softmax", sm_c, lambda: sm.covers(y).slack, "er_covers without sets through ctypes"),
        (
            "matmul_fast_path",
            lambda: ref.covers(out, compute="float32"),
            lambda: ref.covers(out, compute="float32").slack,
            "covers() without lo, hi and slack",
        ),
    ):
        plain(); with_sets()
        t0, t1 = best(plain), best(with_sets)
        print(
            "python_covers_slack_%s_%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: %s)"
            % (name, M, N, t1, t0, t1 / t0, base)
        )
    # at K = 1024 the sets' GEMM of |A| |B| costs what the reference's own GEMM does
    A2 = rng.uniform(-1, 1, (M, 1024)).astype(np.float16)
    B2 = rng.uniform(-1, 1, (1024, N)).astype(np.float16)
    out2 = A2.astype(np.float32) @ B2.astype(np.float32)
    ref2 = er.matmul(A2, B2)
    ref2.covers(out2, compute="float32").slack
    t0, t1 = (
        best(lambda: ref2.covers(out2, compute="float32")),
        best(lambda: ref2.covers(out2, compute="float32").slack),
    )
    print(
        "python_covers_slack_matmul_fast_path_%dx%dx1024: %.4f s vs baseline %.4f s = %.2fx  "
        "(baseline: covers() without lo, hi and slack)" % (M, N, t1, t0, t1 / t0)
    )
    del ref2, A2, B2, out2
    arrays = [np.empty((M, N)) for _ in range(3)]

    def mm_sets():
        assert _lib.lib.er_covers_sets(rep, ref._ptr, view.buf, std, *(a.ctypes.data for a in arrays)) == 0
        _lib.lib.er_report_clear(rep)
    mm_sets()
    t0, t1 = best(c_call), best(mm_sets)
    print(
        "er_covers_sets_matmul_fast_path_%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: er_covers, both through "
        "ctypes)" % (M, N, t1, t0, t1 / t0)
    )

    # a GEMM epilogue as a chain (bias, relu, fp16 store) against the matmul's covers alone, on the same output
    bias = rng.standard_normal(N).astype(np.float16)
    y16 = np.maximum(out + bias.astype(np.float32), np.float32(0)).astype(np.float16)
    chain = ref.add(bias).relu().cast("float16")
    chain.covers(y16)
    t0, t1 = best(lambda: ref.covers(out, compute="float32")), best(lambda: chain.covers(y16))
    print(
        "python_covers_chain_bias_relu_fp16_%dx%d: %.4f s vs baseline %.4f s = %.2fx  "
        "(baseline: covers() of the matmul alone)" % (M, N, t1, t0, t1 / t0)
    )


def epilogue():
    """The fused-kernel issue's yardstick: a 2048 x 2048 x 2048 fp16 GEMM with bias, gelu's tanh form and an fp16 store
    (as one Triton kernel computes it), checked under mma:sm90 outer=any against the matmul's check alone on its fp32
    accumulator: the reference and covers() together (each builds its reference), and covers() alone; then SwiGLU's
    silu(A B) * (A B2) before an fp16 store, covers() alone."""
    rng = np.random.default_rng(3)
    M = N = K = 2048
    A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    acc = A.astype(np.float32) @ B.astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float16)
    g = acc + bias.astype(np.float32)
    y = (
        np.float32(0.5) * g * (np.float32(1) + np.tanh(np.float32(0.7978846) * (g + np.float32(0.044715) * g * g * g)))
    ).astype(np.float16)
    std = dict(standard="mma:sm90", outer="any")

    def mm():
        er.matmul(A, B).covers(acc, **std).assert_all()

    def chain():
        er.matmul(A, B).add(bias).gelu(approximate="tanh").cast("float16").covers(y, **std).assert_all()
    t0, t1 = best(mm, 3), best(chain, 3)
    print("python_check_epilogue_gelu_tanh_fp16_%dx%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: er.matmul(A, B)"
          ".covers(acc), the reference built in both)" % (M, N, K, t1, t0, t1 / t0))
    ref = er.matmul(A, B)
    ch = ref.add(bias).gelu(approximate="tanh").cast("float16")
    t0, t1 = best(lambda: ref.covers(acc, **std), 3), best(lambda: ch.covers(y, **std), 3)
    print(
        "python_covers_epilogue_gelu_tanh_fp16_%dx%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: covers() of the "
        "matmul alone, references built before)" % (M, N, K, t1, t0, t1 / t0)
    )
    # SwiGLU's silu(A B) * (A B2) before an fp16 store: the second GEMM an operand of the chain
    B2 = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    acc2 = A.astype(np.float32) @ B2.astype(np.float32)
    ysw = ((acc / (np.float32(1) + np.exp(-acc))) * acc2).astype(np.float16)
    sw = ref.silu().mul(er.matmul(A, B2)).cast("float16")
    assert sw.covers(ysw, **std).all()
    t0, t1 = best(lambda: ref.covers(acc, **std), 3), best(lambda: sw.covers(ysw, **std), 3)
    print(
        "python_covers_swiglu_fp16_%dx%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: covers() of the first "
        "matmul alone, references built before)" % (M, N, K, t1, t0, t1 / t0)
    )


def chains():
    """GEMM epilogues as chains on a 2048 x 2048 x 2048 fp16 GEMM (the fast path, mma:sm90 outer=any): bias and an fp16
    store, with relu, tanh or gelu's tanh form between, gelu's tanh form stored in fp32 (numpy's float32 result, few
    of them correctly rounded), and SwiGLU; covers() of each against covers() of the matmul alone on its fp32
    accumulator, references built before, best of 15 each."""
    rng = np.random.default_rng(3)
    M = N = K = 2048
    A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    B2 = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    acc = A.astype(np.float32) @ B.astype(np.float32)
    acc2 = A.astype(np.float32) @ B2.astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float16)
    g = acc + bias.astype(np.float32)
    f32 = np.float32
    gelu = f32(0.5) * g * (f32(1) + np.tanh(f32(0.7978846) * (g + f32(0.044715) * g * g * g)))
    std = dict(standard="mma:sm90", outer="any")
    ref = er.matmul(A, B)
    ba = ref.add(bias)
    cases = [
        ("bias_fp16", ba.cast("float16"), g),
        ("bias_relu_fp16", ba.relu().cast("float16"), np.maximum(g, f32(0))),
        ("bias_tanh_fp16", ba.tanh().cast("float16"), np.tanh(g)),
        ("bias_gelu_tanh_fp16", ba.gelu(approximate="tanh").cast("float16"), gelu),
        ("bias_gelu_tanh_fp32", ba.gelu(approximate="tanh"), gelu),
        ("swiglu_fp16", ref.silu().mul(er.matmul(A, B2)).cast("float16"), (acc / (f32(1) + np.exp(-acc))) * acc2),
    ]
    t0 = best(lambda: ref.covers(acc, **std), 15)
    for name, ch, y in cases:
        y = y if name.endswith("fp32") else y.astype(np.float16)
        assert ch.covers(y, **std).all()
        t1 = best(lambda: ch.covers(y, **std), 15)
        print(
            "python_covers_chain_%s_%dx%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: covers() of the matmul "
            "alone, references built before)" % (name, M, N, K, t1, t0, t1 / t0)
        )


def failing():
    """A check that fails against the same check passing, references built before: a 1024 x 1024 x 1024 fp16 matmul
    whose output has every other column moved by 1 (half the elements outside their sets), and the GEMM epilogue
    (bias, gelu's tanh form or its erf form, an fp16 store) with the bias left out, each against covers() of the
    correct output; for the matmul, also with the sets read after."""
    rng = np.random.default_rng(5)
    n = 1024
    A = rng.standard_normal((n, n)).astype(np.float16)
    B = (rng.standard_normal((n, n)) / 32).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float32)
    acc = A.astype(np.float32) @ B.astype(np.float32)

    def gelu(x):
        return np.float32(0.5) * x * (np.float32(1) + np.tanh(np.float32(0.7978846) * (x + np.float32(0.044715) * x
                                                                                          * x * x)))
    def gelu_erf(x):  # in float64, rounded once: what the fused epilogue's check must cover
        import torch
        t = torch.from_numpy(x.astype(np.float64))
        return (0.5 * t * (1 + torch.erf(t / np.sqrt(2)))).numpy().astype(np.float16)
    moved = acc.copy()
    moved[:, ::2] += 1
    ref = er.matmul(A, B)
    ch = ref.add(bias).gelu(approximate="tanh").cast("float16")
    ch_erf = ref.add(bias).gelu().cast("float16")  # no batch pass takes gelu's erf form: the per-element decision
    for name, r, good, bad in (("matmul", ref, acc, moved),
                               ("epilogue_gelu_tanh", ch, gelu(acc + bias).astype(np.float16),
                                gelu(acc).astype(np.float16)),
                               ("epilogue_gelu_erf", ch_erf, gelu_erf(acc + bias), gelu_erf(acc))):
        assert r.covers(good).all() and not r.covers(bad).all()
        t0, t1 = best(lambda: r.covers(good), 3), best(lambda: r.covers(bad), 3)
        print("python_covers_failing_%s_fp16_%dx%dx%d: %.4f s vs baseline %.4f s = %.1fx  (baseline: covers() of the "
              "correct output, the same reference; %d of %d elements outside)"
              % (name, n, n, n, t1, t0, t1 / t0, r.covers(bad).counts["outside"], n * n))
        if name == "matmul":  # the sets read after (lo, hi, slack: a second pass that computes every set)
            t0, t1 = best(lambda: r.covers(good).slack, 3), best(lambda: r.covers(bad).slack, 3)
            print("python_covers_slack_failing_%s_fp16_%dx%dx%d: %.4f s vs baseline %.4f s = %.1fx  (baseline: the "
                  "same of the correct output)" % (name, n, n, n, t1, t0, t1 / t0))


def elementwise():
    """Single elementwise ops on 2^22 elements: er.<fn>(x).covers(y) against numpy evaluating the same function in
    float64 on the same array (the issue's yardstick for elementwise covers): fp32 inputs and outputs, then bf16."""
    import ml_dtypes
    rng = np.random.default_rng(1)
    n = 1 << 22
    c = np.sqrt(2 / np.pi)
    fns = (("exp", lambda v: np.exp(v)), ("tanh", lambda v: np.tanh(v)), ("silu", lambda v: v / (1 + np.exp(-v))),
           ("relu", lambda v: np.maximum(v, 0)),
           ("gelu_tanh", lambda v: 0.5 * v * (1 + np.tanh(c * (v + 0.044715 * v ** 3)))))
    base = rng.standard_normal(n) * 4
    for dt, names in ((np.float32, ("exp", "tanh", "silu", "relu", "gelu_tanh")),
                      (ml_dtypes.bfloat16, ("exp", "tanh", "silu"))):
        x = base.astype(dt)
        x64 = x.astype(np.float64)
        for name, f in fns:
            if name not in names:
                continue
            y = f(x64).astype(dt)

            def ref():
                return er.gelu(x, approximate="tanh") if name == "gelu_tanh" else getattr(er, name)(x)
            assert ref().covers(y).all()
            t0, t1 = best(lambda: f(x64), 5), best(lambda: ref().covers(y), 3)
            with one_thread():
                t2 = best(lambda: ref().covers(y), 3)
            print("python_covers_elementwise_%s%s_%d: %.4f s vs baseline %.4f s = %.1fx  (baseline: numpy evaluating "
                  "it in float64, one thread as its ufuncs run; exactref on one thread; on every core %.4f s = %.1fx)"
                  % (name, "" if dt == np.float32 else "_bf16", n, t2, t0, t2 / t0, t1, t1 / t0))


def references():
    """Modules built on another reference's values, 512 x 512 x 1024 fp16: a chain multiplying two matmuls (SwiGLU's
    second accumulator) and a matmul quantised per row, against the matmul's covers alone."""
    import ml_dtypes
    rng = np.random.default_rng(2)
    M = N = 512
    K = 1024
    x = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    W1 = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    W3 = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    a1 = x.astype(np.float32) @ W1.astype(np.float32)
    a3 = x.astype(np.float32) @ W3.astype(np.float32)
    m1, m3 = er.matmul(x, W1), er.matmul(x, W3)
    y = (a1 * a3).astype(np.float16)
    am = np.abs(a1).max(axis=1)
    sc = (np.float32(448) / am).astype(np.float32)
    q = np.clip(a1 * sc[:, None], -448, 448).astype(ml_dtypes.float8_e4m3fn)
    assert m1.mul(m3).cast("float16").covers(y).all() and m1.quantize("float8_e4m3fn", "row").covers((q, am, sc)).all()
    t0 = best(lambda: m1.covers(a1), 3)
    for name, fn in (("chain_two_references", lambda: m1.mul(m3).cast("float16").covers(y)),
                     ("quantize_after_matmul", lambda: m1.quantize("float8_e4m3fn", "row").covers((q, am, sc)))):
        t1 = best(fn, 3)
        print("python_covers_%s_%dx%dx%d: %.4f s vs baseline %.4f s = %.1fx  (baseline: covers() of the matmul alone)"
              % (name, M, N, K, t1, t0, t1 / t0))


def rows():
    """The row ops' (and layer_norm's y) covers() from Python at 2048 x 4096 fp32 against numpy evaluating the op in
    float64 (both on every core numpy and exactref use): their reports keep no set of an output inside it, and the
    sets (lo, hi, slack) come from a second pass when first read, which the last figure times."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2048, 4096)).astype(np.float32)
    w = (1 + rng.standard_normal(4096) / 4).astype(np.float32)
    x64 = x.astype(np.float64)

    def softmax64():
        e = np.exp(x64 - x64.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def log_softmax64():
        m = x64.max(-1, keepdims=True)
        return x64 - m - np.log(np.exp(x64 - m).sum(-1, keepdims=True))

    def rmsnorm64():
        return x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * w

    def layer_norm64():
        d = x64 - x64.mean(-1, keepdims=True)
        return d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * w + w / 2
    for name, f, ref in (("softmax", softmax64, er.softmax(x)), ("log_softmax", log_softmax64, er.log_softmax(x)),
                         ("rmsnorm", rmsnorm64, er.rmsnorm(x, w, 1e-6)),
                         ("layer_norm", layer_norm64, er.layer_norm(x, 4096, w, w / 2, 1e-5))):
        out = f().astype(np.float32)
        assert ref.covers(out).all()
        t0, t1 = best(f, 3), best(lambda: ref.covers(out).all(), 3)
        t2 = best(lambda: ref.covers(out).lo, 3)
        print("python_covers_%s_2048x4096: %.4f s vs baseline %.4f s = %.1fx  (baseline: numpy evaluating it in "
              "float64; with the sets read after: %.4f s)" % (name, t1, t0, t1 / t0, t2))


def backward_rows():
    """layer_norm_backward, softmax_backward and log_softmax_backward (2048 x 4096) and cross_entropy (64 rows of
    131072 classes) from Python, the reference built
    in the time and every output checked (covers() of the tuple), fp32 kernels' outputs (torch's formulas: dlogits
    from the stored log-probabilities, exp(lp) / N), against numpy evaluating the same backward in float64; both on
    every core numpy and exactref use. With the sets read after as the last figure."""
    rng = np.random.default_rng(6)
    f = np.float32
    R, n = 2048, 4096
    x = rng.standard_normal((R, n)).astype(f)
    dy = rng.standard_normal((R, n)).astype(f)
    w = (1 + rng.standard_normal(n) / 4).astype(f)
    x64, dy64, w64 = x.astype(np.float64), dy.astype(np.float64), w.astype(np.float64)
    mean = x.mean(1, dtype=f)
    rstd = (f(1) / np.sqrt(((x - mean[:, None]) ** 2).mean(1, dtype=f) + f(1e-5))).astype(f)

    def ln_backward64():
        xh = (x64 - mean[:, None]) * rstd[:, None]
        g = dy64 * w64
        dx = rstd[:, None] * (g - g.mean(1, keepdims=True) - xh * (g * xh).mean(1, keepdims=True))
        return dx, (dy64 * xh).sum(0), dy64.sum(0)
    outs = tuple(a.astype(f) for a in ln_backward64())
    N, C = 64, 131072
    z = (2 * rng.standard_normal((N, C))).astype(f)
    t = rng.integers(0, C, N)
    z64 = z.astype(np.float64)
    m = z.max(1, keepdims=True)
    lp = ((z - m) - np.log(np.exp(z - m).sum(1, dtype=f, keepdims=True)).astype(f)).astype(f)
    g = (np.exp(lp).astype(f) * f(1 / N)).astype(f)
    g[np.arange(N), t] = (g[np.arange(N), t] - f(1 / N)).astype(f)
    loss = np.array([-lp[np.arange(N), t].mean(dtype=f)], f)

    def xent64():
        m64 = z64.max(1, keepdims=True)
        lp64 = z64 - m64 - np.log(np.exp(z64 - m64).sum(1, keepdims=True))
        d = np.exp(lp64) / N
        d[np.arange(N), t] -= 1 / N
        return -lp64[np.arange(N), t].mean(), d
    xs = rng.standard_normal((R, n)).astype(f)
    ys = np.exp(xs - xs.max(1, keepdims=True))
    ys = (ys / ys.sum(1, keepdims=True)).astype(f)
    lps = np.log(ys).astype(f)
    ys64, lps64 = ys.astype(np.float64), lps.astype(np.float64)

    def softmax_backward64():
        return ys64 * (dy64 - (dy64 * ys64).sum(1, keepdims=True))

    def log_softmax_backward64():
        return dy64 - np.exp(lps64) * dy64.sum(1, keepdims=True)
    dxs, dxl = softmax_backward64().astype(f), log_softmax_backward64().astype(f)

    def lows(res):  # every output's lower ends (the sets' second pass)
        return [r.lo for r in res.results.values()] if hasattr(res, "results") else res.lo
    for name, base, check in (
            ("layer_norm_backward_2048x4096", ln_backward64,
             lambda: er.layer_norm_backward(dy, x, mean, rstd, w).covers(outs)),
            ("cross_entropy_64x131072", xent64, lambda: er.cross_entropy(z, t).covers((loss, g))),
            ("softmax_backward_2048x4096", softmax_backward64, lambda: er.softmax_backward(dy, ys).covers(dxs)),
            ("log_softmax_backward_2048x4096", log_softmax_backward64,
             lambda: er.log_softmax_backward(dy, lps).covers(dxl))):
        assert check().all()
        t0, t1 = best(base, 3), best(check, 3)
        t2 = best(lambda: lows(check()), 3)
        print("python_check_%s: %.4f s vs baseline %.4f s = %.1fx  (baseline: numpy evaluating the backward in "
              "float64; the reference built in the time, every output checked; with the sets read after: %.4f s)"
              % (name, t1, t0, t1 / t0, t2))


def quantize():
    """quantize() of a 4096 x 4096 fp32 tensor to e4m3 per row (the amax recipe) from Python, the reference built in
    the time and every output checked (q, amax, scale), against numpy computing the same quantisation (amax, the fp32
    scale, q cast to e4m3 by ml_dtypes), both on every core numpy and exactref use. With the sets read after as the
    last figure."""
    import ml_dtypes
    rng = np.random.default_rng(8)
    f = np.float32
    x = rng.standard_normal((4096, 4096)).astype(f)

    def numpy_quantize():
        am = np.abs(x).max(axis=1)
        sc = (f(448) / am).astype(f)
        return (x * sc[:, None]).astype(ml_dtypes.float8_e4m3fn), am, sc
    outs = numpy_quantize()

    def check():
        return er.quantize(x, "float8_e4m3fn", "row").covers(outs)
    assert check().all()
    t0, t1 = best(numpy_quantize, 3), best(check, 3)
    t2 = best(lambda: [r.lo for r in check().results.values()], 3)
    print("python_check_quantize_row_4096x4096: %.4f s vs baseline %.4f s = %.1fx  (baseline: numpy computing the "
          "quantisation, ml_dtypes' cast to e4m3; the reference built in the time, every output checked; with the "
          "sets read after: %.4f s)" % (t1, t0, t1 / t0, t2))


def harness():
    """exactref.testing: the fast tier of matmul in float16 and bfloat16 (default families) for a numpy kernel, its
    time less the kernel's own; and a small check, er.matmul(A, B).covers(out) at 64 x 64 x 64, against numpy's
    float64 matmul plus np.allclose of the same size."""
    import ml_dtypes  # noqa: F401 - bfloat16 inputs
    spent = [0.0]

    def kernel(A, B):
        t0 = time.perf_counter()
        out = A.astype(np.float32) @ B.astype(np.float32)
        spent[0] += time.perf_counter() - t0
        return out
    t0 = time.perf_counter()
    rec = er.testing.check(kernel, "matmul", dtypes=("float16", "bfloat16"), record=False)
    total = time.perf_counter() - t0
    assert rec.passed
    print("python_testing_check_matmul_fast_tier_%dcases: %.4f s of exactref (%.4f s in all, %.4f s in the kernel)"
          % (len(rec.cases), total - spent[0], total, spent[0]))
    rng = np.random.default_rng(4)
    A = rng.standard_normal((64, 64)).astype(np.float16)
    B = rng.standard_normal((64, 64)).astype(np.float16)
    out = A.astype(np.float32) @ B.astype(np.float32)
    t0 = best(lambda: np.allclose(out, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-3, atol=1e-3), 300)
    t1 = best(lambda: er.matmul(A, B).covers(out).all(), 300)
    # the library's part: er_matmul and er_covers through ctypes, on views made once
    va, vb, vo = View(A, "A"), View(B, "B"), View(out, "out")
    std = ctypes.create_string_buffer(_lib.STANDARD_SIZE)
    _lib.lib.er_standard_parse(std, b"any_order", None)
    rep = ctypes.create_string_buffer(_lib.REPORT_SIZE)

    def c_only():
        p = ctypes.c_void_p()
        assert _lib.lib.er_matmul(ctypes.byref(p), va.buf, vb.buf) == 0
        assert _lib.lib.er_covers(rep, p, vo.buf, std) == 0
        _lib.lib.er_report_clear(rep)
        _lib.lib.er_ref_free(p)
    t2 = best(c_only, 300)
    print(
        "python_small_check_64x64x64: %.1f us vs baseline %.1f us = %.2fx  (baseline: numpy float64 matmul plus "
        "np.allclose; er_matmul and er_covers alone through ctypes: %.1f us)" % (t1 * 1e6, t0 * 1e6, t1 / t0, t2 * 1e6)
    )


def attention(heads=8, n=4096, dtype=np.float16, keys=None):
    """er.attention at B = 1, H = heads, Sq = n, Sk = keys (n unless given), D = 128, in dtype (the reference and
    covers of O and LSE) against a float64 numpy attention of the same shape (scores, softmax, P V and LSE), both on
    one thread, numpy's first run untimed. attention(1, 2048, np.float32): an fp32 output, where double's enclosure
    leaves a rounding open in many rows (attention.md, The exact results); attention(4, 16384, np.float16, 16): short
    rows, where each element's bounds after the row's sums are most of the time."""
    rng = np.random.default_rng(5)
    sk = keys or n
    q = rng.standard_normal((1, heads, n, 128)).astype(dtype)
    k, v = (rng.standard_normal((1, heads, sk, 128)).astype(dtype) for _ in range(2))

    def numpy_attention():
        q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
        s = q64 @ np.swapaxes(k64, -1, -2) / np.sqrt(128.0)
        m = s.max(-1, keepdims=True)
        w = np.exp(s - m)
        l = w.sum(-1, keepdims=True)
        return (w @ v64) / l, (m + np.log(l))[..., 0]
    o64, lse64 = numpy_attention()
    o, lse = o64.astype(dtype), lse64.astype(np.float32)
    t0 = best(numpy_attention, 3)
    with one_thread():
        t1 = best(lambda: er.attention(q, k, v).covers((o, lse)).all(), 3)
    name = "fp16" if dtype == np.float16 else np.dtype(dtype).name
    print("python_attention_1x%dx%dx%dx128_%s: %.4f s (numpy float64 attention %.4f s): %.2fx  (both on one "
          "thread; best of 3)" % (heads, n, sk, name, t1, t0, t1 / t0))


def attention_backward():
    """er.attention_backward at B = 1, H = 8, Sq = Sk = 2048, D = 128, fp16 (the reference and covers of dQ, dK and
    dV from the saved o and lse) against a float64 numpy backward of the same shape (scores, P from the lse, dP, D,
    dS and the three products), both on one thread, numpy's first run untimed."""
    rng = np.random.default_rng(6)
    q, k, v, do = (rng.standard_normal((1, 8, 2048, 128)).astype(np.float16) for _ in range(4))
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    s = q64 @ np.swapaxes(k64, -1, -2) / np.sqrt(128.0)
    m = s.max(-1, keepdims=True)
    w = np.exp(s - m)
    lse = (m + np.log(w.sum(-1, keepdims=True)))[..., 0].astype(np.float32)
    o = ((w / w.sum(-1, keepdims=True)) @ v64).astype(np.float16)
    del s, w

    def numpy_backward():
        q64, k64, v64, o64, g64 = (x.astype(np.float64) for x in (q, k, v, o, do))
        p = np.exp(q64 @ np.swapaxes(k64, -1, -2) / np.sqrt(128.0) - lse[..., None])
        dp = g64 @ np.swapaxes(v64, -1, -2)
        ds = p * (dp - (g64 * o64).sum(-1)[..., None])
        return ds @ k64 / np.sqrt(128.0), np.swapaxes(ds, -1, -2) @ q64 / np.sqrt(128.0), np.swapaxes(p, -1, -2) @ g64
    grads = tuple(x.astype(np.float16) for x in numpy_backward())
    t0 = best(numpy_backward, 3)
    with one_thread():
        t1 = best(lambda: er.attention_backward(q, k, v, o, lse, do).covers(grads).all(), 3)
    print("python_attention_backward_1x8x2048x2048x128_fp16: %.4f s (numpy float64 backward %.4f s): %.2fx  (both on "
          "one thread; best of 3)" % (t1, t0, t1 / t0))


def torch_reference():
    """exactref.torch: the reference of a 4-op torch function (linear, a scale, gelu's tanh form, a cast to fp16) on
    512 x 512 x 512 fp16, traced and built then checked, against the same reference written by hand and checked: the
    time tracing adds, on a traced function's first call (a new function each time) and on later calls (the trace
    reused). The first trace of a process also pays torch's tracer's own start (printed once)."""
    try:
        import torch
        import torch.nn.functional as F
        import exactref.torch as ert
    except ImportError:
        print("python_torch_reference: skipped (torch is not installed)")
        return
    rng = np.random.default_rng(5)
    x, w, b = (torch.from_numpy(rng.uniform(-1, 1, s).astype(np.float16)) for s in ((512, 512), (512, 512), (512,)))

    def fn(x, w, b):
        return F.gelu(F.linear(x, w, b) * 0.5, approximate="tanh").to(torch.float16)
    y = F.gelu(F.linear(x.float(), w.float(), b.float()) * 0.5, approximate="tanh").half()
    xn, wn, bn = x.numpy(), w.numpy(), b.numpy()

    def hand():
        assert er.matmul(xn, wn.T).add(bn).mul(0.5).gelu(approximate="tanh").cast("float16").covers(y).all()

    t0 = time.perf_counter()
    ert.reference(fn)(x, w, b)
    cold = time.perf_counter() - t0
    traced = ert.reference(fn)

    def first():
        assert ert.reference(fn)(x, w, b).covers(y).all()

    def cached():
        assert traced(x, w, b).covers(y).all()
    th, tf, tc = best(hand, 5), best(first, 5), best(cached, 5)
    print("python_torch_reference_4ops_512x512x512_fp16: traced %.4f s (first call), %.4f s (trace reused) vs "
          "hand-written %.4f s: %+.1f ms, %+.1f ms  (the process's first trace: %.3f s)"
          % (tf, tc, th, (tf - th) * 1e3, (tc - th) * 1e3, cold))


if __name__ == "__main__":
    main()
    epilogue()
    chains()
    failing()
    rows()
    backward_rows()
    elementwise()
    references()
    harness()
    attention()
    attention(1, 2048, np.float32)
    attention(4, 16384, np.float16, 16)
    attention_backward()
    torch_reference()
