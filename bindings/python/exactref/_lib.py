"""Loading libexactref and declaring the C functions the bindings call (the public C API only)."""
import ctypes
import ctypes.util
import glob
import os

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
    "er_format_from_name": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p]),
    "er_tensor_sizeof": (ctypes.c_size_t, []),
    "er_tensor_view": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, c_int64_p, c_int64_p, ctypes.c_void_p]),
    "er_standard_sizeof": (ctypes.c_size_t, []),
    "er_standard_parse": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]),
    "er_standard_format": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "er_matmul": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p]),
    "er_ref_free": (None, [ctypes.c_void_p]),
    "er_sum": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_mean": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_max": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_softmax": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_log_softmax": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]),
    "er_rmsnorm": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]),
    "er_scaled_matmul": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double,
                                        ctypes.c_double]),
    "er_layernorm": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_double]),
    "er_covers_outputs": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                         ctypes.c_void_p]),
    "er_ref_shape": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), c_int64_p]),
    "er_ref_output_shape": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int), c_int64_p]),
    "er_covers": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    "er_covers_sets": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.c_void_p]),
    "er_covers_outputs_sets": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                              ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p),
                                              ctypes.POINTER(ctypes.c_void_p)]),
    "er_ref_fast": (ctypes.c_int, [ctypes.c_void_p]),
    "er_fill": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]),
    "er_family_parse": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p]),
    "er_tensor_ref": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]),
    "er_quantize": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_int64, ctypes.c_int]),
    "er_quantize_ref": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                       ctypes.c_int64, ctypes.c_int]),
    "er_attention": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_void_p]),
    "er_chain": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]),
    "er_stage_kind_name": (ctypes.c_char_p, [ctypes.c_int]),
    "er_stage_sizeof": (ctypes.c_size_t, []),
    "er_attention_opts_sizeof": (ctypes.c_size_t, []),
    "er_format_name": (ctypes.c_char_p, [ctypes.c_int]),
    "er_ref_enclosure": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_void_p]),
    "er_format_precision": (ctypes.c_int, [ctypes.c_int]),
    "er_format_min_normal": (ctypes.c_double, [ctypes.c_int]),
    "er_format_min_subnormal": (ctypes.c_double, [ctypes.c_int]),
    "er_emulate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    "er_ref_rounded": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    "er_report_sizeof": (ctypes.c_size_t, []),
    "er_report_clear": (None, [ctypes.c_void_p]),
    "er_report_text": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "er_report_json": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "er_report_numel": (ctypes.c_int64, [ctypes.c_void_p]),
    "er_report_count": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_int]),
    "er_report_failed": (ctypes.c_int64, [ctypes.c_void_p]),
    "er_report_classes": (ctypes.POINTER(ctypes.c_uint8), [ctypes.c_void_p]),
    "er_class_name": (ctypes.c_char_p, [ctypes.c_int]),
    "er_cuda_available": (ctypes.c_int, []),
    "er_depth_triton": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int]),
    "er_depth_torch_softmax": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]),
    "er_depth_torch_layer_norm": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]),
    "er_combine_depth_torch_layer_norm": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]),
    "er_depth_cub_block_reduce": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_int]),
    "er_matmul_covers_device": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                               ctypes.c_void_p]),
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


_names = [lib.er_class_name(i) for i in range(CLASS_COUNT + 1)]
check_copy("class count", CLASS_COUNT, next((i for i in range(CLASS_COUNT + 1) if _names[i] in _names[:i] or
                                             _names[i] in (None, b"invalid", b"unknown")), CLASS_COUNT + 1))
TENSOR_SIZE = lib.er_tensor_sizeof()
STANDARD_SIZE = lib.er_standard_sizeof()
REPORT_SIZE = lib.er_report_sizeof()
