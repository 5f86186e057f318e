"""Exceptions: a C status becomes one of these (_ffi.check), carrying the status name and the library's message;
the argument checks (_check.py) raise them too."""


class ExactrefError(Exception):
    """Base class of the errors exactref raises for a refused call."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class ExactrefValueError(ExactrefError, ValueError):
    """Bad arguments: shapes, formats, sizes, standards, outputs."""


class ExactrefTypeError(ExactrefError, TypeError):
    """A missing argument."""


class ExactrefMemoryError(ExactrefError, MemoryError):
    """Out of memory, or a request too large to hold."""


class ExactrefNotImplementedError(ExactrefError, NotImplementedError):
    """A valid request this version does not implement."""


class ExactrefInternalError(ExactrefError, RuntimeError):
    """A broken internal invariant: a bug in exactref."""


_BY_STATUS = {
    -1: ExactrefTypeError,
    -8: ExactrefMemoryError,
    -9: ExactrefNotImplementedError,
    -11: ExactrefInternalError,
}


def error_class(status):
    """The exception class of a C status."""
    return _BY_STATUS.get(status, ExactrefValueError)
