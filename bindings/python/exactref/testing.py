"""Inputs for testing kernels (docs/reference/testing.md): seeded families that go where kernel bugs live.

    import exactref as er
    A = er.testing.family("cancellation", (17, 1025), "float16", seed=3)
    B = er.testing.family("normal", (1025, 9), "float16", seed=4)

The values come from the C library (er_fill), so a (family, shape, dtype, seed) gives the same bits in Python, in
C and on every machine.
"""
import ctypes

import numpy as np

from . import _lib
from ._arrays import View, numpy_dtype
from ._errors import check

#: The families, in er_family order.
FAMILIES = ("normal", "positive", "cancellation", "wide", "near_max", "subnormal", "ties", "specials", "offset",
            "integers", "masked")


def family(name, shape, dtype="float32", seed=0):
    """A new array of `shape` and `dtype` holding the family's values for `seed` (er_fill): "normal", "positive",
    "cancellation" (pairs along each row that cancel to a small residue), "wide" (exponents over a wide range),
    "near_max" (sums of two may overflow), "subnormal" (products near the subnormal range, some values subnormal),
    "ties" (signed powers of two whose exact sums land on rounding midpoints), "specials" (inf and NaN sprinkled),
    "offset" (2^ceil(p/2) + N(0, 1)), "integers" (small integers, mostly zero) or "masked" (rows whose tail is -inf).
    bfloat16 and the fp8 formats come as ml_dtypes arrays."""
    fam = ctypes.c_int()
    if not isinstance(name, str):
        raise TypeError("exactref: family name must be a str, not %s" % type(name).__name__)
    check(_lib.lib.er_family_parse(ctypes.byref(fam), name.encode()))
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2 ** 64:
        raise ValueError("exactref: seed %r: expected an integer in [0, 2^64)" % (seed,))
    out = np.empty(shape, numpy_dtype(dtype))
    if out.size:
        view = View(out, "out", writable=True)
        check(_lib.lib.er_fill(view.buf, fam.value, ctypes.c_uint64(int(seed))))
    return out
