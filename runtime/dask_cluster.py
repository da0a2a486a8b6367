"""The Dask executor's cluster operations (the ``executors.Cluster`` protocol): what tiled arrays ask of the
cluster beyond running call sites, so runtime/tiled/ never reaches into the ``distributed.Client`` itself."""
from __future__ import annotations

import uuid
import warnings


class DaskCluster:
    """Mixed into dask_runtime.DaskExecutor, which provides ``client``, ``_placement`` and ``check_alive`` (each
    operation first says so when the runtime is closed or its scheduler lost, instead of what a closed client
    raises)."""

    def submit_task(self, fn, *args, key=None, home=None):
        """A future of ``fn(*args)`` on a worker (``home`` preferred). Tile tasks carry their data in the task
        (the scheduler keeps it for lineage, see tiled/create.py): Dask's warning about large tasks is expected."""
        self.check_alive()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Ll]arge (graph|object).*")
            return self.client.submit(fn, *args, key=key, pure=False, **self._placement(home))

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
