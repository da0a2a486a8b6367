"""How a compiled function travels to other processes (Dask workers, multiprocessing) and how Dask names it.

Pickling, as Numba's dispatchers and cloudpickle do:

- **by reference** when ``module.qualname`` finds the compiled function itself in an importable module (not
  ``__main__``, not registered with ``cloudpickle.register_pickle_by_value``): the pickle is that name, and loading it
  imports the module and gives back the same object.
- **by value** otherwise (defined inside a function, in a script or a notebook): the plain Python function
  (cloudpickle, nested, so the standard ``pickle`` takes it too), the compile options and the source text of the
  function's file, since the receiving process compiles from source (lazily, on the first call) and a worker may not
  have the file. Within one process, loading the same pickle again gives the same object (a memo keyed by an id the
  object keeps and the pickle's digest, so a function whose globals or closure changed since is loaded anew), so a
  worker compiles a function once, not once per task.

``pickle.dumps(mymod.f)`` used to fail with "not the same object as mymod.f": the default reduction pickled the
instance's ``__dict__``, whose ``__wrapped__`` (the plain function) Python pickles by its ``__module__.__qualname__``,
and that name finds the compiled function that replaced it in the module.

Tokens (``dask.base.tokenize``): the module, qualified name, bytecode, defaults, closure values and options; for a
function pickled by value also the values of the globals it reads (what cloudpickle would ship). The same function
and options give the same token in every process; functions that differ in a closure value or an option do not.
"""
from __future__ import annotations

import collections
import hashlib
import io
import linecache
import marshal
import pickle
import sys
import threading
import types
import uuid
import weakref

_OPTIONS = ("optimize", "disable", "debug", "fuse", "device")

# {(id, digest of the payload): compiled function}: what was pickled or loaded here, so that loading it again gives
# the same object; the last few stay alive (as Numba keeps its last dispatchers) so a worker that loads one
# function per task compiles it once.
_memo: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_recent: collections.deque = collections.deque(maxlen=64)
_memo_lock = threading.Lock()
_local = threading.local()  # .tokens: ids of the compiled functions being tokenized in this thread


def options_of(cf) -> dict:
    return {name: getattr(cf, name) for name in _OPTIONS}


# ---- by reference ----------------------------------------------------------------------------------------------
def _pickled_by_value(module_name: str) -> bool:
    try:
        import cloudpickle
    except ImportError:  # pragma: no cover - a dependency of dask
        return False
    registered = cloudpickle.list_registry_pickle_by_value()
    parts = module_name.split(".")
    return any(".".join(parts[:n]) in registered for n in range(1, len(parts) + 1))


def reference_name(cf) -> str | None:
    """``cf``'s qualified name when ``import module; module.<qualname>`` gives ``cf`` back (else None)."""
    module_name = getattr(cf, "__module__", None)
    qualname = getattr(cf, "__qualname__", None)
    if not module_name or not qualname or module_name == "__main__" or "<locals>" in qualname:
        return None
    module = sys.modules.get(module_name)
    if module is None or _pickled_by_value(module_name):
        return None
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return qualname if obj is cf else None


# ---- by value --------------------------------------------------------------------------------------------------
def _id_of(cf) -> str:
    uid = cf.__dict__.get("_pickle_id")
    if uid is None:
        uid = cf.__dict__.setdefault("_pickle_id", uuid.uuid4().hex)
    return uid


def _is_compiled(obj) -> bool:
    return getattr(type(obj), "__phylanx_compiled__", False) is True


def _dumps(cf) -> tuple[bytes, dict]:
    """cloudpickle's bytes of ``cf`` and {file name: source text} of the code they ship by value.

    One pickler for the function and every compiled function it reaches that is not importable, so functions of
    one module share one globals dict when loaded (as cloudpickle makes them), which the translator reads as that
    module's namespace; each is a blank object filled in by ``compiled_setstate``, so a function that reads itself
    (recursion through a closure or a global) finds the one object. Code objects go as ``marshal`` bytes (version
    2: the same bytes each time), which keep their file name (cloudpickle writes ``<dynamic-code>``): the
    receiving process compiles from source, found by that name."""
    import cloudpickle

    files: set = set()

    def reduce_code(co):
        files.add(co.co_filename)
        return marshal.loads, (marshal.dumps(co, 2),)

    class Pickler(cloudpickle.Pickler):
        dispatch_table = collections.ChainMap({types.CodeType: reduce_code}, cloudpickle.Pickler.dispatch_table)

        def reducer_override(self, obj):
            if _is_compiled(obj) and reference_name(obj) is None:
                state = (obj.__wrapped__, options_of(obj), _id_of(obj))
                return compiled_blank, (type(obj),), state, None, None, compiled_setstate
            return super().reducer_override(obj)

    with io.BytesIO() as buf:
        Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(cf)
        payload = buf.getvalue()
    # linecache: the file as this process reads it, or a notebook cell (IPython keeps those in linecache)
    sources = {f: "".join(lines) for f in sorted(files) if (lines := linecache.getlines(f))}
    return payload, sources


def compiled_blank(cls):
    return cls.__new__(cls)


def compiled_setstate(cf, state):
    fn, options, uid = state
    cf.__init__(fn, **options)
    cf.__dict__["_pickle_id"] = uid


def reduce_by_value(cf):
    """``(rebuild, args)`` for a compiled function that cannot be imported by name where it is loaded (nested
    cloudpickle, as Numba does, so that the standard ``pickle`` takes it too)."""
    payload, sources = _dumps(cf)
    key = (_id_of(cf), _digest(payload))
    _remember(key, cf, keep=False)  # loading it here gives ``cf`` back; the caller keeps ``cf`` alive
    return compiled_by_value, (key, payload, sources)


def _digest(payload: bytes) -> str:
    return hashlib.sha1(payload, usedforsecurity=False).hexdigest()


def _remember(key, cf, keep=True):
    with _memo_lock:
        if _memo.get(key) is not cf:
            _memo[key] = cf
            if keep:
                _recent.append(cf)


def compiled_by_value(key, payload: bytes, sources: dict):
    """Unpickling a compiled function pickled by value: the object this process already has for the same pickle
    (the same function with the same closure and global values and options), or a new one, compiled on its first
    call."""
    with _memo_lock:
        found = _memo.get(key)
    if found is not None:
        return found
    _add_sources(sources)
    cf = pickle.loads(payload)  # noqa: S301 - the payload is part of the pickle being loaded
    _remember(key, cf)
    return cf


def _add_sources(sources: dict):
    """Give linecache (what ``inspect.getsource`` and the translator read) the source the function was compiled
    from, where this process lacks the file or has another version of it."""
    for filename, text in sources.items():
        try:
            with open(filename, encoding="utf-8") as f:
                if f.read() == text:
                    continue
        except (OSError, UnicodeDecodeError, ValueError):
            pass
        lines = text.splitlines(keepends=True)
        # mtime None: linecache.checkcache keeps the entry (as for sources served by a module's loader)
        linecache.cache[filename] = (len(text), None, lines, filename)


# ---- tokens ----------------------------------------------------------------------------------------------------
def _const_token(c):
    if isinstance(c, types.CodeType):
        return code_token(c)
    if isinstance(c, (tuple, list)):
        return (type(c).__name__, *map(_const_token, c))
    if isinstance(c, (frozenset, set)):  # iteration order follows string hashing, which differs between processes
        return (type(c).__name__, *sorted(repr(_const_token(v)) for v in c))
    return repr(c)


def code_token(co: types.CodeType) -> tuple:
    """What the bytecode does, without where it sits (file, line numbers), the same in every process."""
    return ("code", co.co_name, getattr(co, "co_qualname", co.co_name), co.co_argcount, co.co_posonlyargcount,
            co.co_kwonlyargcount, co.co_flags, co.co_code.hex(), co.co_names, co.co_varnames, co.co_freevars,
            co.co_cellvars, tuple(_const_token(c) for c in co.co_consts))


def _global_names(co: types.CodeType, out: set) -> set:
    out.update(co.co_names)
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            _global_names(c, out)
    return out


def _value_token(normalize, value):
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    return normalize(value)


def token(cf) -> tuple:
    """``__dask_tokenize__`` of a compiled function (see the module's docstring)."""
    from dask.base import normalize_token

    fn = cf.__wrapped__
    name = (cf.__module__, cf.__qualname__)
    tokens = _local.__dict__.setdefault("tokens", set())
    if id(cf) in tokens:  # the function reads itself: its name stands for it inside its own token
        return ("phylanx_py.CompiledFunction", *name, "itself")
    tokens.add(id(cf))
    try:
        by_reference = reference_name(cf) is not None
        closure = tuple(_value_token(normalize_token, c.cell_contents) if _filled(c) else "<empty>"
                        for c in fn.__closure__ or ())
        parts = [*name, sorted(options_of(cf).items()), code_token(fn.__code__),
                 _value_token(normalize_token, fn.__defaults__), _value_token(normalize_token, fn.__kwdefaults__),
                 closure]
        if not by_reference:  # what cloudpickle ships with it: the globals it reads
            names = sorted(n for n in _global_names(fn.__code__, set()) if n in fn.__globals__)
            parts.append(tuple((n, _value_token(normalize_token, fn.__globals__[n])) for n in names))
        return ("phylanx_py.CompiledFunction", normalize_token(tuple(parts)))
    finally:
        tokens.discard(id(cf))


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True

