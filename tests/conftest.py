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
