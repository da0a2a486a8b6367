"""A one-line progress display for long calls (tasks done / submitted), on a terminal only."""
from __future__ import annotations

import os
import sys
import threading
import time


class Progress:
    """Shows ``[phylanx-py] done/submitted tasks`` on ``stream`` every ``interval`` s once a call has run for
    ``delay`` s; says nothing for short calls, and clears its line when the call ends."""

    def __init__(self, ev, stream=None, interval: float = 0.5, delay: float | None = None):
        if delay is None:  # PHYLANX_PROGRESS_DELAY: seconds before the line shows (default 1)
            delay = float(os.environ.get("PHYLANX_PROGRESS_DELAY", "1.0"))
        self.ev, self.stream, self.interval, self.delay = ev, stream or sys.stderr, interval, delay
        self._stop = threading.Event()
        self._shown = False
        self._thread = threading.Thread(target=self._run, name="phylanx-progress", daemon=True)

    def __enter__(self):
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()

    def line(self) -> str:
        ev = self.ev
        with ev._lock:
            pending = list(ev.pending)
        running = sum(1 for f in pending if not f.done())
        return f"[phylanx-py] {ev.submitted - running}/{ev.submitted} tasks, {time.monotonic() - self._t0:.1f} s"

    def _run(self):
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            self.stream.write("\r" + self.line())
            self.stream.flush()
            self._shown = True
            self._stop.wait(self.interval)


def wanted(setting, stream=None) -> bool:
    """``setting`` True/False forces it; None shows progress only when ``stream`` is a terminal."""
    if setting is not None:
        return bool(setting)
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
