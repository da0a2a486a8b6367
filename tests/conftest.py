"""Shared fixtures: every differential and error test runs on each local runtime."""
from __future__ import annotations

import pytest

pytest.register_assert_rewrite("helpers")

import phylanx_py as px  # noqa: E402

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
    """The native loop tier off (PHYLANX_NATIVE=0), as it is by default (loops go native once hot, so rarely in
    small tests) and forced on every loop that qualifies (PHYLANX_NATIVE=force): the differential and error
    suites run under all three."""
    if request.param != "default":
        monkeypatch.setenv("PHYLANX_NATIVE", "force" if request.param == "force" else "0")
    else:
        monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    return request.param
