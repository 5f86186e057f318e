"""Inputs for testing kernels (docs/reference/testing.md): seeded families that go where kernel bugs live.

    import exactref as er
    A = er.testing.family("cancellation", (17, 1025), "float16", seed=3)
    B = er.testing.family("normal", (1025, 9), "float16", seed=4)

The values come from the C library (er_fill), so a (family, shape, dtype, seed) gives the same bits in Python, in
C and on every machine.
"""
import os

import numpy as np

from . import _api as er
from . import _check, _ffi, _plot
from ._arrays import View, numpy_dtype
from ._errors import ExactrefError, ExactrefNotImplementedError

#: The families, in er_family order.
FAMILIES = ("normal", "positive", "cancellation", "wide", "near_max", "subnormal", "ties", "specials", "offset",
            "integers", "masked")
#: The block formats' families (blocks of 32 along the last dimension, drawn here rather than by er_fill).
BLOCK_FAMILIES = ("zero_blocks", "huge_in_block", "e2m1_midpoints", "subnormal_blocks")


def _block_family(name, shape, dtype, seed):
    """A block family's values: N(0, 1) blocks of 32 at magnitudes 2^-20 to 2^20, and "zero_blocks": every third
    block all zero; "huge_in_block": each block's first element 2^12 times the rest; "e2m1_midpoints": values on
    e2m1's midpoints (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5) with each block's first element 6, so that the MX and
    NVFP4 scales are 1 and every element is a tie; "subnormal_blocks": every other block 2^-130 times N(0, 1)."""
    rng = np.random.default_rng(seed)
    n = shape[-1] if shape else 1
    nb = -(-n // 32) if n else 0
    mag = np.repeat(np.exp2(rng.integers(-20, 21, tuple(shape[:-1]) + (nb,)).astype(np.float64)), 32, -1)[..., :n]
    x = rng.standard_normal(shape) * mag
    col = np.arange(n)
    if name == "zero_blocks":
        x = np.where((col // 32) % 3 == 0, 0.0, x)
    elif name == "huge_in_block":
        x = np.where(col % 32 == 0, x * 2.0 ** 12, x)
    elif name == "e2m1_midpoints":
        mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
        x = rng.choice(mids, shape) * rng.choice([-1.0, 1.0], shape)
        x = np.where(col % 32 == 0, 6.0, x)
    else:  # subnormal_blocks
        x = np.where((col // 32) % 2 == 1, rng.standard_normal(shape) * 2.0 ** -130, x)
    return np.asarray(x).astype(numpy_dtype(dtype))


def family(name, shape, dtype="float32", seed=0):
    """A new array of `shape` and `dtype` holding the family's values for `seed` (er_fill): "normal", "positive",
    "cancellation" (pairs along each row that cancel to a small residue), "wide" (exponents over a wide range),
    "near_max" (sums of two may overflow), "subnormal" (products near the subnormal range, some values subnormal),
    "ties" (signed powers of two whose exact sums land on rounding midpoints), "specials" (inf and NaN sprinkled),
    "offset" (2^ceil(p/2) + N(0, 1)), "integers" (small integers, mostly zero) or "masked" (rows whose tail is -inf).
    bfloat16 and the fp8 formats come as ml_dtypes arrays."""
    if not isinstance(name, str):
        raise TypeError("exactref: family name must be a str, not %s" % type(name).__name__)
    if name in BLOCK_FAMILIES:
        return _block_family(name, _check.shape(shape, "family"), dtype,
                             _check.integer(seed, "family", "seed", 0, _check.UINT64_MAX))
    fam = _ffi.family_code(name)
    shape = _check.shape(shape, "family")
    seed = _check.integer(seed, "family", "seed", 0, _check.UINT64_MAX)
    out = np.empty(shape, numpy_dtype(dtype))
    if out.size:
        view = View(out, "out", writable=True)
        _ffi.fill(view.buf, fam, seed)
    return out


# ---- shapes: tiers per op family ----

def _matmul_fast():
    # tile boundaries (one past 16, 32, 64, 128, 256, 1024), size-1 dimensions, primes, extreme aspect ratios, and
    # pairs of awkward dimensions at once
    return [(1, 1, 1), (1, 17, 1), (17, 1025, 9), (33, 65, 129), (129, 257, 63), (1, 1024, 1), (257, 1, 256),
            (65, 3, 1025), (2, 2049, 2), (31, 1023, 17), (7, 13, 11), (16, 32, 64), (127, 129, 1), (3, 4097, 5),
            (1025, 16, 7), (97, 97, 97)]


def _matmul_exhaustive():
    dims = (1, 2, 15, 16, 17, 31, 33, 63, 65, 127, 129, 255, 257)
    out, k = [], 0
    for m in dims:
        for n in dims[::3]:
            out.append((m, (17, 33, 257, 1025, 4097)[k % 5], n))
            k += 1
    return out[:60]


_TIERS = {
    "matmul": {
        "fast": _matmul_fast,
        "exhaustive": _matmul_exhaustive,
        "canonical": lambda: [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048)],
    },
    "bmm": {
        "fast": lambda: [
            (1, 1, 1, 1),
            (3, 17, 65, 9),
            (2, 33, 129, 1),
            (5, 1, 257, 16),
            (4, 64, 64, 64),
            (7, 13, 1025, 3),
            (2, 129, 31, 17),
            (1, 2, 2049, 2),
            (3, 65, 16, 65),
            (9, 5, 7, 11),
            (2, 1, 1, 257),
            (6, 31, 33, 35),
            (2, 16, 4097, 2),
            (1, 127, 129, 1),
            (4, 3, 3, 3),
            (2, 97, 97, 97),
        ],
        "exhaustive": lambda: [(b,) + s for b in (1, 2, 5) for s in _matmul_exhaustive()[:20]],
        "canonical": lambda: [(8, 512, 512, 512), (16, 1024, 1024, 128)],
    },
    "rows": {
        "fast": lambda: [
            (1, 1),
            (1, 17),
            (3, 1025),
            (17, 33),
            (5, 4097),
            (2, 8193),
            (64, 65),
            (1, 1024),
            (9, 255),
            (33, 129),
            (7, 2049),
            (128, 16),
            (2, 3),
            (11, 31),
            (4, 4096),
            (1, 16385),
        ],
        "exhaustive": lambda: [
            (r, n)
            for r in (1, 3, 17, 64)
            for n in (1, 2, 15, 16, 17, 255, 256, 257, 1023, 1025, 2049, 4097, 8193, 16385, 32769)
        ],
        "canonical": lambda: [(4096, 1024), (1024, 4096), (256, 16384)],
    },
    "elementwise": {
        "fast": lambda: [
            (1,),
            (17,),
            (1025,),
            (3, 33),
            (65, 129),
            (4097,),
            (2, 3, 5),
            (1, 65537),
            (16, 16),
            (257, 3),
            (31,),
            (7, 11, 13),
            (1024,),
            (2, 1023),
            (5, 4096),
            (33, 65),
        ],
        "exhaustive": lambda: (
            [(n,) for n in (1, 2, 15, 16, 17, 255, 256, 257, 1023, 1025, 4097, 65537)]
            + [(r, c) for r in (1, 3, 17, 64) for c in (1, 16, 17, 1025)]
        ),
        "canonical": lambda: [(1 << 20,), (1 << 24,)],
    },
}

def _attention_exhaustive():
    out, k = [], 0
    for sq in (1, 15, 16, 17, 63, 64, 65, 127, 129, 257):
        for sk in (1, 17, 64, 65, 129, 1025):
            b, h, hkv = ((1, 1, 1), (2, 2, 2), (1, 4, 2), (1, 4, 1))[k % 4]
            out.append((b, h, hkv, sq, sk, (16, 32, 64, 128, 80)[k % 5]))
            k += 1
    return out


_TIERS["attention"] = {
    # (batch, heads, kv heads, Sq, Sk, D): decoding (Sq = 1), key lengths one past the 64- and 128-key blocks, Sq
    # above Sk (rows with no key under a bottom-right causal mask), GQA and MQA, head dims 16 to 256
    "fast": lambda: [(1, 1, 1, 1, 1, 16), (1, 2, 2, 17, 65, 64), (1, 4, 2, 64, 64, 64), (1, 4, 1, 1, 257, 128),
                     (2, 2, 2, 129, 33, 32), (1, 2, 2, 100, 300, 64), (1, 1, 1, 128, 128, 128), (1, 8, 2, 7, 1025, 64),
                     (2, 4, 4, 33, 129, 16), (1, 2, 1, 256, 256, 64), (1, 2, 2, 65, 127, 80), (1, 3, 3, 31, 31, 64),
                     (1, 2, 2, 1, 4097, 64), (1, 2, 2, 16, 16, 256), (1, 2, 2, 200, 129, 64), (1, 4, 2, 96, 160, 64)],
    "exhaustive": _attention_exhaustive,
    "canonical": lambda: [(1, 8, 8, 4096, 4096, 128), (4, 16, 16, 1024, 1024, 64)]}
_ATTENTION = {"attention": (False, "top_left"), "attention_causal": (True, "top_left"),
              "attention_causal_bottom_right": (True, "bottom_right"),
              "attention_backward": (False, "top_left"), "attention_backward_causal": (True, "top_left")}
_ROW_OPS = ("sum", "mean", "max", "softmax", "log_softmax", "rmsnorm", "layer_norm")
#: The ops check(standard="reveal") and reveal_order reveal the order of (docs/algorithms/reveal.md).
from ._reveal import _OPS as _REVEAL_OPS  # noqa: E402
_ELEMENTWISE = ("gelu", "gelu_tanh", "silu", "relu", "exp", "exp2", "log", "tanh", "sigmoid", "erf", "rsqrt")
#: Backward passes along rows: their inputs are the gradient dy and what the forward pass saved (derived from a
#: forward input x of the case's family).
_BACKWARD = ("softmax_backward", "log_softmax_backward", "layer_norm_backward", "rmsnorm_backward", "cross_entropy")
#: Block-scaled quantisation: the element format, the block and the recipe; the kernel returns (q, scale).
_QUANT = {"mxfp8": ("float8_e4m3fn", 32, "mx"), "mxfp6": ("float6_e2m3fn", 32, "mx"),
          "mxfp4": ("float4_e2m1fn", 32, "mx"), "nvfp4": ("float4_e2m1fn", 16, "nvfp4")}


def _op_family(op):
    if not isinstance(op, str):
        raise TypeError(
            "exactref: op must be a string such as 'matmul' or 'softmax', not %r (%s)" % (op, type(op).__name__)
        )
    if op in ("matmul", "bmm"):
        return op
    if op in _ROW_OPS:
        return "rows"
    if op in _ELEMENTWISE:
        return "elementwise"
    if op in _ATTENTION:
        return "attention"
    if op in _BACKWARD:
        return "backward"
    if op in _QUANT:
        return "quantize"
    raise ValueError(
        "exactref: op %r: expected matmul, bmm, %s, %s, %s, %s or %s"
        % (op, ", ".join(_ROW_OPS), ", ".join(_ELEMENTWISE), ", ".join(_ATTENTION), ", ".join(_BACKWARD),
           ", ".join(_QUANT))
    )


def _tiers(op):
    fam = _op_family(op)
    return _TIERS["rows" if fam in ("backward", "quantize") else fam]


def shapes(op, tier="fast"):
    """The shapes of a tier for an op: "fast" (16 per op family: tile boundaries, size-1 dimensions, primes, skinny
    and awkward pairs), "exhaustive" (about 60) or "canonical" (a few aligned shapes, for timing only). matmul:
    (M, K, N); bmm: (batch, M, K, N); the row ops (reduced or normalised along the last dimension): (rows, n);
    elementwise: the tensor's shape; attention, attention_causal, attention_causal_bottom_right, attention_backward
    and attention_backward_causal: (batch, heads, kv heads, Sq, Sk, D); the backward passes (softmax_backward,
    log_softmax_backward, layer_norm_backward, rmsnorm_backward) and cross_entropy (rows of n logits): (rows, n), as
    the row ops."""
    tiers = _tiers(op)
    if not isinstance(tier, str) or tier not in tiers:
        raise ValueError("exactref: tier %r: expected 'fast', 'exhaustive' or 'canonical'" % (tier,))
    return list(tiers[tier]())


_DEFAULT_FAMILIES = {
    "matmul": ("normal", "cancellation", "ties", "integers"),
    "bmm": ("normal", "cancellation", "ties"),
    "rows": ("normal", "offset", "ties"),
    "elementwise": ("normal", "wide", "subnormal", "specials"),
    "attention": ("normal", "ties", "cancellation"),
    "backward": ("normal", "cancellation", "wide", "ties"),
    "quantize": ("normal", "zero_blocks", "huge_in_block", "e2m1_midpoints", "subnormal_blocks"),
}


# ---- cases ----

_LAYOUTS = ("contiguous", "contiguous", "transposed", "strided")


def _hash64(*parts):
    import hashlib
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "little")


class Case:
    """One case of a check: an op, a shape, a dtype, an input family, a layout ("contiguous", "transposed": the last
    two dimensions' memory transposed, "strided": every other element of a wider buffer) and the case's seed, from
    which every input follows (input k from family(..., seed=hash(seed, k)))."""

    def __init__(self, op, shape, dtype, family_name, seed, layout="contiguous"):
        _op_family(op)
        self.op, self.shape, self.dtype, self.family = op, tuple(int(d) for d in shape), dtype, family_name
        self.seed, self.layout = int(seed), layout
        #: A folder where assert_covers draws a failing output's picture (the pytest plugin sets it to
        #: --exactref-records' folder); None draws nothing.
        self.pictures = None

    @property
    def id(self):
        """The pytest id: (17,1025,9)-float16-cancellation, with the layout when not contiguous."""
        s = "(%s)-%s-%s" % (",".join(str(d) for d in self.shape), self.dtype, self.family)
        return s if self.layout == "contiguous" else s + "-" + self.layout

    def input_shapes(self):
        if self.op == "matmul":
            M, K, N = self.shape
            return [(M, K), (K, N)]
        if self.op == "bmm":
            b, M, K, N = self.shape
            return [(b, M, K), (b, K, N)]
        if self.op in _ATTENTION:
            b, h, hkv, sq, sk, d = self.shape
            return [(b, h, sq, d), (b, hkv, sk, d), (b, hkv, sk, d)]
        return [self.shape]

    def inputs(self, device=None):
        """The inputs as numpy arrays (device None), or torch tensors on `device` ("cpu", "cuda"), in the case's
        layout. A backward pass's inputs are the kernel's: (dy, y) for softmax_backward and log_softmax_backward,
        (dy, x, mean, rstd, weight) for layer_norm_backward, (dy, x, rstd, weight) for rmsnorm_backward, (logits,
        target) for cross_entropy; (q, k, v, o, lse, do) for attention_backward and attention_backward_causal (o and
        lse the forward's, from a float64 forward, in the dtype and in float32)."""
        if self.op.startswith("attention_backward"):
            return [_place(a, self.layout if a.ndim > 1 else "contiguous", device) for a in self._attn_bwd_inputs()]
        if self.op in _BACKWARD:
            return [_place(a, self.layout if a.ndim > 1 else "contiguous", device) for a in self._backward_inputs()]
        out = []
        for k, shp in enumerate(self.input_shapes()):
            a = family(self.family, shp, self.dtype, seed=_hash64(self.seed, k))
            out.append(_place(a, self.layout, device))
        return out

    def _backward_inputs(self):
        """x and dy of the case's family (dy "normal" for the families of logits, "masked" and "specials"), then what
        the forward pass saves, from x in float64: y = softmax(x) or log_softmax(x) in the case's dtype; layer_norm's
        mean and rstd = 1/sqrt(var + 1e-5) in float32, rmsnorm's rstd = 1/sqrt(mean(x^2) + 1e-6); a weight 1 + N(0,
        1)/4 in the dtype."""
        dt = numpy_dtype(self.dtype)
        x = family(self.family, self.shape, self.dtype, seed=_hash64(self.seed, 0))
        if self.op == "cross_entropy":  # targets uniform over the classes; every fifth row ignored (-100)
            rows, n = self.shape
            t = np.random.default_rng(_hash64(self.seed, 1)).integers(0, n, rows)
            t[4::5] = -100
            return [x, t]
        gfam = "normal" if self.family in ("masked", "specials") else self.family
        dy = family(gfam, self.shape, self.dtype, seed=_hash64(self.seed, 1))
        xd = x.astype(np.float64)
        if self.op in ("softmax_backward", "log_softmax_backward"):
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                m = xd.max(-1, keepdims=True)
                m = np.where(np.isfinite(m), m, 0.0)
                e = np.exp(xd - m)
                if self.op == "softmax_backward":
                    y = e / e.sum(-1, keepdims=True)
                else:
                    y = (xd - m) - np.log(e.sum(-1, keepdims=True))
            return [dy, y.astype(dt)]
        w = (1 + family("normal", self.shape[-1:], "float64", seed=_hash64(self.seed, 2)) / 4).astype(dt)
        f32 = np.float32
        if self.op == "layer_norm_backward":
            mean = xd.mean(-1)
            rstd = 1 / np.sqrt(((xd - mean[:, None]) ** 2).mean(-1) + 1e-5)
            return [dy, x, mean.astype(f32), rstd.astype(f32), w]
        rstd = 1 / np.sqrt((xd ** 2).mean(-1) + 1e-6)
        return [dy, x, rstd.astype(f32), w]

    def _attn_bwd_inputs(self):
        """q, k, v and do of the case's family, and the saved o and lse of a float64 forward (o in the dtype, lse in
        float32; a row with no key: o 0, lse +inf, as FlashAttention writes them)."""
        b, h, hkv, sq, sk, d = self.shape
        causal, align = _ATTENTION[self.op]
        shp = [(b, h, sq, d), (b, hkv, sk, d), (b, hkv, sk, d), (b, h, sq, d)]
        q, k, v, do = (family(self.family, s_, self.dtype, seed=_hash64(self.seed, i)) for i, s_ in enumerate(shp))
        rep = h // hkv
        kd, vd = (np.repeat(t.astype(np.float64), rep, 1) for t in (k, v))
        s64 = q.astype(np.float64) @ np.swapaxes(kd, -1, -2) / np.sqrt(d)
        if causal:
            off = sk - sq if align == "bottom_right" else 0
            s64 = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + off, s64, -np.inf)
        with np.errstate(invalid="ignore", divide="ignore"):
            m = s64.max(-1, keepdims=True)
            e = np.exp(s64 - np.where(np.isfinite(m), m, 0.0))
            lsum = e.sum(-1, keepdims=True)
            o = np.where(lsum > 0, (e @ vd) / np.where(lsum > 0, lsum, 1.0), 0.0)
            lse = np.where(lsum[..., 0] > 0, m[..., 0] + np.log(np.where(lsum > 0, lsum, 1.0))[..., 0], np.inf)
        dt = numpy_dtype(self.dtype)
        return [q, k, v, o.astype(dt), lse.astype(np.float32), do]

    def reference(self, inputs, recipe=None):
        """The op's exactref reference for these inputs (a block-scaled quantisation's recipe may be another of its
        family: "mx_rceil" for "mxfp8", ...)."""
        if self.op in _QUANT:
            elem, block, rec = _QUANT[self.op]
            return er.quantize(inputs[0], elem, ("block", block), recipe=recipe or rec)
        if self.op.startswith("attention_backward"):
            causal, align = _ATTENTION[self.op]
            return er.attention_backward(*inputs, causal=causal, causal_alignment=align,
                                         enable_gqa=self.shape[1] != self.shape[2])
        if self.op in ("matmul", "bmm"):
            return er.matmul(inputs[0], inputs[1])
        if self.op in _ATTENTION:
            causal, align = _ATTENTION[self.op]
            return er.attention(inputs[0], inputs[1], inputs[2], causal=causal, causal_alignment=align,
                                enable_gqa=self.shape[1] != self.shape[2])
        if self.op in ("softmax_backward", "log_softmax_backward"):
            return getattr(er, self.op)(inputs[0], inputs[1])
        if self.op == "layer_norm_backward":
            return er.layer_norm_backward(*inputs)
        if self.op == "rmsnorm_backward":
            return er.rmsnorm_backward(*inputs)
        if self.op == "cross_entropy":
            return er.cross_entropy(inputs[0], inputs[1])
        x = inputs[0]
        if self.op == "rmsnorm":
            return er.rmsnorm(x)
        if self.op == "layer_norm":
            return er.layer_norm(x, self.shape[-1])
        if self.op == "gelu_tanh":
            return er.gelu(x, approximate="tanh")
        if self.op in _ROW_OPS:
            return getattr(er, self.op)(x, dim=-1)
        return getattr(er, self.op)(x)

    def check(self, out, inputs=None, standard=None):
        """The verdict (Result, or Results for layer_norm and for attention's (O, LSE)) of the kernel output `out` for
        this case's inputs (rebuilt if not given) under `standard` (a string, or a dict of covers() keywords)."""
        ins = inputs if inputs is not None else self.inputs()
        kw = {"standard": standard} if isinstance(standard, str) else dict(standard or {})
        ref = self.reference(ins, kw.pop("recipe", None)) if self.op in _QUANT else self.reference(ins)
        if self.op in _QUANT:  # the kernel returns (q, scale): block-scaled kernels store no amax
            q, scale = out
            return ref.covers((q, None, scale), **kw)
        if self.op in ("layer_norm", "layer_norm_backward", "rmsnorm_backward", "cross_entropy", "attention_backward",
                       "attention_backward_causal") and not isinstance(out, (tuple, list)):
            out = (out,) + (None,) * (len(ref.OUTPUTS) - 1)
        return ref.covers(tuple(out) if isinstance(out, list) else out, **kw)

    def reproduce_call(self, name, config=None, kernel=None, standard=None, device=None, configs=None):
        """The statement that re-runs this case and fails as it failed: `kernel` (the callable) named by its file and
        name where it is defined at a module's top level, so that the line runs as printed in a fresh process
        (python -c "import exactref.testing; ..."); else by `name`, which reproduce() finds only in the process that
        ran check(). The op, the standard and the device are part of the line."""
        where = _locate(kernel) if kernel is not None else None
        args = ["%r" % (where or name), "op=%r" % self.op, "shape=%r" % (self.shape,), "dtype=%r" % self.dtype,
                "family=%r" % self.family, "seed=%d" % self.seed]
        if self.layout != "contiguous":
            args.append("layout=%r" % self.layout)
        if where and standard is not None:
            args.append("standard=%r" % (standard,))
        if where and device is not None:
            args.append("device=%r" % str(device))
        if config is not None:
            cwhere = _locate(configs) if where and configs is not None else None
            if cwhere:
                args.append("configs=%r" % cwhere)
            args.append("config=%d" % config)
        call = "exactref.testing.reproduce(%s)" % ", ".join(args)
        return call + ".assert_all()" if where else call

    def assert_covers(self, out, standard=None, name="kernel", kernel=None):
        """Raises AssertionError with the report and the reproduce call when `out` fails; with `kernel` (the callable
        that produced out, defined at a module's top level) the call runs as printed in a fresh process."""
        res = self.check(out, standard=standard)
        if not res.all():
            picture = ""
            if self.pictures is not None:
                os.makedirs(self.pictures, exist_ok=True)
                path = os.path.join(self.pictures, "%s-%s-%s.png" % (_file_name(name), self.op, _file_name(self.id)))
                if _picture(res, path, "%s: %s %s" % (name, self.op, self.id)):
                    picture = "\npicture: %s" % path
            raise AssertionError("exactref: %s failed on %s\n%s\nreproduce: %s%s" % (
                name, self.id, res, self.reproduce_call(name, kernel=kernel, standard=standard), picture))
        return res


def _locate(obj):
    """'FILE.py:NAME' where obj is defined at the top level of a module with a source file (FILE relative to the
    working directory when under it), so a fresh process can load it; None for a lambda, a local function, or an
    object its module's name does not lead back to. An autotuned or jitted Triton kernel is found through the
    function it wraps."""
    import os
    import sys
    target, hops = obj, 0
    while not hasattr(target, "__code__") and hasattr(target, "fn") and hops < 4:
        target, hops = target.fn, hops + 1
    qual = getattr(target, "__qualname__", "") or ""
    mod = sys.modules.get(getattr(target, "__module__", None) or "")
    path = getattr(mod, "__file__", None)
    if not qual or "<" in qual or not path or not path.endswith(".py"):
        return None
    cur = mod
    for part in qual.split("."):
        cur = getattr(cur, part, None)
    if cur is not obj:
        return None
    rel = os.path.relpath(path)
    return "%s:%s" % (path if rel.startswith("..") else rel, qual)


def _load(where):
    """The object a _locate() string names: its file loaded as a module (once; a module already loaded from that
    file is reused; a script's `if __name__ == "__main__":` part does not run)."""
    import hashlib
    import importlib.util
    import os
    import sys
    path, _, qual = where.rpartition(":")
    apath = os.path.abspath(path)
    if not os.path.isfile(apath):
        raise ValueError("exactref: reproduce: no file %r (from %r); run the line from the directory it was printed in"
                         % (path, where))
    mod = next((m for m in list(sys.modules.values())
                if getattr(m, "__file__", None) and os.path.abspath(m.__file__) == apath), None)
    if mod is None:
        name = "_exactref_reproduce_" + hashlib.blake2b(apath.encode(), digest_size=6).hexdigest()
        spec = importlib.util.spec_from_file_location(name, apath)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    obj = mod
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def _is_location(s):
    return isinstance(s, str) and ":" in s and s.rpartition(":")[0].endswith(".py")


def _place(a, layout, device):
    """a's values in a fresh array of the layout, as numpy or a torch tensor on device."""
    if layout == "transposed" and a.ndim >= 2:
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)
    elif layout == "strided":
        wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        wide[..., ::2] = a
        a = wide[..., ::2]
    if device is None:
        return a
    import torch
    names = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
             "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2, "int64": torch.int64}
    td = names[np.dtype(a.dtype).name]
    raw = np.ascontiguousarray(a)
    if td in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        t = torch.from_numpy(raw.view(np.uint16 if td == torch.bfloat16 else np.uint8)).view(td)
    else:
        t = torch.from_numpy(raw)
    t = t.to(device)
    if layout == "transposed" and t.dim() >= 2:
        t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "strided":
        w = torch.zeros(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype, device=t.device)
        w[..., ::2] = t
        t = w[..., ::2]
    return t


def _names(v, name, allowed=None):
    """A string or a sequence of strings (each one of `allowed` where given), as a tuple."""
    vals = (v,) if isinstance(v, str) else v
    if isinstance(vals, (bytes, dict)) or not hasattr(vals, "__iter__"):
        raise TypeError(
            "exactref: %s must be a string or a sequence of strings, not %r (%s)" % (name, v, type(v).__name__)
        )
    vals = tuple(vals)
    for x in vals:
        if not isinstance(x, str) or (allowed is not None and x not in allowed):
            raise ValueError(
                "exactref: %s: %r is not %s" % (name, x, "one of " + ", ".join(allowed) if allowed else "a string")
            )
    return vals


def cases(op, tier="fast", dtypes=("float32",), families=None, seed=0):
    """The cases of a tier: every shape of the tier, dtype and family (default: the op family's usual ones), each
    shape's layout the tier's rotation (contiguous, contiguous, transposed, strided), each case's seed a hash of
    (seed, op, shape, dtype, family, layout)."""
    fams = (_names(families, "families", FAMILIES + BLOCK_FAMILIES) if families is not None
            else _DEFAULT_FAMILIES[_op_family(op)])
    dtypes = _names(dtypes, "dtypes")
    for dt in dtypes:
        numpy_dtype(dt)  # an unsupported dtype is refused here, not in the first case's inputs
    seed = _check.integer(seed, "cases", "seed", 0, _check.UINT64_MAX)
    out = []
    for i, shp in enumerate(shapes(op, tier)):
        layout = _LAYOUTS[i % len(_LAYOUTS)] if tier != "canonical" else "contiguous"
        for dt in dtypes:
            for fam in fams:
                out.append(Case(op, shp, dt, fam, _hash64(seed, op, shp, dt, fam, layout) % (1 << 63), layout))
    return out


def parametrize(op, tier="fast", dtypes=("float32",), families=None, seed=0):
    """pytest.mark.parametrize("case", ...) over cases(...), one test id per case:

        @exactref.testing.parametrize("matmul", dtypes=("float16",))
        def test_mm(case):
            A, B = case.inputs()
            case.assert_covers(my_matmul(A, B), standard=dict(standard="mma:sm90", outer="any"))
    """
    import pytest
    cs = cases(op, tier, dtypes, families, seed)
    return pytest.mark.parametrize("case", cs, ids=[c.id for c in cs])


# ---- check: every case, a record, the minimal failing case ----

_KERNELS = {}   # name -> (kernel, op, standard, device): what reproduce() re-runs in this process


def _to_host(out):
    from ._arrays import to_numpy
    if isinstance(out, (tuple, list)):
        return tuple(None if o is None else to_numpy(o, "out") for o in out)
    return to_numpy(out, "out")


def _device_name(device):
    if device is None:
        return "numpy (host)"
    if str(device).startswith("cuda"):
        import torch
        return "torch %s (%s)" % (device, torch.cuda.get_device_name(torch.device(device)))
    return "torch %s" % device


class CheckRecord:
    """What check() saw: `cases` (one dict each: shape, dtype, family, layout, seed, verdict "pass", "FAIL" or
    "error", counts, the worst element, the report of a failing case), `passed`, `minimal` (the failing case of the
    fewest elements among those run, or None), `timing` (when asked for and every case passed), `path` (the JSON
    record written, or None)."""

    def __init__(self, name, op, standard, tier, device, seed):
        self.name, self.op, self.standard, self.tier, self.device, self.seed = name, op, standard, tier, device, seed
        self.cases, self.minimal, self.timing, self.path = [], None, None, None
        self._case_objs = []

    @property
    def passed(self):
        return bool(self.cases) and all(c["verdict"] == "pass" for c in self.cases)

    def failed(self):
        return [c for c in self.cases if c["verdict"] != "pass"]

    def to_dict(self):
        import datetime
        return {"library_version": er.version(), "kernel": self.name, "op": self.op, "standard": self.standard,
                "tier": self.tier, "device": _device_name(self.device), "seed": self.seed,
                "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "passed": self.passed, "n_cases": len(self.cases), "n_failed": len(self.failed()),
                "minimal_failing_case": self.minimal, "timing": self.timing, "cases": self.cases}

    def _blind_note(self):
        """The summary's note on the classic bugs that may pass in some cases, or ""."""
        bugs = {}
        for c in self.cases:
            for b in c.get("may_pass", ()):
                bugs[b] = bugs.get(b, 0) + 1
        return "".join("\n      note: %s may pass in %d of %d cases (every set at least as wide as it moves an "
                       "element); state the kernel's order (depth=, or standard='reveal' for %s)"
                       % (b, k, len(self.cases), ", ".join(_REVEAL_OPS)) for b, k in bugs.items())

    def __str__(self):
        n, bad = len(self.cases), len(self.failed())
        if not bad:
            return "PASS  %s    %d of %d cases passed%s" % (self.name, n, n, self._blind_note())
        m = self.minimal
        errors = [c for c in self.cases if c["verdict"] == "error"]
        lines = [
            "FAIL  %s    %d of %d cases failed%s" % (self.name, bad, n,
                                                    " (%d raised in the kernel)" % len(errors) if errors else ""),
            "      minimal failing case: %s %s %s%s seed=%d%s"
            % (
                tuple(m["shape"]),
                m["dtype"],
                m["family"],
                "" if m["layout"] == "contiguous" else " " + m["layout"],
                m["seed"],
                " config " + m["config"] if "config" in m else "",
            ),
            "      reproduce: %s" % m["reproduce"],
        ]
        if "error" in m:
            lines.insert(2, "      %s: %s" % ("raised" if m["verdict"] == "error" else "its output", m["error"]))
        if errors and errors[0] is not m:
            e = errors[0]
            lines.append("      first kernel error: %s %s %s: %s"
                         % (tuple(e["shape"]), e["dtype"], e["family"], e["error"]))
        return "\n".join(lines) + self._blind_note()

    def picture(self, entry=None):
        """The path of a case's picture (default the minimal failing case's), or None where none was drawn."""
        entry = self.minimal if entry is None else entry
        if not self.path or not entry or "picture" not in entry:
            return None
        return os.path.join(os.path.dirname(os.path.abspath(self.path)), entry["picture"])

    def assert_passed(self):
        """Raises AssertionError with the summary, the minimal failing case's report and its picture's path."""
        if not self.passed:
            rep = self.minimal.get("report") or self.minimal.get("error", "")
            pic = self.picture()
            raise AssertionError("%s\n%s%s" % (self, rep, "\npicture: %s" % pic if pic else ""))


def configs(kernel):
    """The candidate configs of an @triton.autotune kernel (its triton.Config objects, in its order); for a plain
    @triton.jit kernel, the names of its constexpr parameters (what a config would set)."""
    if hasattr(kernel, "configs") and hasattr(kernel, "fn"):
        return list(kernel.configs)
    if hasattr(kernel, "constexprs") and hasattr(kernel, "arg_names"):
        return [kernel.arg_names[i] for i in kernel.constexprs]
    raise TypeError(
        "exactref: configs: expected an @triton.autotune or @triton.jit kernel, not %s" % type(kernel).__name__
    )


def _config_text(cfg):
    """A triton.Config as "BK=32, TAIL=1, num_warps=4, num_stages=3" (its meta-parameters, then the launch's)."""
    parts = ["%s=%s" % kv for kv in sorted(getattr(cfg, "kwargs", {}).items())]
    parts += ["%s=%s" % (k, getattr(cfg, k)) for k in ("num_warps", "num_stages") if getattr(cfg, k, None) is not None]
    return ", ".join(parts) if parts else str(cfg)


class _Pinned:
    """An autotuned kernel restricted to one config (its cache cleared) for the duration of a with block."""

    def __init__(self, autotuner, config):
        self.at, self.config = autotuner, config

    def __enter__(self):
        # its pruning off too: a prune that drops the pinned config for some shapes would leave none
        self.saved = (self.at.configs, dict(self.at.cache), getattr(self.at, "early_config_prune", None))
        self.at.configs = [self.config]
        self.at.cache.clear()
        if self.saved[2] is not None:
            self.at.early_config_prune = None

    def __exit__(self, *exc):
        self.at.configs = self.saved[0]
        self.at.cache.clear()
        self.at.cache.update(self.saved[1])
        if self.saved[2] is not None:
            self.at.early_config_prune = self.saved[2]
        return False


def check(kernel, op="matmul", dtypes=("float32",), tier="fast", families=None, standard=None, seed=0, device=None,
          name=None, runs_dir=None, record=True, timing=False, configs=None):
    """Runs `kernel` (called with the op's inputs: (A, B) for matmul and bmm, (q, k, v) for attention, a backward
    pass's as Case.inputs lists them (attention_backward's (q, k, v, o, lse, do)), (x,) otherwise; returning the
    output, for layer_norm (y, mean, rstd) or y, for attention (O, LSE) or O, for layer_norm_backward (dx, dweight,
    dbias) or dx, for rmsnorm_backward (dx, dweight) or dx, for cross_entropy (loss, dlogits) or loss, for
    attention_backward (dq, dk, dv) or dq) on every case of the tier
    (cases()), checks each output against the op's reference under `standard` (a string, or a dict of covers() keywords
    such as dict(standard="mma:sm90", outer="any")), and returns a CheckRecord. Inputs are numpy arrays (device None) or
    torch tensors on `device`. A case whose kernel raises is recorded as "error". The minimal failing case is the
    failing case of the fewest elements among those run (no smaller shape is searched for), with a reproduce() call that
    re-runs it. The record is written as JSON under runs_dir (default $EXACTREF_RUNS or ~/.exactref/runs) unless
    record=False. With timing=True and every case passed, the kernel is timed on the tier "canonical" (first dtype,
    normal inputs). configs: an @triton.autotune kernel that `kernel` launches: every case runs under each of its
    configs in turn (the autotuner restricted to that one config), so a config the autotuner picks only for other shapes
    is tested too; each case's record names its config."""
    import os
    from collections.abc import Mapping
    if not callable(kernel):
        raise TypeError("exactref: check: kernel must be callable, not %s" % type(kernel).__name__)
    if not isinstance(standard, (str, type(None), Mapping)):
        raise TypeError("exactref: check: standard must be a string such as 'mma:sm90' or a dict of covers() keywords "
                        "such as dict(standard='mma:sm90', outer='any'), not %s" % type(standard).__name__)
    seed = _check.integer(seed, "check", "seed", 0, _check.UINT64_MAX)
    if standard == "reveal" and op not in _REVEAL_OPS:
        raise ValueError("exactref: check: standard='reveal' reveals the order of %s kernels; op %r is not one"
                         % (", ".join("'%s'" % o for o in _REVEAL_OPS), op))
    name = name or getattr(kernel, "__name__", "kernel")
    std = standard if isinstance(standard, (str, type(None))) else dict(standard)
    revealed = {}
    pictures = []  # the failing cases' results, drawn beside the record
    rec = CheckRecord(name, op, std, tier, device, seed)
    _KERNELS[name] = (kernel, op, std, device, configs)
    for ci, cfg in enumerate(list(configs.configs) if configs is not None else [None]):
        for c in cases(op, tier, dtypes, families, seed):
            entry = {"shape": list(c.shape), "dtype": c.dtype, "family": c.family, "layout": c.layout, "seed": c.seed,
                     "reproduce": c.reproduce_call(name, None if cfg is None else ci, kernel, std, device, configs)}
            if cfg is not None:
                entry["config"] = _config_text(cfg)
            ins = c.inputs(device)
            cstd = std
            try:
                if std == "reveal":  # the order at this shape (and config), revealed once
                    key = (c.shape, c.dtype, ci)
                    if key not in revealed:
                        if cfg is None:
                            revealed[key] = _reveal_case(kernel, c, device)
                        else:
                            with _Pinned(configs, cfg):
                                revealed[key] = _reveal_case(kernel, c, device)
                    cstd = dict(revealed[key].standard)
                    entry["standard"] = cstd
                    entry["revealed"] = str(revealed[key])
                    entry["reproduce"] = c.reproduce_call(name, None if cfg is None else ci, kernel, cstd, device,
                                                          configs)
                    if revealed[key].wrong is not None:  # the probe rows showed outputs no correct kernel gives
                        entry.update(verdict="FAIL", error="on reveal_order's probe rows at this shape: %s"
                                     % revealed[key].reason, report=str(revealed[key].wrong))
                        rec.cases.append(entry)
                        continue
                if cfg is None:
                    out = _to_host(kernel(*ins))
                else:
                    with _Pinned(configs, cfg):
                        out = _to_host(kernel(*ins))
            except Exception as e:  # the kernel's failure is the case's verdict, not the harness's
                entry.update(verdict="error", error="%s: %s" % (type(e).__name__, e))
                rec.cases.append(entry)
                continue
            try:
                res = c.check(out, [_to_host(i) for i in ins], cstd)
            except (TypeError, ValueError) as e:  # the output's shape or type: the case fails, the run goes on
                if isinstance(e, ExactrefError):  # the library refused the standard or the op: the caller's error
                    raise
                entry.update(verdict="FAIL", error="%s: %s" % (type(e).__name__, e))
                rec.cases.append(entry)
                continue
            ok = res.all()
            entry.update(
                verdict="pass" if ok else "FAIL", n_failed=_n_failed(res), counts=_counts(res), worst=_worst(res)
            )
            blind = _may_pass(res)
            if blind:
                entry["may_pass"] = blind
            if not ok:
                entry["report"] = str(res)
                if record:
                    pictures.append((entry, res, _output_tiles(op, cfg)))
            rec.cases.append(entry)
    bad = rec.failed()
    if bad:
        rec.minimal = min(bad, key=lambda e: (int(np.prod(e["shape"])), rec.cases.index(e)))
    elif timing:
        rec.timing = _time(kernel, op, dtypes[0] if not isinstance(dtypes, str) else dtypes, device)
    if record:
        d = runs_dir or os.environ.get("EXACTREF_RUNS") or os.path.join(os.path.expanduser("~"), ".exactref", "runs")
        os.makedirs(d, exist_ok=True)
        import datetime
        import json
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        rec.path = os.path.join(d, "%s-%s.json" % (stamp, _file_name(name)))
        _draw(rec, pictures)
        with open(rec.path, "w") as f:
            json.dump(rec.to_dict(), f, indent=1)
    return rec


def _file_name(text):
    """text with every character other than letters, digits, '-' and '_' as '_'."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)


def _picture(res, path, title, tiles=None):
    """Draws res's first failing output (Result.plot) to path; False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    r = next(x for x in _results(res) if not x.all())
    plt.close(r.plot(path, tiles=tiles, title=title))
    return True


def _draw(rec, pictures, most=16):
    """The pictures of the first `most` failing cases and of the minimal one, written beside the record as
    <record>-case<k>.png and named in the case's entry ("picture"); none without matplotlib."""
    base = os.path.splitext(rec.path)[0]
    chosen = pictures[:most] + [p for p in pictures[most:] if p[0] is rec.minimal]
    for entry, res, tiles in chosen:
        k = rec.cases.index(entry)
        path = "%s-case%d.png" % (base, k)
        if not _picture(res, path, "%s: %s %s %s" % (rec.name, tuple(entry["shape"]), entry["dtype"], entry["family"]),
                        tiles):
            return
        entry["picture"] = os.path.basename(path)
        if tiles is not None:
            entry["tiles"] = list(tiles)


def _output_tiles(op, cfg):
    """The output tile a case's config sets, for the picture: (BLOCK_M, BLOCK_N) of a matmul's output, BLOCK_M rows of
    an attention output (its BLOCK_N tiles the keys); None without a config or where the config names none."""
    if cfg is None or not (op in ("matmul", "bmm") or op in _ATTENTION and "backward" not in op):
        return None
    try:
        t = _plot.tiles_of(cfg, cols=op in ("matmul", "bmm"))
    except (TypeError, ValueError):  # a config whose tile names hold no sizes: the picture goes without tiles
        return None
    return None if t == (None, None) else t


def _reveal_case(kernel, case, device):
    """The Order of kernel at this case's shape: rows of n for a sum or a layer_norm, (M, K) against (K, N) for a
    matmul."""
    rows, n, ncols = (case.shape[0], case.shape[-1], 16) if case.op != "matmul" else case.shape
    o = Order(case.op, n, case.dtype)
    o.rows = rows
    if n < 2:  # one term: every order is the same
        o.reason = "one term: nothing to reveal"
        return o
    # at the case's own rows: a kernel may pick its order by shape, and an order revealed at another shape would
    # not be evidence for this one (a few long rows take many calls: past 2000 the case is checked under any_order)
    try:
        return reveal_order(kernel, case.op, n=n, dtype=case.dtype, ncols=ncols, rows=rows, device=device,
                            max_calls=2000, eps=1e-6 if case.op == "rmsnorm" else None)
    except ExactrefNotImplementedError as e:  # the dtype cannot hold the probes at this n: any order, said why
        o.reason = "not revealed: %s; checked under any_order" % e
        return o


def _results(res):
    return list(res.results.values()) if hasattr(res, "results") else [res]


def _may_pass(res):
    """The classic bugs the case's reports say may pass (every set of an output at least as wide as the bug moves an
    element; classes.md, Resolution), without repeats."""
    out = []
    for r in _results(res):
        m = r.json.get("may_pass")
        if m and m["bug"] not in out:
            out.append(m["bug"])
    return out


def _n_failed(res):
    return int(sum(r.n_failed for r in _results(res)))


def _counts(res):
    out = {}
    for r in _results(res):
        for k, v in r.counts.items():
            out[k] = out.get(k, 0) + v
    return out


def _worst(res):
    for r in _results(res):
        if r.worst is not None:
            return r.worst
    return None


def _time(kernel, op, dtype, device, reps=7):
    """The kernel's time on the canonical shapes: triton.testing.do_bench on CUDA where Triton is installed, else
    the median of `reps` wall-clock runs (synchronised on CUDA); `stable` False when the runs spread by more than a
    tenth of their median."""
    import time
    out = []
    for c in cases(op, "canonical", (dtype,), ("normal",), 0):
        ins = c.inputs(device)
        cuda = device is not None and str(device).startswith("cuda")
        sync = None
        if cuda:
            import torch
            sync = torch.cuda.synchronize
        kernel(*ins)
        if sync:
            sync()
        ts = None
        if cuda:
            try:
                import triton.testing
                ms = triton.testing.do_bench(lambda: kernel(*ins), quantiles=(0.2, 0.5, 0.8))
                ts = [m / 1e3 for m in ms]
            except ImportError:
                ts = None
        if ts is None:
            runs = []
            for _ in range(reps):
                t0 = time.perf_counter()
                kernel(*ins)
                if sync:
                    sync()
                runs.append(time.perf_counter() - t0)
            runs.sort()
            ts = [runs[len(runs) // 5], runs[len(runs) // 2], runs[-1 - len(runs) // 5]]
        med = ts[1]
        out.append({"shape": list(c.shape), "dtype": dtype, "median_s": med, "stable": (ts[2] - ts[0]) <= 0.1 * med})
    return out


def reproduce(kernel, shape, dtype, family, seed, layout="contiguous", op=None, standard=None, device=None, config=None,
              configs=None):
    """Re-runs one case exactly: `kernel` a callable, 'FILE.py:NAME' (loaded from that file: the form check() prints,
    which runs in a fresh process), or the name of a kernel check() ran in this process (its op, standard, device
    and autotuned kernel then come from that run unless given); `config`, an index into the autotuned kernel's
    configs (`configs`, the kernel or 'FILE.py:NAME'), runs it under that config alone. Returns the verdict (Result
    or Results)."""
    if _is_location(configs):
        configs = _load(configs)
    if _is_location(kernel) and kernel not in _KERNELS:
        kernel = _load(kernel)
    if isinstance(kernel, str):
        if kernel not in _KERNELS:
            raise ValueError("exactref: no kernel named %r was checked in this process; pass the kernel itself (or "
                             "'FILE.py:NAME', where it is defined)" % kernel)
        fn, op0, std0, dev0, cfgs0 = _KERNELS[kernel]
        kernel, op = fn, op or op0
        standard = standard if standard is not None else std0
        device = device if device is not None else dev0
        configs = configs if configs is not None else cfgs0
    if op is None:
        raise ValueError("exactref: reproduce needs op= for a kernel check() has not run")
    if config is not None and configs is None:
        raise ValueError("exactref: config=%r needs the autotuned kernel (configs=)" % (config,))
    c = Case(op, shape, dtype, family, seed, layout)
    ins = c.inputs(device)
    if config is None:
        out = kernel(*ins)
    else:
        with _Pinned(configs, configs.configs[config]):
            out = kernel(*ins)
    return c.check(_to_host(out), [_to_host(i) for i in ins], standard)


from ._reveal import Order, reveal_order  # noqa: E402,F401 - the order-revealing probes (docs/algorithms/reveal.md)
