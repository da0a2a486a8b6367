"""A one-line progress display for long calls, on a terminal only.

One shared daemon thread watches every call in flight (a call costs a set insertion and removal, no thread of
its own); once the oldest has run ``delay`` seconds (PHYLANX_PROGRESS_DELAY, default 1) it shows
``[phylanx-py] 120 tasks done, 2 in flight, 3.1 s`` every half second and clears the line when the call ends.
No fraction: a call issues its tasks as it runs (loops, data-dependent branches), so their total is not known
until it ends, and a growing denominator would mislead.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from phylanx_py.primitives.environ import OFF, raw_reader

_lock = threading.Lock()
_calls: dict[int, Progress] = {}
_watcher: threading.Thread | None = None
_INTERVAL = 0.5


class Progress:
    """Context manager around one call's evaluation ``ev``: registers it with the shared watcher."""

    def __init__(self, ev, stream=None, delay: float | None = None):
        if delay is None:
            delay = float(os.environ.get("PHYLANX_PROGRESS_DELAY", "1.0"))
        self.ev, self.stream, self.delay = ev, stream or sys.stderr, delay
        self.shown = False

    def __enter__(self):
        global _watcher
        self.t0 = time.monotonic()
        with _lock:
            _calls[id(self)] = self
            if _watcher is None or not _watcher.is_alive():
                _watcher = threading.Thread(target=_watch, name="phylanx-progress", daemon=True)
                _watcher.start()
        return self

    def __exit__(self, *exc):
        with _lock:
            _calls.pop(id(self), None)
            if self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()

    def line(self) -> str:
        ev = self.ev
        with ev._lock:
            pending = list(ev.pending)
        running = sum(1 for f in pending if not f.done())
        elapsed = time.monotonic() - self.t0
        if not ev.submitted:
            return f"[phylanx-py] running, {elapsed:.1f} s"
        return f"[phylanx-py] {ev.submitted - running:,} tasks done, {running:,} in flight, {elapsed:.1f} s"


def _watch():
    while True:
        time.sleep(_INTERVAL / 5)
        with _lock:
            if not _calls:
                continue
            oldest = min(_calls.values(), key=lambda p: p.t0)
            now = time.monotonic()
            if now - oldest.t0 < oldest.delay or now - getattr(oldest, "_last", 0.0) < _INTERVAL:
                continue
            oldest._last = now
            oldest.stream.write("\r\033[K" + oldest.line())
            oldest.stream.flush()
            oldest.shown = True


_progress_raw = raw_reader("PHYLANX_PROGRESS")


def wanted(setting, stream=None) -> bool:
    """``setting`` True/False forces it; None shows progress only when ``stream`` is a terminal (and
    PHYLANX_PROGRESS is not 0)."""
    if _progress_raw() in OFF:  # at every call of a compiled function: a dict lookup, not os.environ.get's 1 us
        return False
    if setting is not None:
        return bool(setting)
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
