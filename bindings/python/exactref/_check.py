"""Argument checks for every value that crosses into C: ctypes wraps an integer silently (2**64 + 4 becomes 4) and
truncates a float given for an int (dim=0.9 becomes 0), so each argument is typed and range-checked here first, and a
refusal names the argument, what it got and what it takes."""
import math
import numbers

import numpy as np

from ._errors import ExactrefTypeError, ExactrefValueError

INT64_MAX = 2 ** 63 - 1
INT64_MIN = -2 ** 63
UINT64_MAX = 2 ** 64 - 1


def _what(v):
    """How a refused value is shown: its repr, clipped, and its type."""
    r = repr(v)
    if len(r) > 60:
        r = r[:57] + "..."
    return "%s (%s)" % (r, type(v).__name__)


def _type_error(where, name, v, wanted):
    return ExactrefTypeError("ER_ERR_INVALID", "exactref: %s: %s must be %s; got %s" % (where, name, wanted, _what(v)))


def _value_error(where, name, v, wanted):
    return ExactrefValueError("ER_ERR_INVALID", "exactref: %s: %s must be %s; got %s" % (where, name, wanted, _what(v)))


def is_integer(v):
    """A Python or numpy integer, bool excepted (True is not a dimension)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def integer(v, where, name, lo=INT64_MIN, hi=INT64_MAX):
    """v as a Python int in [lo, hi]; floats, bools, strings and everything else refused (no truncation)."""
    if not is_integer(v):
        raise _type_error(where, name, v, "an integer")
    i = int(v)
    if not lo <= i <= hi:
        raise _value_error(where, name, v, "an integer in [%d, %d]" % (lo, hi))
    return i


def real(v, where, name, lo=None, finite=True, nonzero=False):
    """v as a Python float: an int, a float or a numpy number (bool and strings refused), finite where asked, at
    least lo where given, nonzero where asked; an int too large for a double is refused rather than rounded to inf."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.integer, np.floating)):
        raise _type_error(where, name, v, "a number")
    try:
        f = float(v)
    except OverflowError:
        raise _value_error(where, name, v, "a number a double holds") from None
    if math.isnan(f) or (finite and math.isinf(f)):
        raise _value_error(where, name, v, "a finite number")
    if lo is not None and not f >= lo:
        raise _value_error(where, name, v, "a number of at least %g" % lo)
    if nonzero and f == 0:
        raise _value_error(where, name, v, "nonzero")
    return f


def flag(v, where, name):
    """v as a bool: True, False or a numpy bool (1 and "yes" refused: say what you mean)."""
    if not isinstance(v, (bool, np.bool_)):
        raise _type_error(where, name, v, "True or False")
    return bool(v)


def choice(v, where, name, options):
    """v, one of the strings `options`."""
    if not isinstance(v, str) or v not in options:
        raise _value_error(where, name, v, "one of %s" % ", ".join(repr(o) for o in options))
    return v


def dim(v, where, ndim, name="dim"):
    """A dimension of an array of ndim dimensions as a nonnegative int (negative counts from the end)."""
    d = integer(v, where, name)
    if not -ndim <= d < ndim:
        raise ExactrefValueError(
            "ER_ERR_INVALID",
            "exactref: %s: %s=%d is out of range for %d dimension%s (takes %d to %d)"
            % (where, name, d, ndim, "" if ndim == 1 else "s", -ndim, ndim - 1),
        )
    return d % ndim


def shape(v, where, name="shape"):
    """A shape: an int or a sequence of ints, each in [0, 2^63)."""
    if is_integer(v):
        return (integer(v, where, name, 0),)
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise _type_error(where, name, v, "an integer or a tuple of integers")
    return tuple(integer(d, where, "%s[%d]" % (name, i), 0) for i, d in enumerate(v))


def ulps(v, where, name="ulps"):
    """An accuracy in ulps: None (the default of the function's table) or a number in (0, 64]."""
    if v is None:
        return 0.0
    f = real(v, where, name, lo=0)
    if not 0 < f <= 64:
        raise _value_error(where, name, v, "None or a number in (0, 64]")
    return f
