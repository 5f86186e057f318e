"""Hypothesis properties at the Python boundary: over generated shapes (0 to 6 a dimension), strides and layouts
(C, Fortran, strided, reversed, broadcast), dtypes (fp32, fp16, bf16), arguments and standard options of every op,
each call is refused cleanly (an exactref error, or a TypeError or ValueError whose message says exactref), or a
correct output (the op in float64, rounded once; or the library's own correctly rounded result) is never outside
its set. Derandomized: the same examples on every run."""
import math

import ml_dtypes
import numpy as np
import pytest

import exactref as er
from exactref import ExactrefError

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies
settings = hypothesis.settings(deadline=None, derandomize=True, max_examples=200,
                               suppress_health_check=list(hypothesis.HealthCheck))

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _clean(e):
    """A refusal is clean: one of exactref's errors, or a TypeError or ValueError raised by exactref's own checks."""
    return isinstance(e, ExactrefError) or str(e).startswith("exactref")


@st.composite
def arrays(draw, max_dims=3, max_size=6, lo=-1e4, hi=1e4, dtypes=tuple(sorted(DTYPES))):
    nd = draw(st.integers(1, max_dims))
    shape = tuple(draw(st.integers(0, max_size)) for _ in range(nd))
    dt = draw(st.sampled_from(dtypes))
    layout = draw(st.sampled_from(["c", "f", "strided", "reversed", "broadcast"]))
    n = int(np.prod(shape))
    vals = draw(st.lists(st.floats(lo, hi, allow_nan=False, width=16), min_size=n, max_size=n))
    base = np.array(vals, np.float64).reshape(shape).astype(DTYPES[dt])
    if layout == "f":
        base = np.asfortranarray(base)
    elif layout == "strided" and nd:
        wide = np.zeros(shape[:-1] + (2 * shape[-1],), base.dtype)
        wide[..., ::2] = base
        base = wide[..., ::2]
    elif layout == "reversed":
        base = base[..., ::-1]
    elif layout == "broadcast" and n:
        base = np.broadcast_to(base[..., :1], shape)
    return base


DIMS = st.one_of(st.integers(-4, 4), st.floats(-3, 3), st.booleans(), st.none())


def _row_op(op, x, dim):
    """The op in float64 along dim, rounded once to float32 (layer_norm: y, mean, rstd)."""
    if x.size == 0:  # numpy's mean of nothing is NaN (0 / 0), as the library's; its max of nothing has no value
        return np.zeros(x.sum(dim).shape, np.float32) if op == "max" else \
            np.full(x.sum(dim).shape, np.nan if op == "mean" else 0, np.float32) if op in ("sum", "mean") else \
            np.zeros(x.shape, np.float32)
    if op == "sum":
        return x.sum(dim).astype(np.float32)
    if op == "mean":
        return x.mean(dim).astype(np.float32)
    if op == "max":
        return x.max(dim).astype(np.float32)
    if op == "softmax":
        e = np.exp(x - x.max(dim, keepdims=True))
        return (e / e.sum(dim, keepdims=True)).astype(np.float32)
    if op == "log_softmax":
        m = x.max(dim, keepdims=True)
        return (x - m - np.log(np.exp(x - m).sum(dim, keepdims=True))).astype(np.float32)
    if op == "rmsnorm":
        return (x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)).astype(np.float32)
    mean = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    return ((x - mean) * rstd).astype(np.float32), mean[..., 0].astype(np.float32), rstd[..., 0].astype(np.float32)


@settings
@hypothesis.given(
    a=arrays(), op=st.sampled_from(["sum", "mean", "max", "softmax", "log_softmax", "rmsnorm", "layer_norm"]), dim=DIMS
)
def test_rows_refused_or_covered(a, op, dim):
    try:
        if op == "rmsnorm":
            ref = er.rmsnorm(a, eps=1e-6)
        elif op == "layer_norm":
            ref = er.layer_norm(a, a.shape[-1] if a.ndim else 0, eps=1e-5)
        else:
            ref = getattr(er, op)(a, dim=dim)
    except (TypeError, ValueError, ExactrefError) as e:
        assert _clean(e), repr(e)
        return
    if op not in ("rmsnorm", "layer_norm"):
        assert isinstance(dim, int) and not isinstance(dim, bool)
    with np.errstate(all="ignore"):
        out = _row_op(op, a.astype(np.float64), -1 if op in ("rmsnorm", "layer_norm") else dim)
    res = ref.covers(out)
    assert res, "%s(dim=%r) of %s %s: %s" % (op, dim, a.dtype, a.shape, res)


UNARY = {"exp": np.exp, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "rsqrt": lambda x: 1 / np.sqrt(x),
         "log": np.log, "erf": np.vectorize(math.erf, otypes=[np.float64]),
         "silu": lambda x: x / (1 + np.exp(-x)),
         "gelu": lambda x: x / 2 * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))}


@settings
@hypothesis.given(a=arrays(lo=-100, hi=100), fn=st.sampled_from(sorted(UNARY)),
                  ulps=st.one_of(st.none(), st.integers(-1, 70), st.floats(-1, 70), st.booleans()))
def test_elementwise_refused_or_covered(a, fn, ulps):
    try:
        ref = getattr(er, fn)(a, ulps=ulps)
    except (TypeError, ValueError, ExactrefError) as e:
        assert _clean(e), repr(e)
        return
    with np.errstate(all="ignore"):
        out = UNARY[fn](a.astype(np.float64)).astype(np.float32)
    res = ref.covers(out)
    assert res, "%s(ulps=%r) of %s %s: %s" % (fn, ulps, a.dtype, a.shape, res)


def _quantize(x, fmt, gran, block):
    """A quantisation kernel written from quantize.md: amax exact, the scale qmax / amax in fp32 (1 for amax 0), q the
    product rounded to fp32, then to fmt, saturated."""
    qdt = np.dtype(getattr(ml_dtypes, fmt))
    qmax = float(ml_dtypes.finfo(qdt).max)
    x32 = x.astype(np.float32)
    rows = x32.reshape(int(np.prod(x32.shape[:-1], dtype=np.int64)), x32.shape[-1])
    cols = rows.shape[1]
    if gran == "tensor":
        groups = np.zeros(rows.shape, np.int64)
    elif gran == "row":
        groups = np.repeat(np.arange(rows.shape[0])[:, None], cols, 1)
    else:
        nb = (cols + block - 1) // block
        groups = np.arange(rows.shape[0])[:, None] * nb + np.arange(cols)[None, :] // block
    ng = 1 if gran == "tensor" else rows.shape[0] * (1 if gran == "row" else (cols + block - 1) // block)
    amax = np.zeros(ng, np.float32)
    np.maximum.at(amax, groups.ravel(), np.abs(rows).ravel())
    with np.errstate(divide="ignore"):
        scale = np.where(amax > 0, np.float32(qmax) / np.where(amax > 0, amax, np.float32(1)), np.float32(1)).astype(
            np.float32
        )
    prod = (rows * scale[groups]).astype(np.float32)
    q = np.clip(prod, -qmax, qmax).astype(qdt).reshape(x.shape)
    return q, amax, scale


@settings
@hypothesis.given(a=arrays(max_dims=2, max_size=9), fmt=st.sampled_from(["float8_e4m3fn", "float8_e5m2"]),
                  gran=st.sampled_from(["tensor", "row", "block"]),
                  block=st.one_of(st.integers(-2, 12), st.just(2 ** 63 - 1), st.just(2 ** 64), st.floats(1, 4)))
def test_quantize_refused_or_covered(a, fmt, gran, block):
    granularity = ("block", block) if gran == "block" else gran
    try:
        ref = er.quantize(a, fmt, granularity)
    except (TypeError, ValueError, ExactrefError) as e:
        assert _clean(e), repr(e)
        return
    assert gran != "block" or (isinstance(block, int) and 1 <= block < 2 ** 63)
    q, amax, scale = _quantize(a, fmt, gran, block if gran == "block" else 1)
    if gran != "tensor":
        amax, scale = amax.reshape(ref._output_shape("amax")), scale.reshape(ref._output_shape("scale"))
    res = ref.covers((q, amax, scale))
    assert res, "quantize(%s, %r) of %s %s: %s" % (fmt, granularity, a.dtype, a.shape, res)


@settings
@hypothesis.given(
    b=st.integers(1, 2),
    hkv=st.integers(1, 2),
    rep=st.integers(1, 2),
    sq=st.integers(0, 5),
    sk=st.integers(0, 5),
    d=st.integers(1, 4),
    dt=st.sampled_from(sorted(DTYPES)),
    causal=st.one_of(st.booleans(), st.integers(0, 1)),
    align=st.sampled_from(["top_left", "bottom_right", "x"]),
    window=st.one_of(
        st.none(),
        st.tuples(st.one_of(st.integers(-2, 6), st.none(), st.just(2**64)), st.one_of(st.integers(-2, 6), st.none())),
    ),
    gqa=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_attention_refused_or_covered(b, hkv, rep, sq, sk, d, dt, causal, align, window, gqa, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, hkv * rep, sq, d)).astype(DTYPES[dt])
    k = rng.standard_normal((b, hkv, sk, d)).astype(DTYPES[dt])
    v = rng.standard_normal((b, hkv, sk, d)).astype(DTYPES[dt])
    try:
        ref = er.attention(q, k, v, causal=causal, causal_alignment=align, window=window, enable_gqa=gqa)
    except (TypeError, ValueError, ExactrefError) as e:
        assert _clean(e), repr(e)
        return
    assert isinstance(causal, bool) and align != "x"
    res = ref.covers(ref.exact("float32"))
    assert res, res


OPTION_VALUES = {"compute": ["float32", "float64", "float16", "bogus", 3, True, None],
                 "fma": ["never", "always", "either", "maybe", True, 1.5],
                 "exp_ulps": [1, 2, 3.5, "fast", -1, 0, 2 ** 64, math.nan],
                 "depth": [1, 12, 0, -3, 2 ** 63, "deep"],
                 "div": ["divide", "reciprocal", "either", "neither"],
                 "rounding": ["nearest", "faithful", "up"]}


@settings
@hypothesis.given(
    a=arrays(max_dims=2, lo=-10, hi=10),
    order=st.sampled_from(["any_order", "sequential", "pairwise", "mma:sm90", "blocked:4", "bogus", "split:0"]),
    opts=st.dictionaries(st.sampled_from(sorted(OPTION_VALUES)), st.integers(0, 7), max_size=3),
)
def test_softmax_options_refused_or_classified(a, order, opts):
    kwargs = {k: OPTION_VALUES[k][i % len(OPTION_VALUES[k])] for k, i in opts.items()}
    try:
        ref = er.softmax(a, dim=-1)
        res = ref.covers(np.zeros(a.shape, np.float32), standard=order, **kwargs)
    except (TypeError, ValueError, ExactrefError) as e:
        assert _clean(e), repr(e)
        return
    assert sum(res.counts.values()) == a.size
    with np.errstate(all="ignore"):
        out = _row_op("softmax", a.astype(np.float64), -1)
    if order == "any_order" and kwargs.get("rounding") != "up":
        assert ref.covers(out, standard=order, **kwargs) or a.size == 0


@settings
@hypothesis.given(
    a=arrays(max_dims=2),
    b=arrays(max_dims=2),
    std=st.sampled_from(
        [
            ("any_order", {}),
            ("any_order", {"compute": "float64"}),
            ("mma:sm90", {"outer": "any"}),
            ("blocked:4", {"inner": "any"}),
        ]
    ),
)
def test_matmul_exact_is_covered(a, b, std):
    try:
        ref = er.matmul(a, b)
    except (TypeError, ValueError, ExactrefError) as e:
        assert _clean(e), repr(e)
        return
    exact = ref.exact("float32")
    try:
        res = ref.covers(exact, standard=std[0], **std[1])
    except (ValueError, ExactrefError) as e:
        assert _clean(e), repr(e)
        return
    if std[0] == "any_order":
        assert res, res.report
    assert res.counts["exact"] + res.counts["covered"] + res.counts["overflow"] + res.n_failed == exact.size
