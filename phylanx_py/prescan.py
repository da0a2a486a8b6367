"""Whether a function's first calls may run the plain function while it is translated beside them
(runtime/beside.py), read from its bytecode in microseconds, without its source.

A first call that ran the plain function could not report an unsupported construct until the translation ended,
and would run code the translator rejects (a test's ``uses_with(1)`` opens and closes file descriptor 1). So only a
function that reads as the translator takes it runs so: no construct the translator refuses (classes, ``try`` and
``with``, generators, closures and nested ``def``s (its own lambdas are read as it is), ``global``, ``del``,
starred calls and targets, ``match``, attribute stores, a bare ``raise`` or ``raise ... from``; a ``match``
statement, whose literal patterns compile as ``==`` does, is found in its source lines), its free names resolving as
the translator resolves them (``resolve.py``: a NumPy function, a compiled or plain function, data, an exception's
class; not another class, a module used as a value, an unknown name or an unsupported callable), its methods
registered, its imports at the top of its body, of modules already imported (their names then read as modules).
``assert`` and ``raise X`` run so: a plain run's error is the tree's, located from its traceback (plain_errors.py).
A loop inside another runs so too when a rerun would repeat nothing anyone saw (``beside_mode``: "limited"): the
plain run is stopped after ``floor.OSR_SECONDS`` once the translation can reach native code, its array arguments
put back, and the call reruns through the tree, which switches the inner loop to native code part way through
(whole.py); such a function that prints, draws random numbers or reads mutable module data translates first.
Anything else translates in its first call, as before, and raises its CompileError there. A construct the scan lets
through and the translator refuses is a CompileError at the first call after the translation ended."""
from __future__ import annotations

import dis
import functools
import linecache
import re
import sys
import types
import weakref

import numpy as np

from phylanx_py.primitives import MUTATES, PURE, RAISES, exists, lookup

from .resolve import MISSING, SCALARS, resolve_attr, resolve_name

_OP = dis.opmap
_REFUSED = frozenset(_OP[name] for name in (
    "LOAD_BUILD_CLASS", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_ATTR", "DELETE_ATTR", "DELETE_FAST", "DELETE_NAME",
    "DELETE_SUBSCR", "DELETE_DEREF", "CALL_FUNCTION_EX", "DICT_MERGE", "DICT_UPDATE", "UNPACK_EX",
    "RERAISE", "BEFORE_WITH", "YIELD_VALUE", "IMPORT_STAR", "IMPORT_FROM",
    "LOAD_CLOSURE", "LOAD_DEREF", "STORE_DEREF", "LOAD_CLASSDEREF", "STORE_NAME", "LOAD_NAME",
) if name in _OP) | frozenset(op for name, op in _OP.items() if name.startswith(("MATCH_", "SETUP_")))
_BACKWARD = frozenset(op for name, op in _OP.items() if "BACKWARD" in name)
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
_FLAGS = 0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200  # *args, **kwargs, generator, coroutine, async generator
_EXTENDED_ARG, _COPY = _OP["EXTENDED_ARG"], _OP["COPY"]
_STORE_ATTR, _COMPARE = _OP["STORE_ATTR"], _OP["COMPARE_OP"]
_STORES = frozenset((_OP["STORE_FAST"], _OP["STORE_SUBSCR"], _OP["STORE_ATTR"]))
_LOAD_GLOBAL, _LOAD_ATTR, _LOAD_METHOD = _OP["LOAD_GLOBAL"], _OP["LOAD_ATTR"], _OP.get("LOAD_METHOD", -1)
_LOAD_FAST, _STORE_FAST, _IMPORT_NAME = _OP["LOAD_FAST"], _OP["STORE_FAST"], _OP["IMPORT_NAME"]
_LOAD_CONST, _MAKE_FUNCTION, _RAISE = _OP["LOAD_CONST"], _OP["MAKE_FUNCTION"], _OP["RAISE_VARARGS"]
_LAMBDA_FLAGS = 0x01 | 0x02  # MAKE_FUNCTION of a lambda with defaults (not annotations, nor a closure)
_STORE_SUBSCR, _BINARY_OP = _OP["STORE_SUBSCR"], _OP.get("BINARY_OP", -1)
_INPLACE = frozenset(op for name, op in _OP.items() if name.startswith("INPLACE_"))  # Python 3.10's ``a += b``
_FIRST_INPLACE = 13  # BINARY_OP's arguments from NB_INPLACE_ADD on (3.11, 3.12): ``a += b``
_GLOBAL_SHIFT = 1 if sys.version_info >= (3, 11) else 0  # 3.11: LOAD_GLOBAL's low bit says "push NULL"
_ATTR_SHIFT = 1 if sys.version_info >= (3, 12) else 0  # 3.12: LOAD_ATTR's low bit says "method"
_MATCH = re.compile(r"\s*match\b[^=]*:")  # a ``match`` statement's line (a literal pattern compiles to ``==``)
_MAX_INSTRUCTIONS = 2000  # a longer function translates first: its first call is long enough to pay for it


def _instructions(code):
    """(opcode, argument) of ``code``'s instructions, EXTENDED_ARG folded in, CACHE entries skipped."""
    raw, ext = code.co_code, 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | ext
        if op == _EXTENDED_ARG:
            ext = arg << 8
            continue
        ext = 0
        if op:  # 0 is CACHE
            yield op, arg


def runs_beside(fn) -> bool:
    """Whether ``fn``'s first calls may run the plain function while it is translated (module docstring)."""
    return beside_mode(fn) is not None


def beside_mode(fn) -> str | None:
    """How ``fn``'s first calls run while it is translated: "plain" (the plain function), "limited" (a loop in a
    loop: the plain function, stopped after ``floor.OSR_SECONDS`` to rerun through the tree when its translation
    can reach native code; only a function whose rerun repeats nothing anyone saw: no printing, random draws or
    other effects but changes to arrays and raising, no mutable module data), or None: it translates in its first
    call."""
    facts = {"nested": False, "pure": True, "writes": False}
    if not _reads(fn, set(), True, facts):
        return None
    if not facts["nested"]:
        return "plain"
    return "limited" if facts["pure"] else None


_HARMLESS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def harmless(fn) -> bool:
    """Whether ``fn``, a Python function passed to a compiled one, reads as the translator takes it and shows nothing
    when run again: no printing, random draws or other effects, no mutable module data, and no change in place (no
    item store, in-place operator or mutating call: the arrays a rerun puts back are the program's own). A NumPy
    ufunc is. runtime/floor.py runs the plain function of a program applying such a parameter (numpy-benchmarks'
    local_maxima, ``mode=wrap``: 14x slower through the tree)."""
    if isinstance(fn, np.ufunc):
        return True
    if not isinstance(fn, types.FunctionType):
        return False
    known = _HARMLESS.get(fn)
    if known is None:
        facts = {"nested": False, "pure": True, "writes": False}
        known = _HARMLESS[fn] = _reads(fn, set(), False, facts) and facts["pure"] and not facts["writes"]
    return known


def _note_prim(name: str, facts: dict) -> None:
    """Clear ``facts["pure"]`` when the primitive ``name`` has an effect beyond changing an array in place (which a
    rerun undoes by putting the arguments back) or raising (a run stopped before it raised showed nothing); set
    ``facts["writes"]`` when it changes an array in place."""
    effect = lookup(name).effect
    if effect not in (PURE, MUTATES, RAISES):
        facts["pure"] = False
    elif effect == MUTATES:
        facts["writes"] = True


def _note_effects(r, facts: dict) -> None:
    """``_note_prim`` for a name resolved to a primitive (``r``); clear ``facts["pure"]`` for module data a run
    could change."""
    if r.kind == "prim":
        _note_prim(r.prim, facts)
    elif r.kind == "data" and not _pure_data(r.obj):
        facts["pure"] = False


def _exception(obj) -> bool:
    """Whether a class read by a function is an exception's (``raise ValueError(...)`` translates)."""
    return isinstance(obj, type) and issubclass(obj, BaseException)


def _pure_data(obj) -> bool:
    """Whether module data read by a function is immutable (a stopped run cannot have changed it)."""
    if isinstance(obj, tuple):
        return all(_pure_data(o) for o in obj)
    return isinstance(obj, SCALARS)


def _reads(fn, seen: set, top: bool, facts: dict) -> bool:
    """Whether ``fn`` reads as the translator takes it; the plain functions it calls too (``seen``: those already
    read, recursion included); ``top``: its own loops counted (the functions it calls run inside its tree);
    ``facts``: set "nested" (a loop in a loop) and clear "pure" (an effect a rerun would repeat: beside_mode)."""
    if fn in seen:
        return True
    seen.add(fn)
    return _reads_code(fn.__code__, fn.__globals__, seen, top, facts)


def _reads_code(code, glob: dict, seen: set, top: bool, facts: dict) -> bool:
    """``_reads`` of a code object whose globals are ``glob`` (a function's, or a lambda's in it)."""
    if code.co_flags & _FLAGS or code.co_freevars or code.co_cellvars or code.co_exceptiontable or \
            len(code.co_code) > 2 * _MAX_INSTRUCTIONS:
        return False
    lines = linecache.getlines(code.co_filename)
    numbers = [line for _, _, line in code.co_lines() if line]
    if numbers and any(_MATCH.match(text) for text in lines[min(numbers) - 1:max(numbers)]):
        return False
    names, varnames = code.co_names, code.co_varnames
    loops = 0
    const = None  # the constant just loaded (a lambda's code, which MAKE_FUNCTION takes)
    jumped = False
    loaded: set = set()  # locals read so far
    imported: dict = {}  # local name -> the module a local ``import`` bound it to
    chain = None  # the module a LOAD_GLOBAL/LOAD_ATTR chain has reached, which must end in a function
    pending_import = None  # the module an IMPORT_NAME loaded, until its store
    copied = False  # a COPY 1 waits for its store
    ufunc = None  # a primitive just loaded (``np.add``), whose method (``np.add.outer``) may follow
    for op, arg in _instructions(code):
        if ufunc is not None:
            prim, ufunc = ufunc, None
            if op == _LOAD_ATTR or op == _LOAD_METHOD:
                attr = f"{prim}.{names[arg >> _ATTR_SHIFT if op == _LOAD_ATTR else arg]}"
                if not exists(attr):
                    return False
                _note_prim(attr, facts)
                continue
        if chain is not None:
            if op == _LOAD_ATTR or op == _LOAD_METHOD:
                r = resolve_attr(chain, names[arg >> _ATTR_SHIFT if op == _LOAD_ATTR else arg])
                if r.obj is MISSING or r.kind in ("class", "unsupported"):
                    return False
                _note_effects(r, facts)
                chain = r if r.kind == "module" else None
                ufunc = r.prim if r.kind == "prim" else None
                continue
            return False  # a module used as a value
        if copied:  # after COPY 1, its store (``a = b = v``, ``a[i] = b[j] = v``, ``(a := v)``) comes before any
            if op in _STORES:  # comparison or jump, which a match's subject meets first (its cases compare it)
                copied = False
            elif op == _COMPARE or op in _JUMPS:
                return False
        elif op == _COPY and arg == 1:
            copied = True
        if op == _STORE_ATTR and names[arg] == "shape":  # ``a.shape = s``, the one attribute store translated
            facts["pure"] = False  # (a stopped run's arguments, put back by their elements, keep their new shape)
            continue
        if op in _REFUSED:
            return False
        if op == _STORE_SUBSCR or op in _INPLACE or (op == _BINARY_OP and arg >= _FIRST_INPLACE):
            facts["writes"] = True  # (an in-place operator changes an array operand: ``harmless``)
        if op == _RAISE and arg != 1:
            return False  # ``raise`` alone or ``raise X from Y``; ``raise X`` and ``assert`` translate
        if op == _MAKE_FUNCTION:
            # a lambda (``f = lambda x: 1 - np.tanh(x) ** 2``); a nested ``def`` does not translate
            if arg & ~_LAMBDA_FLAGS or getattr(const, "co_name", None) != "<lambda>" or \
                    not _reads_code(const, glob, seen, False, facts):
                return False
        const = code.co_consts[arg] if op == _LOAD_CONST else None
        if op in _BACKWARD and top:
            loops += 1
        if op in _JUMPS:
            jumped = True
        if op == _LOAD_GLOBAL:
            r = resolve_name(names[arg >> _GLOBAL_SHIFT], glob)
            if r is None or r.kind == "unsupported" or (r.kind == "class" and not _exception(r.obj)) or \
                    (r.kind == "function" and (len(seen) > 20 or not _reads(r.obj, seen, False, facts))):
                return False
            _note_effects(r, facts)
            chain = r if r.kind == "module" else None
            ufunc = r.prim if r.kind == "prim" else None
        elif op == _LOAD_METHOD or (op == _LOAD_ATTR and _ATTR_SHIFT and arg & 1):
            method = f"method.{names[arg >> _ATTR_SHIFT if op == _LOAD_ATTR else arg]}"
            if not exists(method):
                return False
            _note_prim(method, facts)
        elif op == _IMPORT_NAME:
            if jumped or names[arg] not in sys.modules:
                return False
            pending_import = sys.modules[names[arg]]
        elif op == _STORE_FAST:
            name = varnames[arg]
            if name in imported or (pending_import is not None and name in loaded):
                return False
            if pending_import is not None:
                imported[name] = pending_import
                pending_import = None
        elif op == _LOAD_FAST:
            name = varnames[arg]
            loaded.add(name)
            if name in imported:  # ``np.diff`` after ``import numpy as np`` in the body: resolved as a global's
                r = resolve_name(name, {name: imported[name]})
                if r is None or r.kind != "module":
                    return False
                chain = r
    if loops >= 2 and not _loops_apart(code):
        facts["nested"] = True
    return chain is None


@functools.lru_cache(maxsize=256)
def _loops_apart(code) -> bool:
    """Whether no loop of ``code`` is inside another (loops one after the other, as NPBench's deriche has four): each
    backward jump spans [its target, itself], and no span may hold another. (A ``while`` loop's ``continue`` and its
    end jump back to two places, spans that overlap without either holding the other.) A loop in a loop runs
    limited (``beside_mode``): a long first call then reruns through the tree, which switches the inner loop to
    native code part way through (whole.py), as the plain function cannot."""
    spans = _backward_spans(code)
    return not any(a[0] < b[0] and b[1] <= a[1] for a in spans for b in spans)  # (one target: one loop)


def _backward_spans(code) -> set:
    """(target, offset) of each backward jump, read from the raw bytecode where its layout is known (dis's scan
    took 0.5-1 ms in a new process, a tenth of a small first call); dis's instructions otherwise."""
    caches = getattr(dis, "_inline_cache_entries", None)
    if sys.version_info[:2] not in ((3, 11), (3, 12)) or caches is None:
        return {(ins.argval, ins.offset) for ins in dis.get_instructions(code)
                if ins.opcode in _BACKWARD and type(ins.argval) is int}
    raw, ext, spans = code.co_code, 0, set()
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | ext
        ext = arg << 8 if op == _EXTENDED_ARG else 0
        if op in _BACKWARD:  # the target: counted in code units back from the instruction after it and its caches
            spans.add((i + 2 + 2 * caches[op] - 2 * arg, i))
    return spans
