"""Nothing the runtime keeps grows with the number of calls or tasks: a long-lived Dask session holds steady memory
(the executor's table of task placements; an evaluation's table of objects that pending tasks read)."""
from __future__ import annotations

import numpy as np
import pytest
from cluster import DaskProcesses
from phylanx_py.runtime import dask_runtime
from phylanx_py.runtime.evaluation import Evaluation

import phylanx_py as px

pytestmark = pytest.mark.timeout(600)


def scaled(x):
    return x * 2.0 + 1.0


def test_many_calls_keep_the_placement_table_bounded(monkeypatch):
    """Every call uploads its input (as a big one would be: its placement is remembered) and runs a task there.
    1,000 calls with the table's threshold at 64 (1,024 by default) prune it many times over; 10,000 calls at the
    default threshold took 5.4 minutes here (32 ms a call: three scheduler round trips), too long for the suite."""
    monkeypatch.setattr(dask_runtime, "UPLOAD_BYTES", 0)
    monkeypatch.setattr(dask_runtime, "HOMES_KEPT", 64)
    procs = DaskProcesses(n_workers=2)
    rt = px.runtime.dask(procs.address, inline_elements=0)
    try:
        f = px.compile(scaled)
        x = np.arange(8.0)
        sizes = []
        with px.using(rt):
            for i in range(1_000):
                got = f(x + i)
                if i % 100 == 99:
                    sizes.append(len(rt.executor._homes))
            np.testing.assert_array_equal(got, scaled(x + 999))
        assert max(sizes) <= 2 * 64 + 2, sizes  # was 2 entries per call: 2,000 at the end
    finally:
        rt.close()
        procs.stop()


def test_an_evaluation_forgets_objects_no_pending_task_reads():
    """A loop that makes a new list each iteration, read by tasks: the ids of finished ones are dropped."""
    rt = px.runtime.local()
    try:
        ev = Evaluation(rt)
        kept = []
        for i in range(2_000):
            items = [i]
            kept.append(items)  # alive, so ids are not reused
            fut = rt.executor.submit(len, (items,), {})  # a task on the local pool reading the list
            ev._track(fut, (id(items),))
        ev.wait_all()
        assert len(ev.refs) == 0, len(ev.refs)
    finally:
        rt.close()
