"""What compiled code is at run time: a program's generated factory (ProgramCode), function values, and the
calls of function values that generated code makes."""
from __future__ import annotations

import linecache
import os
import types

from phylanx_py.primitives import exists, lookup, name_of

from phylanx_py import ir
from phylanx_py.errors import ExecutionError

from .evaluation import CallSite
from .executors import FUTURES


class PxFunction:
    """A compiled function as a value. Called from Python (``map``, ``sorted(key=)``) it returns concrete
    results; compiled code calls ``raw`` directly and keeps futures flowing."""

    __slots__ = ("raw", "ev")

    def __init__(self, raw, ev):
        self.raw, self.ev = raw, ev

    def __call__(self, *args, **kwargs):
        return self.ev.resolve(self.raw(*args, **kwargs))

    def __repr__(self):
        return f"<compiled function {self.raw.__qualname__}>"


def call_value(ev, fn, args, kwargs, loc):
    """Call a function *value*: a compiled function, a plain Python function (compiled on the fly), or the
    object of a primitive (``np.exp`` passed as an argument)."""
    if type(fn) in FUTURES:
        fn = ev.wait(fn)
    if type(fn) is PxFunction:
        return fn.raw(*args, **kwargs)
    prim_name = name_of(fn)
    if prim_name is not None:
        return ev.call(CallSite(lookup(prim_name), loc), tuple(args), kwargs)
    method = _method_primitive(fn)
    if method is not None:  # a bound method of a list/dict/array: the method primitive, ordered as effects are
        prim, receiver = method
        return ev.call(CallSite(prim, loc), receiver + tuple(args), kwargs)
    hook = ev.hooks.get("compile")
    code = hook(fn) if hook is not None else None
    if code is not None:
        return code.instantiate(ev)[code.entry](*args, **kwargs)
    raise TypeError(f"cannot call an object of type '{type(fn).__name__}' from compiled code")


_UNBOUND_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType)


def _method_primitive(fn):
    """(method primitive, receiver args) for ``d.get`` / ``str.upper`` style values, else None."""
    name = getattr(fn, "__name__", None)
    if not name or not exists(f"method.{name}"):
        return None
    if isinstance(fn, _UNBOUND_METHODS):
        return lookup(f"method.{name}"), ()
    receiver = getattr(fn, "__self__", None)
    if isinstance(fn, types.BuiltinMethodType) and receiver is not None and not isinstance(receiver, types.ModuleType):
        return lookup(f"method.{name}"), (receiver,)
    return None


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


def read_global(ns, name):
    try:
        return ns[name]
    except KeyError:
        raise NameError(f"name '{name}' is not defined") from None


class ProgramCode:
    """A program compiled to one factory; ``instantiate(ev)`` makes its functions for one evaluation."""

    def __init__(self, program: ir.Program, namespaces: dict):
        self.program = program
        self.namespaces = namespaces
        self.entry = program.entry
        self._factory, self.source, self.linemap = self._build(fast=True)
        self._profiled = None  # the same program without inline fast paths, built when first profiled

    def _build(self, fast: bool):
        from .codegen import Generator

        gen = Generator(self.program, self.namespaces, fast=fast)
        source = gen.generate()
        env = dict(gen.consts)
        env["__pxr_fail"] = lambda exc: self._fail(exc, gen.linemap)
        entry = self.program.function(self.entry)
        where = f" at {os.path.basename(entry.loc.filename)}:{entry.loc.lineno}" if entry.loc.lineno else ""
        filename = f"<phylanx {self.entry}{'' if fast else ' profiled'}{where}>"
        annotated = _annotate(source, gen.linemap)
        filename = _register_source(filename, annotated)
        code = _rename_functions(compile(source, filename, "exec"), {v: k for k, v in gen.fnames.items()})
        exec(code, env)  # noqa: S102 - our own generated source
        return env["__pxr_factory"], annotated, gen.linemap

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
