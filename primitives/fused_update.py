"""In-place element-wise updates fused into one pass: ``v = m*v + g; p = p - lr*v`` as one loop over memory.

``fused_update(statements, *args)`` runs ``statements``, a tuple of ``(target, spec)``, in order: each computes
its spec (primitives/fused.py's nested tuples over registry names, ``("arg", i)`` reading ``args[i]``) and stores
it into the array ``args[target]`` in place, so later statements read the new values. The reference does exactly
that with the registry's NumPy kernels, statement after statement over whole arrays (what NumPy's ``v *= m``,
``v += g``, ``p -= lr * v`` compute). The compiled kernel does it element by element, every statement for element
``i`` before element ``i + 1``, which is the same thing when the arrays all have one shape and none shares memory
with another (checked at every call; otherwise the reference runs). Each intermediate is cast to the dtype NumPy
gives it (the same generated scalar code as fused kernels), and a statement runs compiled only when its value
already has its target's dtype, so the answer is NumPy's to the last bit. An optimizer's update over a model's
parameters is one such call for all of them (``fused_update_groups``, phylanx_py/nn/optim.py): one compiled call
runs the statements over each parameter's arrays in turn, three to five passes of NumPy per parameter in one pass.
"""
from __future__ import annotations

import functools
import operator
import os
import re

import numpy as np

from . import kernel_cache
from .fused import (
    _blocks,
    _body,
    _dtypes,
    _map_blocks,
    _numba_type,
    _signature,
    _threads,
    reference,
)
from .kernel_builds import cached_kernel, remember

_kernels: dict = {}
_found: dict = {}
_found_groups: dict = {}
# statements -> (the arrays of the last call's groups that passed the checks, per column: a tuple or None for a
# scalar; the columns made of them; per column the ids of the allocations they own). A training step updates the
# same parameters and buffers at every step, only the gradients are new: arrays met again are checked only for
# what can change in place (dtype, shape, contiguity, writeability), not for who owns their memory (25 -> ~13 us
# of checks a step for simplemlp's 8 parameters, 1 thread). Holds the last call's arrays until the next call.
_last_groups: dict = {}

# An update runs on parallel blocks from this many elements on (all groups together). Below, one thread: an
# update is a few passes over memory the step has just touched, and a hand-off to a block thread cost more than
# it gave (simplemlp's 1.33M-element SGD update, 2 threads, interleaved runs at load ~5: one thread 333 us median,
# 217 min; two blocks 474 us, 277 min; at 0.3M, 4M and 16M elements two blocks were slower too, also at their
# best run). Element-wise kernels (kernel_runs.PARALLEL_MIN_ELEMENTS) keep their own threshold.
UPDATE_PARALLEL_MIN_ELEMENTS = 1 << 24


class Sum:
    """The sum of same-shape arrays, ``((a0 + a1) + a2) ...``, as an input of an update (not a target): the update
    reads the parts and adds them in its own pass. Data-parallel ranks that share memory give the optimizer their
    chunk of every rank's gradient this way (runtime/training/shard.py): summing the chunk into a buffer first was
    a pass that wrote it and another that read it back (0.2 ms of simplemlp's 4.4 ms step, 2 ranks of 64 rows). The
    bits are NumPy's: the parts added in order in their dtype, as ``np.add`` then ``+=`` give them."""

    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = tuple(parts)


@functools.cache
def _summed(statements, counts, n_args):
    """``statements`` with input ``i`` read as the sum of its parts, for each ``(i, k)`` of ``counts`` (input ``i`` a
    Sum of ``k`` parts): its first part at ``i``, its other parts after the ``n_args`` inputs, in ``counts``' order
    (the inputs ``_expanded`` gives)."""
    extra, at = {}, n_args
    for i, k in counts:
        extra[i] = tuple(range(at, at + k - 1))
        at += k - 1

    def visit(node):
        if node[0] == "arg" and node[1] in extra:
            out = node
            for j in extra[node[1]]:
                out = ("add", out, ("arg", j))
            return out
        if node[0] in ("arg", "const"):
            return node
        return (node[0],) + tuple(visit(c) for c in node[1:])

    return tuple((t, visit(spec)) for t, spec in statements)


def _expanded(statements, args):
    """(statements, args) with each Sum input spread into its parts (``_summed``); as they are without one."""
    counts = tuple((i, len(a.parts)) for i, a in enumerate(args) if type(a) is Sum)
    if not counts:
        return statements, args
    if any(t in dict(counts) for t, _ in statements):
        raise ValueError("a Sum is an input of an update, not a target")
    flat = [a.parts[0] if type(a) is Sum else a for a in args]
    flat += [part for i, _ in counts for part in args[i].parts[1:]]
    return _summed(statements, counts, len(args)), tuple(flat)


def fused_update(statements, *args):
    """Run ``statements`` (``(target, spec)`` pairs) in order, each storing its value into ``args[target]``. An
    input may be a ``Sum`` of arrays."""
    statements, args = _expanded(statements, args)
    kernel = _kernel(statements, args)
    if kernel is not None:
        flat = [a.reshape(-1) if type(a) is np.ndarray else a for a in args]
        size = next(a.size for a in flat if type(a) is np.ndarray)
        n = _threads() if size >= UPDATE_PARALLEL_MIN_ELEMENTS else 1
        if n < 2:
            kernel(*flat)
        else:  # element i depends on element i only: contiguous blocks on parallel threads (the kernel drops the GIL)
            _map_blocks(lambda lo, hi: kernel(*[a[lo:hi] if type(a) is np.ndarray else a for a in flat]),
                        _blocks(size, n))
        return None
    for target, spec in statements:  # the reference: NumPy's in-place statements, one after another
        out = args[target]
        np.copyto(out, reference(spec, args), casting="same_kind")
    return None


def fused_update_groups(statements, groups):
    """``fused_update(statements, *args)`` for each ``args`` of ``groups``, in order (an optimizer's update of every
    parameter): one compiled call runs them all when the groups agree (the same scalars; at each array argument,
    C-contiguous arrays of one dtype, writable or not alike) and no two arrays share memory (each its own
    allocation), else one ``fused_update`` per group. A call per parameter paid its checks and dispatch, and on
    large parameters a hand-off to the block threads, for each parameter: simplemlp's 8-parameter update took
    0.41 ms that way against 0.35 ms in one call (2 threads, best of 25 runs of 20 updates). Groups with a Sum
    input are not such arrays (``_groups_kernel`` finds none): each runs as its own ``fused_update``, which reads
    the Sum's parts."""
    groups = [tuple(g) for g in groups]
    found = _groups_kernel(statements, groups) if len(groups) > 1 else None
    if found is None:
        for args in groups:
            fused_update(statements, *args)
        return None
    kernel, columns, sizes = found
    total = sum(sizes)
    n = _threads() if total >= UPDATE_PARALLEL_MIN_ELEMENTS else 1
    if n < 2:
        kernel(*columns, np.zeros(len(sizes), np.int64), np.array(sizes, np.int64))
        return None
    # Element lo:hi of the whole run is group j's lo - start_j : hi - start_j (clipped to the group). Each block's
    # bounds are made here, in plain ints, before the threads start: a block thread then only runs the kernel,
    # which releases the GIL (np.linspace, np.cumsum and np.clip per block took ~25 us a step, partly in the
    # block thread, waiting for the GIL the calling thread held).
    starts = [0] * len(sizes)
    for j in range(1, len(sizes)):
        starts[j] = starts[j - 1] + sizes[j - 1]
    cuts = [total * k // n for k in range(n + 1)]

    def within(at):
        return np.array([min(max(at - s0, 0), size) for s0, size in zip(starts, sizes)], np.int64)
    bounds = {lo: (within(lo), within(hi)) for lo, hi in zip(cuts[:-1], cuts[1:]) if hi > lo}

    def block(lo, hi):
        kernel(*columns, *bounds[lo])
    _map_blocks(block, [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:]) if hi > lo])
    return None


def _groups_kernel(statements, groups):
    """(the compiled kernel over groups, its arguments: per array argument the tuple of the groups' flat arrays,
    scalars as they are, the groups' sizes), or None: then each group runs on its own."""
    first = groups[0]
    sig = _signature(first)
    if sig is None or os.environ.get("PHYLANX_FUSE", "1") == "0" or any(len(g) != len(first) for g in groups):
        return None
    targets = {t for t, _ in statements}
    last = _last_groups.get(statements)
    if last is not None and len(last[0]) != len(first):
        last = None
    owners: set = set()
    columns, kept, owned = [], [], []
    for i, a0 in enumerate(first):
        t0 = type(a0)
        if t0 is not np.ndarray:
            for g in groups:
                v = g[i]
                if type(v) is not t0 or v != a0:
                    return None
            columns.append(a0)
            kept.append(None)
            owned.append(None)
            continue
        dtype, writeable = a0.dtype, a0.flags.writeable
        if i in targets and not writeable:
            return None
        arrays = tuple([g[i] for g in groups])
        before = last[0][i] if last is not None else None
        if before is not None and len(before) == len(arrays) and all(map(operator.is_, arrays, before)):
            # the arrays checked last time: their owners are as they were (a flat view of each holds it, so none
            # was resized), what can change in place is checked again
            for g in groups:
                a = g[i]
                flags = a.flags
                if a.dtype != dtype or a.shape != g[0].shape or not flags.c_contiguous or \
                        flags.writeable != writeable:
                    return None
            ids = last[2][i]
            if not owners.isdisjoint(ids):
                return None
            owners.update(ids)
            columns.append(last[1][i])
            kept.append(arrays)
            owned.append(ids)
            continue
        flat, ids = [], []
        for g in groups:
            a = g[i]
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != g[0].shape or a.size == 0:
                return None
            flags = a.flags
            owner = a if a.base is None else a.base  # NumPy points a view's base at the array owning the memory
            if not flags.c_contiguous or flags.writeable != writeable or type(owner) is not np.ndarray or \
                    not owner.flags.owndata or id(owner) in owners:
                return None
            owners.add(id(owner))
            ids.append(id(owner))
            flat.append(a.reshape(-1))
        columns.append(tuple(flat))
        kept.append(arrays)
        owned.append(tuple(ids))
    _last_groups[statements] = (tuple(kept), tuple(columns), tuple(owned))
    key = (statements, sig, tuple(type(c) is tuple and c[0].flags.writeable for c in columns), len(groups))
    hit = _found_groups.get(key, _found_groups)
    if hit is _found_groups:
        hit = remember(_found_groups, key, lambda: _find(statements, first, len(groups)))
    if hit is None:
        return None
    return hit, columns, [g[0].size for g in groups]


def _kernel(statements, args):
    """The compiled kernel for these inputs, or None (the reference runs)."""
    if os.environ.get("PHYLANX_FUSE", "1") == "0" or not _layout_ok(statements, args):
        return None
    sig = _signature(args)
    if sig is None:
        return _find(statements, args)
    key = (statements, sig)
    hit = _found.get(key, _found)
    if hit is _found:
        hit = remember(_found, key, lambda: _find(statements, args))
    return hit


def _layout_ok(statements, args) -> bool:
    """Every array input a C-contiguous ndarray of one shape, no two sharing memory, every target an array."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    if not arrays or any(type(a) is not np.ndarray for a in arrays):
        return False
    shape = arrays[0].shape
    if any(a.shape != shape or not a.flags.c_contiguous for a in arrays):
        return False
    if any(type(args[t]) is not np.ndarray or not args[t].flags.writeable for t, _ in statements):
        return False
    for i, a in enumerate(arrays):  # (bounds only: distinct parameters are distinct allocations)
        for b in arrays[i + 1:]:
            if np.may_share_memory(a, b):
                return False
    return True


def _find(statements, args, groups: int = 0):
    """The compiled kernel of ``statements`` for inputs like ``args`` (over ``groups`` groups of them if given)."""
    dtypes = []
    for target, spec in statements:
        try:
            found = _dtypes(spec, args)
        except Exception:  # noqa: BLE001 - NumPy refuses these dtypes: the reference raises the real error
            return None
        if found is None or found[0][id(spec)] != args[target].dtype:
            return None  # a value cast on its way into the target: left to NumPy's copyto
        dtypes.append(found[0])
    in_dtypes = [np.asarray(a).dtype for a in args]
    if groups:
        writeable = [isinstance(a, np.ndarray) and a.flags.writeable for a in args]
        key = (statements, tuple(d.str for d in in_dtypes), tuple(writeable), groups)
        return cached_kernel(_kernels, key, lambda: _compile(statements, args, dtypes, in_dtypes, groups, writeable))
    key = (statements, tuple(d.str for d in in_dtypes))
    return cached_kernel(_kernels, key, lambda: _compile(statements, args, dtypes, in_dtypes))


def _source(statements, args, dtypes, groups: bool = False) -> str:
    """One njit loop: load each array's element, run the statements' scalar code, store the targets. ``groups``:
    each array argument is a tuple of arrays, one per group, and ``kernel`` runs that loop (``one``) on elements
    ``lo[j]:hi[j]`` of group ``j``, for each group in order."""
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    names = [f"x{i}" if i in arrays else f"a{i}" for i in range(len(args))]
    lines = [f"        x{i} = a{i}[k]" for i in arrays]
    for n, ((target, spec), dts) in enumerate(zip(statements, dtypes)):
        body, result = _body(spec, dts, names, indent="        ")
        rename = lambda text, n=n: re.sub(r"\bt(\d+)\b", rf"s{n}_t\1", text)  # noqa: E731
        lines += [rename(line) for line in body]
        lines += [f"        x{target} = {rename(result)}", f"        a{target}[k] = x{target}"]
    params = ", ".join(f"a{i}" for i in range(len(args)))
    src = ("import numpy as np\nimport numba\n\n\n"
           "@numba.njit(cache=True, nogil=True)\n"
           f"def {'one' if groups else 'kernel'}({params}):\n"
           f"    for k in range(a{arrays[0]}.size):\n" + "\n".join(lines) + "\n")
    if groups:
        # each group's part as a C-contiguous slice indexed from 0, the loop above as it is for one group
        # (``range(lo[j], hi[j])`` in one loop over groups ran 4-5x slower: a negative-index fix-up per access)
        parts = ", ".join(f"a{i}[j][lo[j]:hi[j]]" if i in arrays else f"a{i}" for i in range(len(args)))
        src += ("\n\n@numba.njit(cache=True, nogil=True)\n"
                f"def kernel({params}, lo, hi):\n    for j in range(len(lo)):\n        one({parts})\n")
    return src


def _compile(statements, args, dtypes, in_dtypes, groups: int = 0, writeable=()):
    src = _source(statements, args, dtypes, groups=bool(groups))
    src += f"\n# {', '.join(_numba_type(d) for d in in_dtypes)}\n"  # one file per input dtypes

    def sample(a, d, i):
        if not isinstance(a, np.ndarray):
            return a
        if not groups:
            return np.zeros(1, d)
        one = [np.zeros(1, d) for _ in range(groups)]
        for z in one:
            z.flags.writeable = writeable[i]  # read-only arrays are another Numba type: compiled for what comes
        return tuple(one)

    def compile_now(module):  # a failure to compile is a failure here, not at the first real call
        samples = [sample(a, d, i) for i, (a, d) in enumerate(zip(args, in_dtypes))]
        if groups:
            samples += [np.zeros(groups, np.int64), np.ones(groups, np.int64)]
        module.kernel(*samples)

    return kernel_cache.load_or_build("update", src, compile_now).kernel

