"""The native tier: loop nests and whole functions lowered to Numba at call time (see tiering.py for the modes,
lower.py and arith.py for what keeps the plain function's answer). Importing it registers both with loop_tiers.py,
after every other loop tier, and remote.py's tier for loops over the cluster's arrays (after the SPMD tier)."""
from .. import loop_tiers
from . import remote  # noqa: F401 - registers the tier for loops over the cluster's arrays
from .kinds import Decline
from .loop import NativeLoop, mode
from .whole import whole_function

loop_tiers.register(NativeLoop.factory, native=True, nested=True, order=100)
loop_tiers.register_function(whole_function)

__all__ = ["Decline", "NativeLoop", "mode"]
