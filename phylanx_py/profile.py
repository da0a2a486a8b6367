"""``px.profile()``: per-node costs of compiled calls, as a table, a dict, an HTML report or a coloured drawing."""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

from phylanx_py.runtime import profiling

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
        self._lock = threading.Lock()

    # ---- the recorder protocol (runtime/profiling.py) --------------------------------------------------
    def record(self, loc, label, seconds, mode, worker, nbytes=0, moved=0):
        key = (loc.filename, loc.lineno, loc.col, label)
        with self._lock:
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

    # ---- views ----------------------------------------------------------------------------------------
    def stats(self) -> list[NodeStats]:
        """Every node, most total time first."""
        return sorted(self.nodes.values(), key=lambda s: -s.total)

    def stats_for(self, loc, label) -> NodeStats | None:
        return self.nodes.get((loc.filename, loc.lineno, loc.col, label))

    def to_dict(self) -> dict:
        return {"nodes": [
            {"primitive": s.label, "file": s.loc.filename, "line": s.loc.lineno, "col": s.loc.col,
             "function": s.loc.function, "calls": s.calls, "total_s": s.total, "mean_s": s.mean, "max_s": s.max,
             "inline": s.inline, "tasks": s.tasks, "mode": s.mode, "workers": sorted(s.workers),
             "result_bytes": s.nbytes, "moved_bytes": s.moved} for s in self.stats()],
            "functions": sorted(self.programs)}

    def table(self) -> str:
        """A text table, one row per node, most total time first."""
        rows = [("node", "where", "calls", "total ms", "mean ms", "max ms", "run", "workers", "moved")]
        for s in self.stats():
            workers = ",".join(sorted(s.workers))
            rows.append((s.label, s.loc.short, str(s.calls), f"{s.total * 1e3:.3f}", f"{s.mean * 1e3:.3f}",
                         f"{s.max * 1e3:.3f}", s.mode, workers if len(workers) <= 40 else workers[:37] + "...",
                         _human(s.moved)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) if i < 2 or i >= 6 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                 for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

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
