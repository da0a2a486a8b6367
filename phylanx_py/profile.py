"""``px.profile()``: per-node costs of compiled calls, as a table, a dict, an HTML report or a coloured drawing."""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

from phylanx_py.runtime import profiling

from .fused_names import groups
from .report import write_report


@dataclass
class NodeStats:
    """One call site (a primitive at a source location) over every call profiled."""

    label: str
    loc: object
    calls: int = 0
    total: float = 0.0
    max: float = 0.0
    inline: int = 0
    tasks: int = 0
    workers: set = field(default_factory=set)
    nbytes: int = 0  # size of the results produced
    moved: int = 0  # bytes fetched from other workers (Dask) for its inputs

    @property
    def mean(self) -> float:
        return self.total / self.calls if self.calls else 0.0

    @property
    def mode(self) -> str:
        return "inline" if not self.tasks else "task" if not self.inline else "mixed"


class Profile:
    """What ``px.profile()`` yields: filled while compiled functions run inside the block."""

    def __init__(self):
        self.nodes: dict[tuple, NodeStats] = {}
        self.programs: dict = {}  # entry name -> ir.Program of every compiled function that ran
        self.calls: list[tuple[str, float]] = []  # (function, wall seconds) of every top-level call
        self._intervals: list[tuple[float, float]] = []  # (start, end) of local kernels, perf_counter clock
        self._unplaced = 0.0  # kernel seconds without a start time (Dask's task stream)
        self._lock = threading.Lock()

    # ---- the recorder protocol (runtime/profiling.py) --------------------------------------------------
    def record(self, loc, label, seconds, mode, worker, nbytes=0, moved=0, start=None):
        key = (loc.filename, loc.lineno, loc.col, label)
        with self._lock:
            if start is None:
                self._unplaced += seconds
            else:
                self._intervals.append((start, start + seconds))
            s = self.nodes.get(key)
            if s is None:
                s = self.nodes[key] = NodeStats(label, loc)
            s.calls += 1
            s.total += seconds
            s.max = max(s.max, seconds)
            if mode == "inline":
                s.inline += 1
            else:
                s.tasks += 1
            s.workers.add(str(worker))
            s.nbytes += nbytes
            s.moved += moved

    def record_call(self, function: str, seconds: float):
        with self._lock:
            self.calls.append((function, seconds))

    # ---- views ----------------------------------------------------------------------------------------
    def name(self, s: NodeStats) -> str:
        """The row's name: the primitive, or a fused group by its contents (``fused[neg, exp, add, truediv]``)."""
        if not s.label.startswith("fused"):
            return s.label
        programs = list(self.programs.values())
        cached = getattr(self, "_group_names", None)
        if cached is None or cached[0] != [id(p) for p in programs]:  # recomputed when other programs ran
            names = {}
            for program in programs:
                names.update(groups(program))
            cached = self._group_names = ([id(p) for p in programs], names)
        return cached[1].get((s.loc.filename, s.loc.lineno, s.loc.col, s.label), s.label)

    def times(self) -> dict:
        """Wall time of the profiled calls; kernel time (while at least one node ran, and summed over threads
        and workers); overhead: wall time with no node running (Python between nodes, scheduling, waiting)."""
        with self._lock:
            spans = sorted(self._intervals)
            unplaced = self._unplaced
        busy, end = 0.0, float("-inf")
        for a, b in spans:  # the union of the nodes' intervals
            if b > end:
                busy += b - max(a, end)
                end = b
        wall = sum(t for _, t in self.calls)
        summed = sum(s.total for s in self.nodes.values())
        busy = min(busy + unplaced, wall) if wall else busy + unplaced
        return {"calls": len(self.calls), "wall_s": wall, "kernel_s": busy, "kernel_summed_s": summed,
                "overhead_s": max(wall - busy, 0.0)}

    def headline(self) -> str:
        t = self.times()
        fns = sorted({f for f, _ in self.calls})
        return (f"wall {t['wall_s'] * 1e3:.1f} ms in {t['calls']} call{'s' if t['calls'] != 1 else ''} of "
                f"{', '.join(fns) or '-'}; kernels {t['kernel_s'] * 1e3:.1f} ms (summed over threads and workers "
                f"{t['kernel_summed_s'] * 1e3:.1f} ms); overhead {t['overhead_s'] * 1e3:.1f} ms (no node running)")

    def stats(self) -> list[NodeStats]:
        """Every node, most total time first."""
        return sorted(self.nodes.values(), key=lambda s: -s.total)

    def stats_for(self, loc, label) -> NodeStats | None:
        return self.nodes.get((loc.filename, loc.lineno, loc.col, label))

    def to_dict(self) -> dict:
        return {"times": self.times(), "nodes": [
            {"primitive": s.label, "name": self.name(s), "file": s.loc.filename, "line": s.loc.lineno, "col": s.loc.col,
             "function": s.loc.function, "calls": s.calls, "total_s": s.total, "mean_s": s.mean, "max_s": s.max,
             "inline": s.inline, "tasks": s.tasks, "mode": s.mode, "workers": sorted(s.workers),
             "result_bytes": s.nbytes, "moved_bytes": s.moved} for s in self.stats()],
            "functions": sorted(self.programs)}

    def table(self) -> str:
        """The headline (wall, kernel and overhead time), then a text table: one row per node, most total time
        first."""
        rows = [("node", "where", "calls", "total ms", "mean ms", "max ms", "run", "workers", "moved")]
        for s in self.stats():
            workers = ",".join(sorted(s.workers))
            rows.append((self.name(s), s.loc.short, str(s.calls), f"{s.total * 1e3:.3f}", f"{s.mean * 1e3:.3f}",
                         f"{s.max * 1e3:.3f}", s.mode, workers if len(workers) <= 40 else workers[:37] + "...",
                         _human(s.moved)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) if i < 2 or i >= 6 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                 for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return self.headline() + "\n\n" + "\n".join(lines)

    def to_html(self, path) -> str:
        """Write the self-contained HTML report (tree as inline SVG, table, source with per-line times)."""
        return write_report(self, path)

    def __repr__(self):
        return f"<phylanx profile: {len(self.nodes)} nodes, {sum(s.calls for s in self.nodes.values())} calls>"


def _human(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


@contextlib.contextmanager
def profile():
    """``with px.profile() as prof:`` records every compiled call in the block (any runtime)."""
    prof = Profile()
    with profiling.recording(prof):
        yield prof
