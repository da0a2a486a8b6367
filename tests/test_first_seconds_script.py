"""benchmarks/first_seconds.py's smoke run: each program in a fresh child process with a fresh kernel cache, its
compiled calls against the plain function; the script exits with status 1 when a compiled answer differs from the
plain one, so this checks that the calls it times compute the plain function's answer (timings are not asserted)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "first_seconds.py")


def test_short_run_of_every_program_gives_the_plain_answer():
    env = {k: v for k, v in os.environ.items() if k not in ("PHYLANX_FLOOR", "PHYLANX_FUSE_WAIT")}  # as a user runs
    out = subprocess.run([sys.executable, SCRIPT, "--seconds", "0.5", "--window", "0.25"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for name in ("scalar", "stencil", "chain"):
        assert re.search(rf"^{name}: plain median [\d.]+ ms; \d+ compiled calls; same answer: True$", out.stdout,
                         re.M), out.stdout
    assert len(re.findall(r"^calls over 1\.1x plain: \d+ of \d+; first call [\d.]+x plain$", out.stdout, re.M)) == 3
    assert out.stdout.startswith("load at start: ") and "load at end: " in out.stdout
