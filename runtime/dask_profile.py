"""The Dask executor's profiles (``px.profile`` on a Dask runtime): each task's compute time, worker, result size
and the bytes it fetched from other workers, read from the scheduler's task stream and reported under the task's
call site."""
from __future__ import annotations

import time

from .executors import collect


class DaskProfiling:
    """Mixed into dask_runtime.DaskExecutor, which provides ``client`` and ``_distributed``."""

    def note_task(self, ev, key, site, args):
        """Task ``key`` (of ``site``) submitted while ``ev`` is profiled: the futures it waits for are its inputs."""
        deps: list = []
        collect(args, deps)
        ev.profile_keys[key] = (site, [d.key for d in deps if type(d) is self._distributed.Future])

    def start_profile(self, ev):
        """Make sure the scheduler records a task stream from now on (its plugin starts on first request)."""
        ev.profile_since = time.time()
        self.client.get_task_stream(start=ev.profile_since)

    def collect_profile(self, ev):
        """Per-task compute time, worker, result size and bytes fetched from other workers, from the
        scheduler's task stream, reported to the profile under each task's call site."""
        entries = {e["key"]: e for e in self.client.get_task_stream(start=ev.profile_since)}
        for key, (site, deps) in ev.profile_keys.items():
            e = entries.get(key)
            if e is None:
                continue
            compute = sum(s["stop"] - s["start"] for s in e.get("startstops", ()) if s.get("action") == "compute")
            moved = sum(entries[d].get("nbytes", 0) for d in deps
                        if d in entries and entries[d].get("worker") != e.get("worker"))
            ev.profile.record(site.loc, site.prim.label, compute, "task", e.get("worker", "?"),
                              e.get("nbytes", 0) or 0, moved)
