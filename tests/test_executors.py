"""Every executor satisfies the executor protocol (runtime/executors.py) and behaves as it says: the same checks
run against the synchronous executor, the local pool and Dask on real worker processes."""
from __future__ import annotations

import numpy as np
import pytest
from cluster import DaskProcesses
from phylanx_py.primitives import lookup
from phylanx_py.runtime.evaluation import CallSite
from phylanx_py.runtime.executors import Executor

import phylanx_py as px
from phylanx_py.source import SourceLoc

pytestmark = pytest.mark.timeout(300)

ADD = CallSite(lookup("add"), SourceLoc(__file__, 1, 1, "test"))


@pytest.fixture(scope="module")
def cluster():
    procs = DaskProcesses(n_workers=2)
    yield procs
    procs.stop()


@pytest.fixture(params=["synchronous", "local", "dask"])
def executor(request):
    if request.param == "dask":
        rt = px.runtime.dask(request.getfixturevalue("cluster").address)
    else:
        rt = getattr(px.runtime, request.param)()
    try:
        yield rt.executor
    finally:
        rt.close()


def test_each_executor_satisfies_the_protocol(executor):
    assert isinstance(executor, Executor)
    assert executor.workers >= 1


def test_submitted_tasks_chain_gather_and_fail_as_the_protocol_says(executor):
    a = executor.submit(ADD, (1, 2), {})
    b = executor.submit(ADD, (a, np.arange(3)), {})  # a future as an argument: resolved before the task runs
    assert type(a) in executor.future_types and type(b) in executor.future_types
    executor.wait([a, b])
    assert not executor.failed(a) and not executor.failed(b)
    assert executor.result(a) == 3
    got = executor.gather([a, (b,), {"k": b}, 7])
    assert got[0] == 3 and got[3] == 7
    np.testing.assert_array_equal(got[1][0], [3, 4, 5])
    np.testing.assert_array_equal(got[2]["k"], [3, 4, 5])
    bad = executor.submit(ADD, (np.ones(2), np.ones(3)), {})
    after = executor.submit(ADD, (bad, 1), {})  # depends on a failed task: fails with the same error
    executor.wait([bad, after])
    assert executor.failed(bad) and executor.failed(after)
    with pytest.raises(Exception, match="could not be broadcast"):
        executor.result(after)
    shared = executor.result(b) is executor.result(b)
    assert shared == executor.shares_results
