"""exactref: exact references and sound covering sets for checking GPU kernel outputs.

    import exactref as er
    ref = er.matmul(A, B)                                  # numpy, torch or ml_dtypes arrays
    res = ref.covers(out, standard="any_order", compute="float32")
    res.all()            # True when every element is exact, covered, or an allowed overflow (also bool(res))
    res.assert_all()     # for pytest: AssertionError carrying the report
    expected = ref.emulate(standard="sequential", compute="float32", fma="always", dtype="float32")

Standards and their options are those of the C library (docs/reference/standard.md): keyword arguments become
the options string (compute="float16", fma="always", inner="any", ...).

The package in layers: _ffi (the only module that imports ctypes: the library, its signatures, every call), _check
(each argument typed and range-checked before a call), _api (the user API, re-exported here), testing and depth
over it.
"""
from . import depth, testing
from ._api import (
    CLASSES,
    PASSING,
    AttentionReference,
    ChainReference,
    Enclosure,
    LayerNormReference,
    QuantizeReference,
    Reference,
    Result,
    Results,
    attention,
    cuda_available,
    cuda_trim,
    erf,
    exp,
    exp2,
    gelu,
    layer_norm,
    log,
    log_softmax,
    matmul,
    matmul_covers_device,
    softmax_covers_device,
    log_softmax_covers_device,
    rmsnorm_covers_device,
    layer_norm_covers_device,
    attention_covers_device,
    max,
    mean,
    quantize,
    relu,
    rmsnorm,
    rsqrt,
    scaled_matmul,
    sigmoid,
    silu,
    softmax,
    softmax_backward,
    log_softmax_backward,
    layer_norm_backward,
    rmsnorm_backward,
    cross_entropy,
    attention_backward,
    CrossEntropyReference,
    AttentionBackwardReference,
    LayerNormBackwardReference,
    RmsNormBackwardReference,
    sum,
    tanh,
    tensor,
    version,
)
from ._arrays import unpack_fp4
from ._errors import (ExactrefError, ExactrefInternalError, ExactrefMemoryError, ExactrefNotImplementedError,
                      ExactrefTypeError, ExactrefValueError)

#: The library's version (er_version), which the package's matches.
__version__ = version()

__all__ = [
    "ChainReference",
    "Enclosure",
    "depth",
    "testing",
    "gelu",
    "relu",
    "silu",
    "tensor",
    "exp",
    "exp2",
    "log",
    "tanh",
    "sigmoid",
    "erf",
    "rsqrt",
    "quantize",
    "attention",
    "matmul",
    "matmul_covers_device",
    "softmax_covers_device",
    "log_softmax_covers_device",
    "rmsnorm_covers_device",
    "layer_norm_covers_device",
    "attention_covers_device",
    "cuda_available",
    "cuda_trim",
    "scaled_matmul",
    "unpack_fp4",
    "sum",
    "mean",
    "max",
    "softmax",
    "log_softmax",
    "softmax_backward",
    "log_softmax_backward",
    "layer_norm_backward",
    "rmsnorm_backward",
    "cross_entropy",
    "attention_backward",
    "rmsnorm",
    "layer_norm",
    "Reference",
    "Result",
    "Results",
    "AttentionReference",
    "LayerNormReference",
    "LayerNormBackwardReference",
    "RmsNormBackwardReference",
    "CrossEntropyReference",
    "AttentionBackwardReference",
    "QuantizeReference",
    "version",
    "CLASSES",
    "PASSING",
    "ExactrefError",
    "ExactrefValueError",
    "ExactrefTypeError",
    "ExactrefMemoryError",
    "ExactrefNotImplementedError",
    "ExactrefInternalError",
]
