"""Source locations: where in the user's code an IR node came from; and parsing source text (stdlib only)."""
from __future__ import annotations

import ast
import itertools
import os
import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SourceLoc:
    """A position in user code. ``col`` is 1-based, like compiler diagnostics (``file:line:col``)."""

    filename: str
    lineno: int
    col: int = 1
    function: str = "<module>"
    line_text: str = ""

    @property
    def short(self) -> str:
        """``lra.py:12:9``: the base name, for messages and tree labels."""
        return f"{os.path.basename(self.filename)}:{self.lineno}:{self.col}"

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}:{self.col}"

    def traceback_lines(self, end_col: int | None = None) -> str:
        """The two lines Python's tracebacks show: file/line/function, then the source line with a caret."""
        out = f'  File "{self.filename}", line {self.lineno}, in {self.function}'
        text = self.line_text.rstrip()
        if text:
            stripped = text.lstrip()
            indent = len(text) - len(stripped)
            out += f"\n    {stripped}"
            start = max(self.col - 1 - indent, 0)
            width = 1 if end_col is None else max(end_col - self.col, 1)
            out += "\n    " + " " * start + "^" * width
        return out


UNKNOWN = SourceLoc("<unknown>", 0, 0, "<unknown>", "")


def instruction_position(code, lasti: int, line: int) -> tuple[int, int | None]:
    """(line, 1-based column) of the instruction at byte offset ``lasti`` of ``code``, ``line`` being the line a
    frame or a traceback gives for it: the column from the instruction's position (Python 3.11+); None where there
    is none (Python 3.10, an instruction without a position)."""
    pos = next(itertools.islice(code.co_positions(), lasti // 2, None), None) \
        if hasattr(code, "co_positions") else None
    if pos is None or pos[0] is None:
        return line, None
    return pos[0], (pos[2] or 0) + 1


_PARSING = threading.RLock()


def parse(text: str, **kwargs) -> ast.AST:
    """``ast.parse``, one thread at a time. CPython 3.11 keeps the AST constructor's recursion depth in state that
    all threads share, so two parses at once (the native tier lowers kernels in background threads while the
    frontend reads functions) can fail with "SystemError: AST constructor recursion depth mismatch"
    (python/cpython#106905): seen here once, a whole-function kernel declined in ``benchmarks/loops.py``."""
    with _PARSING:
        return ast.parse(text, **kwargs)
