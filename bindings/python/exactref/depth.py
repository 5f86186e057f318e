"""Depths of the reduction trees real kernels use, for the `depth=` option (docs/algorithms/any-order.md, Theorem 7).

    import exactref as er
    d = er.depth.triton(block=4096, num_warps=4, version="3.6")      # 38: a chain per thread, then butterflies
    er.layer_norm(x, (4096,)).covers((y, mean, rstd), variance="two_pass", depth=d)
"""
from . import _check, _ffi
from ._errors import ExactrefTypeError

_INT_MAX = 2 ** 31 - 1


def _ints(where, hi=_check.INT64_MAX, **args):
    """The arguments as Python ints in [0, hi] (the C helper's int or int64_t), never wrapped by ctypes."""
    return [_check.integer(v, "depth." + where, name, 0, hi) for name, v in args.items()]


def _call(fn, *args):
    """The int64 the C helper fn writes through its first argument, its other arguments args."""
    return _ffi.depth(fn[3:], *args)


def triton(block, num_warps=4, version=None):
    """The depth of Triton's tl.sum / tl.reduce over `block` elements (a power of two) with `num_warps` warps:
    each thread chains its block / (32 num_warps) elements (Triton up to 3.7) or adds them in a balanced tree (3.8
    and later), then a 5-level warp butterfly and a log2(num_warps)-level tree across warps. `version`: "3.6",
    (3, 6), or None for the installed Triton's."""
    if version is None:
        try:
            import triton as _t
            version = _t.__version__
        except ImportError:
            raise ExactrefTypeError("ER_ERR_INVALID", "exactref: depth.triton needs version= (Triton is not installed "
                                    "here to read it from)") from None
    if isinstance(version, str):
        parts = version.split(".")
        try:
            major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
        except ValueError:
            raise ExactrefTypeError("ER_ERR_INVALID", "exactref: depth.triton: version %r: expected 'major.minor'"
                                    % version) from None
    elif isinstance(version, tuple) and len(version) >= 2:
        major, minor = version[0], version[1]
    else:
        raise ExactrefTypeError(
            "ER_ERR_INVALID",
            "exactref: depth.triton: version must be 'major.minor', (major, minor) "
            "or None; got %r (%s)" % (version, type(version).__name__),
        )
    major, minor = _ints("triton", _INT_MAX, version_major=major, version_minor=minor)
    block, = _ints("triton", block=block)
    num_warps, = _ints("triton", _INT_MAX, num_warps=num_warps)
    return _call("er_depth_triton", block, num_warps, major, minor)


def torch_softmax(n):
    """The depth of torch's CUDA softmax and log_softmax sums over rows of n elements: on its persistent path (n up
    to 1024) each of W = min(P, 32) lanes chains its P / W elements (P: n rounded up to a power of two), then a
    log2(W)-level butterfly; on its block path (n above 1024) each of 1024 threads chains its elements, then two
    5-level shuffle trees (er_depth_torch_softmax)."""
    n, = _ints("torch_softmax", n=n)
    return _call("er_depth_torch_softmax", n)


def torch_layer_norm(n):
    """The depth of torch's CUDA layer_norm Welford tree over rows of n elements (er_depth_torch_layer_norm), for
    covers(..., variance="welford" or "either", depth=...): the deeper of its vectorized kernel (128 threads' chains
    of 4 ceil(n / 512) elements, then 7 combine levels) and its rowwise one (512 threads, then 10 levels)."""
    n, = _ints("torch_layer_norm", n=n)
    return _call("er_depth_torch_layer_norm", n)


def torch_layer_norm_combines(n):
    """The combine depth of the same trees (er_combine_depth_torch_layer_norm), for combine_depth=: the most Welford
    combines on a leaf's path, 10 (the rowwise kernel's 5 + 5 levels; the vectorized kernel's are 5 + 2).

        er.layer_norm(x, n).covers((y, mean, rstd), variance="either", depth=er.depth.torch_layer_norm(n),
                                   combine_depth=er.depth.torch_layer_norm_combines(n))"""
    n, = _ints("torch_layer_norm_combines", n=n)
    return _call("er_combine_depth_torch_layer_norm", n)


def cub_block_reduce(items_per_thread, block_threads):
    """The depth of CUB's BlockReduce Sum (BLOCK_REDUCE_WARP_REDUCTIONS, its default) over `block_threads` threads of
    `items_per_thread` fp32 or fp64 items: each thread's items in a chain, a shuffle-down tree in each warp, the warp
    totals in a chain: (items_per_thread - 1) + ceil(log2(min(block_threads, 32))) + (warps - 1)."""
    items_per_thread, block_threads = _ints("cub_block_reduce", _INT_MAX, items_per_thread=items_per_thread,
                                            block_threads=block_threads)
    return _call("er_depth_cub_block_reduce", items_per_thread, block_threads)
