"""How both segment drivers (SPMD and training) read rank tasks that failed (segments/driver.py ``rank_failure``),
on real worker processes: a rank's own error comes before a lost peer's, whatever order the tasks failed in."""
from __future__ import annotations

import time

import pytest
from cluster import DaskProcesses
from phylanx_py.runtime.segments.driver import rank_failure
from phylanx_py.runtime.segments.ports import RankLost
from phylanx_py.runtime.spmd.driver import Declined
from phylanx_py.runtime.spmd.driver import _failed as spmd_failed
from phylanx_py.runtime.training.span import failure as training_failure

import phylanx_py as px

pytestmark = pytest.mark.timeout(300)


def _raise(exc, delay=0.0):
    time.sleep(delay)
    raise exc


_raise.__module__ = "__main__"  # Dask pickles what lives in __main__ by value: workers cannot import this module


@pytest.fixture(scope="module")
def rt():
    procs = DaskProcesses(n_workers=2)
    runtime = px.runtime.dask(procs.address)
    yield runtime
    runtime.close()
    procs.stop()


def _failed_tasks(ex, *errors):
    """Rank tasks that raised ``errors`` (None: cancelled), finished in the order given: the first failed first."""
    futs = []
    for i, exc in enumerate(errors):
        fut = ex.submit_task(_raise if exc is not None else time.sleep, *((exc, 0.3 * i) if exc is not None else (30,)))
        futs.append(fut)
    cancelled = [f for f, e in zip(futs, errors) if e is None]
    if cancelled:
        ex.cancel(cancelled)
    deadline = time.monotonic() + 60
    while any(f.status not in ("error", "cancelled") for f in futs) and time.monotonic() < deadline:
        time.sleep(0.05)
    return futs


def test_a_ranks_own_error_comes_before_a_lost_peers(rt):
    ex = rt.executor
    futs = _failed_tasks(ex, RankLost("group g: rank 1 closed its connection"), ValueError("broken layer"))
    own, lost = rank_failure(futs)
    assert type(own) is ValueError and str(own) == "broken layer" and lost is None
    with pytest.raises(ValueError, match="broken layer"):  # training: the user's error as it was
        raise training_failure("seg", futs)
    got = spmd_failed("seg")(futs)  # SPMD: the loop runs as before
    assert type(got) is Declined and str(got) == "a rank could not run: ValueError: broken layer"


def test_ranks_that_lost_their_peers_or_their_worker_are_lost(rt):
    ex = rt.executor
    futs = _failed_tasks(ex, RankLost("group g: rank 1 closed its connection"), ConnectionResetError("reset"))
    own, lost = rank_failure(futs)
    assert own is None and type(lost) is RankLost and str(lost) == "group g: rank 1 closed its connection"
    got = training_failure("seg", futs)
    assert type(got) is RankLost and str(got) == "a rank of seg failed: group g: rank 1 closed its connection"
    got = spmd_failed("seg")(futs)
    assert type(got) is RankLost and str(got).startswith("a rank of seg was lost: RankLost(")


def test_a_cancelled_rank_is_lost(rt):
    futs = _failed_tasks(rt.executor, None)
    assert rank_failure(futs) == (None, None)
    got = training_failure("seg", futs)
    assert type(got) is RankLost and str(got) == "a rank of seg failed: cancelled"
    got = spmd_failed("seg")(futs)
    assert type(got) is RankLost and str(got) == "a rank of seg was lost: None"


@pytest.mark.parametrize("count", [1, 2])
def test_results_of_cancelled_ranks_are_a_lost_rank_whichever_error_dask_gives(rt, count):
    """Dask's gather of cancelled futures raises FutureCancelledError or FuturesCancelledError (a suite run met
    the singular, from a rank cancelled between the driver's wait and its gather, and the training driver let it
    through instead of rerunning the segment): both are a lost rank, for the waits and the results alike."""
    from phylanx_py.runtime.segments.driver import results, tasks_done

    futs = _failed_tasks(rt.executor, *[None] * count)
    cluster = rt.executor
    with pytest.raises(RankLost, match="a rank of seg was cancelled: "):
        results(cluster, "seg", futs, timeout=10)
    with pytest.raises(RankLost):
        tasks_done(cluster, "seg", futs, 1.0, lambda bad: RankLost("failed"))
