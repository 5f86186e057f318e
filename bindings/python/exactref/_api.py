"""The user API: references of the ops, their covers(), emulate() and enclosures, and the verdicts. Over the FFI layer
(_ffi.py, the only module that touches ctypes) and the argument checks (_check.py); exactref.testing builds on this
module, and the package's __init__ re-exports it."""
from __future__ import annotations

import json
import numbers
import re
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _check, _ffi
from ._arrays import DeviceView, View, format_of, format_of_name, numpy_dtype, to_numpy
from ._errors import ExactrefInternalError, ExactrefTypeError, ExactrefValueError

#: What the API takes as an array: a numpy array (ml_dtypes' low-precision dtypes included), a torch tensor, or what
#: numpy.asarray takes.
ArrayLike = Any
#: A dtype: a name ("float16", "bfloat16", "bf16", "float8_e4m3fn", ...), a numpy, ml_dtypes or torch dtype.
DType = Any
#: quantize's granularity: "tensor", "row" or ("block", n).
Granularity = Union[str, Tuple[str, int]]

CLASSES = _ffi.CLASSES
PASSING = ("exact", "covered", "overflow")


def version() -> str:
    """The C library's version string."""
    return _ffi.version()


def _dtype_name(v):
    """The name of a numpy or torch dtype (or numpy scalar type) given as an option value, else None."""
    if type(v).__module__.startswith("torch") and type(v).__name__ == "dtype":
        return str(v).replace("torch.", "")
    try:
        if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
            return np.dtype(v).name
    except TypeError:
        return None
    return None


def _option_value(key, v):
    """An option value as the C grammar reads it: strings as given, numbers in decimal, dtypes by name; anything
    else is refused with the key named (a bool means always/never for fma and nothing for the other keys)."""
    if isinstance(v, str):
        text = v
    elif isinstance(v, bool) and key == "fma":
        text = "always" if v else "never"
    elif isinstance(v, bool) or v is None:
        raise ExactrefTypeError(
            "ER_ERR_STANDARD",
            "exactref: option %s=%r: give a string, such as %s='any' or %s='always'" % (key, v, key, key),
        )
    elif isinstance(v, (int, float, np.integer, np.floating)):
        text = repr(float(v)) if isinstance(v, (float, np.floating)) else str(int(v))
    else:
        text = _dtype_name(v)
        if text is None:
            raise ExactrefTypeError(
                "ER_ERR_STANDARD",
                "exactref: option %s=%r: expected a string, a number or a dtype, not %s" % (key, v, type(v).__name__),
            )
    if "\0" in text or "\0" in key:
        raise ExactrefValueError("ER_ERR_STANDARD", "exactref: option %s holds a NUL byte" % key)
    return text


def _options(options, kwargs):
    if options is not None and not isinstance(options, str):
        raise ExactrefTypeError(
            "ER_ERR_STANDARD",
            "exactref: options must be a string such as 'compute=fp32 fma=never', not %s" % type(options).__name__,
        )
    parts = [options] if options else []
    for k, v in kwargs.items():
        parts.append("%s=%s" % (k, _option_value(k, v)))
    text = " ".join(parts)
    if "\0" in text:
        raise ExactrefValueError("ER_ERR_STANDARD", "exactref: the options hold a NUL byte")
    return text


def _standard(standard, options, kwargs):
    """The C standard for 'mma:sm90 outer=any'-style strings (options may follow the order, as the docs write
    them) plus options and keyword options."""
    if not isinstance(standard, str):
        raise ExactrefTypeError("ER_ERR_STANDARD", "exactref: standard must be a string such as 'any_order' or "
                                "'blocked:32', not %s" % type(standard).__name__)
    if "\0" in standard:
        raise ExactrefValueError("ER_ERR_STANDARD", "exactref: the standard holds a NUL byte")
    key = (standard, _options(options, kwargs))
    std = _STANDARDS.get(key)
    if std is None:  # parsed once per text: the C calls only read a standard
        std = _ffi.standard(*key)
        if len(_STANDARDS) >= 64:
            _STANDARDS.clear()
        _STANDARDS[key] = std
    return std


_STANDARDS = {}  # the parsed standards by (order, options) text


class Result:
    """The verdict of covers(): per-element classes, counts, the worst element, and the report; `lo`, `hi` and
    `slack`, each element's set and how far inside it the output lies (for a matmul on the fast path, and a chain
    over one or over a tensor, computed on first use by a second pass)."""

    def __init__(self, rep, shape, out=None, sets=None):
        """rep: the report it reads (an _ffi.Report: the text and the JSON rendered on first use); sets: (lo, hi,
        slack) arrays, or a function computing them on first use."""
        self._out = out
        self._rep, self._text, self._json = rep, None, None
        self._lohi, self._sets = (sets, None) if isinstance(sets, tuple) else (None, sets)
        self._shape, self._classes, self._counts = shape, None, None
        self.n_failed = rep.failed()

    @property
    def classes(self) -> np.ndarray:
        """uint8 array of out's shape: each element's class (the report's own array, read on first use)."""
        if self._classes is None:
            self._classes = self._rep.classes().reshape(self._shape)
        return self._classes

    @property
    def counts(self) -> Dict[str, int]:
        """The number of elements of each class, by class name (read on first use)."""
        if self._counts is None:
            self._counts = {name: self._rep.count(c) for c, name in enumerate(CLASSES)}
        return self._counts

    @property
    def report(self) -> str:
        """The report's text (er_report_text)."""
        if self._text is None:
            self._text = self._rep.text()
        return self._text

    @property
    def json(self) -> Dict[str, Any]:
        """The report as a dict (er_report_json)."""
        if self._json is None:
            self._json = json.loads(self._rep.json_text())
        return self._json

    @property
    def worst(self) -> Optional[Dict[str, Any]]:
        """The worst element (a dict as in the JSON), or None."""
        return self.json["worst"]

    @property
    def first_failing(self) -> List[Dict[str, Any]]:
        """The first failing elements (dicts as in the JSON)."""
        return self.json["first_failing"]

    def _bounds(self):
        if self._lohi is None:
            if self._sets is None:
                raise ValueError("exactref: this result has no sets to give")
            self._lohi = self._sets()
        return self._lohi

    @property
    def lo(self) -> np.ndarray:
        """float64 array of out's shape: the least finite value each element's set allows (NaN where none)."""
        return self._bounds()[0]

    @property
    def hi(self) -> np.ndarray:
        """float64 array of out's shape: the greatest finite value each element's set allows (NaN where none)."""
        return self._bounds()[1]

    @property
    def slack(self) -> np.ndarray:
        """float64 array of out's shape: the distance from each output to the nearer edge of its set, in ulps of the
        output format at the output (negative when outside; NaN for a non-finite output or a set without finite
        values)."""
        return self._bounds()[2]

    def widest(self) -> Tuple[Tuple[int, ...], float]:
        """(index, relative width): the element whose set is widest relative to its size, (hi - lo) / max(|lo|,
        |hi|), among those with a finite set away from 0: how loose a passing check may be."""
        lo, hi = self._bounds()[:2]
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = (hi - lo) / np.maximum(np.abs(lo), np.abs(hi))
        rel = np.where(np.isfinite(rel), rel, -1.0)
        i = int(np.argmax(rel))
        return np.unravel_index(i, lo.shape), float(rel.flat[i])

    @property
    def resolution(self) -> float:
        """The smallest relative error sure to fail the check: r = c / (1 - c) for the largest relative width c among
        the sets that lie away from 0, so that an output farther than r |v| from any value v its set allows fails,
        wherever it lands among those elements (docs/reference/classes.md). From the report where it saw every set;
        on a fast path, from the sets (a second pass, as for lo and hi). NaN where no set lies away from 0."""
        r = self._rep.resolution()
        if r == r:
            return r
        lo, hi = self._bounds()[:2]
        with np.errstate(invalid="ignore", divide="ignore"):
            away = (lo <= hi) & ((lo > 0) | (hi < 0)) & np.isfinite(lo) & np.isfinite(hi)
            if not away.any():
                return float("nan")
            c = float(np.max((hi[away] - lo[away]) / np.maximum(np.abs(lo[away]), np.abs(hi[away]))))
        return c / (1 - c)

    def all(self) -> bool:
        """True when every element passes (exact, covered, or an overflow some allowed order produces)."""
        return self.n_failed == 0

    def plot(self, path: Optional[str] = None, tiles: Any = None, title: Optional[str] = None,
             max_panels: int = 16):
        """An image of the output's elements by class: exact, covered, an allowed overflow, outside by how far (under
        2 ulps, 2 to 16, beyond; from `slack` where the result has sets), NaN or inf where not allowed, and missing.
        A 2-D output is one image (rows down, columns across), a 1-D one a row, a batched one small multiples over
        its leading indices (the first max_panels); tiles=(rows, cols) outlines a kernel's tiles, and tiles=config
        reads them from a triton.Config or a dict of meta-parameters (BLOCK_M, BLOCK_SIZE_M, BM, TILE_M, BLOCK_ROWS or
        XBLOCK for rows; the N names for columns; one of the two is enough). Returns the matplotlib Figure, saved to
        path when given. Needs matplotlib (pip install 'exactref[plot]')."""
        from . import _plot
        max_panels = _check.integer(max_panels, "plot", "max_panels", 1, 1 << 20)
        if title is not None and not isinstance(title, str):
            raise TypeError("exactref: plot: title must be a string, not %s" % type(title).__name__)
        return _plot.plot(self, path, tiles, title, max_panels)

    def __bool__(self):
        """The verdict, as all(): `assert ref.covers(out)` fails when an element fails."""
        return self.all()

    def assert_all(self) -> None:
        """Raises AssertionError with the report when an element fails (for pytest)."""
        if self.n_failed:
            raise AssertionError("exactref: kernel output not covered\n" + self.report)

    def __str__(self):
        return self.report

    def __repr__(self):
        return "<exactref.Result %s: %s>" % ("pass" if self.all() else "FAIL",
                                              ", ".join("%s %d" % kv for kv in self.counts.items() if kv[1]))


class Enclosure:
    """The set of every element of an output under a standard (Reference.enclosure): `lo` and `hi` (float64 arrays
    of the output's shape: the least and greatest finite values allowed, NaN where none), `flags` (uint8: bit 1 NaN
    allowed, 2 NaN required, 4 +inf allowed, 8 -inf allowed) and the output format `dtype`."""

    NAN, NAN_ONLY, PINF, NINF = 1, 2, 4, 8

    def __init__(self, lo, hi, flags, dtype):
        self.lo, self.hi, self.flags, self.dtype = lo, hi, flags, dtype

    @property
    def nan_allowed(self) -> np.ndarray:
        return (self.flags & self.NAN) != 0

    @property
    def nan_required(self) -> np.ndarray:
        return (self.flags & self.NAN_ONLY) != 0

    @property
    def pinf_allowed(self) -> np.ndarray:
        return (self.flags & self.PINF) != 0

    @property
    def ninf_allowed(self) -> np.ndarray:
        return (self.flags & self.NINF) != 0

    def contains(self, out: ArrayLike) -> np.ndarray:
        """Boolean array: which elements of `out` (of the output's shape) the sets contain, which is which elements
        covers() passes."""
        y = to_numpy(out, "out").astype(np.float64).reshape(self.lo.shape)
        with np.errstate(invalid="ignore"):
            finite = (y >= self.lo) & (y <= self.hi) & ~self.nan_required
        return np.where(np.isnan(y), self.nan_allowed,
                        np.where(np.isposinf(y), self.pinf_allowed & ~self.nan_required,
                                 np.where(np.isneginf(y), self.ninf_allowed & ~self.nan_required, finite)))

    def __repr__(self):
        return "<exactref.Enclosure %s of %s>" % (self.lo.shape, np.dtype(self.dtype).name)


class Reference:
    """The exact reference of an op on given inputs (it keeps them alive: do not modify them while it is used)."""

    _build = None  # a reference of CUDA tensors: the function making its host reference (see _later)

    def __init__(self, ptr, keep, shape, op):
        self._p = ptr
        self._keep = keep
        self.shape = shape      # numpy's result shape
        self.op = op

    @classmethod
    def _later(cls, build, keep, shape, op):
        """A reference of CUDA tensors, its inputs checked, whose host reference (their copies and the library's
        reference of them) build() makes on first use: an eager reference of the same op, whose pointer and views it
        takes. The device paths read the tensors where they are and never need it. keep: the inputs, where the
        device paths find them."""
        ref = cls(None, keep, shape, op)
        ref._build, ref._build_lock = build, threading.Lock()
        return ref

    @property
    def _ptr(self):
        """The library's reference (made here on first use for a reference of CUDA tensors, once: threads asking
        together wait for the one that makes it)."""
        if self._p is None and self._build is not None:
            with self._build_lock:
                if self._p is None and self._build is not None:
                    eager = self._build()
                    self._p, self._keep, eager._p, self._build = eager._p, eager._keep, None, None
        return self._p

    def __del__(self):
        ptr, self._p = getattr(self, "_p", None), None
        if ptr:
            _ffi.ref_free(ptr)

    def __bool__(self):
        raise TypeError("exactref: a Reference has no truth value (it is not a verdict): assert ref.covers(out) or "
                        "ref.covers(out).assert_all()")

    def _c_shape(self, output=0):
        """Output `output`'s shape as the library counts it (er_ref_output_shape): the one source of every output's
        size, never recomputed here (asked once per output: a reference's shapes do not change)."""
        shapes = self.__dict__.setdefault("_c_shapes", {})
        if output not in shapes:
            shapes[output] = _ffi.ref_output_shape(self._ptr, output)
        return shapes[output]

    def _out_view(self, arr, name, writable=False):
        if tuple(arr.shape) != tuple(self.shape):
            raise ValueError(
                "exactref: %s has shape %s but %s produces %s" % (name, tuple(arr.shape), self.op, tuple(self.shape))
            )
        c_shape = self._c_shape()
        if arr.shape != c_shape:
            arr = arr.reshape(c_shape)  # a view: only unit dimensions were added
        return View(arr, name, writable)

    def covers(
        self, out: ArrayLike, standard: str = "any_order", options: Optional[str] = None, **kwargs: Any
    ) -> Result:
        """Classifies every element of the kernel output `out` against the set the standard allows. With `out` and
        the reference's inputs CUDA torch tensors, a matmul, softmax, log_softmax, softmax_backward or rmsnorm is
        checked where they are (the device paths, docs/reference/cuda.md), and a chain's CUDA output by
        er_covers_device (its epilogue pass on the GPU where it applies), with the same result."""
        dev = self._device_covers(out, standard, options, kwargs)
        if dev is None:
            dev = self._host_covers_of_device_output(out, standard, options, kwargs)
        if dev is not None:
            return dev
        arr = to_numpy(out, "out")
        std = _standard(standard, options, kwargs)
        view = self._out_view(arr, "out")
        shape = tuple(self.shape)

        def sets_and_report():
            # one block, its pages touched here: the pass's threads faulting in fresh pages together wait on each other
            block = np.empty((3,) + shape, np.float64)
            block.fill(np.nan)
            arrays = tuple(block[i, ...] for i in range(3))
            return arrays, _ffi.covers_sets(self._ptr, view.buf, std, *arrays)

        def sets():
            arrays, again = sets_and_report()
            _ffi.clear(again)
            return arrays
        if _ffi.ref_fast(self._ptr) or self.op in self.LAZY_SETS:
            # the fast path's decisions need no sets, nor do the row ops' records of outputs inside their sets: they
            # come from a second pass when asked for; a matmul of at most 2^20 products is a short call
            short = self.op == "matmul" and arr.size * np.shape(self._keep[2])[-1] <= 1 << 20
            return Result(_ffi.covers(self._ptr, view.buf, std, short), shape, arr, sets)
        arrays, rep = sets_and_report()
        return Result(rep, shape, arr, arrays)

    def _host_covers_of_device_output(self, out, standard, options, kwargs):
        """covers() of a CUDA output where no op's device path applies: er_covers_device (a chain's epilogue pass on
        the GPU where it applies; else the library copies the output, its pages faulted in on the threads first, and
        checks the copy on the host); None where that does not apply (no CUDA
        tensor, a library without CUDA, a 0-d output or one DeviceView does not take: to_numpy's copy then)."""
        if not _on_cuda(out) or not _ffi.cuda_available() or out.dim() < 1:
            return None
        if tuple(out.shape) != tuple(self.shape):
            raise ValueError("exactref: out has shape %s but %s produces %s" % (tuple(out.shape), self.op,
                                                                                 tuple(self.shape)))
        c_shape = self._c_shape()
        t = out.detach()
        t = t.reshape(c_shape) if tuple(t.shape) != c_shape else t
        try:
            vo = DeviceView(t, "out")
        except (TypeError, ValueError):
            return None
        std = _standard(standard, options, kwargs)
        import torch
        with torch.cuda.device(t.device):
            rep = _ffi.covers_device(self._ptr, vo.buf, std, torch.cuda.current_stream(t.device).cuda_stream)

        def sets():
            return self.covers(to_numpy(out, "out"), standard, options, **kwargs)._bounds()
        return Result(rep, tuple(self.shape), None, sets)

    def _device_covers(self, out, standard, options, kwargs):
        """covers() by a device path where one applies (a matmul, softmax, log_softmax, softmax_backward,
        log_softmax_backward or rmsnorm whose inputs and output are CUDA torch tensors, the library built with CUDA);
        else None. Its sets, where asked for, come from the host's pass on copies."""
        if not _on_cuda(out):
            return None
        inputs = (self._keep[2:4] if self.op == "matmul" else self._keep[1:2] if self.op in ("softmax", "log_softmax")
                  else self._keep[1::2] if self.op in ("rmsnorm", "softmax_backward", "log_softmax_backward") else ())
        if not inputs or not all(_on_cuda(t) for t in inputs + (out,)) or not _ffi.cuda_available():
            return None
        if tuple(out.shape) != tuple(self.shape):
            raise ValueError("exactref: out has shape %s but %s produces %s" % (tuple(out.shape), self.op,
                                                                                 tuple(self.shape)))
        if self.op == "matmul" and min(t.dim() for t in inputs) < 2:
            return None  # a vector operand: the host's path
        std = _standard(standard, options, kwargs)
        import torch
        stream = torch.cuda.current_stream(out.device).cuda_stream
        names = {"matmul": ("A", "B"), "softmax": ("x",), "log_softmax": ("x",), "rmsnorm": ("x", "weight"),
                 "softmax_backward": ("dy", "y"), "log_softmax_backward": ("dy", "y")}[self.op]
        views = [DeviceView(t, name) for t, name in zip(inputs, names)]
        vo = DeviceView(out, "out")
        if self.op == "matmul":
            rep = _ffi.matmul_covers_device(views[0].buf, views[1].buf, vo.buf, std, stream)
        elif self.op in ("softmax_backward", "log_softmax_backward"):
            rep = _ffi.softmax_backward_covers_device(views[0].buf, views[1].buf, self._dim, vo.buf, std, stream,
                                                      self.op == "log_softmax_backward")
        elif self.op == "rmsnorm":
            rep = _ffi.rmsnorm_covers_device(views[0].buf, views[1].buf if len(views) > 1 else None, self._eps,
                                             vo.buf, std, stream)
        else:
            rep = _ffi.softmax_covers_device(views[0].buf, self._dim, vo.buf, std, stream, self.op == "log_softmax")

        def sets():
            host = self.covers(to_numpy(out, "out"), standard, options, **kwargs)
            return host._bounds()
        return Result(rep, tuple(self.shape), None, sets)

    OUTPUTS = ("out",)
    # ops whose covers() leaves the sets to a second pass, when first read: the row ops keep no set of an output
    # inside it (rowmods.c, er_row_put; softmax's backward passes too, sbwdmod.c), and the norms' backward (dx) and
    # cross_entropy (dlogits) decide their
    # elements without their sets where the standard lets them (nbwdmod.c, xentmod.c: a pass asked for the sets
    # computes every element's), so their pass without sets is the cheaper one; attention's O alone is checked
    # without its sets' 24 bytes an element (half a long check's time went to their fresh pages), and quantize's q
    # (the same pages, most of its check's time on the host)
    LAZY_SETS = ("softmax", "log_softmax", "rmsnorm", "layernorm", "attention", "layer_norm_backward",
                 "rmsnorm_backward", "cross_entropy", "softmax_backward", "log_softmax_backward", "quantize")

    def _index(self, output):
        """The index of an output given by number or name."""
        if isinstance(output, str) and output in self.OUTPUTS:
            return self.OUTPUTS.index(output)
        if _check.is_integer(output) and 0 <= output < len(self.OUTPUTS):
            return int(output)
        raise ExactrefValueError("ER_ERR_INVALID", "exactref: %s's outputs are %s (or 0 to %d); got output=%r"
                                 % (self.op, ", ".join(self.OUTPUTS), len(self.OUTPUTS) - 1, output))

    def _output_shape(self, output):
        """Output `output`'s shape: the first output's as numpy gives the op's result (matmul of vectors drops their
        dimensions), the others' as the library counts them."""
        index = self._index(output)
        if index == 0:
            return tuple(self.shape)
        return self._c_shape(index)

    def enclosure(self, standard: str = "any_order", dtype: DType = "float32", options: Optional[str] = None,
                  output: Union[int, str] = 0, **kwargs: Any) -> Enclosure:
        """The set of every element of the output under a standard, for an output of `dtype`, without an output to
        check (er_ref_enclosure): an Enclosure with lo, hi and flags arrays of the output's shape."""
        std = _standard(standard, options, kwargs)
        dt = numpy_dtype(dtype)
        index = self._index(output)
        shape = self._output_shape(index)
        n = int(np.prod(self._c_shape(index), dtype=np.int64))  # the count the library writes
        if int(np.prod(shape, dtype=np.int64)) != n:
            raise ExactrefInternalError(
                "ER_ERR_INTERNAL",
                "exactref: %s's output %d: %s elements here, %d in the library" % (self.op, index, shape, n),
            )
        lo, hi, flags = np.empty(n), np.empty(n), np.empty(n, np.uint8)
        _ffi.enclosure(self._ptr, index, std, format_of(dt), lo, hi, flags)
        return Enclosure(lo.reshape(shape), hi.reshape(shape), flags.reshape(shape), dt)

    # ---- chains: elementwise stages after the op, as a fused kernel evaluates them (docs/algorithms/chains.md) ----

    def add(self, other: Union[float, ArrayLike, Reference]) -> ChainReference:
        """This result plus `other` (a number, an array broadcasting to the result's shape, or another Reference of the
        same shape: any value its standard allows, as a second accumulator or a residual), each addition rounded once
        in the compute format of the standard given at covers(): a chain."""
        return ChainReference._extend(self, ("add", other))

    def mul(self, other: Union[float, ArrayLike, Reference]) -> ChainReference:
        """This result times `other` (a number, a broadcasting array or another Reference: SwiGLU's
        er.matmul(x, W1).silu().mul(er.matmul(x, W3))), each product rounded once in the compute format: a chain."""
        return ChainReference._extend(self, ("mul", other))

    def relu(self) -> ChainReference:
        """max(x, 0), exact (a NaN may stay NaN or become 0, as max instructions do): a chain."""
        return ChainReference._extend(self, ("relu", None))

    def backward(self, dC: ArrayLike) -> Tuple["Reference", "Reference"]:
        """For a matmul reference C = A @ B: the references of its gradients (dA, dB) = (dC @ B^T, A^T @ dC), each a
        matmul of the same operands (B^T and A^T as strided views). Where one operand is shared by a batch (A of shape
        [batch..., M, K] with a 2-D B, or the reverse), its gradient sums over the batch: the batch is folded into
        the reduction (dB = A'^T dC' with A' = A as [batch M, K]), so that a wgrad kernel reducing the batch in
        separate partial sums is a split of that reduction (standard `split:S`, or `any_order`). dC has C's shape.
        Operands of one dimension are refused."""
        if self.op != "matmul":
            raise ValueError("exactref: backward() applies to a matmul reference, not to %s" % self.op)
        A, B = (to_numpy(t, name) for t, name in ((self._keep[2], "A"), (self._keep[3], "B")))
        if A.ndim < 2 or B.ndim < 2:
            raise ValueError("exactref: backward(): A and B need at least 2 dimensions (shapes %s and %s)"
                             % (A.shape, B.shape))
        g = to_numpy(dC, "dC")
        format_of(g.dtype)
        if g.shape != tuple(self.shape):
            raise ValueError("exactref: backward(): dC has shape %s, not C's %s" % (g.shape, tuple(self.shape)))
        M, K, N = A.shape[-2], A.shape[-1], B.shape[-1]
        At, Bt = np.swapaxes(A, -1, -2), np.swapaxes(B, -1, -2)
        if A.shape[:-2] == B.shape[:-2]:
            return matmul(g, Bt), matmul(At, g)
        if B.ndim == 2:  # B shared by the batch: dB = sum over the batch of A_b^T dC_b
            return matmul(g, Bt), matmul(A.reshape(-1, K).T, g.reshape(-1, N))
        if A.ndim == 2:  # A shared: dA = sum over the batch of dC_b B_b^T
            gm = np.moveaxis(g, -2, 0).reshape(M, -1)      # [M, batch N]
            return matmul(gm, Bt.reshape(-1, K)), matmul(At, g)
        raise ValueError("exactref: backward(): batch shapes %s and %s: only equal batches or a 2-D operand are "
                         "supported" % (A.shape[:-2], B.shape[:-2]))

    def cast(self, dtype: DType) -> ChainReference:
        """A storage rounding: the value rounded to nearest even into `dtype` (as the kernel stores it): a chain."""
        return ChainReference._extend(self, ("cast", numpy_dtype(dtype)))

    def gelu(self, ulps: Optional[float] = None, approximate: str = "none") -> ChainReference:
        """gelu as torch's CUDA kernel evaluates it in the compute format: approximate="none", (x / 2)(1 + erf(x
        fl(1/sqrt 2))), erf within `ulps` (default 2, CUDA's erff); approximate="tanh", (x / 2)(1 + tanh(fl(sqrt(2/pi))
        (x + fl(0.044715) x^3))), the cube in any of its evaluation orders and the sum fused or not, tanh within
        `ulps`: a chain."""
        if approximate not in ("none", "tanh"):
            raise ValueError("exactref: gelu(approximate=%r): expected 'none' or 'tanh'" % (approximate,))
        return ChainReference._extend(self, ("gelu" if approximate == "none" else "gelu_tanh", ulps))

    def silu(self, ulps: Optional[float] = None) -> ChainReference:
        """silu as x / (1 + exp(-x)) or x * sigmoid(x) in the compute format (either form), exp within `ulps` (default
        2, CUDA's expf; tl.exp with math="triton"): a chain."""
        return ChainReference._extend(self, ("silu", ulps))

    def exp(self, ulps: Optional[float] = None) -> ChainReference:
        """exp of this result, within `ulps` (default 2, CUDA's expf; with math=triton, ex2.approx of the rounded
        product x fl(log2 e), as Triton's tl.exp): a chain."""
        return ChainReference._extend(self, ("exp", ulps))

    def exp2(self, ulps: Optional[float] = None) -> ChainReference:
        """2^x within `ulps` (default 2, exp2f; ex2.approx): a chain."""
        return ChainReference._extend(self, ("exp2", ulps))

    def log(self, ulps: Optional[float] = None) -> ChainReference:
        """log(x) within `ulps` (default 1, logf; with math=triton a subnormal x is flushed to 0 first): a chain."""
        return ChainReference._extend(self, ("log", ulps))

    def tanh(self, ulps: Optional[float] = None) -> ChainReference:
        """tanh(x) within `ulps` (default 2, tanhf): a chain."""
        return ChainReference._extend(self, ("tanh", ulps))

    def sigmoid(self, ulps: Optional[float] = None) -> ChainReference:
        """1 / (1 + exp(-x)) in the compute format, exp within `ulps` (default 2); the division correctly rounded, or
        within 2 ulps with math=triton: a chain."""
        return ChainReference._extend(self, ("sigmoid", ulps))

    def erf(self, ulps: Optional[float] = None) -> ChainReference:
        """erf(x) within `ulps` (default 2, erff): a chain."""
        return ChainReference._extend(self, ("erf", ulps))

    def rsqrt(self, ulps: Optional[float] = None) -> ChainReference:
        """1 / sqrt(x) within `ulps` (default 2, rsqrtf; with math=triton rsqrt.approx.ftz, a subnormal x giving +inf):
        a chain."""
        return ChainReference._extend(self, ("rsqrt", ulps))

    def quantize(self, dtype: DType = "float8_e4m3fn", granularity: Granularity = "tensor",
                 recipe: str = "amax") -> QuantizeReference:
        """This result quantised with an amax, as a kernel whose epilogue quantises its accumulator does
        (er_quantize_ref; exactref.quantize for the arguments and recipes, MX and NVFP4 included): three outputs, q,
        amax and scale, checked together by covers() under this reference's standard."""
        qf, gran, block, rec = _quant_args(dtype, granularity, recipe)
        return QuantizeReference(
            _ffi.quantize_ref(self._ptr, qf, gran, block, rec), (self,), tuple(self.shape), "quantize"
        )

    def exact(self, dtype: DType = "float32") -> np.ndarray:
        """The exact result correctly rounded to dtype, as an array of the result's shape (matmul, sum, mean, max;
        attention's O)."""
        out = np.empty(self.shape, dtype=numpy_dtype(dtype))
        view = self._out_view(out, "the exact output", writable=True)
        _ffi.rounded(view.buf, self._ptr)
        return out

    def emulate(
        self, standard: str, dtype: DType = "float32", options: Optional[str] = None, **kwargs: Any
    ) -> np.ndarray:
        """The exact output a correct implementation of a fully fixed standard produces, as an array of dtype."""
        std = _standard(standard, options, kwargs)
        out = np.empty(self.shape, dtype=numpy_dtype(dtype))
        view = self._out_view(out, "the emulated output", writable=True)
        _ffi.emulate(self._ptr, view.buf, std)
        return out


def tensor(x: ArrayLike) -> Reference:
    """The reference of x's own values (er_tensor_ref): exact, so covers() accepts x rounded to nearest into the
    output's dtype; the base of elementwise chains: er.tensor(x).gelu().cast("float16")."""
    a = to_numpy(x, "x")
    va = View(a, "x")
    return Reference(_ffi.tensor_ref(va.buf), (va, x), a.shape, "tensor")


def gelu(x: ArrayLike, ulps: Optional[float] = None, approximate: str = "none") -> ChainReference:
    """gelu of each element of x as torch's CUDA kernel computes it in the compute format (er.tensor(x).gelu())."""
    return tensor(x).gelu(ulps, approximate)


def silu(x: ArrayLike, ulps: Optional[float] = None) -> ChainReference:
    """silu of each element of x, x / (1 + exp(-x)) in the compute format (er.tensor(x).silu())."""
    return tensor(x).silu(ulps)


def relu(x: ArrayLike) -> ChainReference:
    """max(x, 0) of each element of x (er.tensor(x).relu())."""
    return tensor(x).relu()


def _unary(name):
    def fn(x: ArrayLike, ulps: Optional[float] = None) -> ChainReference:
        return getattr(tensor(x), name)(ulps)
    fn.__name__ = name
    fn.__doc__ = "%s of each element of x in the compute format (er.tensor(x).%s(ulps); see Reference.%s)." % (
        name,
        name,
        name,
    )
    return fn


exp, exp2, log, tanh, sigmoid, erf, rsqrt = (
    _unary(n) for n in ("exp", "exp2", "log", "tanh", "sigmoid", "erf", "rsqrt")
)


def matmul(A: ArrayLike, B: ArrayLike) -> Reference:
    """The exact reference of A @ B (numpy matmul semantics, 1-D operands included; batch dims broadcast)."""
    return _matmul(A, B, None)


def _on_cuda(t) -> bool:
    """Whether t is a CUDA torch tensor."""
    return type(t).__module__.startswith("torch") and getattr(t, "device", None) is not None and t.device.type == "cuda"


def cuda_available() -> bool:
    """True when the library was built with the CUDA runtime (the device entry points work)."""
    return _ffi.cuda_available()


def cuda_trim() -> None:
    """Returns to CUDA the device memory the library's pools keep between device checks for reuse (up to a quarter
    of each device's memory; er_cuda_trim) and the pinned host buffers it keeps (up to 1 GiB), e.g. before a
    workload that needs them."""
    _ffi.cuda_trim()


def matmul_covers_device(A: Any, B: Any, out: Any, standard: str = "any_order", options: Optional[str] = None,
                         stream: Any = None, **kwargs: Any) -> Result:
    """covers() of out = A @ B with A, B and out CUDA torch tensors (2-D, or batched with the same or broadcast batch
    dimensions), the reference computed on the GPU where they are (er_matmul_covers_device): an fp64 GEMM and the
    fast path's certified decisions there, the undecided elements exactly on the host. Outside the GPU path's scope
    (docs/reference/cuda.md) the tensors are copied back and checked on the host; the result is the same as
    er.matmul(A, B).covers(out) on host copies; the per-element classes stay on the GPU until first read
    (er_report_keep_on_device). stream: a torch.cuda.Stream (default: the current stream)."""
    _check_stream(stream, "matmul_covers_device")
    va, vb, vo = DeviceView(A, "A"), DeviceView(B, "B"), DeviceView(out, "out")
    if va.tensor.dim() < 2 or vb.tensor.dim() < 2:
        raise ValueError("exactref: matmul_covers_device: A and B need at least 2 dimensions")
    if stream is None:
        import torch
        stream = torch.cuda.current_stream(va.tensor.device)
    std = _standard(standard, options, kwargs)
    rep = _ffi.matmul_covers_device(va.buf, vb.buf, vo.buf, std, stream.cuda_stream)
    return Result(rep, tuple(vo.tensor.shape))


def _check_stream(stream, fn):
    """stream: None or a torch.cuda.Stream (an object whose cuda_stream is an integer handle), checked before anything
    crosses into C."""
    if stream is None:
        return
    handle = getattr(stream, "cuda_stream", None)
    if not _check.is_integer(handle) or not 0 <= handle < 1 << 64:
        raise TypeError("exactref: %s: stream must be a torch.cuda.Stream or None, not %s"
                        % (fn, type(stream).__name__))


def softmax_covers_device(x: Any, out: Any, dim: int = -1, standard: str = "any_order", options: Optional[str] = None,
                          stream: Any = None, **kwargs: Any) -> Result:
    """covers() of out = softmax(x, dim) with x and out CUDA torch tensors of the same shape, the sets computed on the
    GPU where they are (er_softmax_covers_device): each row's sets in double with the host's operations there, the
    rows the GPU does not decide on the host. Outside the GPU path's scope (docs/reference/cuda.md) the tensors are
    copied back and checked on the host; the result is the same as er.softmax(x, dim).covers(out) on host copies.
    stream: a torch.cuda.Stream (default: the current stream)."""
    return _rows_covers_device("softmax_covers_device", x, out, dim, standard, options, stream, kwargs)


def log_softmax_covers_device(x: Any, out: Any, dim: int = -1, standard: str = "any_order",
                              options: Optional[str] = None, stream: Any = None, **kwargs: Any) -> Result:
    """covers() of out = log_softmax(x, dim) with x and out CUDA torch tensors of the same shape
    (er_log_softmax_covers_device): each row's maximum and sums on the GPU, its two logs on the host, every element's
    set on the GPU, the rows the GPU does not decide on the host. Outside the GPU path's scope the tensors are copied
    back and checked on the host; the result is the same as er.log_softmax(x, dim).covers(out) on host copies."""
    return _rows_covers_device("log_softmax_covers_device", x, out, dim, standard, options, stream, kwargs)


def _rows_covers_device(fn, x, out, dim, standard, options, stream, kwargs):
    """softmax_covers_device and log_softmax_covers_device (fn, their name)."""
    _check_stream(stream, fn)
    vx, vo = DeviceView(x, "x"), DeviceView(out, "out")
    if vx.tensor.dim() == 0:
        raise ValueError("exactref: %s of a scalar: x needs at least 1 dimension" % fn)
    dim = _check.dim(dim, fn, vx.tensor.dim())
    if stream is None:
        import torch
        stream = torch.cuda.current_stream(vx.tensor.device)
    std = _standard(standard, options, kwargs)
    rep = _ffi.softmax_covers_device(vx.buf, dim, vo.buf, std, stream.cuda_stream, fn.startswith("log"))
    return Result(rep, tuple(vo.tensor.shape))


def _sbwd_covers_device(fn, dy, y, out, dim, standard, options, stream, kwargs):
    """softmax_backward_covers_device and log_softmax_backward_covers_device (fn, the function's name)."""
    _check_stream(stream, fn)
    vd, vy, vo = DeviceView(dy, "dy"), DeviceView(y, "y"), DeviceView(out, "out")
    if vy.tensor.dim() == 0:
        raise ValueError("exactref: %s of a scalar: y needs at least 1 dimension" % fn)
    if tuple(vd.tensor.shape) != tuple(vy.tensor.shape):
        raise ValueError("exactref: %s: dy has shape %s and y %s; they must be the same"
                         % (fn, tuple(vd.tensor.shape), tuple(vy.tensor.shape)))
    dim = _check.dim(dim, fn, vy.tensor.dim())
    if stream is None:
        import torch
        stream = torch.cuda.current_stream(vy.tensor.device)
    std = _standard(standard, options, kwargs)
    rep = _ffi.softmax_backward_covers_device(vd.buf, vy.buf, dim, vo.buf, std, stream.cuda_stream,
                                              fn.startswith("log"))
    return Result(rep, tuple(vo.tensor.shape))


def softmax_backward_covers_device(dy: Any, y: Any, out: Any, dim: int = -1, standard: str = "any_order",
                                   options: Optional[str] = None, stream: Any = None, **kwargs: Any) -> Result:
    """covers() of out = dx of softmax's backward pass along dim, dx = y (dy - sum(dy * y, dim)), with dy, y and out
    CUDA torch tensors of the same shape, the sets computed on the GPU where they are
    (er_softmax_backward_covers_device): each row's sum of products exactly there, D's set on the host, every
    element's set and exact result on the GPU, the rows the GPU does not decide on the host. Outside the GPU path's
    scope (docs/reference/cuda.md) the tensors are copied back and checked on the host; the result is the same as
    er.softmax_backward(dy, y, dim).covers(out) on host copies. stream: a torch.cuda.Stream (default: the current
    stream)."""
    return _sbwd_covers_device("softmax_backward_covers_device", dy, y, out, dim, standard, options, stream, kwargs)


def log_softmax_backward_covers_device(dy: Any, y: Any, out: Any, dim: int = -1, standard: str = "any_order",
                                       options: Optional[str] = None, stream: Any = None,
                                       **kwargs: Any) -> Result:
    """covers() of out = dx of log_softmax's backward pass along dim, dx = dy - exp(y) sum(dy, dim), with dy, y (the
    saved log_softmax output) and out CUDA torch tensors of the same shape, the sets computed on the GPU where they
    are (er_log_softmax_backward_covers_device): each row's sum of dy exactly there, its set on the host, every
    element's set and exact result on the GPU, the rows the GPU does not decide on the host. Outside the GPU path's
    scope (docs/reference/cuda.md) the tensors are copied back and checked on the host; the result is the same as
    er.log_softmax_backward(dy, y, dim).covers(out) on host copies. stream: a torch.cuda.Stream (default: the current
    stream)."""
    return _sbwd_covers_device("log_softmax_backward_covers_device", dy, y, out, dim, standard, options, stream,
                               kwargs)


def rmsnorm_covers_device(x: Any, out: Any, weight: Any = None, eps: float = 1e-6, standard: str = "any_order",
                          options: Optional[str] = None, stream: Any = None, **kwargs: Any) -> Result:
    """covers() of out = rmsnorm(x, weight, eps) over the last dimension with x, out (and weight, a vector, or None)
    CUDA torch tensors, the sets computed on the GPU where they are (er_rmsnorm_covers_device): each row's sum of
    squares exactly there, its rstd set on the host, every element's set and exact result in double on the GPU, the
    rows the GPU does not decide on the host. Outside the GPU path's scope (docs/reference/cuda.md) the tensors are
    copied back and checked on the host; the result is the same as er.rmsnorm(x, weight, eps).covers(out) on host
    copies. stream: a torch.cuda.Stream (default: the current stream)."""
    _check_stream(stream, "rmsnorm_covers_device")
    eps = _check.real(eps, "rmsnorm_covers_device", "eps", lo=0)
    vx, vo = DeviceView(x, "x"), DeviceView(out, "out")
    vw = None if weight is None else DeviceView(weight, "weight")
    if vx.tensor.dim() == 0:
        raise ValueError("exactref: rmsnorm_covers_device of a scalar: x needs at least 1 dimension")
    if vw is not None and (vw.tensor.dim() != 1 or vw.tensor.shape[0] != vx.tensor.shape[-1]):
        raise ValueError("exactref: rmsnorm_covers_device: weight must be a vector of length %d, not of shape %s"
                         % (vx.tensor.shape[-1], tuple(vw.tensor.shape)))
    if stream is None:
        import torch
        stream = torch.cuda.current_stream(vx.tensor.device)
    std = _standard(standard, options, kwargs)
    rep = _ffi.rmsnorm_covers_device(vx.buf, None if vw is None else vw.buf, eps, vo.buf, std, stream.cuda_stream)
    return Result(rep, tuple(vo.tensor.shape))


def layer_norm_covers_device(x: Any, out: Any, normalized_shape: Union[int, Sequence[int]], weight: Any = None,
                             bias: Any = None, eps: float = 1e-5, standard: str = "any_order",
                             options: Optional[str] = None, stream: Any = None, **kwargs: Any) -> Result:
    """covers() of y = layer_norm(x, normalized_shape, weight, bias, eps) with x, y (and weight and bias, of the
    normalised shape, or None) CUDA torch tensors, the sets computed on the GPU where they are
    (er_layernorm_covers_device): each row's sums exactly there, its mean's and rstd's sets on the host, every
    element's set and exact result on the GPU, the rows the GPU does not decide on the host. Outside the GPU path's
    scope (docs/reference/cuda.md) the tensors are copied back and checked on the host; the result is the same as
    er.layer_norm(x, normalized_shape, weight, bias, eps).covers(y) on host copies. mean and rstd (one value per row)
    are checked on the host: er.layer_norm(...).covers((y, mean, rstd)). stream: a torch.cuda.Stream (default: the
    current stream)."""
    fn = "layer_norm_covers_device"
    _check_stream(stream, fn)
    ns = _check.shape(normalized_shape, fn, "normalized_shape")
    eps = _check.real(eps, fn, "eps", lo=0)
    vx, vo = DeviceView(x, "x"), DeviceView(out, "out")
    k = len(ns)
    if k < 1 or k > vx.tensor.dim() or tuple(vx.tensor.shape[vx.tensor.dim() - k:]) != ns:
        raise ValueError("exactref: %s: normalized_shape %s is not the end of x's shape %s"
                         % (fn, ns, tuple(vx.tensor.shape)))
    vw, vb = (None if t is None else DeviceView(t, name) for t, name in ((weight, "weight"), (bias, "bias")))
    for v, name in ((vw, "weight"), (vb, "bias")):
        if v is not None and tuple(v.tensor.shape) != ns:
            raise ValueError("exactref: %s: %s has shape %s, not the normalized shape %s"
                             % (fn, name, tuple(v.tensor.shape), ns))
    if stream is None:
        import torch
        stream = torch.cuda.current_stream(vx.tensor.device)
    std = _standard(standard, options, kwargs)
    rep = _ffi.layernorm_covers_device(vx.buf, k, None if vw is None else vw.buf, None if vb is None else vb.buf, eps,
                                       vo.buf, std, stream.cuda_stream)
    return Result(rep, tuple(vo.tensor.shape))


def scaled_matmul(A: ArrayLike, B: ArrayLike, scale_a, scale_b, block: Optional[int] = None) -> Reference:
    """The exact reference of (A @ B) * scale_a * scale_b with per-tensor fp32 scales, as torch._scaled_mm computes
    on fp8 inputs (standards: "mma:sm90" with outer="any", and promote=4 for use_fast_accum=False).

    With block=n, a block-scaled matmul (MX: n = 32 with float8_e8m0fnu scales; NVFP4: n = 16 with float8_e4m3fn
    scales): A (M x K) and B (K x N) in fp8, fp6 or fp4, scale_a an array of shape (M, ceil(K / n)) (one scale per
    block of n along each row of A), scale_b of shape (ceil(K / n), N) (along each column of B). The result is
    sum_k (a_ik sa_i,k/n)(b_kj sb_k/n,j): each operand times its block's scale is exact (a few significant bits
    times a power of two, or times an e4m3 value), so the reference is er.matmul of the scaled operands, held exactly
    in float16 where every value fits (its products are exact in fp32), else float32, else float64; judge a kernel
    that adds the products in fp32 under the default any_order (docs/algorithms/quantize.md, "Block-scaled matmul").

    With arrays for both scales and no block, rowwise scales as torch._scaled_mm's rowwise fp8 recipe takes them:
    scale_a one fp32 value per row of A (shape (M,) or (M, 1)), scale_b one per column of B ((N,) or (1, N)); element
    (i, j) is the accumulator times scale_a[i] and scale_b[j] (er_scaled_matmul_rowwise). Batched operands (A of
    shape (..., M, K), B (..., K, N), their batch dimensions broadcasting as numpy's matmul) take scales per matrix:
    scale_a of A's batch shape then (M,) or (M, 1), scale_b of B's batch shape then (N,) or (1, N)."""
    arrays = [isinstance(sc, np.ndarray) or type(sc).__module__.startswith("torch") for sc in (scale_a, scale_b)]
    if block is None and not any(arrays):
        return _matmul(
            A, B, (_check.real(scale_a, "scaled_matmul", "scale_a"), _check.real(scale_b, "scaled_matmul", "scale_b"))
        )
    n = None if block is None else _check.integer(block, "scaled_matmul", "block", 1)
    for sc, name, is_array in ((scale_a, "scale_a", arrays[0]), (scale_b, "scale_b", arrays[1])):
        if not is_array:
            raise TypeError("exactref: scaled_matmul: %s scales take arrays for both scale_a and scale_b; %s is %s"
                            % ("rowwise" if n is None else "block", name, type(sc).__name__))
    a, b = to_numpy(A, "A"), to_numpy(B, "B")
    format_of(a.dtype, "A")
    format_of(b.dtype, "B")
    if n is not None and (a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]):
        raise ValueError("exactref: scaled_matmul: block scales take matrices A (M x K) and B (K x N), not shapes %s "
                         "and %s" % (a.shape, b.shape))
    if n is None and (a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]):
        raise ValueError("exactref: scaled_matmul: rowwise scales take matrices A (..., M, K) and B (..., K, N), not "
                         "shapes %s and %s" % (a.shape, b.shape))
    sa, sb = to_numpy(scale_a, "scale_a"), to_numpy(scale_b, "scale_b")
    return _scaled_rowwise(A, B, a, b, sa, sb) if n is None else _scaled_blocks(a, b, sa, sb, n)


def _scaled_rowwise(A, B, a, b, sa, sb):
    """scaled_matmul with one fp32 scale per row of A and per column of B (er_scaled_matmul_rowwise)."""
    views = [View(a, "A"), View(b, "B")]
    for sv, name, n, lead in ((sa, "scale_a", a.shape[-2], a.shape[:-2]), (sb, "scale_b", b.shape[-1], b.shape[:-2])):
        shapes = [lead + (n,), lead + ((n, 1) if name == "scale_a" else (1, n))]
        if sv.dtype != np.float32:
            raise TypeError("exactref: scaled_matmul: %s holds fp32 scales (float32), not %s" % (name, sv.dtype))
        if sv.shape not in shapes:
            raise ValueError("exactref: scaled_matmul: %s has shape %s; rowwise it must be %s or %s"
                             % (name, sv.shape, shapes[0], shapes[1]))
        if not np.all(np.isfinite(sv)):
            raise ValueError("exactref: scaled_matmul: %s holds a value that is not finite" % name)
        views.append(View(sv, name))
    ptr = _ffi.scaled_matmul_rowwise(*(v.buf for v in views))
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return Reference(ptr, tuple(views) + (A, B), tuple(batch) + (a.shape[-2], b.shape[-1]), "scaled_matmul")


def _scaled_blocks(a, b, sa, sb, n):
    """scaled_matmul with a scale per block of n along K (quantize.md, Lemma Q6): er.matmul of the operands times their
    blocks' scales, exact in the narrowest of float16, float32 and float64 that holds every value (float16's
    products are exact in fp32: the any-order set then rounds no product)."""
    (M, K), N = a.shape, b.shape[1]
    nb = -(-K // n)
    scaled = []
    for x, sv, name, want, axis in ((a, sa, "scale_a", (M, nb), 1), (b, sb, "scale_b", (nb, N), 0)):
        format_of(sv.dtype, name)
        if np.float64 in (x.dtype, sv.dtype):  # then x times its scale may need more than a double's 53 bits
            raise TypeError("exactref: scaled_matmul with block: %s and its operand take formats of at most fp32, "
                            "not float64" % name)
        if sv.shape != want:
            raise ValueError("exactref: scaled_matmul: %s has shape %s; with block=%d it must be %s"
                             % (name, sv.shape, n, want))
        full = np.repeat(sv.astype(np.float64), n, axis=axis)[:M, :K] if axis == 1 else \
            np.repeat(sv.astype(np.float64), n, axis=0)[:K, :]
        with np.errstate(invalid="ignore", over="ignore"):
            v = x.astype(np.float64) * full  # exact: at most 24 + 24 significant bits, within double's range
            for dt in (np.float16, np.float32, np.float64):
                c = v.astype(dt)
                if dt is np.float64 or bool(np.all((c.astype(np.float64) == v) | np.isnan(v))):
                    break
        scaled.append(c)
    return _matmul(scaled[0], scaled[1], None)


def _on_device(*ts):
    """Whether every given input (None skipped) is a CUDA torch tensor, in a library built with CUDA: a reference of
    them is made with Reference._later."""
    ts = [t for t in ts if t is not None]
    return bool(ts) and all(_on_cuda(t) for t in ts) and _ffi.cuda_available()


def _like(t, name):
    """A stand-in of CUDA tensor t for a constructor's checks: a numpy array of its dtype and shape whose elements
    all read one zero (none of t's data copied)."""
    dtype = to_numpy(t.detach().new_empty(0), name).dtype
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape=tuple(t.shape), strides=(0,) * t.dim())


def _matmul(A, B, scales, now=False):
    if scales is None and _on_device(A, B) and A.dim() >= 2 and B.dim() >= 2:
        shape = _matmul_shape(_like(A, "A"), _like(B, "B"))
        if not now:
            return Reference._later(lambda: _matmul(A, B, None, True), (None, None, A, B), shape, "matmul")
    if scales is None and _on_device(A, B) and A.dim() >= 2 and B.dim() >= 2 and A.device == B.device:
        # the host reference: the library copies A and B and computes its fp64 GEMM on the GPU (er_matmul_device)
        import torch
        va, vb = DeviceView(A, "A"), DeviceView(B, "B")
        with torch.cuda.device(A.device):
            ptr = _ffi.matmul_device(va.buf, vb.buf, torch.cuda.current_stream(A.device).cuda_stream)
        return Reference(ptr, (None, None, A, B), shape, "matmul")
    a, b = to_numpy(A, "A"), to_numpy(B, "B")
    res_shape = _matmul_shape(a, b)
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    va, vb = View(a2, "A"), View(b2, "B")
    ptr = _ffi.matmul(va.buf, vb.buf) if scales is None else _ffi.scaled_matmul(va.buf, vb.buf, scales[0], scales[1])
    return Reference(ptr, (va, vb, A, B), res_shape, "matmul" if scales is None else "scaled_matmul")


def _matmul_shape(a, b):
    """numpy's shape of a @ b, the operands' dtypes and shapes checked."""
    for x, name in ((a, "A"), (b, "B")):
        format_of(x.dtype)  # TypeError for an unsupported dtype, before anything else
        if x.ndim == 0:
            raise ValueError("exactref: matmul: %s is a scalar; it needs at least 1 dimension" % name)
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError("exactref: matmul: A has %d columns but B has %d rows (shapes %s and %s)"
                         % (a2.shape[-1], b2.shape[-2], a.shape, b.shape))
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]) if a2.ndim > 2 or b2.ndim > 2 else ()
    except ValueError:
        raise ValueError(
            "exactref: matmul: batch dimensions %s and %s do not broadcast" % (a.shape[:-2], b.shape[:-2])
        ) from None
    return tuple(batch) + ((a2.shape[-2],) if a.ndim > 1 else ()) + ((b2.shape[-1],) if b.ndim > 1 else ())


def _reduce(name, x, dim):
    a = to_numpy(x, "x")
    format_of(a.dtype)
    if a.ndim == 0:
        raise ValueError("exactref: %s of a scalar: x needs at least 1 dimension" % name)
    d = _check.dim(dim, name, a.ndim)
    if a.ndim > _ffi.MAX_DIMS - 1:
        raise ValueError("exactref: %s takes at most %d dimensions (x has %d)" % (name, _ffi.MAX_DIMS - 1, a.ndim))
    if name == "max" and a.shape[d] == 0:
        raise ValueError("exactref: max over an empty dimension has no value")
    shape = a.shape[:d] + a.shape[d + 1:]
    va = View(a, "x")
    return (_MaxReference if name == "max" else Reference)(_ffi.along(name, va.buf, d), (va, x), shape, name)


class _MaxReference(Reference):
    """max's reference: it adds and multiplies nothing, so an accumulator or an fma rule given to it is refused, not
    ignored (the library refuses the values other than the defaults; here any value given)."""

    @staticmethod
    def _no_arithmetic(standard, options, kwargs):
        text = " ".join(t for t in (standard, options) if isinstance(t, str))
        given = [k for k in ("compute", "fma") if k in kwargs or re.search(r"(^|[\s,:])%s=" % k, text)]
        if given:
            raise ExactrefValueError("ER_ERR_STANDARD", "exactref: max adds and multiplies nothing: %s %s not apply "
                                     "to it (it takes overflow= alone)"
                                     % (" and ".join(k + "=" for k in given), "does" if len(given) == 1 else "do"))

    def covers(self, out: ArrayLike, standard: str = "any_order", options: Optional[str] = None,
               **kwargs: Any) -> Result:
        self._no_arithmetic(standard, options, kwargs)
        return super().covers(out, standard, options, **kwargs)

    def enclosure(self, standard: str = "any_order", dtype: DType = "float32", options: Optional[str] = None,
                  output: Union[int, str] = 0, **kwargs: Any) -> Enclosure:
        self._no_arithmetic(standard, options, kwargs)
        return super().enclosure(standard, dtype, options, output, **kwargs)

    def emulate(self, standard: str, dtype: DType = "float32", options: Optional[str] = None,
                **kwargs: Any) -> np.ndarray:
        self._no_arithmetic(standard, options, kwargs)
        return super().emulate(standard, dtype, options, **kwargs)


def sum(x: ArrayLike, dim: int = -1) -> Reference:  # noqa: A001 - the op's name
    """The exact reference of x summed over dimension dim (every standard of a matmul applies)."""
    return _reduce("sum", x, dim)


def mean(x: ArrayLike, dim: int = -1) -> Reference:
    """The exact reference of the mean of x over dim (option mean="divide"|"reciprocal"|"either")."""
    return _reduce("mean", x, dim)


def max(x: ArrayLike, dim: int = -1) -> Reference:  # noqa: A001
    """The exact reference of the maximum of x over dim (exact: NaN if any element is NaN)."""
    return _reduce("max", x, dim)


def _softmax_like(name, x, dim, now=False):
    later = not now and _on_device(x)
    a = _like(x, "x") if later else to_numpy(x, "x")
    format_of(a.dtype)
    if a.ndim == 0:
        raise ValueError("exactref: %s of a scalar: x needs at least 1 dimension" % name)
    d = _check.dim(dim, name, a.ndim)
    if later:
        ref = Reference._later(lambda: _softmax_like(name, x, d, True), (None, x), a.shape, name)
    else:
        va = View(a, "x")
        ref = Reference(_ffi.along(name, va.buf, d), (va, x), a.shape, name)
    ref._dim = d
    return ref


def softmax(x: ArrayLike, dim: int = -1) -> Reference:
    """The exact reference of softmax(x) along dim (options exp_ulps=..., div="divide"|"reciprocal"|"either")."""
    return _softmax_like("softmax", x, dim)


def log_softmax(x: ArrayLike, dim: int = -1) -> Reference:
    """The exact reference of log_softmax(x) along dim (options exp_ulps=..., log_ulps=...)."""
    return _softmax_like("log_softmax", x, dim)


def _gradient_and(op, dy, t, name, later=False):
    """dy and the array t (named name) of a backward pass as numpy arrays, checked: supported dtypes, t not a scalar,
    the same shape (later: stand-ins of CUDA tensors, _like's, none of their data copied)."""
    g, a = (_like(dy, "dy"), _like(t, name)) if later else (to_numpy(dy, "dy"), to_numpy(t, name))
    format_of(g.dtype)
    format_of(a.dtype)
    if a.ndim == 0:
        raise ValueError("exactref: %s of a scalar: %s needs at least 1 dimension" % (op, name))
    if g.shape != a.shape:
        raise ValueError(
            "exactref: %s: dy has shape %s and %s %s; they must be the same" % (op, g.shape, name, a.shape)
        )
    return g, a


def _backward(name, dy, y, dim, now=False):
    # softmax's and log_softmax's backward passes of CUDA tensors: made on the host on first use (their device paths
    # read them there)
    later = not now and _on_device(dy, y)
    g, a = _gradient_and(name, dy, y, "y", later)
    d = _check.dim(dim, name, a.ndim)
    if later:
        ref = Reference._later(lambda: _backward(name, dy, y, d, True), (None, dy, None, y), a.shape, name)
    else:
        vg, va = View(g, "dy"), View(a, "y")
        ptr = _ffi.softmax_backward(vg.buf, va.buf, d, log=name.startswith("log"))
        ref = Reference(ptr, (vg, dy, va, y), a.shape, name)
    ref._dim = d
    return ref


def softmax_backward(dy: ArrayLike, y: ArrayLike, dim: int = -1) -> Reference:
    """The exact reference of softmax's backward pass along dim, dx = y (dy - sum(dy * y, dim)), from the kernel's
    saved softmax output y and the gradient dy of the same shape (torch's _softmax_backward_data): covers(dx). The
    set holds every result of the sum in any order in the compute format, its products rounded or fused, then dx as
    y (dy - D), dy y - y D, or either with a fused multiply-add (docs/algorithms/softmax-backward.md)."""
    return _backward("softmax_backward", dy, y, dim)


def log_softmax_backward(dy: ArrayLike, y: ArrayLike, dim: int = -1) -> Reference:
    """The exact reference of log_softmax's backward pass along dim, dx = dy - exp(y) sum(dy, dim), from the kernel's
    saved log_softmax output y and the gradient dy (torch's _log_softmax_backward_data): covers(dx), exp within
    exp_ulps (default 2) and the sum in any order (docs/algorithms/softmax-backward.md, Theorem B2)."""
    return _backward("log_softmax_backward", dy, y, dim)


def rmsnorm(x: ArrayLike, weight: Optional[ArrayLike] = None, eps: float = 1e-6) -> Reference:
    """The exact reference of rmsnorm over x's last dimension (options mean=..., rsqrt_ulps=...)."""
    return _rmsnorm(x, weight, eps)


def _rmsnorm(x, weight, eps, now=False):
    later = not now and _on_device(x, weight)
    a = _like(x, "x") if later else to_numpy(x, "x")
    format_of(a.dtype)
    eps = _check.real(eps, "rmsnorm", "eps", lo=0)
    if a.ndim == 0:
        raise ValueError("exactref: rmsnorm of a scalar: x needs at least 1 dimension")
    va = None if later else View(a, "x")
    keep = [va, x]
    wbuf = None
    if weight is not None:
        w = _like(weight, "weight") if later else to_numpy(weight, "weight")
        format_of(w.dtype)
        if w.ndim != 1 or w.shape[0] != a.shape[-1]:
            raise ValueError(
                "exactref: rmsnorm: weight must be a vector of length %d, not of shape %s" % (a.shape[-1], w.shape)
            )
        vw = None if later else View(w, "weight")
        keep += [vw, weight]
        wbuf = None if later else vw.buf
    if later:
        ref = Reference._later(lambda: _rmsnorm(x, weight, eps, True), tuple(keep), a.shape, "rmsnorm")
    else:
        ref = Reference(_ffi.rmsnorm(va.buf, wbuf, eps), tuple(keep), a.shape, "rmsnorm")
    ref._eps = eps
    return ref


class Results:
    """The verdicts of a multi-output op (layernorm): one Result per checked output, by name."""

    def __init__(self, results):
        self.results = results  # {"y": Result, "mean": Result, "rstd": Result}, checked outputs only
        for name, r in results.items():
            setattr(self, name, r)

    def all(self) -> bool:
        """True when every checked output passes."""
        return all(r.all() for r in self.results.values())

    def __bool__(self):
        """The verdict, as all(): `assert ref.covers((y, mean, rstd))` fails when an element of any output fails."""
        return self.all()

    def plot(self, output: str, path: Optional[str] = None, **kwargs: Any):
        """Result.plot of one checked output, by name."""
        if output not in self.results:
            raise ExactrefValueError("ER_ERR_INVALID", "exactref: plot: the checked outputs are %s; got %r"
                                     % (", ".join(self.results), output))
        return self.results[output].plot(path, **kwargs)

    def assert_all(self) -> None:
        """Raises AssertionError with the failing outputs' reports."""
        bad = [r.report for r in self.results.values() if not r.all()]
        if bad:
            raise AssertionError("exactref: kernel output not covered\n" + "\n".join(bad))

    def __str__(self):
        return "\n".join(r.report for r in self.results.values())

    def __repr__(self):
        return "<exactref.Results %s: %s>" % ("pass" if self.all() else "FAIL",
                                               ", ".join("%s %s" % (k, "pass" if r.all() else "FAIL")
                                                         for k, r in self.results.items()))


class ChainReference(Reference):
    """A reduction (matmul, scaled_matmul or sum) followed by elementwise stages (er_chain): built by add, mul, relu
    and cast on a reference; covers() takes the standard of the reduction, and the stages compute in its compute
    format (float32 by default)."""

    _KINDS = _ffi.STAGE_KINDS

    _UNARY = ("gelu", "gelu_tanh", "silu", "exp", "exp2", "log", "tanh", "sigmoid", "erf", "rsqrt")

    @classmethod
    def _extend(cls, ref, stage):
        base, stages = (ref._base, ref._stages) if isinstance(ref, ChainReference) else (ref, ())
        return cls(base, stages + (stage,))

    def __init__(self, base, stages):
        c_shape = base._c_shape()
        keep, c_stages = [base], []
        for kind, arg in stages:
            view, scalar, fmt, ref = None, 0.0, 0, None
            if kind == "cast":
                fmt = format_of(arg)
            elif kind in self._UNARY:
                scalar = _check.ulps(arg, kind)
            elif kind in ("add", "mul") and isinstance(arg, Reference):
                if tuple(arg.shape) != tuple(base.shape):
                    raise ValueError(
                        "exactref: the %s operand's output has shape %s, not the result's %s"
                        % (kind, tuple(arg.shape), tuple(base.shape))
                    )
                ref = arg._ptr
                keep.append(arg)
            elif kind in ("add", "mul"):
                if isinstance(arg, bool) or not isinstance(arg, (int, float, np.ndarray, np.generic)) and \
                        not type(arg).__module__.startswith("torch"):
                    raise TypeError("exactref: %s takes a number or an array, not %s" % (kind, type(arg).__name__))
                if isinstance(arg, (int, float, np.generic)):
                    scalar = _check.real(arg, kind, "the %s operand" % kind)
                else:
                    a = to_numpy(arg, "the %s operand" % kind)
                    try:
                        b = np.broadcast_to(a, base.shape).reshape(c_shape)
                    except ValueError:
                        raise ValueError(
                            "exactref: the %s operand of shape %s does not broadcast to the result's shape %s"
                            % (kind, a.shape, tuple(base.shape))
                        ) from None
                    v = View(b, "the %s operand" % kind)
                    keep += [v, arg]
                    view = v.buf
            c_stages.append((kind, view, scalar, fmt, ref))
        super().__init__(_ffi.chain(base._ptr, c_stages), tuple(keep), base.shape, "chain")
        self._base, self._stages = base, tuple(stages)

    def emulate(
        self, standard: str, dtype: DType = "float32", options: Optional[str] = None, **kwargs: Any
    ) -> np.ndarray:
        raise NotImplementedError("exactref: a chain is not emulated in this version")


class _MultiOutputReference(Reference):
    """An op with several outputs (OUTPUTS), checked together by covers()."""

    OUTPUTS = ()

    _args = None  # a reference of CUDA tensors with a device path for its first output: its arguments
    # (the inputs, then the op's options), as the op's function took them

    def covers(self, out: Union[ArrayLike, Sequence[Optional[ArrayLike]]], standard: str = "any_order",
               options: Optional[str] = None, **kwargs: Any) -> Union[Result, Results]:
        """Classifies the outputs against their sets. `out` is the first output, or a tuple of every output where any
        may be None (not checked). Returns Results for a tuple, a Result for the first output alone. A first output
        that is a CUDA torch tensor, with the op's inputs, is checked where it is by the op's device path where it
        has one (layer_norm, attention; the library built with CUDA), with the same result; its sets, where asked
        for, come from the host's pass on copies, and the other outputs are checked on the host."""
        single = not isinstance(out, (tuple, list))
        outs = (out,) if single else tuple(out)
        if not single and len(outs) == len(self.OUTPUTS):
            both = self._outputs_device(outs, standard, options, kwargs)
            if both is not None:
                return both
        if len(outs) == len(self.OUTPUTS) or single:
            first = outs[0]
            if first is not None and self._on_gpu(first):
                if tuple(first.shape) != tuple(self.shape):
                    raise ValueError("exactref: %s has shape %s but %s produces %s"
                                     % (self.OUTPUTS[0], tuple(first.shape), self.op, tuple(self.shape)))

                def sets():
                    return self._covers_host(to_numpy(first, self.OUTPUTS[0]), standard, options, kwargs)._bounds()
                res = self._first_device(first, standard, options, kwargs)
                res._sets = sets
                if single or all(o is None for o in outs[1:]):
                    return res if single else Results({self.OUTPUTS[0]: res})
                rest = self._covers_host((None,) + outs[1:], standard, options, kwargs)
                return Results(dict([(self.OUTPUTS[0], res)] + list(rest.results.items())))
        return self._covers_host(out, standard, options, kwargs)

    def _on_gpu(self, first):
        """Whether the first output and the inputs are CUDA torch tensors, in a library built with CUDA, and the op
        has a device path (its arguments kept)."""
        ins = self._device_inputs()
        return (ins is not None and _on_cuda(first) and all(t is None or _on_cuda(t) for t in ins)
                and _ffi.cuda_available())

    def _device_inputs(self):
        """The tensors the device path reads besides the first output (None: the op has no device path)."""
        return None

    def _first_device(self, first, standard, options, kwargs):
        """The device path's Result of the first output."""
        raise NotImplementedError

    def _outputs_device(self, outs, standard, options, kwargs):
        """Results of every output on the device path where the op has one for them all; else None."""
        return None

    def _covers_host(self, out, standard, options, kwargs):
        """covers() on the host (out as covers() takes it). The first output alone of an op of LAZY_SETS is checked
        as a one-output op's: its sets, where asked for, from a second pass."""
        nout = len(self.OUTPUTS)
        single = not isinstance(out, (tuple, list))
        if single and self.op in self.LAZY_SETS:
            return Reference.covers(self, out, standard, options, **kwargs)
        outs = (out,) + (None,) * (nout - 1) if single else tuple(out)
        if len(outs) != nout:
            raise ValueError(
                "exactref: %s has %d outputs (%s); got %d" % (self.op, nout, ", ".join(self.OUTPUTS), len(outs))
            )
        std = _standard(standard, options, kwargs)
        bufs = [None] * nout
        arrs, views = [None] * nout, []
        for i, (o, name) in enumerate(zip(outs, self.OUTPUTS)):
            if o is None:
                continue
            arr = to_numpy(o, name)
            if arr.ndim == 0:
                arr = arr.reshape(1)   # a 0-d output (torch's amax of a whole tensor) as its one element
            arrs[i] = arr
            v = self._out_view(arr, name) if i == 0 else View(arr, name)
            views.append(v)
            bufs[i] = v.buf
        if not views:
            raise ValueError("exactref: %s: every output is None" % self.op)
        shapes = [tuple(self.shape) if i == 0 else (None if a is None else tuple(a.shape)) for i, a in enumerate(arrs)]
        # an op of LAZY_SETS computes its outputs' sets when they are first read, a second pass for that output
        lazy = self.op in self.LAZY_SETS
        cache = {} if lazy else {
            i: tuple(np.empty(shapes[i], np.float64) for _ in range(3)) for i in range(nout) if arrs[i] is not None
        }
        owned = _ffi.covers_outputs_sets(self._ptr, bufs, std, [cache.get(i) for i in range(nout)])

        def later(i):  # output i's view reads arrs[i], which its Result keeps
            def sets():
                arrays = tuple(np.empty(shapes[i], np.float64) for _ in range(3))
                _ffi.covers_outputs_sets(self._ptr, [b if j == i else None for j, b in enumerate(bufs)], std,
                                         [arrays if j == i else None for j in range(nout)])
                return arrays
            return sets
        results = {name: Result(owned[i], shapes[i], arrs[i], cache[i] if i in cache else later(i))
                   for i, name in enumerate(self.OUTPUTS) if outs[i] is not None}
        return results[self.OUTPUTS[0]] if single else Results(results)


class LayerNormReference(_MultiOutputReference):
    """layernorm's reference: three outputs, y (x's shape), mean and rstd (x's leading dimensions; (1,) when every
    dimension is normalised)."""

    OUTPUTS = ("y", "mean", "rstd")
    # _args: (x, normalized_shape, weight, bias, eps) as layer_norm() took them

    def _device_inputs(self):
        return None if self._args is None else (self._args[0], self._args[2], self._args[3])

    def _first_device(self, first, standard, options, kwargs):
        x, ns, w, b, eps = self._args
        return layer_norm_covers_device(x, first, ns, w, b, eps, standard, options, **kwargs)


class QuantizeReference(_MultiOutputReference):
    """quantize's reference: three outputs, q (x's shape), and each group's amax and scale (one element per group,
    as the library counts the groups)."""

    OUTPUTS = ("q", "amax", "scale")


def _attention_args(op, arrs, scale, causal, causal_alignment, window, enable_gqa):
    """attention's options as the C call takes them (scale 0 for the real 1/sqrt(D), the window's sides), each
    checked; arrs' formats checked."""
    for a in arrs:
        format_of(a.dtype)
    _check.choice(causal_alignment, op, "causal_alignment", ("top_left", "bottom_right"))
    c_scale = 0.0  # the real 1/sqrt(D)
    if scale is not None:
        c_scale = _check.real(scale, op, "scale")
        if c_scale == 0:
            raise ExactrefValueError("ER_ERR_INVALID", "exactref: %s: scale=0 is not supported (every key would "
                                     "weigh the same; pass q = 0)" % op)
    c_causal = int(_check.flag(causal, op, "causal"))
    sides = None
    if window is not None:
        if not isinstance(window, (tuple, list)) or len(window) != 2:
            raise ExactrefValueError(
                "ER_ERR_INVALID", "exactref: %s: window must be (left, right), not %r" % (op, window)
            )
        sides = []
        for w, side in zip(window, ("left", "right")):
            if w is None or (_check.is_integer(w) and w == -1):
                sides.append(_check.INT64_MAX)  # unbounded: every key on that side
            elif _check.is_integer(w) and 0 <= w <= _check.INT64_MAX:
                sides.append(int(w))
            else:
                raise ExactrefValueError(
                    "ER_ERR_INVALID",
                    "exactref: %s: window sides are integers in [0, 2^63), -1 "
                    "or None; the %s side got %r" % (op, side, w),
                )
    c_gqa = int(_check.flag(enable_gqa, op, "enable_gqa"))
    return c_scale, c_causal, sides, c_gqa


class AttentionReference(_MultiOutputReference):
    """attention's reference: two outputs, out (q's shape with v's head dimension last) and lse (out's shape without
    its last dimension)."""

    OUTPUTS = ("out", "lse")
    # _args: (q, k, v, options) of a reference of CUDA tensors, the options attention_covers_device's keywords

    def _device_inputs(self):
        return None if self._args is None else self._args[:3]

    def _first_device(self, first, standard, options, kwargs):
        q, k, v, opts = self._args
        return attention_covers_device(q, k, v, first, standard=standard, options=options, **opts, **kwargs)

    def _outputs_device(self, outs, standard, options, kwargs):
        """(out, lse) of CUDA tensors (either None) on the device path together; their sets, where asked for, from
        the host's pass on copies."""
        given = [o for o in outs if o is not None]
        if not given or not all(self._on_gpu(o) for o in given):
            return None
        out, lse = outs
        want = {"out": tuple(self.shape), "lse": tuple(self.shape[:-1])}
        for name, o in (("out", out), ("lse", lse)):
            if o is not None and tuple(o.shape) != want[name]:
                raise ValueError("exactref: %s has shape %s but attention produces %s"
                                 % (name, tuple(o.shape), want[name]))
        q, k, v, opts = self._args
        res = attention_covers_device(q, k, v, out, standard=standard, options=options, lse=lse, **opts, **kwargs)
        for i, name in enumerate(("out", "lse")):
            if name in res.results:
                host = tuple(to_numpy(o, n) if j == i else None for j, (o, n) in enumerate(zip(outs, self.OUTPUTS)))
                res.results[name]._sets = (lambda h=host, nm=name: self._covers_host(h, standard, options, kwargs)
                                           .results[nm]._bounds())
        return res


class AttentionFp8Reference(_MultiOutputReference):
    """fp8 attention's reference: four outputs, out, lse, amax_s and amax_o (one value each)."""

    OUTPUTS = ("out", "lse", "amax_s", "amax_o")


_FP8_SCALES = ("descale_q", "descale_k", "descale_v", "scale_s", "descale_s", "scale_o")


def _fp8_scale(v, op, name):
    """A scale given as a number or a one-element array or tensor (cuDNN's and torch's descale tensors): a positive
    finite float of at most 2^126."""
    if hasattr(v, "shape") and not isinstance(v, (numbers.Real, np.generic)):
        a = to_numpy(v, name)
        if a.size != 1:
            raise ExactrefValueError("ER_ERR_INVALID", "exactref: %s: %s must be one value, not an array of shape %s"
                                     % (op, name, tuple(a.shape)))
        v = a.reshape(-1)[0]
        if not np.issubdtype(np.asarray(v).dtype, np.floating) and not np.issubdtype(np.asarray(v).dtype,
                                                                                       np.integer):
            v = np.float64(np.asarray(v).astype(np.float32))  # fp8 and bfloat16 one-element tensors
    f = _check.real(v, op, name)
    if not 0 < f <= 2.0 ** 126:
        raise ExactrefValueError("ER_ERR_INVALID", "exactref: %s: %s must be positive, at most 2^126 (got %r)"
                                 % (op, name, v))
    return f


def attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, scale: Optional[float] = None, causal: bool = False,
              causal_alignment: str = "top_left", window: Optional[Tuple[Optional[int], Optional[int]]] = None,
              enable_gqa: bool = False, descale_q=None, descale_k=None, descale_v=None, scale_s=None,
              descale_s=None, scale_o=None) -> AttentionReference:
    """The reference of scaled dot-product attention (torch's scaled_dot_product_attention, flash attention): q
    [..., H, Sq, D], k and v [..., Hkv, Sk, D] and [..., Hkv, Sk, Dv]; two outputs, out = softmax(scale q k^T + mask) v
    ([..., H, Sq, Dv]) and lse ([..., H, Sq], the natural log of each row's sum of exp(scale q k^T) over its unmasked
    keys). scale defaults to 1/sqrt(D) (the real number). causal masks key j for query i when j > i + offset, offset
    0 for causal_alignment "top_left" (torch's is_causal) or Sk - Sq for "bottom_right" (FlashAttention 2.1 and
    later); window=(left, right) masks keys outside [i + offset - left, i + offset + right] (None or -1: unbounded on
    that side). enable_gqa lets H be a multiple of Hkv (query head h reads kv head h // (H // Hkv)). A fully masked
    row's exact out is 0 and its lse -inf (NaN accepted in both, and +inf in lse). covers((out, lse)) checks both,
    covers(out) out alone; options exp_ulps=, log_ulps=, kv_block= (docs/algorithms/attention.md).

    fp8 attention (cuDNN's fp8 SDPA, FlashAttention-3's fp8 path): any of descale_q, descale_k, descale_v,
    scale_s, descale_s, scale_o (numbers, or one-element arrays or tensors; positive) makes it the fp8 reference
    with four outputs: out = scale_o descale_v softmax(scale descale_q descale_k q k^T + mask) v, lse of those
    scores, amax_s (the largest P before scale_s, normalised or not) and amax_o (max |out| before scale_o), the
    last two one value each and never called exact. P is quantised to v's format as RN(p scale_s) and P V
    multiplied by descale_s (default 1 / scale_s). covers((out, lse, amax_s, amax_o)), None for one not stored
    (Theorem A4)."""
    given = dict(zip(_FP8_SCALES, (descale_q, descale_k, descale_v, scale_s, descale_s, scale_o)))
    opts = dict(scale=scale, causal=causal, causal_alignment=causal_alignment, window=window, enable_gqa=enable_gqa)
    return _attention(q, k, v, opts, given)


def _attention(q, k, v, opts, given, now=False):
    """attention(); a reference of CUDA tensors (not fp8) makes its host reference on first use, its inputs and
    options checked now on stand-ins."""
    later = not now and all(val is None for val in given.values()) and _on_device(q, k, v)
    arrs = [(_like if later else to_numpy)(t, name) for t, name in ((q, "q"), (k, "k"), (v, "v"))]
    c_scale, c_causal, sides, c_gqa = _attention_args("attention", arrs, opts["scale"], opts["causal"],
                                                      opts["causal_alignment"], opts["window"], opts["enable_gqa"])
    scales = {n: (0.0 if val is None else _fp8_scale(val, "attention", n)) for n, val in given.items()}
    views = [View(a, name) for a, name in zip(arrs, ("q", "k", "v"))]
    shape = tuple(arrs[0].shape[:-1]) + (arrs[2].shape[-1],)
    if any(val is not None for val in given.values()):
        ptr = _ffi.attention_fp8(views[0].buf, views[1].buf, views[2].buf, c_scale, c_causal,
                                 int(opts["causal_alignment"] == "bottom_right"), sides, c_gqa, scales)
        return AttentionFp8Reference(ptr, tuple(views) + (q, k, v), shape, "attention")
    ptr = _ffi.attention(views[0].buf, views[1].buf, views[2].buf, c_scale, c_causal,
                         int(opts["causal_alignment"] == "bottom_right"), sides, c_gqa)
    if later:  # the stand-ins' reference checked the shapes and options; the host's is made on first use
        _ffi.ref_free(ptr)
        ref = AttentionReference._later(lambda: _attention(q, k, v, opts, given, True), (None,) * 3 + (q, k, v),
                                        shape, "attention")
        ref._args = (q, k, v, opts)
        return ref
    return AttentionReference(ptr, tuple(views) + (q, k, v), shape, "attention")


def attention_covers_device(q: Any, k: Any, v: Any, out: Any, scale: Optional[float] = None, causal: bool = False,
                            causal_alignment: str = "top_left",
                            window: Optional[Tuple[Optional[int], Optional[int]]] = None, enable_gqa: bool = False,
                            standard: str = "any_order", options: Optional[str] = None, stream: Any = None,
                            lse: Any = None, **kwargs: Any) -> Union[Result, Results]:
    """covers() of out = attention(q, k, v, ...) (options as attention() takes them; not fp8) with q, k, v and out
    CUDA torch tensors of any strides, each row's loops over its keys on the GPU (er_attention_covers_device: the
    scores' bounds, the weights' bounds and sums, and the weighted sums of v, with the host's operations there) and
    its sets from them on the host's threads. Outside the GPU path's scope (docs/reference/cuda.md) the tensors are
    checked on host copies; the result is the same as er.attention(q, k, v, ...).covers(out) on host copies. With
    lse (a CUDA tensor, the natural-log LSE) both are checked there (er_attention_covers_device_outputs; out may then
    be None) and Results come back, as er.attention(...).covers((out, lse)) gives them. stream: a torch.cuda.Stream
    (default: the current stream)."""
    fn = "attention_covers_device"
    _check_stream(stream, fn)
    if out is None and lse is None:
        raise ValueError("exactref: %s: out and lse are both None" % fn)
    c_scale, c_causal, sides, c_gqa = _attention_args(fn, [], scale, causal, causal_alignment, window, enable_gqa)
    vq, vk, vv = (DeviceView(t, name) for t, name in ((q, "q"), (k, "k"), (v, "v")))
    vo = None if out is None else DeviceView(out, "out")
    vl = None if lse is None else DeviceView(lse, "lse")
    if stream is None:
        import torch
        stream = torch.cuda.current_stream(vq.tensor.device)
    std = _standard(standard, options, kwargs)
    args = (vq.buf, vk.buf, vv.buf, c_scale, c_causal, int(causal_alignment == "bottom_right"), sides, c_gqa)
    if lse is None:
        rep = _ffi.attention_covers_device(*args, vo.buf, std, stream.cuda_stream)
        return Result(rep, tuple(vo.tensor.shape))
    reps = _ffi.attention_covers_device_outputs(*args, None if vo is None else vo.buf, vl.buf, std,
                                                stream.cuda_stream)
    results = {name: Result(r, tuple(view.tensor.shape)) for name, r, view in zip(("out", "lse"), reps, (vo, vl))
               if view is not None}
    return Results(results)


class AttentionBackwardReference(_MultiOutputReference):
    """attention_backward's reference: three outputs, dq (q's shape), dk (k's) and dv (v's)."""

    OUTPUTS = ("dq", "dk", "dv")


def attention_backward(q: ArrayLike, k: ArrayLike, v: ArrayLike, o: ArrayLike, lse: Optional[ArrayLike],
                       do: ArrayLike, scale: Optional[float] = None, causal: bool = False,
                       causal_alignment: str = "top_left",
                       window: Optional[Tuple[Optional[int], Optional[int]]] = None,
                       enable_gqa: bool = False) -> AttentionBackwardReference:
    """The reference of attention's backward pass (FlashAttention-2/3's backward, torch SDPA's): q, k, v and the
    options as attention() takes them; o ([..., H, Sq, Dv]) and lse ([..., H, Sq], natural log) the forward's outputs
    as the backward kernel read them, do the gradient of o. lse=None: a kernel that recomputes it (torch's math and
    cudnn paths through autograd): any LSE attention's set allows, and D from the saved o or from its own P and dP.
    Three outputs: dq = scale dS k, dk = scale dS^T q, dv = P^T do, with P = exp(scale q k^T - lse) over the unmasked
    keys, D = rowsum(do o) and dS = P (do v^T - D); GQA's kv heads summed over their query heads; a fully masked
    row's gradients are 0. covers((dq, dk, dv)) checks all three; options exp_ulps=, qk_scale=input,
    products=compute (docs/algorithms/attention-backward.md)."""
    arrs = [to_numpy(t, name) for t, name in ((q, "q"), (k, "k"), (v, "v"))]
    c_scale, c_causal, sides, c_gqa = _attention_args("attention_backward", arrs, scale, causal, causal_alignment,
                                                      window, enable_gqa)
    more = [to_numpy(t, name) for t, name in ((o, "o"), (do, "do"))]
    for a, name in zip(more, ("o", "do")):
        format_of(a.dtype, name)
    views = [View(a, name) for a, name in zip(arrs + more, ("q", "k", "v", "o", "do"))]
    keep = list(views)
    vlse = None
    if lse is not None:
        la = to_numpy(lse, "lse")
        format_of(la.dtype, "lse")
        vl = View(la, "lse")
        keep.append(vl)
        vlse = vl.buf
    ptr = _ffi.attention_backward(views[0].buf, views[1].buf, views[2].buf, views[3].buf, vlse, views[4].buf, c_scale,
                                  c_causal, int(causal_alignment == "bottom_right"), sides, c_gqa)
    return AttentionBackwardReference(ptr, tuple(keep) + (q, k, v, o, lse, do), tuple(arrs[0].shape),
                                      "attention_backward")


_QUANT_FORMATS = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float6_e2m3fn",
                  "float6_e3m2fn")


def _quant_args(dtype, granularity, recipe):
    """quantize's arguments as the C call takes them (the groups are counted by the library: er_ref_output_shape)."""
    qf = format_of_name(dtype)
    if qf not in [format_of_name(n) for n in _QUANT_FORMATS]:
        raise ExactrefValueError("ER_ERR_FORMAT", "exactref: quantize: dtype %r: q's format must be one of %s"
                                 % (dtype, ", ".join(_QUANT_FORMATS)))
    grans = {"tensor": 0, "row": 1}
    block = 0
    if isinstance(granularity, tuple) and len(granularity) == 2 and granularity[0] in ("block", "tile"):
        gran = 2 if granularity[0] == "block" else 3
        block = _check.integer(granularity[1], "quantize", "the %s size" % granularity[0], 1)
    elif isinstance(granularity, str) and granularity in grans:
        gran = grans[granularity]
    else:
        raise ExactrefValueError("ER_ERR_INVALID", "exactref: quantize: granularity %r: expected 'tensor', 'row', "
                                 "('block', n) or ('tile', n)" % (granularity,))
    recipes = {"amax": 0, "pow2": 1, "inverse": 2, "mx": 3, "mx_ceil": 4, "mx_even": 5, "mx_rceil": 6, "nvfp4": 7}
    return qf, gran, block, recipes[_check.choice(recipe, "quantize", "recipe", tuple(recipes))]


def quantize(x: ArrayLike, dtype: DType = "float8_e4m3fn", granularity: Granularity = "tensor",
             recipe: str = "amax") -> QuantizeReference:
    """The reference of quantising x to `dtype` with an amax, as Transformer Engine and torch fp8 recipes do: three
    outputs, q (x's shape), amax and scale (one per group): granularity "tensor" (one group; amax and scale of shape
    (1,) or 0-d), "row" (each row along the last dimension: x's leading shape), ("block", n) (blocks of n along the
    last dimension: x's leading shape and ceil(cols / n)) or ("tile", n) (n x n tiles over the last two dimensions,
    as Transformer Engine's 2-D NVFP4 weights: x's shape but the last two, then ceil(rows / n), ceil(cols / n)).
    amax = max |x|; scale = qmax / amax (recipe "amax") or the power of two at or below it ("pow2"), within div_ulps
    (default 2) in the compute format; q = RN(x scale) in dtype.
    Recipe "inverse" (DeepSeek-style blockwise kernels): the scale output is scale_inv = amax / qmax and q = RN(x /
    scale_inv), each division within div_ulps.
    The OCP Microscaling recipes (usually with ("block", 32) and an fp8, fp6 or fp4 dtype): the scale output is the
    power of two X, stored as float8_e8m0fnu (or any dtype holding it), and q = RN(x / X) saturated. "mx" takes
    the spec's shared exponent floor(log2 amax) - emax of dtype; "mx_ceil" its ceiling; "mx_even" the floor after
    rounding amax to dtype's precision (torchao's EVEN); "mx_rceil" ceil(log2(amax / qmax)) with the quotient within
    div_ulps (cuBLAS, cvt.rp.ue8m0, torchao's RCEIL). An all-zero block allows every scale; a block holding an
    infinity or NaN requires a NaN scale and leaves q free (with a NaN and no infinity, the scale of the other
    elements too: a max that skips NaN, as tl.max does). torchao's float8 recipes divide by clamp(amax, 1e-12):
    covers(..., amax_floor=1e-12); div_ulps=0.5 states a correctly rounded division (CUDA C's and torch's /).
    Recipe "nvfp4" (("block", 16) or ("tile", 16), float4_e2m1fn): the tensor's encode scale S = 448 * 6 /
    max|x| (1 where that is 0), each block's scale the e4m3 value RN(amax_b S / 6) and q = RN(x S / scale)
    saturated, as Transformer Engine and torchao compute them in fp32 (a scale output as float8_e4m3fn). MX and
    NVFP4 kernels store no amax: covers((q, None, scale)).
    covers((q, amax, scale)) judges q against the kernel's own scale where that scale is in its set
    (docs/algorithms/quantize.md)."""
    a = to_numpy(x, "x")
    format_of(a.dtype)
    qf, gran, block, rec = _quant_args(dtype, granularity, recipe)
    va = View(a, "x")
    return QuantizeReference(_ffi.quantize(va.buf, qf, gran, block, rec), (va, x), a.shape, "quantize")


class LayerNormBackwardReference(_MultiOutputReference):
    """layer_norm_backward's reference: three outputs, dx (x's shape), dweight and dbias (the normalised shape)."""

    OUTPUTS = ("dx", "dweight", "dbias")


class RmsNormBackwardReference(_MultiOutputReference):
    """rmsnorm_backward's reference: two outputs, dx (x's shape) and dweight (x's last dimension)."""

    OUTPUTS = ("dx", "dweight")


def _norm_backward(op, dy, x, stats, weight, bias, normalized_shape, eps=0.0):
    g, a = _gradient_and(op, dy, x, "x")
    keep = []
    affine = {}
    for t, name in ((weight, "weight"), (bias, "bias")):
        if t is not None:
            affine[name] = to_numpy(t, name)
            format_of(affine[name].dtype)
    if normalized_shape is not None:
        ns, said = _check.shape(normalized_shape, op, "normalized_shape"), "normalized_shape"
    elif affine:
        said = next(iter(affine))
        ns, said = tuple(affine[said].shape), "%s's shape" % said
    else:
        ns, said = (a.shape[-1],), "x's last dimension"
    k = len(ns)
    if k < 1 or k > a.ndim or tuple(a.shape[a.ndim - k:]) != ns:
        raise ValueError("exactref: %s: %s %s is not the end of x's shape %s" % (op, said, ns, a.shape))
    for name, arr in affine.items():
        if tuple(arr.shape) != ns:
            raise ValueError("exactref: %s: %s has shape %s, not the normalized shape %s" % (op, name, arr.shape, ns))
    views = {}
    for t, name in [(dy, "dy"), (x, "x")] + [(t, name) for t, name in stats] + [(weight, "weight")]:
        if t is None:
            views[name] = None
            continue
        arr = {"dy": g, "x": a}.get(name)
        arr = to_numpy(t, name) if arr is None else arr
        format_of(arr.dtype, name)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        v = View(arr, name)
        keep += [v, t]
        views[name] = v.buf
    if bias is not None:
        keep.append(bias)
    rms = "mean" not in views
    ptr = _ffi.norm_backward(views["dy"], views["x"], k, views.get("mean"), views["rstd"], views["weight"], eps, rms)
    cls = RmsNormBackwardReference if rms else LayerNormBackwardReference
    return cls(ptr, tuple(keep), a.shape, op)


def layer_norm_backward(dy: ArrayLike, x: ArrayLike, mean: ArrayLike, rstd: ArrayLike,
                        weight: Optional[ArrayLike] = None, bias: Optional[ArrayLike] = None,
                        normalized_shape: Optional[Union[int, Sequence[int]]] = None) -> LayerNormBackwardReference:
    """The exact reference of layer_norm's backward pass (torch's native_layer_norm_backward) from the gradient dy, the
    forward input x and the forward pass's saved mean and rstd (one value per row: x's leading shape, size-1
    dimensions aside): three outputs, dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = weight dy and xhat =
    (x - mean) rstd (x's shape), dweight = the sum over rows of dy xhat and dbias = the sum over rows of dy (the
    normalised shape). The normalised shape is normalized_shape, else weight's or bias's shape, else x's last
    dimension; bias enters no gradient (only its shape is checked). covers((dx, dweight, dbias)) checks all three,
    covers(dx) dx alone. The set holds every evaluation of these formulas in any association and order of the sums,
    each operation rounded to nearest in the compute format or fused (docs/algorithms/norm-backward.md)."""
    return _norm_backward("layer_norm_backward", dy, x, [(mean, "mean"), (rstd, "rstd")], weight, bias,
                          normalized_shape)


def rmsnorm_backward(dy: ArrayLike, x: ArrayLike, rstd: Optional[ArrayLike] = None,
                     weight: Optional[ArrayLike] = None, eps: float = 1e-6) -> RmsNormBackwardReference:
    """The exact reference of rmsnorm's backward pass over x's last dimension from the gradient dy, the forward input
    x and the forward pass's saved rstd (one value per row): two outputs, dx = rstd (g - xhat mean(g xhat)) with
    g = weight dy, xhat = x rstd, and dweight = the sum over rows of dy xhat. The set as layer_norm_backward's
    (docs/algorithms/norm-backward.md). rstd=None: the kernel computed its own rstd with `eps`, any value rmsnorm's
    forward standard allows (options rsqrt_ulps=, mean=, variance=, math=triton as for rmsnorm); the exact results
    take the exact 1/sqrt(mean(x^2) + eps)."""
    eps = _check.real(eps, "rmsnorm_backward", "eps", lo=0)
    if weight is not None:
        w = to_numpy(weight, "weight")
        if w.ndim != 1:
            raise ValueError("exactref: rmsnorm_backward: weight must be a vector, not of shape %s" % (w.shape,))
    return _norm_backward("rmsnorm_backward", dy, x, [(rstd, "rstd")], weight, None, None, eps)


class CrossEntropyReference(_MultiOutputReference):
    """cross_entropy's reference: two outputs, loss ((1,) or a 0-d tensor for "mean" and "sum", one per row for
    "none") and dlogits (the logits' shape)."""

    OUTPUTS = ("loss", "dlogits")
    # _args: (logits, target, options) of a reference of CUDA logits, the options cross_entropy_covers_device's keywords

    def _outputs_device(self, outs, standard, options, kwargs):
        """(loss, dlogits) of CUDA tensors (either None) on the device path together; their sets, where asked for,
        from the host's pass on copies."""
        given = [o for o in outs if o is not None]
        if self._args is None or not given or not all(_on_cuda(o) for o in given) or not _ffi.cuda_available():
            return None
        z, t, opts = self._args
        loss, dl = outs
        if loss is not None and tuple(loss.shape) not in (tuple(self.shape), ()):
            raise ValueError("exactref: loss has shape %s but cross_entropy produces %s"
                             % (tuple(loss.shape), tuple(self.shape)))
        if dl is not None and tuple(dl.shape) != tuple(z.shape):
            raise ValueError("exactref: dlogits has shape %s but cross_entropy produces %s"
                             % (tuple(dl.shape), tuple(z.shape)))
        res = cross_entropy_covers_device(z, t, loss, dl, standard=standard, options=options, **opts, **kwargs)
        for i, name in enumerate(self.OUTPUTS):
            if name in res.results:
                host = tuple(to_numpy(o, n) if j == i else None for j, (o, n) in enumerate(zip(outs, self.OUTPUTS)))
                res.results[name]._sets = (lambda h=host, nm=name: self._covers_host(h, standard, options, kwargs)
                                           .results[nm]._bounds())
        return res


_REDUCTIONS = ("mean", "sum", "none")


def _targets(target, rows):
    """The targets as a C-contiguous native int64 array of `rows` entries: integer arrays, or one integer for one row
    (class-probability targets, floats and bools refused, never truncated)."""
    if _check.is_integer(target):  # one row's class as a number
        target = np.array([_check.integer(target, "cross_entropy", "target")], np.int64)
    t = to_numpy(target, "target")
    if t.dtype.kind not in "iu":
        raise TypeError("exactref: cross_entropy: target must hold integer class indices (torch.long), not %s; "
                        "class-probability targets are not supported" % t.dtype)
    if t.ndim > 1 or t.size != rows:
        raise ValueError("exactref: cross_entropy: target must hold one class per row: %d rows, target of shape %s"
                         % (rows, t.shape))
    if t.dtype.kind == "u" and t.size and int(t.max()) > _check.INT64_MAX:
        raise ValueError("exactref: cross_entropy: target %d is beyond int64" % int(t.max()))
    return np.ascontiguousarray(t.reshape(rows), dtype=np.int64)


def cross_entropy(logits: ArrayLike, target: ArrayLike, reduction: str = "mean", ignore_index: int = -100,
                  label_smoothing: float = 0.0) -> CrossEntropyReference:
    """The exact reference of cross-entropy (torch's F.cross_entropy and its backward; fused cross-entropy kernels):
    logits N x C (or one row of C with a 0-d target), target one integer class per row in [0, C) or ignore_index.
    Two outputs: loss, from the row losses log sum_j exp(x_j) - (1 - eps) x_t - (eps / C) sum_j x_j (eps =
    label_smoothing), their mean over the rows not ignored ("mean"), sum ("sum") or each row's ("none", 0 on an
    ignored row); and dlogits = (softmax(x) - (1 - eps) onehot(t) - eps / C) / W, the gradient of that loss (W the
    rows not ignored for "mean", else 1; 0 on an ignored row). covers((loss, dlogits)) checks both, covers(loss) the
    loss alone. The set holds every kernel whose probabilities and log-sum-exp lie in softmax's and log_softmax's
    sets (their options apply: exp_ulps=, log_ulps=, div=, math=, online=yes for an online log-sum-exp) and that
    combines them with at most 8 roundings in the compute format and, as torch's composition does, 3 (gradient) or 4
    (loss, after its stored log-probabilities) in the logits' format on each term's path; products="compute" states a
    fused kernel that rounds nothing to the logits' format (docs/algorithms/cross-entropy.md)."""
    return _cross_entropy(logits, target, reduction, ignore_index, label_smoothing)


def _cross_entropy(logits, target, reduction, ignore_index, label_smoothing, now=False):
    """cross_entropy(); a reference of CUDA logits makes its host reference on first use, its arguments checked now
    on a stand-in."""
    later = not now and _on_device(logits)
    a = _like(logits, "logits") if later else to_numpy(logits, "logits")
    format_of(a.dtype, "logits")
    if a.ndim not in (1, 2):
        raise ValueError("exactref: cross_entropy: logits must be N x C or one row of C, not of shape %s" % (a.shape,))
    red = _REDUCTIONS.index(_check.choice(reduction, "cross_entropy", "reduction", _REDUCTIONS))
    ign = _check.integer(ignore_index, "cross_entropy", "ignore_index")
    eps = _check.real(label_smoothing, "cross_entropy", "label_smoothing", lo=0)
    if eps > 1:
        raise ExactrefValueError("ER_ERR_INVALID", "exactref: cross_entropy: label_smoothing must be in [0, 1], not %r"
                                 % (label_smoothing,))
    rows = a.shape[0] if a.ndim == 2 else 1
    t = _targets(target, rows)
    va = View(a, "logits")
    ptr = _ffi.cross_entropy(va.buf, t, red, ign, eps)
    shape = (rows,) if red == 2 else (1,)
    if later:  # the stand-in's reference checked the targets and options; the host's is made on first use
        _ffi.ref_free(ptr)
        ref = CrossEntropyReference._later(
            lambda: _cross_entropy(logits, target, reduction, ignore_index, label_smoothing, True), (None, logits, t),
            shape, "cross_entropy")
        ref._args = (logits, t, dict(reduction=reduction, ignore_index=ign, label_smoothing=eps))
        return ref
    return CrossEntropyReference(ptr, (va, logits, t), shape, "cross_entropy")


def cross_entropy_covers_device(logits: Any, target: Any, loss: Any = None, dlogits: Any = None,
                                reduction: str = "mean", ignore_index: int = -100, label_smoothing: float = 0.0,
                                standard: str = "any_order", options: Optional[str] = None, stream: Any = None,
                                **kwargs: Any) -> Results:
    """covers() of cross_entropy(logits, target, ...)'s outputs loss and dlogits (either None: not checked), the
    logits and outputs CUDA torch tensors (target: integers anywhere, copied to the host), each row's sums and its
    gradient's fast decision on the GPU (er_cross_entropy_covers_device), its loss from its sums on the host. Outside
    the GPU path's scope (docs/reference/cuda.md) the tensors are checked on host copies; the Results are the ones
    er.cross_entropy(logits, target, ...).covers((loss, dlogits)) gives on host copies. stream: a torch.cuda.Stream
    (default: the current stream)."""
    fn = "cross_entropy_covers_device"
    _check_stream(stream, fn)  # the numbers and options before the tensors
    red = _REDUCTIONS.index(_check.choice(reduction, fn, "reduction", _REDUCTIONS))
    ign = _check.integer(ignore_index, fn, "ignore_index")
    eps = _check.real(label_smoothing, fn, "label_smoothing", lo=0)
    if eps > 1:
        raise ExactrefValueError("ER_ERR_INVALID", "exactref: %s: label_smoothing must be in [0, 1], not %r"
                                 % (fn, label_smoothing))
    std = _standard(standard, options, kwargs)
    if loss is None and dlogits is None:
        raise ValueError("exactref: %s: loss and dlogits are both None" % fn)
    vx = DeviceView(logits, "logits")
    if vx.tensor.dim() > 2:
        raise ValueError("exactref: %s: logits must be N x C or one row of C, not of shape %s"
                         % (fn, tuple(vx.tensor.shape)))
    rows = vx.tensor.shape[0] if vx.tensor.dim() == 2 else 1
    t = _targets(target, rows)
    if loss is not None and type(loss).__module__.startswith("torch") and loss.dim() == 0:
        loss = loss.reshape(1)  # torch's reduced loss: a 0-d tensor
    vl = None if loss is None else DeviceView(loss, "loss")
    vg = None if dlogits is None else DeviceView(dlogits, "dlogits")
    if stream is None:
        import torch
        stream = torch.cuda.current_stream(vx.tensor.device)
    reps = _ffi.cross_entropy_covers_device(vx.buf, t, red, ign, eps, None if vl is None else vl.buf,
                                            None if vg is None else vg.buf, std, stream.cuda_stream)
    return Results({name: Result(r, tuple(view.tensor.shape)) for name, r, view in
                    zip(("loss", "dlogits"), reps, (vl, vg)) if view is not None})


def layer_norm(x: ArrayLike, normalized_shape: Union[int, Sequence[int]], weight: Optional[ArrayLike] = None,
               bias: Optional[ArrayLike] = None, eps: float = 1e-5) -> LayerNormReference:
    """The exact reference of layernorm over x's trailing `normalized_shape` (an int or a tuple, as in torch), with
    the biased variance; outputs y, mean and rstd (options variance="two_pass"|"welford"|"either", mean=...,
    rsqrt_ulps=...)."""
    return _layer_norm(x, normalized_shape, weight, bias, eps)


def _layer_norm(x, normalized_shape, weight, bias, eps, now=False):
    later = not now and _on_device(x, weight, bias)
    a = _like(x, "x") if later else to_numpy(x, "x")
    format_of(a.dtype)
    ns = _check.shape(normalized_shape, "layer_norm", "normalized_shape")
    eps = _check.real(eps, "layer_norm", "eps", lo=0)
    k = len(ns)
    if k < 1 or k > a.ndim or tuple(a.shape[a.ndim - k:]) != ns:
        raise ValueError("exactref: layer_norm: normalized_shape %s is not the end of x's shape %s" % (ns, a.shape))
    va = None if later else View(a, "x")
    keep = [va, x]
    bufs = []
    for t, name in ((weight, "weight"), (bias, "bias")):
        if t is None:
            bufs.append(None)
            continue
        arr = _like(t, name) if later else to_numpy(t, name)
        format_of(arr.dtype)
        if tuple(arr.shape) != ns:
            raise ValueError(
                "exactref: layer_norm: %s has shape %s, not the normalized shape %s" % (name, arr.shape, ns)
            )
        v = None if later else View(arr, name)
        keep += [v, t]
        bufs.append(None if later else v.buf)
    if later:
        ref = LayerNormReference._later(lambda: _layer_norm(x, ns, weight, bias, eps, True), tuple(keep), a.shape,
                                        "layernorm")
    else:
        ref = LayerNormReference(_ffi.layernorm(va.buf, k, bufs[0], bufs[1], eps), tuple(keep), a.shape,
                                 "layernorm")
    ref._args = (x, ns, weight, bias, eps)
    return ref


# ---- docstrings from the library's tables: the standard's options and which op takes which ----

_ORDERS = "any_order, sequential, blocked:B, split:S, pairwise, mma:smNN, triton:BLOCK, tree:TEXT"


def _document():
    import textwrap

    options = _ffi.standard_options()
    listing = "\n".join("        %s=: %s" % (name, values) for name, values in options)
    text = textwrap.fill(
        "`standard` is an order (%s); options follow it in the string or come as `options` and keywords. The options"
        " (docs/reference/standard.md, from the library's own table), with the values each takes:" % _ORDERS,
        width=116, initial_indent="        ", subsequent_indent="        ")
    for method in (Reference.covers, _MultiOutputReference.covers):
        method.__doc__ = (method.__doc__ or "").rstrip() + "\n\n" + text + "\n" + listing
    ops = {matmul: "matmul", scaled_matmul: "matmul", sum: "sum", mean: "mean", max: "max", softmax: "softmax",
           log_softmax: "log_softmax", softmax_backward: "softmax_backward",
           log_softmax_backward: "log_softmax_backward", rmsnorm: "rmsnorm",
           layer_norm_backward: "layer_norm_backward", rmsnorm_backward: "rmsnorm_backward",
           cross_entropy: "cross_entropy",
           layer_norm: "layernorm", quantize: "quantize", attention: "attention", tensor: "tensor"}
    for fn, op in ops.items():
        own = _ffi.op_options(op)
        fn.__doc__ = (fn.__doc__ or "").rstrip() + "\n\n" + textwrap.fill(
            "Standards: covers() takes the orders and options Reference.covers lists, where they apply to the op; of"
            " the options only some ops take, %s takes %s." % (op, ", ".join(own) if own else "none"),
            width=116, initial_indent="    ", subsequent_indent="    ")


_document()
