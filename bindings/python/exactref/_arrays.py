"""Arrays in, tensor views out: numpy arrays, torch tensors (CUDA ones copied back) and ml_dtypes arrays
become exactref tensor views over the same memory whenever the layout allows (non-negative strides that are
whole elements); otherwise a contiguous copy is viewed."""
import numpy as np

from . import _ffi

# exactref format codes (exactref/format.h)
FP64, FP32, TF32, BF16, FP16, E4M3FN, E5M2 = 1, 2, 3, 4, 5, 6, 7
E2M1, E2M3, E3M2, E8M0 = 8, 9, 10, 11  # the OCP MX element and scale formats, one byte per element
_BY_NAME = {"float64": FP64, "float32": FP32, "float16": FP16, "bfloat16": BF16,
            "float8_e4m3fn": E4M3FN, "float8_e5m2": E5M2, "float4_e2m1fn": E2M1, "float6_e2m3fn": E2M3,
            "float6_e3m2fn": E3M2, "float8_e8m0fnu": E8M0}
_STORAGE = {FP64: np.uint64, FP32: np.uint32, FP16: np.uint16, BF16: np.uint16, E4M3FN: np.uint8, E5M2: np.uint8,
            E2M1: np.uint8, E2M3: np.uint8, E3M2: np.uint8, E8M0: np.uint8}
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn",
              "float8_e8m0fnu")
SUPPORTED = ("float64, float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, float4_e2m1fn, float6_e2m3fn, "
             "float6_e3m2fn, float8_e8m0fnu")


def _ml_dtype(name):
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("exactref: %s arrays need the ml_dtypes package (pip install ml_dtypes)" % name) from None
    return np.dtype(getattr(ml_dtypes, name))


def _canonical(name):
    key = str(name).replace("torch.", "")
    return {"fp64": "float64", "double": "float64", "fp32": "float32", "float": "float32", "fp16": "float16",
            "half": "float16", "bf16": "bfloat16", "fp8_e4m3fn": "float8_e4m3fn", "e4m3fn": "float8_e4m3fn",
            "fp8_e5m2": "float8_e5m2", "e5m2": "float8_e5m2", "fp4_e2m1fn": "float4_e2m1fn", "e2m1": "float4_e2m1fn",
            "fp6_e2m3fn": "float6_e2m3fn", "e2m3": "float6_e2m3fn", "fp6_e3m2fn": "float6_e3m2fn",
            "e3m2": "float6_e3m2fn", "fp8_e8m0fnu": "float8_e8m0fnu", "e8m0": "float8_e8m0fnu"}.get(key, key)


def format_of_name(name):
    """The format of a dtype or its name, without needing ml_dtypes for the formats numpy lacks."""
    try:
        key = name if isinstance(name, str) or "torch" in str(type(name)) + str(name) else np.dtype(name).name
    except TypeError:
        raise TypeError("exactref: unsupported dtype %r (supported: %s)" % (name, SUPPORTED)) from None
    fmt = _BY_NAME.get(_canonical(key))
    if fmt is None:
        raise TypeError("exactref: unsupported dtype %r (supported: %s)" % (name, SUPPORTED))
    return fmt


def numpy_dtype(name):
    """The numpy dtype of a format name ("float32", "bfloat16", ...; torch-style and exactref names accepted)."""
    key = _canonical(name)
    if key in ("float64", "float32", "float16"):
        return np.dtype(key)
    if key in _ML_DTYPES:
        return _ml_dtype(key)
    if isinstance(name, np.dtype) or isinstance(name, type):
        return np.dtype(name)
    raise TypeError("exactref: unsupported dtype %r (supported: %s)" % (name, SUPPORTED))


_FMT_OF_DTYPE = {}  # dtype -> format, filled as dtypes are seen (np.dtype(...).name is slow on a hot path)


def format_of(dtype, name=None):
    """The format of an array's dtype; TypeError for an unsupported one (naming the argument `name` where given)."""
    fmt = _FMT_OF_DTYPE.get(dtype)
    if fmt is not None:
        return fmt
    fmt = _BY_NAME.get(np.dtype(dtype).name)
    if fmt is None:
        raise TypeError("exactref: %sunsupported dtype %s (supported: %s)"
                        % ("%s has " % name if name else "", np.dtype(dtype).name, SUPPORTED))
    if isinstance(dtype, np.dtype):
        _FMT_OF_DTYPE[dtype] = fmt
    return fmt


def _native(a):
    """a in the machine's byte order: a big-endian array on a little-endian machine (and the reverse) is copied with
    its bytes swapped, since the library reads elements as the machine stores them."""
    if a.dtype.byteorder in ("=", "|") or a.dtype.isnative:
        return a
    return a.byteswap().view(a.dtype.newbyteorder("="))


def to_numpy(x, name):
    """numpy view of x in native byte order (tests/test_boundary.py); torch tensors are detached (CUDA ones copied to
    the host), low-precision torch dtypes are reinterpreted as their ml_dtypes equivalents without copying."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        special = {torch.bfloat16: ("bfloat16", torch.int16), torch.float8_e4m3fn: ("float8_e4m3fn", torch.uint8),
                   torch.float8_e5m2: ("float8_e5m2", torch.uint8)}
        if hasattr(torch, "float8_e8m0fnu"):
            special[torch.float8_e8m0fnu] = ("float8_e8m0fnu", torch.uint8)
        if t.dtype == getattr(torch, "float4_e2m1fn_x2", None):
            raise TypeError("exactref: %s is packed fp4 (two values per byte), whose order in the byte is the "
                            "kernel's own: unpack it with exactref.unpack_fp4(%s, first=\"low\" or \"high\")"
                            % (name, name))
        if t.dtype in special:
            dname, raw = special[t.dtype]
            return t.view(raw).numpy().view(_ml_dtype(dname))
        try:
            return t.numpy()
        except TypeError:  # a dtype numpy has no equivalent of (float8_e4m3fnuz, ...): exactref's list, not torch's
            raise TypeError("exactref: %s has unsupported dtype %s (supported: %s)"
                            % (name, str(t.dtype).replace("torch.", ""), SUPPORTED)) from None
    if isinstance(x, np.ndarray):
        return _native(x)
    if hasattr(x, "__array__") or isinstance(x, (list, tuple)):
        return _native(np.asarray(x))
    raise TypeError("exactref: %s must be a numpy array or a torch tensor, not %s" % (name, type(x).__name__))


def unpack_fp4(x, first):
    """Packed fp4 e2m1 (torch.float4_e2m1fn_x2, or uint8 bytes holding two values each) as one value per element:
    an ml_dtypes float4_e2m1fn array whose last dimension is twice x's. `first` says which half of each byte holds
    the element that comes first: "low" (the low 4 bits: torch's float4_e2m1fn_x2 tests, PTX and CUTLASS) or "high"
    (the high 4 bits: some torchao versions). No default: the order is the kernel's, and a wrong guess would check
    other values."""
    if first not in ("low", "high"):
        raise ValueError("exactref: unpack_fp4 takes first=\"low\" or first=\"high\", not %r" % (first,))
    if type(x).__module__.startswith("torch"):
        import torch
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if t.dtype not in (getattr(torch, "float4_e2m1fn_x2", None), torch.uint8):
            raise TypeError("exactref: unpack_fp4 takes float4_e2m1fn_x2 or uint8 bytes, not %s" % t.dtype)
        raw = t.contiguous().view(torch.uint8).numpy()
    else:
        raw = np.asarray(x)
        if raw.dtype != np.uint8:
            raise TypeError("exactref: unpack_fp4 takes uint8 bytes (two fp4 values each), not %s" % raw.dtype)
    if raw.ndim < 1:
        raise ValueError("exactref: unpack_fp4 takes an array of at least one dimension")
    lo, hi = raw & 0x0F, raw >> 4
    pair = (lo, hi) if first == "low" else (hi, lo)
    out = np.stack(pair, axis=-1).reshape(raw.shape[:-1] + (2 * raw.shape[-1],))
    return np.ascontiguousarray(out).view(_ml_dtype("float4_e2m1fn"))


class View:
    """An exactref tensor view over a numpy array (kept alive with the view)."""

    def __init__(self, arr, name, writable=False):
        if arr.ndim < 1 or arr.ndim > _ffi.MAX_DIMS:
            raise ValueError("exactref: %s has %d dimensions; exactref takes 1 to %d" % (name, arr.ndim, _ffi.MAX_DIMS))
        fmt = format_of(arr.dtype)
        isz = arr.dtype.itemsize
        # a dimension of one element addresses nothing through its stride, whatever numpy keeps there (a reversed
        # one-element array has a negative one): 0 then
        steps = [0 if n == 1 else s for n, s in zip(arr.shape, arr.strides)]
        if any(s < 0 or s % isz for s in steps):
            if writable:
                raise ValueError(
                    "exactref: %s has a layout exactref cannot write through (negative or partial-element strides)"
                    % name
                )
            arr = np.array(arr, order="C", copy=True)
            steps = [0 if n == 1 else s for n, s in zip(arr.shape, arr.strides)]
        self.array = arr
        self.format = fmt
        self.buf = _ffi.tensor_view(fmt, arr.shape, [s // isz for s in steps], arr.ctypes.data if arr.size else None)


class DeviceView:
    """An exactref tensor view over a CUDA torch tensor's memory (the tensor kept alive with the view)."""

    def __init__(self, t, name):
        if not type(t).__module__.startswith("torch") or t.device.type != "cuda":
            raise TypeError("exactref: %s must be a CUDA torch tensor, not %s" % (name, type(t).__name__))
        import torch
        names = {torch.float64: FP64, torch.float32: FP32, torch.float16: FP16, torch.bfloat16: BF16,
                 torch.float8_e4m3fn: E4M3FN, torch.float8_e5m2: E5M2}
        fmt = names.get(t.dtype)
        if fmt is None:
            raise TypeError("exactref: %s has dtype %s (supported on the device: float64, float32, float16, bfloat16, "
                            "float8_e4m3fn, float8_e5m2)" % (name, t.dtype))
        if t.dim() < 1 or t.dim() > _ffi.MAX_DIMS:
            raise ValueError("exactref: %s has %d dimensions; exactref takes 1 to %d" % (name, t.dim(), _ffi.MAX_DIMS))
        self.tensor = t
        self.format = fmt
        self.buf = _ffi.tensor_view(fmt, tuple(t.shape), tuple(t.stride()), t.data_ptr() if t.numel() else None)
