"""The Dask executor's cluster operations (the ``executors.Cluster`` protocol): what tiled arrays ask of the
cluster beyond running call sites, so runtime/tiled/ never reaches into the ``distributed.Client`` itself."""
from __future__ import annotations

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
