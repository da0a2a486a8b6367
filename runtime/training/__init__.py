"""Data-parallel training in the runtime: segments (one long-running task per worker over the row tiles it holds)
on the segment layer (runtime/segments/: the driver that restarts a failed segment from its checkpoint on the live
workers, the ranks' ring group). The frontend (``phylanx_py.nn``) hands it a problem object and flat arrays."""
from ..segments.ring import Group, RankLost
from .driver import RETRIES, STALL_SECONDS, SegmentTrainer

__all__ = ["RETRIES", "STALL_SECONDS", "Group", "RankLost", "SegmentTrainer"]
