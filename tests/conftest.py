"""Shared fixtures: every differential and error test runs on each local runtime."""
from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time

import pytest

pytest.register_assert_rewrite("helpers")

import phylanx_py as px  # noqa: E402

EXIT_SECONDS = 120

# The plain function as the floor (runtime/floor.py) is off in tests unless a test turns it on: most tests are about
# what the tree does (fusion, tasks, native loops, counts); the differential and error suites turn it on in two of
# their three passes (``native_tier``), tests/test_floor.py and the tier's own tests in test_native.py turn it on.
os.environ["PHYLANX_FLOOR"] = "0"
# Functions are translated in their first call, not beside it by a worker while the plain function runs
# (runtime/beside.py): the suites' first calls are to go through the tiers they test (with the floor on, a first call
# would otherwise be the plain function's own answer); tests/test_beside.py turns it on.
os.environ["PHYLANX_BESIDE"] = "0"
# Fused kernels are built in the call that first needs them, not in a background thread (primitives/fused.py):
# tests check which path computed a result from the first call on; tests/test_fusion.py tests the background.
os.environ["PHYLANX_FUSE_WAIT"] = "1"
# Kernels compiled before are not native from their first call in tests (runtime/native/warm.py): a test's kernel is
# compiled again and again in a run (three modes, several tests over one program), and the tiers' tests are about
# their order of events from an empty cache; tests/test_native_warm.py turns it on.
os.environ["PHYLANX_NATIVE_WARM"] = "0"
# Compiles go to a compile process of the test process's own, not to the user's compile server kept between programs
# (runtime/native/compile_server.py): the tests of the compile process look at their child, its priority and its
# pipe, and a server would outlive the run; tests/test_compile_server.py starts servers of its own and ends them.
os.environ["PHYLANX_COMPILE_SERVER"] = "0"


def pytest_unconfigure(config):
    """After the tests, the process must exit: a thread that keeps the interpreter alive is a bug (a CI run once
    hung 80 minutes after its tests passed, on a driver thread waiting for a lost task). After ``EXIT_SECONDS``
    this names the threads still alive, prints every thread's stack and exits with status 3 (a failure, never a
    pass) instead of waiting for CI's time limit."""
    def watchdog():
        time.sleep(EXIT_SECONDS)
        alive = [t.name for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
        sys.stderr.write(f"\nthe test process did not exit {EXIT_SECONDS} s after its tests; threads keeping it "
                         f"alive: {alive}\n")
        faulthandler.dump_traceback(all_threads=True)
        sys.stderr.flush()
        os._exit(3)

    threading.Thread(target=watchdog, name="exit-watchdog", daemon=True).start()


RUNTIMES = {"local": px.runtime.local, "sync": px.runtime.synchronous}


@pytest.fixture(params=sorted(RUNTIMES))
def runtime(request):
    """A fresh runtime of each kind, current for the test (``px.using``), closed afterwards."""
    rt = RUNTIMES[request.param]()
    try:
        with px.using(rt):
            yield rt
    finally:
        rt.close()


@pytest.fixture(params=["off", "default", "force"])
def native_tier(request, monkeypatch):
    """The native loop tier off (PHYLANX_NATIVE=0, and the plain function not the floor: PHYLANX_FLOOR=0), as it is
    by default (loops go native once hot, so rarely in small tests) and forced on every loop that qualifies
    (PHYLANX_NATIVE=force): the differential and error suites run under all three."""
    if request.param != "default":
        monkeypatch.setenv("PHYLANX_NATIVE", "force" if request.param == "force" else "0")
    else:
        monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    # "off" is the tree alone: the plain function is not the floor either (runtime/floor.py), so every call of the
    # suites runs the tree on both local runtimes there; by default and forced, calls may run the plain function
    monkeypatch.setenv("PHYLANX_FLOOR", "0" if request.param == "off" else "1")
    return request.param
