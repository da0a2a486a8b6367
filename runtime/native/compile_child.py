"""The compile process's side (compile_process.py starts it: ``compile_process.BOOT`` runs this module as ``__main__``):
requests on stdin, one reply byte each on stdout; or, with a socket's path (``compile_server.BOOT``), the compile
server of this user, which answers the same requests from several programs (compile_server.py)."""
from __future__ import annotations

import os
import pickle
import sys
import threading
import time
import warnings

from phylanx_py.primitives import kernel_cache

from . import aot, argtypes, compile_server, tiering
from .compile_process import HEADER, low_priority
from .whole_lower import lowering


def serve(stdin, stdout):
    """Requests on ``stdin`` (a header, then ``compile_request``'s payload), one reply byte each on ``stdout``."""
    while True:
        header = stdin.read(HEADER.size)
        if len(header) < HEADER.size:
            return
        stdout.write(compile_request(stdin.read(HEADER.unpack(header)[0])))
        stdout.flush()


def compile_request(payload: bytes) -> bytes:
    """A request is (cache folder, loader, source, sig), pickled by a process of this user (the parent, or a client
    of the compile server whose user the server checked); the reply one byte, b"1" compiled, b"0" not. The loader
    is ``tiering``'s function of that name, "fused" for a fused group's kernel (``sig`` unused), or "aot" for a
    whole function's kernel built ahead of time (aot.py: ``sig`` is its request)."""
    from numba.core.errors import NumbaParallelSafetyWarning  # this process compiles kernels: Numba at once

    kernel_cache.CACHE_DIR, loader, source, sig = pickle.loads(payload)  # noqa: S301 - from this user's process
    try:
        kernel_cache.forget_other_folders()  # a kernel compiled for another folder is compiled again for this one
        with warnings.catch_warnings():
            # as the parent's compile has it (tuning.Choice.build): nothing Numba doubts gets cached
            warnings.simplefilter("error", NumbaParallelSafetyWarning)
            if loader == "fused":  # a fused group's ufunc (primitives/fused.py): compiled as its module runs
                kernel_cache.load_or_build("fused", source)
            elif loader == "aot":  # a whole function's kernel as an extension module (aot.py; ``sig``: its request)
                aot.build(source, sig)
            else:  # the parent's types, or told without Numba there (argtypes.described)
                tiering.compile_quietly(getattr(tiering, loader)(source).kernel, argtypes.typed(sig))
        return b"1"
    except Exception:  # noqa: BLE001 - the asker's thread compiles it and reports what fails
        return b"0"


def lower_request(payload: bytes) -> bytes:
    """A whole function's signature lowered here for a program's job beside its calls (whole_lower.lowering, asked
    by whole.py): the payload is that call's arguments, pickled by a process of this user as a compile request is;
    the reply a HEADER-sized length and the pickled result (the lowering's products, ("declined", why), or
    ("failed", why): the asker then lowers it itself and meets the error there)."""
    try:
        result = lowering(*pickle.loads(payload))  # noqa: S301 - from this user's process
    except Exception as e:  # noqa: BLE001 - the asker lowers it again and raises it there
        result = ("failed", f"{type(e).__name__}: {e}")
    data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def lower_priority() -> None:
    """Run at a lower CPU priority than the caller: the niceness the parent set as this process started
    (``PHYLANX_COMPILE_TARGET_NICE``, from ``PHYLANX_COMPILE_NICE``: default 19, the lowest; 0 leaves the caller's),
    set again here in case the parent could not. On a machine whose cores the caller's own work fills (NumPy's
    BLAS threads on both cores of a 2-core machine), a compile at equal priority took half a core from it and made
    the plain function slower while its kernel was being built; niced, it runs on what the caller leaves idle (a
    single-threaded caller leaves a core). 19 rather than 10: at 10 it still took a tenth of a core under
    contention (docs/tiers.md has the A/B figures)."""
    if not hasattr(os, "getpriority"):
        return
    own = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        target = int(os.environ["PHYLANX_COMPILE_TARGET_NICE"])
    except (KeyError, ValueError):
        target = low_priority(own)
    if target > own:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, target)
        except OSError:
            pass


def ready_numba() -> None:
    """Numba's CPU target made ready now, before the first request: its typing and target contexts and LLVM take
    about 0.5 s, which every compile needs once. The child starts when a function is compiled (decorated), and the
    first request comes when a loop or a call is found hot: from tens of milliseconds to seconds later; that much of
    the half second is then off its compile's path (and never longer on it: the request would wait for the same
    work)."""
    import numba

    numba.njit(lambda x: x + 1)(1)


def _exit_with_parent(parent: int, every: float = 1.0):
    """End this process once its parent is gone: a compile still running when the parent ended (a kernel of
    seconds, the parent's script done) would otherwise go on alone, taking a core nobody asked for."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(0)


if __name__ == "__main__" and len(sys.argv) > 1:  # the compile server (compile_server.BOOT: its socket's path)
    compile_server.main(sys.argv[1], compile_request, ready_numba, lower_request)
elif __name__ == "__main__":
    lower_priority()
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever prints goes where stderr goes: the pipe carries replies only
    ready_numba()
    serve(sys.stdin.buffer, replies)
