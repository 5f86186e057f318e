"""Exceptions: a C status becomes one of these, carrying the status name and the library's message."""
from . import _lib


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


_BY_STATUS = {-1: ExactrefTypeError, -8: ExactrefMemoryError, -9: ExactrefNotImplementedError, -11: ExactrefInternalError}


def check(status):
    """Raises the exception of a nonzero C status with the thread's last error message."""
    if status == 0:
        return
    name = _lib.lib.er_status_name(status).decode()
    msg = _lib.lib.er_last_error().decode() or name
    raise _BY_STATUS.get(status, ExactrefValueError)(name, msg)
