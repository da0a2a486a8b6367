"""The ExecutionError of a plain run that raised (floor.py), located from where it was raised: the error the tree
gives for the same failure, without running the tree again.

Why: when the floor's plain run of a call raised, the call was rerun through the tree, whose error names the
primitive and the line (promise 2), and for that rerun every array the program may change was copied before each
plain run and put back after a failure. The copies cost what the call's own work did not: NPBench's kernels that
update their arguments in place ran their plain function at 0.7x NumPy (vadv: five arrays copied a call), 0.9x
(gemm, doitgen), 0.8x (hdiff), against 0.95-1.0x without them, calls 3-12 of a fresh process, alternating with
NumPy's (2026-11-28, load 0.3-0.6).

The plain function is the user's code: the innermost frame of the traceback in a file of the program names the line
and, since Python 3.11, the failing instruction's first column (``co_positions``), which is the column the
translator gave the tree's node for that expression (its AST node's ``col_offset``, 1-based). The tree's linemap
holds each primitive call's (location, label): the same location gives the same label, so the same message. A
location holding several (``A[i] += 1``: ``slice_at``, ``__iadd`` and ``store_at`` at one column) is decided by the
instruction's kind; one holding none names the instruction's position and ``python``."""
from __future__ import annotations

import dis
import linecache

from phylanx_py.errors import ExecutionError
from phylanx_py.source import SourceLoc, instruction_position

_NOT_PRIMITIVES = frozenset({"python", "if", "fused"})
# which labels an instruction of this kind can have failed in (the others: calls of named primitives)
_KIND = {"BINARY_SUBSCR": "subscript", "STORE_SUBSCR": "store", "BINARY_OP": "operator", "COMPARE_OP": "operator",
         "UNARY_NEGATIVE": "operator", "UNARY_INVERT": "operator", "UNARY_NOT": "operator",
         "UNARY_POSITIVE": "operator"}


def _kind_of(label: str) -> str:
    if label == "slice_at":
        return "subscript"
    if label == "store_at":
        return "store"
    return "operator" if label.startswith("__") else "call"


class Locator:
    """The tree's primitive locations of one program (from its generated code's linemap)."""

    def __init__(self, linemap: dict):
        index: dict = {}
        for loc, label in linemap.values():
            if label not in _NOT_PRIMITIVES and loc.lineno:
                index.setdefault((loc.filename, loc.lineno, loc.col), {}).setdefault(label, loc)
        self.index = index
        self.files = frozenset(key[0] for key in index)

    def error(self, exc: BaseException, strict: bool = False) -> ExecutionError | None:
        """The ExecutionError for ``exc``, raised by a plain run; None when no frame of the program's files is in
        its traceback (the call failed before the function's body ran: nothing of it ran, the tree may), or with
        ``strict`` when none is at one of the program's primitives (a function passed to another program, whose
        own error it is otherwise: floor.py)."""
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in self.files:
                frames.append((tb.tb_frame.f_code, tb.tb_lasti, tb.tb_lineno))
            tb = tb.tb_next
        if not frames:
            return None
        for code, lasti, line in reversed(frames):  # the innermost instruction that is one of the tree's primitives
            found = self._primitive(code, lasti, line)
            if found is not None:
                return ExecutionError.from_exception(exc, *found)
        if strict:
            return None
        code, lasti, line = frames[-1]
        line, col = instruction_position(code, lasti, line)
        loc = SourceLoc(code.co_filename, line, col or 1, code.co_name, linecache.getline(code.co_filename, line))
        return ExecutionError.from_exception(exc, loc, "python")

    def _primitive(self, code, lasti, line):
        """(location, label) of the tree's primitive at the instruction (on ``line``, the traceback's), or None."""
        line, col = instruction_position(code, lasti, line)
        if dis.opname[code.co_code[lasti]] == "RAISE_VARARGS":
            # an ``assert``'s raise has its test's position; the tree's node is the statement's (its first column)
            asserts = [(key, found["assert"]) for key, found in self.index.items()
                       if key[:2] == (code.co_filename, line) and "assert" in found and (col is None or key[2] <= col)]
            if asserts:
                return max(asserts, key=lambda a: a[0][2])[1], "assert"
        if col is None:  # Python 3.10 (no instruction columns): the line's primitive, when it has one only
            labels = {k: v for key, found in self.index.items() if key[:2] == (code.co_filename, line)
                      for k, v in found.items()}
            return next(((loc, label) for label, loc in labels.items()), None) if len(labels) == 1 else None
        labels = self.index.get((code.co_filename, line, col))
        if not labels:
            return None
        if len(labels) > 1:
            kind = _KIND.get(dis.opname[code.co_code[lasti]], "call")
            labels = {k: v for k, v in labels.items() if _kind_of(k) == kind}
            if len(labels) != 1:
                return None
        (label, loc), = labels.items()
        return loc, label

