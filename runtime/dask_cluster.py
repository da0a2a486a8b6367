"""The Dask executor's cluster operations (the ``executors.Cluster`` protocol): what tiled arrays and segments ask
of the cluster beyond running call sites, so runtime/tiled/ and runtime/segments/ never reach into the
``distributed.Client`` itself."""
from __future__ import annotations

import asyncio
import threading
import uuid
import warnings
import weakref

from .dask_connect import live_workers
from .dask_faults import scheduler_lost

# client -> {topic: [handlers]}: a client keeps one handler per topic (``subscribe_topic`` replaces the last), and
# several executors may share one client (px.runtime.dask(client=c) twice), so the one handler calls each of theirs
_TOPICS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TOPICS_LOCK = threading.Lock()


class DaskCluster:
    """Mixed into dask_runtime.DaskExecutor, which provides ``client``, ``_placement`` and ``check_alive`` (each
    operation first says so when the runtime is closed or its scheduler lost, instead of what a closed client
    raises)."""

    def submit_task(self, fn, *args, key=None, home=None, pinned=False):
        """A future of ``fn(*args)`` on a worker (``home`` preferred; only ``home`` when ``pinned``). Tile tasks
        carry their data in the task (the scheduler keeps it for lineage, see tiled/create.py): Dask's warning about
        large tasks is expected."""
        self.check_alive()
        where = {"workers": [home], "allow_other_workers": False} if pinned else self._placement(home)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Ll]arge (graph|object).*")
            return self.client.submit(fn, *args, key=key, pure=False, **where)

    def worker_addresses(self) -> list:
        self.check_alive()
        return sorted(self.client.nthreads())

    def who_has(self, futures) -> dict:
        self.check_alive()
        return self.client.who_has(futures)

    def replicate(self, futures) -> None:
        self.check_alive()
        self.client.replicate(futures)

    def persist(self, collection):
        self.check_alive()
        return self.client.persist(collection)

    def submit_ranks(self, fn, specs) -> list:
        """Sent to the scheduler as one graph: the ranks start together (a submit each is a message each, and the
        client's stream holds the later ones back for up to 10 ms). The placement is a per-key annotation
        (``dict.get``, pickled with the graph). Built as ``Client.submit`` builds its one task (dask's task spec, an
        explicit token: tokenizing a segment's job would pickle it once more); one submit per rank where dask lacks
        those."""
        self.check_alive()
        client = self.client
        try:
            import dask
            from dask._expr import LLGExpr
            from dask._task_spec import Task, parse_input
        except ImportError:  # another dask: correct, only slower
            return [client.submit(fn, *args, key=key, workers=[w], allow_other_workers=False, pure=False)
                    for key, w, args in specs]
        dsk = {key: Task(key, fn, *(parse_input(a) for a in args)) for key, _, args in specs}
        with dask.annotate(workers={key: [w] for key, w, _ in specs}.get, allow_other_workers=False):
            futures = client.get(LLGExpr(dsk, _determ_token=uuid.uuid4().hex), list(dsk), sync=False)
        return list(futures)

    # ---- what a segment's driver asks (runtime/segments/driver.py) --------------------------------------------
    # None of these calls check_alive: they are asked while a segment is watched, given up or told apart from a lost
    # scheduler, when the connection may be gone and the caller decides what that means (``connected`` first, or
    # ``connection_lost``); the segment layer's fault handling was written against the client's own answers.
    def connected(self) -> bool:
        return self.client.status == "running"

    def connection_lost(self) -> str | None:
        return scheduler_lost(self.client)

    def live_workers(self) -> dict:
        return live_workers(self.client)

    def run_on_workers(self, fn, *args, workers=None, on_error="raise") -> dict:
        return self.client.run(fn, *args, workers=workers, on_error=on_error)

    def cancel(self, futures) -> None:
        self.client.cancel(futures)

    def wait_within(self, futures, timeout: float) -> None:
        # this client's own wait, not ``distributed.wait`` (the process's default client: see DaskExecutor.wait)
        from distributed.client import _wait

        self.client.sync(_wait, futures, timeout=timeout, return_when="ALL_COMPLETED")

    def gather_within(self, futures, timeout: float) -> list:
        return self.client.sync(self.client._gather, futures, callback_timeout=timeout)

    def scatter_within(self, value, timeout: float):
        [fut] = self.client.sync(self.client._scatter, [value], hash=False, callback_timeout=timeout)
        return fut

    def adopt(self, who_has, nbytes) -> dict:
        """Futures of arrays workers already hold as Dask data, put there outside any task (spmd/stored.py): the
        scheduler is told who holds them (``update_data``, as ``Client.scatter`` does) and the futures are finished."""
        import numpy as np
        from distributed import Future

        client = self.client

        async def take():
            # one round trip, as Client.scatter's: on the message stream (no wait) a request on another connection
            # (who_has, the scheduler's gather of a result read at once) could reach the scheduler first
            await client.scheduler.update_data(who_has=who_has, nbytes=nbytes, client=client.id)
            futs = {k: Future(k, client) for k in who_has}
            for k in who_has:
                client.futures[k].finish(type=np.ndarray)
            return futs

        return client.sync(take)

    def subscribe(self, topic: str, handler) -> None:
        client = self.client
        with _TOPICS_LOCK:
            topics = _TOPICS.setdefault(client, {})
            handlers = topics.get(topic)
            if handlers is None:
                handlers = topics[topic] = []

                def dispatch(event, handlers=handlers):
                    for h in list(handlers):
                        h(event)

                client.subscribe_topic(topic, dispatch)
            handlers.append(handler)

    # ---- the client's connections of its own to the workers' ports (runtime/segments/service.py) -----------------
    def connection_args(self) -> dict:
        return self.client.security.get_connection_args("client")

    def run_on_loop(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.client.loop.asyncio_loop)

    def call_on_loop(self, fn) -> None:
        self.client.loop.add_callback(fn)
