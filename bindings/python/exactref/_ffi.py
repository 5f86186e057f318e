"""The foreign-function layer: the only module of the package that imports ctypes. It loads libexactref, declares
the C functions the bindings call (the public C API only), checks the codes and struct layouts it copies from the
headers against the library, and marshals every call: the modules above it pass Python ints, floats, strings and
numpy arrays, and get back opaque handles (a reference's address as an int; a view, a standard or reports as a buffer
they only hand back here). Every argument reaches these functions checked already (_check.py); their C status is
turned into an exception here."""
import ctypes
import ctypes.util
import glob
import os

from ._errors import error_class

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates(tried):
    """The places to load from, in order; each one not even present is noted in `tried`."""
    env = os.environ.get("EXACTREF_LIBRARY")
    if env:
        yield env
        return  # an explicit choice that fails is an error, not a hint to look elsewhere
    tried.append("EXACTREF_LIBRARY: not set")
    beside = sorted(glob.glob(os.path.join(_HERE, "libexactref.so*")))
    if not beside:
        tried.append("%s: no libexactref.so* beside the package" % os.path.join(_HERE, "libexactref.so*"))
    for path in beside:
        yield path
    found = ctypes.util.find_library("exactref")
    if found:
        yield found
    else:
        tried.append("ctypes.util.find_library('exactref'): not found")
    yield "libexactref.so.0"


def _load():
    tried = []
    for path in _candidates(tried):
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s: %s" % (path, e))
    raise ImportError(
        "exactref: cannot load libexactref. Tried, in order:\n  " + "\n  ".join(tried) + "\n"
        "Fixes: install the package from the source tree (pip install ./bindings/python builds the library with CMake "
        "and ships it inside the package); or point EXACTREF_LIBRARY at a built library (make, then "
        "EXACTREF_LIBRARY=$PWD/build/libexactref.so); or add the library's folder to LD_LIBRARY_PATH, or install it "
        "(cmake --install build) where the system's loader finds it; or copy libexactref.so* beside the package (%s)."
        % _HERE)


lib, path = _load()

c_int64_p = ctypes.POINTER(ctypes.c_int64)
_sig = {
    "er_version": (ctypes.c_char_p, []),
    "er_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "er_last_error": (ctypes.c_char_p, []),
    "er_cancel_reset": (None, []),
    "er_cancel_requested": (ctypes.c_int, []),
    "er_cancel_on_signal": (None, [ctypes.c_int]),
    "er_set_progress": (None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]),
    "er_format_from_name": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p]),
    "er_tensor_sizeof": (ctypes.c_size_t, []),
    "er_tensor_view": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, c_int64_p, c_int64_p, ctypes.c_void_p],
    ),
    "er_standard_sizeof": (ctypes.c_size_t, []),
    "er_standard_option_count": (ctypes.c_int, []),
    "er_standard_option_name": (ctypes.c_char_p, [ctypes.c_int]),
    "er_standard_option_values": (ctypes.c_char_p, [ctypes.c_int]),
    "er_op_count": (ctypes.c_int, []),
    "er_op_name": (ctypes.c_char_p, [ctypes.c_int]),
    "er_op_options": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "er_standard_parse": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]),
    "er_standard_format": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "er_matmul": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p]),
    "er_ref_free": (None, [ctypes.c_void_p]),
    "er_sum": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_mean": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_max": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_softmax": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_log_softmax": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_softmax_backward": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int],
    ),
    "er_log_softmax_backward": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int],
    ),
    "er_layer_norm_backward": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
         ctypes.c_void_p, ctypes.c_void_p],
    ),
    "er_rmsnorm_backward": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
         ctypes.c_double],
    ),
    "er_cross_entropy": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
         ctypes.c_int, ctypes.c_int64, ctypes.c_double],
    ),
    "er_rmsnorm": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]),
    "er_scaled_matmul": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double, ctypes.c_double],
    ),
    "er_scaled_matmul_rowwise": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p],
    ),
    "er_layernorm": (
        ctypes.c_int,
        [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_double,
        ],
    ),
    "er_covers_outputs": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_void_p],
    ),
    "er_ref_shape": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), c_int64_p]),
    "er_ref_output_shape": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int), c_int64_p]),
    "er_covers": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    "er_covers_sets": (
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ],
    ),
    "er_covers_outputs_sets": (
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_void_p),
        ],
    ),
    "er_ref_fast": (ctypes.c_int, [ctypes.c_void_p]),
    "er_fill": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]),
    "er_family_parse": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p]),
    "er_tensor_ref": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]),
    "er_quantize": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int],
    ),
    "er_quantize_ref": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int],
    ),
    "er_attention": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p],
    ),
    "er_attention_fp8": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
         ctypes.c_void_p],
    ),
    "er_attention_fp8_scales_sizeof": (ctypes.c_size_t, []),
    "er_attention_backward": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_void_p)] + [ctypes.c_void_p] * 7,
    ),
    "er_chain": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]),
    "er_stage_kind_name": (ctypes.c_char_p, [ctypes.c_int]),
    "er_stage_sizeof": (ctypes.c_size_t, []),
    "er_attention_opts_sizeof": (ctypes.c_size_t, []),
    "er_format_name": (ctypes.c_char_p, [ctypes.c_int]),
    "er_ref_enclosure": (
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ],
    ),
    "er_format_precision": (ctypes.c_int, [ctypes.c_int]),
    "er_format_min_normal": (ctypes.c_double, [ctypes.c_int]),
    "er_format_min_subnormal": (ctypes.c_double, [ctypes.c_int]),
    "er_emulate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    "er_ref_rounded": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    "er_report_sizeof": (ctypes.c_size_t, []),
    "er_report_clear": (None, [ctypes.c_void_p]),
    "er_report_text": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "er_report_json": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "er_report_numel": (ctypes.c_int64, [ctypes.c_void_p]),
    "er_report_count": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_int]),
    "er_report_failed": (ctypes.c_int64, [ctypes.c_void_p]),
    "er_report_resolution": (ctypes.c_double, [ctypes.c_void_p]),
    "er_report_classes": (ctypes.POINTER(ctypes.c_uint8), [ctypes.c_void_p]),
    "er_report_keep_on_device": (ctypes.c_int, [ctypes.c_void_p]),
    "er_report_fetch_classes": (ctypes.c_int, [ctypes.c_void_p]),
    "er_class_name": (ctypes.c_char_p, [ctypes.c_int]),
    "er_cuda_available": (ctypes.c_int, []),
    "er_cuda_trim": (ctypes.c_int, []),
    "er_depth_triton": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int],
    ),
    "er_depth_torch_softmax": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]),
    "er_depth_torch_layer_norm": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]),
    "er_combine_depth_torch_layer_norm": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]),
    "er_depth_cub_block_reduce": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_int]),
    "er_covers_device": (
        ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    ),
    "er_matmul_device": (
        ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    ),
    "er_matmul_covers_device": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p],
    ),
    "er_softmax_covers_device": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p],
    ),
    "er_log_softmax_covers_device": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p],
    ),
    "er_softmax_backward_covers_device": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
         ctypes.c_void_p],
    ),
    "er_log_softmax_backward_covers_device": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
         ctypes.c_void_p],
    ),
    "er_rmsnorm_covers_device": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p,
         ctypes.c_void_p],
    ),
    "er_layernorm_covers_device": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double,
         ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p],
    ),
    "er_attention_covers_device": (
        ctypes.c_int,
        [ctypes.c_void_p] * 8,
    ),
    "er_attention_covers_device_outputs": (
        ctypes.c_int,
        [ctypes.c_void_p] * 8,
    ),
    "er_cross_entropy_covers_device": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.c_int,
         ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p],
    ),
}
for _name, (_res, _args) in _sig.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

MAX_DIMS = 8
CLASS_COUNT = 8


def check_copy(what, ours, theirs):
    """A layout or a value the bindings copy from the C headers, against the library's own: a mismatch (a library
    of another version) is an ImportError here, never a struct the library reads wrongly."""
    if ours != theirs:
        raise ImportError("exactref: the bindings' %s is %r but the library %s (%s) says %r: the package and the "
                          "library do not match; reinstall the package from the same source tree" % (what, ours, path,
                                                                                                   lib.er_version().decode(),
                                                                                                   theirs))


# ---- Ctrl-C: the library's er_cancel_on_signal handles SIGINT during a long call ----

def _sigaction():
    """libc's sigaction (Linux), or None."""
    import sys
    if not sys.platform.startswith("linux"):
        return None
    try:
        f = ctypes.CDLL(None, use_errno=True).sigaction
    except (OSError, AttributeError):
        return None
    f.restype, f.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return f


_SIGACTION = _sigaction()
_ON_SIGNAL = ctypes.cast(lib.er_cancel_on_signal, ctypes.c_void_p).value


def interruptible(call):
    """Runs call() (a C call; its result returned) so that Ctrl-C stops it. In the main thread, where SIGINT has
    Python's default handler, the library's er_cancel_on_signal takes SIGINT for the call (a struct sigaction of
    that handler alone; the one it replaces is restored exactly afterwards): the long loops stop at their next poll
    and return ER_ERR_CANCELLED. A request that arrived during the call (cancelled or finished) is reset and raised
    as KeyboardInterrupt, so a Ctrl-C is never lost. Elsewhere the call runs as it is."""
    import signal
    import threading
    if (_SIGACTION is None or threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        return call()
    new, old = ctypes.create_string_buffer(512), ctypes.create_string_buffer(512)  # >= sizeof(struct sigaction)
    ctypes.c_void_p.from_buffer(new).value = _ON_SIGNAL  # sa_handler first; no flags, an empty mask
    if _SIGACTION(signal.SIGINT, new, old) != 0:
        return call()
    try:
        result = call()
    finally:
        _SIGACTION(signal.SIGINT, old, None)
        cancelled = lib.er_cancel_requested()
        if cancelled:
            lib.er_cancel_reset()
    if cancelled:
        raise KeyboardInterrupt
    return result


# ---- progress of long calls (er_set_progress) on standard error ----

_PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
_bar = {}


def _show_progress(done, total, user):
    """The library's progress callback: a tqdm bar where tqdm is installed, else one line rewritten in place."""
    try:
        import sys
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            bar = _bar.get("tqdm")
            if bar is None or bar.total != total:
                bar = _bar["tqdm"] = tqdm(total=total, desc="exactref", leave=False)
            bar.update(done - bar.n)
            if done >= total:
                bar.close()
                _bar.pop("tqdm", None)
            return
        end = "\n" if done >= total else ""
        sys.stderr.write("\rexactref: %3d%% (%d of %d)%s" % (100 * done // max(total, 1), done, total, end))
        sys.stderr.flush()
    except Exception:  # a callback must not raise into C
        pass


_PROGRESS = _PROGRESS_FN(_show_progress)


def _progress_setting():
    """EXACTREF_PROGRESS: 0 off, 1 on after 2 s of a call, a number of seconds on after that long; unset: on after
    2 s where standard error is a terminal."""
    import sys
    v = os.environ.get("EXACTREF_PROGRESS", "").strip()
    if v == "":
        return 2.0 if hasattr(sys.stderr, "isatty") and sys.stderr.isatty() else None
    try:
        x = float(v)
    except ValueError:
        raise ImportError("exactref: EXACTREF_PROGRESS=%r: expected 0 (off), 1 (on after 2 s) or a number of seconds"
                          % v) from None
    if not (x >= 0 and x < 1e9):
        raise ImportError("exactref: EXACTREF_PROGRESS=%r: expected 0 (off), 1 (on after 2 s) or a number of "
                          "seconds" % v)
    return None if x == 0 else 2.0 if x == 1 else x


_delay = _progress_setting()
if _delay is not None:
    lib.er_set_progress(ctypes.cast(_PROGRESS, ctypes.c_void_p), None, _delay)


def check(status):
    """Raises the exception of a nonzero C status with the thread's last error message."""
    if status == 0:
        return
    name = lib.er_status_name(status).decode()
    msg = lib.er_last_error().decode() or name
    raise error_class(status)(name, msg)


_names = [lib.er_class_name(i) for i in range(CLASS_COUNT + 1)]
check_copy("class count", CLASS_COUNT, next((i for i in range(CLASS_COUNT + 1) if _names[i] in _names[:i] or
                                             _names[i] in (None, b"invalid", b"unknown")), CLASS_COUNT + 1))
TENSOR_SIZE = lib.er_tensor_sizeof()
STANDARD_SIZE = lib.er_standard_sizeof()
REPORT_SIZE = lib.er_report_sizeof()

CLASSES = tuple(lib.er_class_name(i).decode() for i in range(CLASS_COUNT))
for _name, _code in (
    ("fp64", 1),
    ("fp32", 2),
    ("tf32", 3),
    ("bf16", 4),
    ("fp16", 5),
    ("fp8_e4m3fn", 6),
    ("fp8_e5m2", 7),
    ("fp4_e2m1fn", 8),
    ("fp6_e2m3fn", 9),
    ("fp6_e3m2fn", 10),
    ("fp8_e8m0fnu", 11),
):
    check_copy("format code of %s" % _name, _name, (lib.er_format_name(_code) or b"").decode())


def version():
    return lib.er_version().decode()


def standard_options():
    """The options of the standard string, from the parser's table: (name, the values it takes) in its order."""
    return tuple(
        (lib.er_standard_option_name(i).decode(), lib.er_standard_option_values(i).decode())
        for i in range(lib.er_standard_option_count())
    )


def op_options(op):
    """The options only some ops take that op (the library's name: "matmul", "layernorm") takes, from its module."""
    buf = ctypes.create_string_buffer(512)
    check(lib.er_op_options(op.encode(), buf, len(buf), None))
    return tuple(x for x in buf.value.decode().split(", ") if x)


OPS = tuple(lib.er_op_name(i).decode() for i in range(lib.er_op_count()))


def cuda_available():
    return bool(lib.er_cuda_available())


def cuda_trim():
    check(lib.er_cuda_trim())


def _out_ptr():
    return ctypes.c_void_p()


def _made(ptr):
    """A new reference's address (an int), which Reference owns and frees with ref_free."""
    return ptr.value


# ---- views, standards, reports ----

def tensor_view(fmt, shape, strides, data):
    """A view (er_tensor) of `data` (an address, or None for no element) as a buffer the other calls take."""
    buf = ctypes.create_string_buffer(TENSOR_SIZE)
    nd = len(shape)
    check(lib.er_tensor_view(buf, fmt, nd, (ctypes.c_int64 * nd)(*shape), (ctypes.c_int64 * nd)(*strides), data))
    return buf


def standard(order, options):
    """A parsed standard (er_standard_parse) as a buffer. A tree: standard points into its order's text, which the
    buffer keeps."""
    buf = ctypes.create_string_buffer(STANDARD_SIZE)
    text = ctypes.create_string_buffer(order.encode())
    check(lib.er_standard_parse(buf, text, options.encode()))
    buf._order_text = text
    return buf


class Reports:
    """n C reports in one buffer, each cleared (its classes array freed) when the last Report reading it goes."""

    def __init__(self, n):
        self.buf = ctypes.create_string_buffer(REPORT_SIZE * n)
        self.n = n

    def at(self, i):
        return Report(self, i)


class Report:
    """One filled report of a Reports block: the getters the Result reads (er_report_*), and its renderings."""

    def __init__(self, block, i=0):
        self._block = block
        self.ptr = ctypes.byref(block.buf, REPORT_SIZE * i)

    def __del__(self):
        try:
            lib.er_report_clear(self.ptr)
        except Exception:  # interpreter shutdown: the library may be gone already
            pass

    def numel(self):
        return int(lib.er_report_numel(self.ptr))

    def classes(self):
        """The classes as a uint8 numpy array over the report's own array, no copy: the array keeps this report alive
        (its buffer holds it), and er_report_clear runs once neither is referenced."""
        import numpy as np
        n = self.numel()
        if not n:
            return np.zeros(0, np.uint8)
        addr = ctypes.cast(lib.er_report_classes(self.ptr), ctypes.c_void_p).value
        if addr is None:  # left on the GPU by a device path (kept_block): brought here once
            check(lib.er_report_fetch_classes(self.ptr))
            addr = ctypes.cast(lib.er_report_classes(self.ptr), ctypes.c_void_p).value
        buf = (ctypes.c_uint8 * n).from_address(addr)
        buf._report = self  # the report outlives every array over its classes
        return np.frombuffer(buf, np.uint8)

    def count(self, c):
        return int(lib.er_report_count(self.ptr, c))

    def failed(self):
        return int(lib.er_report_failed(self.ptr))

    def resolution(self):
        return float(lib.er_report_resolution(self.ptr))

    def text(self):
        return rendered(lib.er_report_text, self.ptr)

    def json_text(self):
        return rendered(lib.er_report_json, self.ptr)


def rendered(fn, ptr):
    """A C rendering (er_report_text, er_standard_format) of the object at ptr: asked for its length, then written."""
    need = ctypes.c_size_t(0)
    fn(ptr, None, 0, ctypes.byref(need))
    out = ctypes.create_string_buffer(need.value + 1)
    check(fn(ptr, out, need.value + 1, None))
    return out.value.decode()


def clear(rep):
    """Frees a Report's classes now (a report that is only a step towards others)."""
    lib.er_report_clear(rep.ptr)


# ---- references ----

def ref_free(ptr):
    lib.er_ref_free(ptr)


def ref_fast(ptr):
    return bool(lib.er_ref_fast(ptr))


def ref_output_shape(ptr, output):
    nd = ctypes.c_int(0)
    shp = (ctypes.c_int64 * MAX_DIMS)()
    check(lib.er_ref_output_shape(ptr, output, ctypes.byref(nd), shp))
    return tuple(shp[i] for i in range(nd.value))


def _new(fn, *args):
    ptr = _out_ptr()
    check(fn(ctypes.byref(ptr), *args))
    return _made(ptr)


def matmul(va, vb):
    return _new(lib.er_matmul, va, vb)


def scaled_matmul(va, vb, scale_a, scale_b):
    return _new(lib.er_scaled_matmul, va, vb, scale_a, scale_b)


def scaled_matmul_rowwise(va, vb, vsa, vsb):
    return _new(lib.er_scaled_matmul_rowwise, va, vb, vsa, vsb)


def along(op, vx, dim):
    """sum, mean, max, softmax or log_softmax of a view along dim."""
    return _new({"sum": lib.er_sum, "mean": lib.er_mean, "max": lib.er_max, "softmax": lib.er_softmax,
                 "log_softmax": lib.er_log_softmax}[op], vx, dim)


def rmsnorm(vx, vw, eps):
    return _new(lib.er_rmsnorm, vx, vw, eps)


def softmax_backward(vdy, vy, dim, log=False):
    return _new(lib.er_log_softmax_backward if log else lib.er_softmax_backward, vdy, vy, dim)


def norm_backward(vdy, vx, k, vmean, vrstd, vw, eps=0.0, rms=False):
    """layer_norm_backward, or rmsnorm_backward (rms; vrstd None: the kernel's own rstd with eps)."""
    if rms:
        return _new(lib.er_rmsnorm_backward, vdy, vx, vrstd, vw, eps)
    return _new(lib.er_layer_norm_backward, vdy, vx, k, vmean, vrstd, vw)


def cross_entropy(vx, target, reduction, ignore_index, eps):
    """er_cross_entropy; target a C-contiguous int64 numpy array in native byte order (the library copies it)."""
    ptr = target.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
    return _new(lib.er_cross_entropy, vx, ptr, target.size, reduction, ignore_index, eps)


def layernorm(vx, k, vw, vb, eps):
    return _new(lib.er_layernorm, vx, k, vw, vb, eps)


def tensor_ref(vx):
    return _new(lib.er_tensor_ref, vx)


def quantize(vx, fmt, gran, block, recipe):
    return _new(lib.er_quantize, vx, fmt, gran, block, recipe)


def quantize_ref(base, fmt, gran, block, recipe):
    return _new(lib.er_quantize_ref, base, fmt, gran, block, recipe)


class _Stage(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("t", ctypes.c_void_p), ("scalar", ctypes.c_double), ("format", ctypes.c_int),
                ("ref", ctypes.c_void_p)]


check_copy("er_stage size", ctypes.sizeof(_Stage), lib.er_stage_sizeof())

STAGE_KINDS = {
    "add": 1,
    "mul": 2,
    "relu": 3,
    "cast": 4,
    "gelu": 5,
    "silu": 6,
    "exp": 7,
    "exp2": 8,
    "log": 9,
    "tanh": 10,
    "sigmoid": 11,
    "erf": 12,
    "rsqrt": 13,
    "gelu_tanh": 14,
}
for _kind, _code in STAGE_KINDS.items():
    check_copy("stage kind %d" % _code, _kind, (lib.er_stage_kind_name(_code) or b"").decode())


def chain(base, stages):
    """er_chain over base; stages: (kind, view or None, scalar, format, reference or None) each."""
    arr = (_Stage * (len(stages) or 1))()
    for i, (kind, view, scalar, fmt, ref) in enumerate(stages):
        arr[i].kind = STAGE_KINDS[kind]
        arr[i].t = ctypes.addressof(view) if view is not None else None
        arr[i].scalar = scalar
        arr[i].format = fmt
        arr[i].ref = ref
    return _new(lib.er_chain, base, arr, len(stages))


class _AttentionOpts(ctypes.Structure):
    _fields_ = [
        ("scale", ctypes.c_double),
        ("causal", ctypes.c_int),
        ("bottom_right", ctypes.c_int),
        ("window", ctypes.c_int),
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("enable_gqa", ctypes.c_int),
    ]


check_copy("er_attention_opts size", ctypes.sizeof(_AttentionOpts), lib.er_attention_opts_sizeof())


class _AttentionFp8Scales(ctypes.Structure):
    _fields_ = [(name, ctypes.c_double) for name in ("descale_q", "descale_k", "descale_v", "scale_s", "descale_s",
                                                      "scale_o")]


check_copy("er_attention_fp8_scales size", ctypes.sizeof(_AttentionFp8Scales), lib.er_attention_fp8_scales_sizeof())


def attention(vq, vk, vv, scale, causal, bottom_right, window, enable_gqa):
    """er_attention; window None (no window) or (left, right) in [0, 2^63)."""
    o = _attention_opts(scale, causal, bottom_right, window, enable_gqa)
    return _new(lib.er_attention, vq, vk, vv, ctypes.byref(o))


def _attention_opts(scale, causal, bottom_right, window, enable_gqa):
    o = _AttentionOpts()
    o.scale, o.causal, o.bottom_right, o.enable_gqa = scale, causal, bottom_right, enable_gqa
    if window is not None:
        o.window, o.window_left, o.window_right = 1, window[0], window[1]
    return o


def attention_fp8(vq, vk, vv, scale, causal, bottom_right, window, enable_gqa, scales):
    """er_attention_fp8; scales a dict of the six fields (0 for a default), each checked already."""
    o = _attention_opts(scale, causal, bottom_right, window, enable_gqa)
    sc = _AttentionFp8Scales(**scales)
    return _new(lib.er_attention_fp8, vq, vk, vv, ctypes.byref(o), ctypes.byref(sc))


def attention_backward(vq, vk, vv, vo, vlse, vdo, scale, causal, bottom_right, window, enable_gqa):
    """er_attention_backward; vlse None: the kernel's own LSE is not given."""
    o = _attention_opts(scale, causal, bottom_right, window, enable_gqa)
    return _new(lib.er_attention_backward, vq, vk, vv, vo, vlse, vdo, ctypes.byref(o))


# ---- covers, sets, exact values ----

def covers(ptr, view, std, short=False):
    """er_covers into a new report; short: a call of at most about a millisecond, run without taking SIGINT for it (a
    Ctrl-C during it is raised by Python once it returns, as for any short call)."""
    block = Reports(1)
    call = lambda: lib.er_covers(block.buf, ptr, view, std)  # noqa: E731
    check(call() if short else interruptible(call))
    return block.at(0)


def covers_device(ptr, view, std, stream_handle):
    """er_covers_device (the output in device memory, copied by the library) into a new report."""
    block = Reports(1)
    check(interruptible(lambda: lib.er_covers_device(block.buf, ptr, view, std, ctypes.c_void_p(stream_handle))))
    return block.at(0)


def covers_sets(ptr, view, std, lo, hi, slack, into=None):
    """er_covers_sets into the float64 arrays lo, hi, slack (a new report, or `into`'s storage)."""
    block = into or Reports(1)
    check(interruptible(lambda: lib.er_covers_sets(block.buf, ptr, view, std, lo.ctypes.data, hi.ctypes.data,
                                                   slack.ctypes.data)))
    return block.at(0)


def covers_outputs_sets(ptr, views, std, arrays):
    """er_covers_outputs_sets: views[i] a view or None (not checked), arrays[i] (lo, hi, slack) float64 arrays or
    None."""
    n = len(views)
    bufs = (ctypes.c_void_p * n)(*[ctypes.addressof(v) if v is not None else None for v in views])
    ptrs = [(ctypes.c_void_p * n)() for _ in range(3)]
    for i, a in enumerate(arrays):
        if a is not None:
            for k in range(3):
                ptrs[k][i] = a[k].ctypes.data
    block = Reports(n)
    check(interruptible(lambda: lib.er_covers_outputs_sets(block.buf, ptr, bufs, n, std, *ptrs)))
    return [block.at(i) for i in range(n)]


def enclosure(ptr, output, std, fmt, lo, hi, flags):
    check(interruptible(lambda: lib.er_ref_enclosure(ptr, output, std, fmt, lo.ctypes.data, hi.ctypes.data,
                                                     flags.ctypes.data)))


def rounded(view, ptr):
    check(interruptible(lambda: lib.er_ref_rounded(view, ptr)))


def emulate(ptr, view, std):
    check(interruptible(lambda: lib.er_emulate(ptr, view, std)))


def matmul_device(va, vb, stream_handle):
    return _new(lib.er_matmul_device, va, vb, ctypes.c_void_p(stream_handle))


def matmul_covers_device(va, vb, vo, std, stream_handle):
    block = kept_block()
    check(lib.er_matmul_covers_device(block.buf, va, vb, vo, std, ctypes.c_void_p(stream_handle)))
    return block.at(0)


def kept_block():
    """One report marked to keep a device check's classes on the GPU (er_report_keep_on_device) until
    Report.classes()."""
    block = Reports(1)
    check(lib.er_report_keep_on_device(block.buf))
    return block


def softmax_covers_device(vx, dim, vo, std, stream_handle, log=False):
    block = kept_block()
    fn = lib.er_log_softmax_covers_device if log else lib.er_softmax_covers_device
    check(fn(block.buf, vx, dim, vo, std, ctypes.c_void_p(stream_handle)))
    return block.at(0)


def softmax_backward_covers_device(vd, vy, dim, vo, std, stream_handle, log=False):
    block = kept_block()
    fn = lib.er_log_softmax_backward_covers_device if log else lib.er_softmax_backward_covers_device
    check(fn(block.buf, vd, vy, dim, vo, std, ctypes.c_void_p(stream_handle)))
    return block.at(0)


def rmsnorm_covers_device(vx, vw, eps, vo, std, stream_handle):
    block = kept_block()
    check(lib.er_rmsnorm_covers_device(block.buf, vx, vw, eps, vo, std, ctypes.c_void_p(stream_handle)))
    return block.at(0)


def layernorm_covers_device(vx, nd, vw, vb, eps, vo, std, stream_handle):
    block = kept_block()
    check(lib.er_layernorm_covers_device(block.buf, vx, nd, vw, vb, eps, vo, std, ctypes.c_void_p(stream_handle)))
    return block.at(0)


def attention_covers_device_outputs(vq, vk, vv, scale, causal, bottom_right, window, enable_gqa, vo, vl, std,
                                    stream_handle):
    """er_attention_covers_device_outputs; vo or vl None: that output not checked. The two reports."""
    o = _attention_opts(scale, causal, bottom_right, window, enable_gqa)
    outs = (ctypes.c_void_p * 2)(*[ctypes.addressof(v) if v is not None else None for v in (vo, vl)])
    block = Reports(2)
    check(lib.er_attention_covers_device_outputs(block.buf, vq, vk, vv, ctypes.byref(o), outs, std,
                                                 ctypes.c_void_p(stream_handle)))
    return [block.at(0), block.at(1)]


def cross_entropy_covers_device(vx, target, reduction, ignore_index, eps, vl, vg, std, stream_handle):
    """er_cross_entropy_covers_device; target a C-contiguous native int64 numpy array; vl or vg None: that output not
    checked. The two reports, dlogits' marked to keep its classes on the GPU (er_report_keep_on_device) until
    Report.classes()."""
    ptr = target.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
    outs = (ctypes.c_void_p * 2)(*[ctypes.addressof(v) if v is not None else None for v in (vl, vg)])
    block = Reports(2)
    check(lib.er_report_keep_on_device(ctypes.byref(block.buf, REPORT_SIZE)))  # dlogits' classes stay on the GPU
    check(lib.er_cross_entropy_covers_device(block.buf, vx, ptr, target.size, reduction, ignore_index, eps, outs, std,
                                             ctypes.c_void_p(stream_handle)))
    return [block.at(0), block.at(1)]


def attention_covers_device(vq, vk, vv, scale, causal, bottom_right, window, enable_gqa, vo, std, stream_handle):
    o = _attention_opts(scale, causal, bottom_right, window, enable_gqa)
    block = Reports(1)
    check(lib.er_attention_covers_device(block.buf, vq, vk, vv, ctypes.byref(o), vo, std,
                                         ctypes.c_void_p(stream_handle)))
    return block.at(0)


# ---- inputs and depths ----

def family_code(name):
    fam = ctypes.c_int()
    check(lib.er_family_parse(ctypes.byref(fam), name.encode()))
    return fam.value


def fill(view, family, seed):
    check(lib.er_fill(view, family, ctypes.c_uint64(seed)))


def depth(fn, *args):
    """The int64 the C helper er_<fn> writes through its first argument."""
    out = ctypes.c_int64(0)
    check(getattr(lib, "er_" + fn)(ctypes.byref(out), *args))
    return out.value
