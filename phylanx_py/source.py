"""Source locations: where in the user's code an IR node came from (stdlib only)."""
from __future__ import annotations

import os
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
