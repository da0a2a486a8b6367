"""The errors phylanx-py raises; each names the user's file:line (stdlib only)."""
from __future__ import annotations

from .source import SourceLoc


class PhylanxError(Exception):
    """Base class. ``loc`` is the user's source location; ``filename``/``lineno``/``col`` mirror it."""

    def __init__(self, message: str, loc: SourceLoc | None = None):
        self.message = message
        self.loc = loc
        super().__init__(self._format())

    @property
    def filename(self) -> str | None:
        return self.loc.filename if self.loc else None

    @property
    def lineno(self) -> int | None:
        return self.loc.lineno if self.loc else None

    @property
    def col(self) -> int | None:
        return self.loc.col if self.loc else None

    def _format(self) -> str:
        if self.loc is None:
            return self.message
        return f"{self.loc}: {self.message}\n{self.loc.traceback_lines()}"

    def __reduce__(self):
        # Errors travel between processes (Dask workers); rebuild from the same arguments.
        return (type(self), (self.message, self.loc))


class CompileError(PhylanxError):
    """A construct that @compile does not support, or a name it cannot resolve."""


class ExecutionError(PhylanxError):
    """A failure while evaluating the tree: names the primitive, the user's line and the cause (chained)."""

    def __init__(self, message: str, loc: SourceLoc | None = None, primitive: str | None = None):
        self.primitive = primitive
        super().__init__(message, loc)

    @classmethod
    def from_exception(cls, exc: BaseException, loc: SourceLoc | None, primitive: str) -> ExecutionError:
        # A composite kernel (a fused group) names the operation that failed inside it and that operation's
        # location (primitives.OperationFailed, duck-typed: errors.py imports nothing of the project).
        located = getattr(exc, "located", None)
        if located is not None:
            exc, loc, primitive = located
        err = cls(f"in primitive '{primitive}': {type(exc).__name__}: {exc}", loc, primitive)
        err.__cause__ = exc
        return err

    def __reduce__(self):
        return (_rebuild_execution_error, (self.message, self.loc, self.primitive, self.__cause__))


def _rebuild_execution_error(message, loc, primitive, cause):
    err = ExecutionError(message, loc, primitive)
    err.__cause__ = cause
    return err


class ClusterError(PhylanxError):
    """A Dask cluster cannot be used: unreachable scheduler, workers without (this version of) phylanx-py."""


class ConfigurationError(PhylanxError):
    """phylanx-py's setup is wrong (an environment variable, a folder), not a line of the program: raised as it is
    wherever it is found (see ``RAISED_AS_IS``), never wrapped in an ExecutionError at the line that happened to
    need the setting."""


class UnsafeCacheError(ConfigurationError):
    """A folder of the kernel cache (primitives/kernel_cache.py) can be written by other users, so the kernels and
    machine code cached there cannot be trusted. ``folder`` is that folder, ``variable`` the environment variable
    that chooses it (``PHYLANX_CACHE_DIR``, or ``NUMBA_CACHE_DIR`` where Numba keeps the kernels' machine code)."""

    def __init__(self, message: str, loc: SourceLoc | None = None, folder: str | None = None,
                 variable: str = "PHYLANX_CACHE_DIR"):
        self.folder, self.variable = folder, variable
        super().__init__(message, loc)

    def __reduce__(self):
        return (type(self), (self.message, self.loc, self.folder, self.variable))


# What kernels, tile rules and generated code raise unchanged (anything else becomes an ExecutionError at the line
# that failed): errors that already say what went wrong and where, and errors of the setup, which no line caused.
RAISED_AS_IS = (ExecutionError, ConfigurationError)
