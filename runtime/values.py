"""Function values at run time: compiled functions as values, and the calls of function values and reads of
globals that generated code makes."""
from __future__ import annotations

import types

from phylanx_py.primitives import exists, lookup, name_of

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


def read_global(ns, name):
    try:
        return ns[name]
    except KeyError:
        raise NameError(f"name '{name}' is not defined") from None
