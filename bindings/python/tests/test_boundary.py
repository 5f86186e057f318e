"""The Python boundary: every argument typed and range-checked before it crosses into C (ctypes wraps 2**64 + 4 to 4
and truncates 0.9 to 0), arrays read in the machine's byte order, every output's shape asked of the library, and a
verdict that cannot pass by accident. The reproducers of docs/reliability.md, a sweep of every parameter of every
public function through bad values, and reproduce lines run in a fresh process (the Hypothesis properties over
shapes, strides, dtypes and options are in test_properties.py)."""
import inspect
import math

import ml_dtypes
import numpy as np
import pytest

import exactref as er
from exactref import ExactrefError

RNG = np.random.default_rng(28)


def _mm():
    A = RNG.standard_normal((5, 7)).astype(np.float32)
    B = RNG.standard_normal((7, 3)).astype(np.float32)
    return A, B


# ---- the reproducers ----

def test_bool_of_a_verdict_is_the_verdict():
    A, B = _mm()
    ref = er.matmul(A, B)
    good, bad = ref.exact("float32"), ref.exact("float32") + 1
    assert ref.covers(good)
    assert not ref.covers(bad)
    with pytest.raises(AssertionError):
        assert er.matmul(A, B).covers(bad)
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    mean = x.mean(-1, dtype=np.float64).astype(np.float32)
    rstd = (1 / np.sqrt(x.astype(np.float64).var(-1) + 1e-5)).astype(np.float32)
    y = ((x - mean[:, None].astype(np.float64)) * rstd[:, None]).astype(np.float32)
    res = er.layer_norm(x, 16).covers((y, mean, rstd))
    assert res
    assert not er.layer_norm(x, 16).covers((y, mean + 1, rstd))
    with pytest.raises(TypeError, match="no truth value"):
        bool(ref)


def test_floats_and_bools_are_not_dimensions():
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    for fn in (er.softmax, er.log_softmax, er.sum, er.mean, er.max, er.softmax_backward, er.log_softmax_backward):
        args = (x, x) if "backward" in fn.__name__ else (x,)
        for dim in (0.9, np.float64(-0.5), True, np.bool_(False), "1", None, 2 ** 64, -2 ** 63 - 1, 2):
            with pytest.raises((TypeError, ValueError), match="dim"):
                fn(*args, dim=dim)
    assert er.softmax(x, dim=np.int64(-1)).covers(_softmax(x))


def _softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def test_attention_windows_are_not_wrapped():
    q = RNG.standard_normal((1, 4, 8)).astype(np.float32)
    v = RNG.standard_normal((1, 4, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="window sides"):
        er.attention(q, q, v, window=(2 ** 64, 2 ** 64))
    # the widest window the library takes is no window: the attention of every key, not each query's own value
    wide = er.attention(q, q, v, window=(2 ** 63 - 1, 2 ** 63 - 1))
    full = er.attention(q, q, v)
    o = full.exact("float32")
    assert wide.covers(o)
    assert not wide.covers(v)
    for bad in ((0.5, 1), (True, 1), (1, "1"), (-2, 0)):
        with pytest.raises(ValueError, match="window sides"):
            er.attention(q, q, v, window=bad)
    for name, bad in (("causal", 1), ("enable_gqa", "yes"), ("scale", "0.5"), ("scale", math.nan), ("scale", True)):
        with pytest.raises((TypeError, ValueError), match=name):
            er.attention(q, q, v, **{name: bad})


def test_quantize_groups_come_from_the_library():
    A = RNG.standard_normal((5, 7)).astype(np.float32)
    b = RNG.standard_normal(7).astype(np.float32)
    # a matmul of a vector: numpy's shape (5,) while the library's rows are [5, 1]; the amax and scale of each row are
    # as many as the library counts (this wrote past Python-sized arrays before)
    for gran, n in (("row", 5), (("block", 2), 5), ("tensor", 1)):
        enc = er.matmul(A, b).quantize("float8_e4m3fn", gran).enclosure(output="amax")
        assert enc.lo.size == n, (gran, enc.lo.shape)
    x = RNG.standard_normal((4, 10)).astype(np.float32)
    ref = er.quantize(x, "float8_e4m3fn", ("block", 4))
    assert ref._output_shape("amax") == (4, 3)
    for bad in (2 ** 64 + 4, 2 ** 63, 0, -1, 2.0, True, "4"):
        with pytest.raises((TypeError, ValueError), match="block size"):
            er.quantize(x, "float8_e4m3fn", ("block", bad))
    # the largest block is one block a row: an all-zero q does not pass
    big = er.quantize(x, "float8_e4m3fn", ("block", 2 ** 63 - 1))
    assert big._output_shape("amax") == (4, 1)
    assert not big.covers(np.zeros(x.shape, ml_dtypes.float8_e4m3fn))
    with pytest.raises(ValueError, match="q's format"):
        er.quantize(x, "float64")


def test_big_endian_arrays_are_read_by_value():
    A = RNG.standard_normal((6, 9)).astype(np.float16)
    B = RNG.standard_normal((9, 4)).astype(np.float16)
    out = er.matmul(A, B).exact("float32")
    assert er.matmul(A.astype(">f2"), B).covers(out)
    assert er.matmul(A, B).covers(out.astype(">f4"))
    assert er.matmul(A.astype(">f2"), B.astype(">f2")).covers(out.astype(">f4"))
    assert not er.matmul(A, B).covers((out + 1).astype(">f4"))


def test_other_bad_inputs_name_the_argument():
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    for eps in ("1e-5", True, math.nan, math.inf, -1.0, None):
        with pytest.raises((TypeError, ValueError), match="eps"):
            er.layer_norm(x, 8, eps=eps)
        with pytest.raises((TypeError, ValueError), match="eps"):
            er.rmsnorm(x, eps=eps)
    with pytest.raises(ValueError, match="empty last dimension"):
        er.rmsnorm(np.zeros((4, 0), np.float32))
    for seed in (-1, 2 ** 64, 1.5, True):
        with pytest.raises((TypeError, ValueError), match="seed"):
            er.testing.family("normal", (3, 3), seed=seed)
    for shape in ((2.7, 3), (-1, 3), (True, 3), "3"):
        with pytest.raises((TypeError, ValueError), match="shape"):
            er.testing.family("normal", shape)
    with pytest.raises(TypeError, match="standard"):
        er.testing.check(lambda a, b: a @ b, "matmul", standard=5, record=False)
    with pytest.raises(ValueError, match=r"must have shape \[4\].*got \[5\]"):
        er.quantize(x[:, :6], "float8_e4m3fn", "row").covers((None, np.zeros(5, np.float32), None))
    A, B = _mm()
    with pytest.raises(ValueError) as e:
        er.matmul(A, B).covers(np.zeros((5, 3), np.float32), standard="mma:sm_90")
    assert str(e.value).count("ER_ERR_STANDARD") <= 1
    for ulps in (True, "2", -1, 0, 65, math.nan):
        with pytest.raises((TypeError, ValueError), match="ulps"):
            er.exp(x, ulps=ulps)
    for s in (math.inf, "1", True):
        with pytest.raises((TypeError, ValueError)):
            er.matmul(A, B).add(s)
    for s in (math.nan, "2", True, 2 ** 1100):
        with pytest.raises((TypeError, ValueError), match="scale_a"):
            er.scaled_matmul(A, B, s, 1.0)


# ---- the sweep: every parameter of every public function, each bad value ----

def _inputs():
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    q = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    A, B = _mm()
    return x, q, A, B


def _calls():
    """Each public function with valid arguments by name, and the names of those that take numbers (the arrays are
    left to the array checks)."""
    x, q, A, B = _inputs()
    w = np.ones(8, np.float32)
    return [
        (er.sum, dict(x=x, dim=-1)), (er.mean, dict(x=x, dim=0)), (er.max, dict(x=x, dim=1)),
        (er.softmax, dict(x=x, dim=-1)), (er.log_softmax, dict(x=x, dim=-1)),
        (er.softmax_backward, dict(dy=x, y=x, dim=-1)), (er.log_softmax_backward, dict(dy=x, y=x, dim=0)),
        (er.rmsnorm, dict(x=x, weight=w, eps=1e-6)), (er.layer_norm, dict(x=x, normalized_shape=8, eps=1e-5)),
        (er.layer_norm_backward, dict(dy=x, x=x, mean=x.mean(-1), rstd=np.ones(x.shape[:-1], np.float32), weight=w,
                                      normalized_shape=8)),
        (er.rmsnorm_backward, dict(dy=x, x=x, rstd=None, weight=w, eps=1e-6)),
        (er.cross_entropy, dict(logits=x, target=np.array([0, 7, 3]), reduction="sum", ignore_index=-100,
                                label_smoothing=0.1)),
        (er.scaled_matmul, dict(A=A, B=B, scale_a=0.5, scale_b=2.0)),
        (er.scaled_matmul, dict(A=A, B=B, scale_a=np.ones((A.shape[0], 1), np.float32),
                                scale_b=np.ones((1, B.shape[1]), np.float32), block=A.shape[1])),
        (er.quantize, dict(x=x, dtype="float8_e4m3fn", granularity=("block", 4), recipe="amax")),
        (er.unpack_fp4, dict(x=np.zeros((2, 2), np.uint8), first="low")),
        (er.attention, dict(q=q, k=q, v=q, scale=0.25, causal=True, causal_alignment="bottom_right", window=(2, 1),
                            enable_gqa=False)),
        (er.attention_backward, dict(q=q, k=q, v=q, o=q, lse=q[..., 0], do=q, scale=0.25, causal=True,
                                     causal_alignment="bottom_right", window=(2, 1), enable_gqa=False)),
        (er.gelu, dict(x=x, ulps=2, approximate="tanh")), (er.silu, dict(x=x, ulps=2)), (er.exp, dict(x=x, ulps=2)),
        (er.tanh, dict(x=x, ulps=3)), (er.rsqrt, dict(x=np.abs(x) + 1, ulps=2)), (er.exp2, dict(x=x, ulps=2)),
        (er.log, dict(x=np.abs(x) + 1, ulps=1)), (er.sigmoid, dict(x=x, ulps=2)), (er.erf, dict(x=x, ulps=2)),
        (er.testing.family, dict(name="normal", shape=(3, 4), dtype="float32", seed=5)),
        (er.testing.shapes, dict(op="matmul", tier="fast")),
        (er.testing.cases, dict(op="softmax", tier="fast", dtypes=("float32",), families=("normal",), seed=3)),
        (er.depth.triton, dict(block=1024, num_warps=4, version="3.6")), (er.depth.torch_softmax, dict(n=1024)),
        (er.depth.torch_layer_norm, dict(n=1024)), (er.depth.torch_layer_norm_combines, dict(n=1024)),
        (er.depth.cub_block_reduce, dict(items_per_thread=4, block_threads=256)),
    ] + _method_calls(A, B, x)


def _method_calls(A, B, x):
    """The references' methods, on a matmul and a quantize reference."""
    ref = er.matmul(A, B)
    out = ref.exact("float32")
    q = er.quantize(x, "float8_e4m3fn", "row")
    return [
        (ref.covers, dict(out=out, standard="any_order", options="compute=fp32")),
        (ref.enclosure, dict(standard="any_order", dtype="float32", output=0)),
        (ref.emulate, dict(standard="sequential", dtype="float32", options="fma=never")),
        (ref.exact, dict(dtype="float16")),
        (ref.quantize, dict(dtype="float8_e5m2", granularity="row", recipe="pow2")),
        (ref.cast, dict(dtype="float16")),
        (ref.gelu, dict(ulps=2, approximate="none")),
        (ref.silu, dict(ulps=1)),
        (ref.add, dict(other=1.5)),
        (ref.mul, dict(other=2.0)),
        (q.enclosure, dict(standard="any_order", dtype="float32", output="amax")),
    ]


BAD = [
    ("a float", 0.5),
    ("a bool", True),
    ("a negative", -3),
    ("2**63", 2**63),
    ("2**64", 2**64),
    ("NaN", math.nan),
    ("a string", "7"),
    ("a list", [1]),
]


def _valid(fn, name, value):
    """Whether `value` is an answer the parameter documents (then the call must succeed and answer right)."""
    if isinstance(value, bool) and name in ("causal", "enable_gqa"):
        return True
    if name in ("scale_a", "scale_b", "scale") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return math.isfinite(value) and abs(value) < 1e300 and (name != "scale" or value != 0)
    if name == "dim" and isinstance(value, int) and not isinstance(value, bool):
        return -2 <= value < 2
    if name == "ulps" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return 0 < value <= 64
    if name == "eps" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return math.isfinite(value) and value >= 0
    if name == "ignore_index" and isinstance(value, int) and not isinstance(value, bool):
        return -2 ** 63 <= value < 2 ** 63
    if name == "label_smoothing" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return 0 <= value <= 1
    if name == "seed" and isinstance(value, int) and not isinstance(value, bool):
        return 0 <= value < 2 ** 64
    if name == "other":   # add, mul: a finite number, or an array (a list) broadcasting to the result
        return isinstance(value, list) or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                           and math.isfinite(value))
    if name == "version" and isinstance(value, str):
        return value.split(".")[0].isdigit()    # "7" is Triton 7.0
    if name == "shape" and isinstance(value, list):
        return all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value)
    return False


ARRAYS = {"x", "A", "B", "q", "k", "v", "dy", "y", "out", "weight", "bias", "mean", "rstd", "kernel",
          "op_or_reference", "logits", "target", "o", "lse", "do"}


def test_the_sweep_holds_every_public_function():
    """Every public function that takes an argument other than an array is in the sweep below, so a new one is
    checked or this fails."""
    swept = {fn for fn, _ in _calls()}
    swept.add(er.matmul_covers_device)  # CUDA tensors only: test_exactref's test on a CUDA device checks its arguments
    swept.add(er.softmax_covers_device)  # likewise
    swept.add(er.rmsnorm_covers_device)  # likewise
    swept.add(er.log_softmax_covers_device)  # likewise
    swept.add(er.softmax_backward_covers_device)  # likewise
    swept.add(er.log_softmax_backward_covers_device)  # likewise
    swept.add(er.layer_norm_covers_device)  # likewise
    swept.add(er.attention_covers_device)  # likewise
    swept.add(er.cross_entropy_covers_device)  # likewise
    missing = []
    for name in er.__all__:
        fn = getattr(er, name)
        if not inspect.isfunction(fn):
            continue
        params = set(inspect.signature(fn).parameters) - ARRAYS
        if params and fn not in swept:
            missing.append(name)
    assert not missing, missing


def test_every_parameter_refuses_bad_values_by_name():
    seen = 0
    for fn, kwargs in _calls():
        params = inspect.signature(fn).parameters
        assert set(kwargs) <= set(params), fn.__name__
        fn(**kwargs)  # the valid call works
        for name in kwargs:
            if isinstance(kwargs[name], np.ndarray):
                continue
            for what, value in BAD:
                call = dict(kwargs, **{name: value})
                seen += 1
                try:
                    fn(**call)
                except (TypeError, ValueError) as e:
                    msg = str(e)
                    assert (
                        name in msg
                        or name.rstrip("s") in msg
                        or (name == "granularity" and "block size" in msg)
                        or (name == "name" and "famil" in msg)
                        or (name == "other" and fn.__name__ in msg)
                        or (name in ("standard", "options") and getattr(e, "status", "") == "ER_ERR_STANDARD")
                    ), "%s(%s=%s): %s" % (fn.__name__, name, what, msg)
                    continue
                assert _valid(fn, name, value), "%s(%s=%s) was accepted" % (fn.__name__, name, what)
    assert seen > 150


def test_c_status_errors_are_exactref_errors():
    x, _, A, B = _inputs()
    with pytest.raises(ExactrefError):
        er.matmul(A, B).covers(np.zeros((5, 3), np.float32), standard="no_such_order")
    with pytest.raises(ExactrefError):
        er.matmul(A, B).enclosure(output=1)


# ---- reproduce lines run as printed, in a fresh process ----

KERNEL_MODULE = '''
import numpy as np

def mm_reversed(A, B):
    """fp32 products added from the last to the first: correct in any order, not the sequential order"""
    a, b = A.astype(np.float32), B.astype(np.float32)
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1] - 1, -1, -1):
        out += a[:, k:k + 1] * b[k:k + 1, :]
    return out
'''


def test_reproduce_line_runs_as_printed(tmp_path, monkeypatch):
    """A kernel defined in a file fails check() under a stated standard; the printed line, run with python -c in a
    fresh process from the same directory, loads the kernel from its file, keeps the standard, and fails the same
    way (without the standard the case would pass: the any-order set holds the reversed order)."""
    import subprocess
    import sys
    (tmp_path / "kern.py").write_text(KERNEL_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import kern
    std = dict(standard="sequential", fma="never", compute="float32")
    rec = er.testing.check(kern.mm_reversed, "matmul", families=("normal",), standard=std, record=False)
    assert not rec.passed
    line = rec.minimal["reproduce"]
    assert line.startswith("exactref.testing.reproduce('kern.py:mm_reversed', op='matmul'") and "sequential" in line
    env = dict(
        __import__("os").environ, PYTHONPATH=__import__("os").path.dirname(__import__("os").path.dirname(er.__file__))
    )
    r = subprocess.run([sys.executable, "-c", "import exactref.testing; " + line], capture_output=True, text=True,
                       cwd=str(tmp_path), env=env)
    assert r.returncode != 0 and "AssertionError" in r.stderr and "not covered" in r.stderr, r.stderr[-2000:]
    m = rec.minimal
    assert er.testing.reproduce(kern.mm_reversed, tuple(m["shape"]), m["dtype"], m["family"], m["seed"], m["layout"],
                                op="matmul")   # under the default standard the same case passes
    # a kernel the line cannot name (a local) keeps the name, which this process resolves
    def local_mm(A, B):
        return kern.mm_reversed(A, B)
    rec2 = er.testing.check(local_mm, "matmul", families=("normal",), standard=std, record=False)
    assert rec2.minimal["reproduce"].startswith("exactref.testing.reproduce('local_mm'")
    assert not er.testing.reproduce("local_mm", tuple(m["shape"]), m["dtype"], m["family"], m["seed"], m["layout"])


def test_copied_layouts_and_codes_match_the_library():
    """The struct layouts and enum values the bindings copy from the headers are checked against the library at
    import (a package and a library of different versions fail there, not inside a C call); the check itself
    refuses a mismatch."""
    import ctypes
    from exactref import _ffi as _lib
    assert ctypes.sizeof(_lib._Stage) == _lib.lib.er_stage_sizeof()
    assert ctypes.sizeof(_lib._AttentionOpts) == _lib.lib.er_attention_opts_sizeof()
    assert [_lib.lib.er_stage_kind_name(v).decode() for v in er.ChainReference._KINDS.values()] == list(
        er.ChainReference._KINDS
    )
    assert _lib.lib.er_stage_kind_name(0) is None and _lib.lib.er_stage_kind_name(15) is None
    assert [_lib.lib.er_class_name(i).decode() for i in range(_lib.CLASS_COUNT)] == list(er.CLASSES)

    class Wider(ctypes.Structure):
        _fields_ = _lib._Stage._fields_ + [("extra", ctypes.c_int64)]
    with pytest.raises(ImportError, match="er_stage size"):
        _lib.check_copy("er_stage size", ctypes.sizeof(Wider), _lib.lib.er_stage_sizeof())
