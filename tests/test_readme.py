"""Every ```python block of README.md runs as written, in order, in one namespace (as a reader pastes them).

A block preceded by the line ``<!-- not run: reason -->`` is skipped; the README uses it only for snippets that
need a cluster at a fixed address. The blocks run as one script in a subprocess (``@px.compile`` reads the
source of the functions it compiles, so they must live in a file), in a temporary directory (the files they
write land there).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = re.compile(r"<!--\s*not run:.*-->")


def readme_blocks(path=os.path.join(ROOT, "README.md")):
    """[(first line number, code, skipped)] of every ```python block."""
    lines = open(path, encoding="utf-8").read().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            j = start
            while lines[j].strip() != "```":
                j += 1
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            blocks.append((start + 1, "\n".join(lines[start:j]), bool(SKIP.search(prev))))
            i = j
        i += 1
    return blocks


def test_the_extractor_sees_the_blocks_and_the_marker():
    blocks = readme_blocks()
    assert len(blocks) >= 5
    skipped = [code for _, code, skip in blocks if skip]
    # only snippets that talk to a cluster at a fixed address are not run
    assert skipped and all("tcp://127.0.0.1:8786" in code for code in skipped)


def test_readme_python_blocks_run_as_written(tmp_path):
    out: list[str] = []
    for lineno, code, skip in readme_blocks():
        if not skip:
            out += [""] * (lineno - 1 - len(out))  # so a traceback's line numbers are README.md's
            out += code.splitlines()
    script = tmp_path / "readme_blocks.py"
    script.write_text("\n".join(out) + "\n")
    env = {**os.environ, "PHYLANX_PROGRESS": "0"}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, f"README block failed (line numbers are README.md's):\n{done.stderr[-4000:]}"


def test_readme_sample_tree_is_what_the_example_prints():
    import runpy

    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    start = readme.index("```\ndefine(lra, lambda(X, y, alpha, iterations),") + 4
    sample = readme[start:readme.index("```", start)].rstrip()
    lra = runpy.run_path(os.path.join(ROOT, "examples", "lra.py"), run_name="example")["lra"]
    printed = str(lra.tree).replace(os.path.join(ROOT, "examples"), "/home/me/examples")
    assert sample == printed
