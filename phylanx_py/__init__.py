"""phylanx-py: compile NumPy-style Python into an execution tree of futures; run it locally or on Dask."""
from . import runtime  # noqa: E402
from ._version import __version__  # noqa: F401
from .decorator import CompiledFunction, compile  # noqa: E402
from .errors import (  # noqa: E402
    ClusterError,
    CompileError,
    ConfigurationError,
    ExecutionError,
    PhylanxError,
    UnsafeCacheError,
)
from .grad import grad, value_and_grad  # noqa: E402
from .profile import Profile, profile  # noqa: E402
from .runtime import (
           tiled,  # noqa: E402
           using,  # noqa: E402
)
from .runtime.tiled import allgather, allreduce, broadcast  # noqa: E402
from .trace import TraceError  # noqa: E402

__all__ = ["ClusterError", "CompileError", "CompiledFunction", "ConfigurationError", "ExecutionError",
           "PhylanxError", "Profile", "TraceError", "UnsafeCacheError", "allgather", "allreduce", "broadcast",
           "compile", "grad", "profile", "runtime", "tiled", "using", "value_and_grad"]
