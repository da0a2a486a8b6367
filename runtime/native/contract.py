"""A sum over axes of an element-wise expression as one loop nest in a native kernel (a contraction).

NPBench's convolutions (conv2d_bias, lenet, resnet) compute each output pixel as

    output[:, i, j, :] = np.sum(input[:, i:i + K, j:j + K, :, np.newaxis] * weights[np.newaxis, :, :, :],
                                axis=(1, 2, 3))

As Numba array expressions that is a 5-d broadcast product (a temporary per call) and a reduction: Numba took 20 s
to compile the nest's one version of it (40 s for the kernel with its checked version), longer than the benchmark's
whole settle window, and ran it at 1.7 ms. As loops over the broadcast frame it compiles in 0.4 s and runs in
1.1 ms, without the temporary:

    if <the operands' extents agree, the indices are in range, the target shares no memory with them>:
        for n in range(N):                     # the kept axes, in order
            for co in range(C_out):
                acc = np.float32(0)
                for a in range(K):             # the reduced axes, in order
                    for b in range(K):
                        for c in range(C_in):
                            acc = acc + input[n, i + a, j + b, c] * weights[a, b, c, co]
                output[n, i, j, co] = acc
    else:
        raise _Overflow(...)                   # the loop or call reruns interpreted, its arrays put back

NumPy's order: ``np.sum`` of the C-ordered temporary over a run of axes that does not end at the last one adds the
reduced elements of each output one by one in C order from 0 (helpers_reduce's ``_pxr_sum_mid``), which is the
order of the loops above; a float sum over the last axis alone is pairwise per output in NumPy, so the nest fills
a row buffer and adds it with NumPy's pairwise order (helpers_numpy._pairwise); one over a run of trailing axes is
not taken for floats (NumPy's iterator decides how it coalesces them), and the test requires the kept axes
after the summed ones to be longer than 1 together (NumPy drops axes of length 1, and a
sum with nothing kept after it is a trailing one: a review found 2.7e-15 apart for a convolution with one output
channel). A new array is made only from operands in C order, the order NumPy then gives it. Float
results are marked inexact (stored, never compared), as the reductions' are: NumPy's order follows the memory order
of the temporary, which follows its operands'. The other branch is not the array expression, whose compile is what
this avoids: a statement whose operands broadcast a dimension of length 1 that is not a new axis, overlap the target
or index out of range makes the kernel stop and the loop (or the call) rerun interpreted with the arrays it changed
put back, which gives NumPy's result or NumPy's error at the user's line."""
from __future__ import annotations

import numpy as np

from phylanx_py import ir

from . import kinds as K
from . import kir
from .nests import (
    Nest,
    No,
    Spans,
    array_name,
    c_order_test,
    components,
    condition,
    condition_call,
    element_read,
    forget,
    guarded,
    hoist,
    loop_indices,
    otherwise_rerun,
    replace,
)
from .reductions import _constant

_DTYPES = (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.int64))  # the sum's dtype is the element's


def takes(value) -> bool:
    """Whether the assigned value is a call this module lowers: ``np.sum(e, axis=<constant>)``."""
    return _summed(value) is not None


def _summed(value):
    """(the summed expression, the axis node) of ``np.sum(e, axis=...)``, or of the fusion pass's group of it (a
    fused reduction: its body is the same sum over the chain), else None."""
    if isinstance(value, ir.Fused) and value.reduce and value.reduce[0] == "sum" and \
            isinstance(value.body, ir.Call) and value.body.prim == "sum":
        chain = ir.Fused(value.spec, value.body.args[0], value.leaves, value.locs, (), value.loc)
        return _summed(ir.Call("sum", (chain,), value.body.kwargs, loc=value.loc))
    if isinstance(value, ir.Call) and value.prim == "sum" and len(value.args) == 1 and \
            [k for k, _ in value.kwargs] == ["axis"]:
        return value.args[0], value.kwargs[0][1]
    return None


def emit(low, n):
    """Emit ``n`` (a store or a binding of ``np.sum(<element-wise>, axis=...)``) as the module docstring's nest, or
    raise No (nothing kept: the caller restores the lowerer's state)."""
    summed, axis = _summed(n.value)
    axis = _constant(axis)
    if axis is ... or axis is None:
        raise No
    t = n.target
    name = tk = None
    if isinstance(t, ir.StoreItem):
        name = array_name(low, t.obj)
        tk = low.env[name]
        comps = components(low, t.key, tk.ndim)
        if any(c[0] == "new" for c in comps):
            raise No
    elif t.depth != 0:
        raise No
    nest = Nest(low, name, None, frame=True)
    expr = nest.element(summed)
    if not nest.reads:
        raise No
    frames = [[c for c in comps_ if c[0] != "int"] for _, comps_, _ in nest.reads]
    rank = max(len(f) for f in frames)
    axes = (axis,) if type(axis) is int else axis
    axes = tuple(sorted(a + rank if a < 0 else a for a in axes))
    if not axes or len(set(axes)) != len(axes) or not 0 <= axes[0] <= axes[-1] < rank or \
            axes != tuple(range(axes[0], axes[-1] + 1)):
        raise No  # one run of axes: NumPy's order is known for it (module docstring)
    kept = [d for d in range(rank) if d not in axes]
    if not kept:
        raise No

    conds = []
    span = Spans(low, conds)
    if name is not None:
        target_index, target_lengths = span(name, comps)
    extents = [None] * rank
    reads = []
    for (array, comps_, placeholder), frame in zip(nest.reads, frames):
        index, lengths = span(array, comps_)
        offset = rank - len(frame)  # broadcasting aligns the trailing dimensions
        for d, length in enumerate(lengths, offset):
            if length is None:
                continue
            if extents[d] is None:
                extents[d] = length
            elif extents[d] != length:
                conds.append(condition(f"{length} == {extents[d]}", length, extents[d]))
        reads.append((array, index, offset, placeholder))
        # a new array: C-ordered as NumPy makes it from operands in C order; a sum over the last axis: NumPy adds
        # each row pairwise only when its temporary's rows are contiguous, as they are from operands in C order
        # (F-ordered ones gave 1e-14 apart: a review)
        order = c_order_test(low, array, comps_, lengths) if name is None or axes == (rank - 1,) else None
        if order is not None:
            conds.append(order)
    if any(e is None for e in extents):
        raise No  # a dimension only new axes make
    after = [extents[d] for d in kept if d > axes[-1]]
    if after:  # NumPy drops kept axes of length 1: with none longer after the summed ones, it sums those pairwise
        conds.append(condition(f"{' * '.join(after)} != 1", *after))
    if name is not None:
        if len(target_lengths) != len(kept):
            raise No
        conds += [condition(f"{a} == {extents[d]}", a, extents[d]) for a, d in zip(target_lengths, kept)
                  if a != extents[d]]
        for other in sorted({a for a, _, _, _ in reads}):
            conds.append(condition_call("_apart", name, other, arrays=(name, other)))
    hoist(low, nest)
    loops = [span.new() for _ in range(rank)]
    loop_indices(low, loops)
    elements = {id(p): element_read(array, index, loops[offset:]) for array, index, offset, p in reads}
    expr = replace(expr, elements)
    acc = span.new()
    # a float sum over the last axis alone: NumPy adds each output's elements pairwise (its temporary's rows are
    # contiguous), so the nest writes them into a row buffer and adds it as NumPy does (helpers_numpy._pairwise)
    pairwise = span.new() if axes == (rank - 1,) else None
    if name is None:
        fresh = span.new()
        store = ir.Call("operator.getitem", (ir.Var(fresh), ir.Tuple(tuple(ir.Var(loops[d]) for d in kept))))
    else:
        store = element_read(name, target_index, [loops[d] for d in kept])
    before_unchecked = low.unchecked
    low.unchecked = low.unchecked | {id(e) for e in elements.values()} | {id(store)}
    guarded(low, conds, "a sum of an element-wise expression")
    low.indent += 1
    allocation = low.emit("") if name is None else None  # the allocation, once the element's dtype is known
    choice = None
    if pairwise is not None:  # the test between the two nests below (its condition once the dtype is known)
        choice = low.put(kir.If(0, f"{extents[axes[0]]} < 8", (kir.Name(extents[axes[0]]),),
                                note="NumPy adds fewer than 8 one by one"))
        low.indent += 1
    try:
        dtype, tainted = _sums(low, expr, kept, axes, extents, loops, acc, store, tk, name, rank, None)
        if choice is not None:
            low.indent -= 1
            if dtype.kind == "f":
                # more elements, pairwise: the row buffer's nest (two nests: the first keeps no buffer, so its
                # outer loop may run on two threads)
                low.put(kir.Else(0))
                low.indent += 1
                low.names(reads=[extents[axes[0]]], binds=[pairwise], holds=K.array(dtype, 1),
                          fresh=True)
                low.emit(f"{pairwise} = {low.call_of('np.empty', f'({extents[axes[0]]}, )', f'np.{dtype.name}')}")
                _sums(low, expr, kept, axes, extents, loops, acc, store, tk, name, rank, pairwise)
                low.indent -= 1
            else:
                choice.cond, choice.note = "True", "an integer sum: any order is NumPy's"
                choice.tags = tuple(t for t in choice.tags if type(t) is not kir.Name)  # (it reads nothing now)
        if name is None:
            allocation.tags += kir.declared("np.empty") + (kir.Name(fresh, True),) + tuple(
                kir.Name(extents[d]) for d in kept)
            allocation.text = \
                f"{fresh} = np.empty(({''.join(extents[d] + ', ' for d in kept)}), np.{dtype.name})"
            low.env[fresh] = K.array(dtype, len(kept))
            low.hold(fresh, low.env[fresh], fresh=True)
    finally:
        low.unchecked = before_unchecked
    if name is None:
        low.names(reads=[fresh])
        low.assign(t, fresh, K.array(dtype, len(kept)), tainted)
    elif tainted:
        low.arrays_tainted = True
    low.indent -= 1
    otherwise_rerun(low)
    forget(low)


def _sums(low, expr, kept, axes, extents, loops, acc, store, tk, name, rank, pairwise):
    """Emit the kept loops, each output's sum over the reduced ones (into the row buffer ``pairwise`` and added in
    NumPy's pairwise order, or one by one) and its store; the element's dtype and taint, or No."""
    for d in kept:
        low.put(kir.over_range(loops[d], extents[d]))
        low.indent += 1
    start = low.emit("")  # the accumulator's start, once its dtype is known
    for d in axes:
        low.put(kir.over_range(loops[d], extents[d]))
        low.indent += 1
    src, k, tainted = low.expr(expr)
    if type(k) is K.Either or not isinstance(k, np.generic) or np.dtype(type(k)) not in _DTYPES:
        raise No
    dtype = np.dtype(type(k))
    if dtype.kind == "f" and axes[-1] == rank - 1 and len(axes) > 1:
        raise No  # NumPy sums a run of trailing axes in an order of its iterator's
    if pairwise is not None:
        low.names(reads=[pairwise, loops[axes[0]]])
        # (an element of the buffer, which is as long as the loop: in bounds; a store parallel.py sees, kir.Access)
        low.pending.append(kir.Access(pairwise, "proven", pairwise, True, ((loops[axes[0]], ""),), True))
        low.emit(f"{pairwise}[{loops[axes[0]]}] = {src}")
        low.indent -= len(axes)
        low.names(reads=[pairwise, extents[axes[0]]], binds=[acc], holds=k)
        low.mention(pairwise)  # (the helper's argument: the buffer as a value, kir.Use.whole)
        low.emit(f"{acc} = {low.call_of(f'np.{dtype.name}', '0')} + "
                 f"{low.helper('_pairwise', pairwise, '0', extents[axes[0]])}")
    else:
        low.names(reads=[acc], binds=[acc], holds=k)
        low.emit(f"{acc} = {acc} + {src}")
        low.indent -= len(axes)
    start.text, start.tags = f"{acc} = np.{dtype.name}(0)", start.tags + kir.declared(f"np.{dtype.name}") + (
        kir.Name(acc, True),)
    low.hold(acc, k)
    if name is not None and dtype != tk.dtype and not (dtype.kind == tk.dtype.kind == "f"):
        raise No  # a cast on the store: NumPy's casting rules, not a C cast (between floats both round alike)
    if name is None:  # the new array, allocated before the nests once its dtype is known (``emit``)
        low.env[store.args[0].name] = K.array(dtype, len(kept))
    obj, _, _ = low.expr(store.args[0])
    key, kk, _ = low.expr(store.args[1])
    low.names(reads=[acc])
    low.emit(f"{low.access(store, store.args[0], obj, store.args[1], key, kk, store=True)} = {acc}")
    low.indent -= len(kept)
    return dtype, tainted or dtype.kind == "f"
