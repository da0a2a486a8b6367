"""Data-parallel training in the runtime: segments (one long-running task per worker over the row tiles it holds),
a ring group over ``distributed.comm`` between them, and a driver that restarts a failed segment from its
checkpoint on the live workers. The frontend (``phylanx_py.nn``) hands it a problem object and flat arrays."""
from .driver import RETRIES, STALL_SECONDS, SegmentTrainer
from .ring import Group, RankLost

__all__ = ["RETRIES", "STALL_SECONDS", "Group", "RankLost", "SegmentTrainer"]
