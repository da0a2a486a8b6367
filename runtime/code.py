"""What compiled code is at run time: a program's generated factory (ProgramCode), built once per program."""
from __future__ import annotations

import linecache
import os
import types

from phylanx_py import ir
from phylanx_py.errors import ExecutionError
from phylanx_py.turns import turn

from . import loop_tiers
from .codegen import Generator
from .floor import Floor
from .plain_errors import Locator


def _annotate(source: str, linemap: dict) -> str:
    """The generated source with each line that runs user code followed by ``# file:line: the user's line``:
    what tracebacks, pdb and ``f.source`` show (line numbers unchanged)."""
    lines = source.split("\n")
    for lineno, (loc, _label) in linemap.items():
        if 0 < lineno <= len(lines) and loc is not None and loc.lineno:
            lines[lineno - 1] += f"  # {os.path.basename(loc.filename)}:{loc.lineno}: {loc.line_text.strip()}"
    return "\n".join(lines)


def _register_source(filename: str, source: str) -> str:
    """Put ``source`` in ``linecache`` under ``filename`` (a new name if another source has it) so tracebacks
    and pdb show generated lines; entries without an mtime are never dropped by ``linecache.checkcache``."""
    lines = source.splitlines(keepends=True)
    name, k = filename, 1
    while name in linecache.cache and linecache.cache[name][2] != lines:
        k += 1
        name = f"{filename[:-1]} #{k}>"
    linecache.cache[name] = (len(source), None, lines, name)
    return name


def _rename_functions(code, names: dict):
    """``code`` with nested generated functions (``__pxf0``) renamed to the user's names in tracebacks."""
    consts = tuple(_rename_functions(c, names) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    new = names.get(code.co_name)
    if new is None:
        return code.replace(co_consts=consts)
    return code.replace(co_consts=consts, co_name=new, co_qualname=new)


class ProgramCode:
    """A program compiled to one factory; ``instantiate(ev)`` makes its functions for one evaluation."""

    def __init__(self, program: ir.Program, namespaces: dict, native: bool = True):
        self.program = program
        self.namespaces = namespaces
        self.native = native  # False: no loop is offered to the native tier (an SPMD rank's program)
        self.entry = program.entry
        self._factory, self.source, self.linemap = self._build(fast=True)
        self._profiled = None  # the same program without inline fast paths, built when first profiled
        # a tier that runs the entry as a whole (the native tier's whole function: loop_tiers.py), when one of
        # its loops may run native code or it has none (straight-line array code: ``loop_free``)
        whole = loop_tiers.function_tier(program) if native else None
        self.whole = whole if whole is not None and (self.native_loops or getattr(whole, "loop_free", False)) \
            else None
        self._locator = None
        # the plain function as the floor (floor.py); a failed plain run's error is located from its traceback
        self.floor = Floor.of(program, self.locate, self.native_loops) if native else None
        if self.whole is not None:
            self.whole.locate = self.locate
            if hasattr(self.whole, "namespaces"):  # the modules whose data globals it reads (whole.py)
                self.whole.namespaces = namespaces

    def _build(self, fast: bool):
        gen = Generator(self.program, self.namespaces, fast=fast, native=self.native)
        source = gen.generate()
        env = dict(gen.consts)
        env["__pxr_fail"] = lambda exc: self._fail(exc, gen.linemap)
        entry = self.program.function(self.entry)
        where = f" at {os.path.basename(entry.loc.filename)}:{entry.loc.lineno}" if entry.loc.lineno else ""
        filename = f"<phylanx {self.entry}{'' if fast else ' profiled'}{where}>"
        turn()  # (beside the calls, between steps that each hold the interpreter lock: phylanx_py/turns.py)
        annotated = _annotate(source, gen.linemap)
        filename = _register_source(filename, annotated)
        turn()
        code = compile(source, filename, "exec")
        turn()
        code = _rename_functions(code, {v: k for k, v in gen.fnames.items()})
        turn()
        exec(code, env)  # noqa: S102 - our own generated source
        if fast:
            self.native_loops = gen.native_loops  # loops offered to tiers that run native code
            self.loop_hooks = gen.loop_hooks  # every loop's tiers, for explain()
        return env["__pxr_factory"], annotated, gen.linemap

    def locate(self, exc: BaseException, strict: bool = False):
        """The tree's ExecutionError for ``exc``, raised by a plain run of this program (plain_errors.py), or None
        when it was raised before the function's body ran (``strict``: or at none of its primitives)."""
        if self._locator is None:
            self._locator = Locator(self.linemap)
        return self._locator.error(exc, strict)

    def _fail(self, exc: BaseException, linemap) -> ExecutionError:
        """The ExecutionError for an exception raised by generated bytecode, at its line's user location."""
        tb = exc.__traceback__
        loc, label = linemap.get(tb.tb_lineno if tb is not None else -1, (None, "python"))
        err = ExecutionError.from_exception(exc, loc, label)
        return err

    def instantiate(self, ev) -> dict:
        if ev.profile is None:
            return self._factory(ev)
        # Profiling sees every primitive call: the variant whose calls all go through the Evaluation.
        if self._profiled is None:
            self._profiled = self._build(fast=False)[0]
        ev.profile.programs[self.entry] = self.program
        return self._profiled(ev)

    def invoke(self, ev, args, kwargs):
        return self.instantiate(ev)[self.entry](*args, **kwargs)
