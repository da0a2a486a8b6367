"""The native tier: loop nests lowered to Numba at call time (see loop.py for the modes, lower.py for what
keeps the plain function's answer)."""
from .kinds import Decline
from .loop import NativeLoop, mode

__all__ = ["Decline", "NativeLoop", "mode"]
