"""Threads started inside ``px.using(rt)`` run their compiled calls on ``rt`` (they do not inherit the context
variable, so the runtime follows the blocks open in other threads); ambiguity is a warning, never a silent switch."""
from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from phylanx_py.runtime import Runtime
from phylanx_py.runtime.executors import SynchronousExecutor

import phylanx_py as px


class Counting(Runtime):
    """A real (synchronous) runtime that counts the calls evaluated on it."""

    def __init__(self):
        super().__init__(SynchronousExecutor())
        self.calls = 0

    def evaluate(self, *a, **k):
        self.calls += 1
        return super().evaluate(*a, **k)


@px.compile
def scaled(x, k):
    return (x * k).sum()


def test_threads_started_inside_using_follow_its_runtime():
    rt = Counting()
    x = np.arange(10.0)
    with px.using(rt), ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda k: scaled(x, k), range(6)))
        seen = list(pool.map(lambda _: px.runtime.current(), range(3)))
    assert got == [(x * k).sum() for k in range(6)]
    assert rt.calls == 6 and all(s is rt for s in seen)
    # after the block, a thread has nothing to follow: the default runtime again
    t = ThreadPoolExecutor(1)
    assert t.submit(px.runtime.current).result() is px.runtime.default()
    t.shutdown()


def test_a_thread_with_its_own_block_keeps_it_and_the_main_thread_never_follows():
    outer, inner = Counting(), Counting()
    ready, done = threading.Event(), threading.Event()

    def worker():
        with px.using(inner):
            scaled(np.ones(3), 2.0)
            ready.set()
            done.wait(30)

    t = threading.Thread(target=worker)
    t.start()
    ready.wait(30)
    # the main thread chose nothing: the default runtime, not the block open in the other thread
    assert px.runtime.current() is px.runtime.default()
    done.set()
    t.join()
    with px.using(outer):
        scaled(np.ones(3), 2.0)
    assert (outer.calls, inner.calls) == (1, 1)


def test_blocks_for_different_runtimes_in_other_threads_are_a_warning(monkeypatch):
    from phylanx_py.runtime import select

    monkeypatch.setattr(select, "_warned_ambiguous", False)
    a, b = Counting(), Counting()
    ready, done = threading.Barrier(3), threading.Event()

    def hold(rt):
        with px.using(rt):
            ready.wait(30)
            done.wait(30)

    threads = [threading.Thread(target=hold, args=(rt,)) for rt in (a, b)]
    for t in threads:
        t.start()
    ready.wait(30)
    try:
        with warnings.catch_warnings(record=True) as caught, ThreadPoolExecutor(1) as pool:
            warnings.simplefilter("always")
            assert pool.submit(scaled, np.ones(3), 3.0).result() == 9.0
    finally:
        done.set()
        for t in threads:
            t.join()
    assert (a.calls, b.calls) == (0, 0)
    (w,) = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert "while px.using blocks for 2 different runtimes are open in other threads: it runs on the default " \
           "runtime" in str(w.message)


