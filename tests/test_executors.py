"""Every executor satisfies the executor protocol (runtime/executors.py) and behaves as it says: the same checks
run against the synchronous executor, the local pool and Dask on real worker processes."""
from __future__ import annotations

import numpy as np
import pytest
from cluster import DaskProcesses
from phylanx_py.primitives import lookup
from phylanx_py.runtime.evaluation import CallSite
from phylanx_py.runtime.executors import Cluster, Executor

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
    assert isinstance(executor, Cluster) == (executor.name == "dask")  # only Dask has workers of its own
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


def test_the_dask_executors_cluster_operations(cluster):
    import dask.array as da

    with px.runtime.dask(cluster.address) as rt:
        ex = rt.executor
        workers = ex.worker_addresses()
        assert workers == sorted(workers) and len(workers) == 2
        fut = ex.submit_task(np.multiply, np.arange(4), 2, key="doubled-1", home=workers[1])
        assert fut.key == "doubled-1"
        np.testing.assert_array_equal(ex.result(fut), [0, 2, 4, 6])
        assert list(ex.who_has([fut])["doubled-1"]) == [workers[1]]  # idle workers: the preference holds
        ex.replicate([fut])
        assert sorted(ex.who_has([fut])["doubled-1"]) == workers
        d = ex.persist(da.arange(6, chunks=3) + 1)
        np.testing.assert_array_equal(d.compute(), np.arange(1, 7))
