"""The native tier: loop nests and whole functions lowered to Numba at call time (see tiering.py for the modes,
lower.py and arith.py for what keeps the plain function's answer). Importing it registers both with loop_tiers.py,
after every other loop tier, and remote.py's tier for loops over the cluster's arrays (after the SPMD tier)."""
import threading

from .. import beside, loop_tiers
from . import early, remote, warm  # noqa: F401 - registers the tier for loops over the cluster's arrays
from .compile_process import prestart
from .kinds import Decline
from .loop import NativeLoop, mode
from .tiering import current_mode
from .whole import whole_function

loop_tiers.register(NativeLoop.factory, native=True, nested=True, order=100)
loop_tiers.register_function(whole_function)
loop_tiers.register_early(early.for_function)


@loop_tiers.register_preparer
def _ahead():
    """A function compiled in the program's main thread starts the compile process (prestart): its start (an
    interpreter, phylanx-py and Numba imported, niced: 1-1.5 s, more on a busy machine) then overlaps the program's
    own set-up between the decoration and the first call, instead of the first kernel's time to native (a stencil
    decorated 1.5 s before its first call, fresh kernel, load 3-4: native after 3.6-4.0 s against 5.3-5.7 s).
    Not in other threads: a Dask worker unpickles compiled functions in its task threads."""
    if threading.current_thread() is threading.main_thread() and current_mode() != "off":
        if beside.enabled():
            beside.start(prestart)  # by the worker beside the first calls: one thread's start in the decorator
        else:
            prestart()



@loop_tiers.register_first
def _first(pyfunc) -> bool:
    # forced: every loop and whole function native from its first call (tiering.py); kept before: its whole
    # function's kernel loads in its first call (warm.py), which the plain function beside the translation would delay
    return current_mode() == "force" or warm.kept_code(pyfunc)


__all__ = ["Decline", "NativeLoop", "mode"]
