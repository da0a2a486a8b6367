"""The per-call path of a whole function (whole.py): once a signature runs natively, a call is checked against its
arguments by one generated expression per signature (types, dtypes by identity, ndim, layout flags, the small-int
test) instead of building a key: the decorator's call, this check and the bookkeeping cost about 1 us over the
kernel, where the general path (``call``) costs about 3 us. A call the check does not match (another signature,
another runtime, a profile being recorded, the mode changed) takes the general path."""
from __future__ import annotations

import threading

import numpy as np

from .. import profiling, select
from ..base import Runtime
from ..loop_tiers import FALLBACK, MISS
from . import kinds as K
from . import tiering as T

_LAYOUT_FLAGS = 0x0001 | 0x0002 | 0x0100 | 0x0400  # C_CONTIGUOUS, F_CONTIGUOUS, ALIGNED, WRITEABLE:
# tiering._layout's


def guard(args, small):
    """(source of a test that ``a0, a1, ...`` have the kinds of ``args``, the names it uses, whether passing it
    fixes the Numba types of the arguments), or (None, None, False) for arguments the test does not cover
    (tuples): the key of ``_entry`` is what decides then. The names are ``_d<i>``/``_t<i>``; the source writes
    them ``_d<i>_{j}`` (a ``str.format`` field: ``make_quick`` gives each signature's names their entry's
    number)."""
    tests, values, exact = [], {}, True
    for i, (a, is_small) in enumerate(zip(args, small)):
        t, v = type(a), f"a{i}"
        if t is np.ndarray:
            values[f"_d{i}"] = a.dtype
            tests.append(f"type({v}) is _ndarray and {v}.dtype is _d{i}_{{j}} and {v}.ndim == {a.ndim} and "
                         f"{v}.flags.num & {_LAYOUT_FLAGS} == {a.flags.num & _LAYOUT_FLAGS}")
        elif t is int:
            s = T.SMALL
            tests.append(f"type({v}) is int and -{s} < {v} < {s}" if is_small else
                         f"type({v}) is int and not -{s} < {v} < {s} and {K.INT64[0]} <= {v} < {K.INT64[1]}")
        elif t in (float, bool) or isinstance(a, np.generic):
            values[f"_t{i}"] = t
            tests.append(f"type({v}) is _t{i}_{{j}}")
            exact = exact and (t in (float, bool) or issubclass(t, (np.number, np.bool_)))  # not datetime64's unit
        else:
            return None, None, False
    return " and ".join(f"({x})" for x in tests) or "True", values, exact


def make_quick(whole, entries):
    """The quick path of ``whole`` over ``entries`` (signatures with a kernel): a function of the call's argument
    tuple to its result, MISS or FALLBACK (on the current runtime); None when there is nothing to run natively."""
    if not entries:
        return None
    n = len(whole.params)
    names = ", ".join(f"a{i}" for i in range(n)) + ("," if n == 1 else "")
    env_get = T._ENV_DATA.get if T._ENV_KEY is not None else None
    ns = dict(_MISS=MISS, _FALLBACK=FALLBACK, _ndarray=np.ndarray, _Runtime=Runtime,
              _active=profiling._active.get, _failed=whole.failed,
              _env_get=env_get or (lambda _key: T._raw_mode()), _KEY=T._ENV_KEY, _RAW=T._raw_mode(),
              _stages=threading.local(), _zeros=np.zeros, _i64=np.int64,
              _using=select._current.get, _select=select, _open=select._open)
    # the runtime as ``select.current()`` finds it, read inline (a call of it costs 0.2 us here): a ``using``
    # block's, else the default; while ``using`` blocks are open in other threads, which one this thread follows
    # is current()'s decision (the general path). Arguments unpacked first: a wrong count is a MISS
    ns["_defaults"] = whole.defaults
    own = whole.own  # the function's own parameters; the module globals its body reads follow (``globals``)
    lines = ["def quick(args):"]
    if whole.defaults:  # a call leaving out the last parameters takes their defaults (numbers)
        lines += [f"    if {own - len(whole.defaults)} <= len(args) < {own}:",
                  f"        args = args + _defaults[len(args) - {own - len(whole.defaults)}:]"]
    if whole.globals:  # read at each call, as the tree reads them; an unset one fails the guard (then the tree)
        reads = []
        for k, (name, module) in enumerate(whole.globals.items()):
            ns[f"_gns{k}"] = whole.namespaces[module]
            reads.append(f"_gns{k}.get({name!r}, _MISS)")
        lines.append(f"    args = args + ({', '.join(reads)},)")
    lines += ["    try:",
              f"        {names} = args" if n else "        () = args",
              "    except ValueError:",
              "        return _MISS",
              "    if _env_get(_KEY) != _RAW:",
              "        return _MISS",
              "    rt = _using()",
              "    if rt is None:",
              "        if _open:",
              "            return _MISS",
              "        rt = _select._default",
              "    if type(rt) is not _Runtime or rt.closed or _active() is not None:",
              "        return _MISS"]
    for j, e in enumerate(entries):
        for name, value in e.values.items():
            ns[f"{name}_{j}"] = value
        ns[f"_e{j}"], ns[f"_c{j}"] = e, e.convert
        ns[f"_k{j}"] = e.runner(e.entry_point if e.exact else e.kernel)
        guard = e.guard.format(j=j)
        lines.append(f"    if {guard}:")
        # copies to put back only when the kernel may stop on an overflow (``checked``): ``writes`` also serves
        # the plain runs, and a copy of every array it writes per call cost NPBench's trisolv 3 ms (32 MB of L)
        saved = "[" + ", ".join(f"(a{i}, a{i}.copy())" for i in e.writes) + "]" if e.writes and e.checked else "()"
        call = ", ".join((["st"] if len(e.stages) > 1 else []) + [f"a{i}" for i in range(n)])
        if len(e.stages) > 1:  # one stage array per thread: kernels run without the GIL
            lines += ["        try:",
                      "            st = _stages.st",
                      "        except AttributeError:",
                      "            st = _stages.st = _zeros(1, _i64)"]
        lines += [f"        saved = {saved}",
                  "        try:",
                  f"            out = _k{j}({call})",
                  "        except Exception as exc:",
                  f"            if _failed(_e{j}, exc, {'st' if len(e.stages) > 1 else 'None'}, saved) is _FALLBACK:",
                  "                return _FALLBACK",
                  f"        _e{j}.native_runs += 1",
                  # display counters: no lock (CPython does not switch threads inside these bytecodes; a lost
                  # count under free threading would only make the CLI's summary low)
                  '        rt.counts["calls"] += 1',
                  f"        return {'out' if e.convert is None else f'_c{j}(out)'}"]
    lines.append("    return _MISS")
    exec(compile("\n".join(lines) + "\n", f"<phylanx quick path of {whole.where}>", "exec"), ns)  # noqa: S102 - our own source
    return ns["quick"]
