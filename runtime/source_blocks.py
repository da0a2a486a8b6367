"""Indented blocks of the generated Python source of runtime/codegen.py: a block's statements one level in, ``pass``
when it emitted nothing (the native tier's lowerer builds kernel IR nodes instead: runtime/native/kir.py)."""
from __future__ import annotations


class BlockWriter:
    """A mixin; ``self`` has ``lines``, ``indent``, ``emit(text)`` and ``stmt(node)``."""

    def s_Block(self, n):
        for s in n.stmts:
            self.stmt(s)

    def block(self, n):
        self.indent += 1
        start = len(self.lines)
        self.stmt(n)
        if len(self.lines) == start:
            self.emit("pass")
        self.indent -= 1
