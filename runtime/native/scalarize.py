"""Element-wise array statements as one loop nest in a native kernel (scalarization).

``B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + ...)`` written as Numba array expressions makes a temporary
array per operation (Numba fuses array expressions only with ``parallel=True``), which is why a whole-function
kernel of NumPy stencil code ran at 0.7x NumPy (NPBench's jacobi_2d) or lost to the plain function (heat_3d,
fdtd_2d). Here such a statement becomes one loop nest that reads each operand element once and stores each result
element once:

    if <the shapes agree, the indices are in range, B shares no memory with the other arrays read>:
        for i0 in range(n0):
            for i1 in range(n1):
                B[s0 + i0, s1 + i1] = 0.2 * (A[a0 + i0, a1 + i1] + ...)
    else:
        raise _Overflow(...)   # the loop (or call) reruns interpreted, its arrays put back (nests.otherwise_rerun)

The element expression is lowered by the lowerer itself over element reads, so its NumPy semantics (NEP 50
promotion, inexact functions, integer helpers) are the scalar ones, which NEP 50 makes the array ones. Taken only
when that is the same computation as NumPy's: operands are slices (step 1) or int indices of arrays named in the
kernel, whole arrays, or scalars (evaluated once, before the loop, as NumPy evaluates them once); operations are
element-wise primitives (a fused form) with Numba's integer semantics equal to NumPy's; the result's dtype is the
target's; the target array is read only at the very elements it writes (``B[s] = B[s] * 2``) or in other rows or
columns of it (``p[1:-1, j] = p[1:-1, j - 1] * a``: an int index at a dimension where the write has one too; another
slice of the same rows would need NumPy's temporary), and the guard tests at run time that those int indices differ,
that no other operand shares its memory and that every operand's extent equals the target's (broadcasting through a
slice of length 1 reruns interpreted). In-place forms
(``B[s] -= e``, as the canonicalizer writes them) are the same statement with ``B[s]`` read first."""
from __future__ import annotations

import os

import numpy as np

from phylanx_py import ir

from . import contract, kir
from . import kinds as K
from .nests import (
    IDX,
    Nest,
    No,
    Spans,
    array_name,
    c_order_test,
    components,
    condition,
    condition_call,
    element_forms,
    element_read,
    forget,
    guarded,
    hoist,
    loop_indices,
    otherwise_rerun,
    replace,
    resolve,
    same_components,
)

_INPLACE = {"operator.iadd": "operator.add", "operator.isub": "operator.sub", "operator.imul": "operator.mul",
            "operator.itruediv": "operator.truediv"}


def note_temporary(low, n) -> None:
    """Remember what a canonicalizer temporary (``__px_1 = ey``, ``__px_2 = (slice(1, None), ...)``) holds: an
    in-place store ``ey[1:, :] -= e`` reaches this module as ``__px_1[__px_2] = isub(__px_1[__px_2], e)``."""
    t = n.target
    if isinstance(t, ir.StoreName) and t.name.startswith("__px_"):
        low.pxz_temps[t.name] = n.value


def scalarized(low, n) -> bool:
    """Emit the assignment ``n`` as a guarded loop nest (module docstring) and say True; False when it is not one
    this module takes (nothing emitted: the caller lowers it as before)."""
    t = n.target
    if os.environ.get("PHYLANX_SCALARIZE", "1") == "0":  # off: the array statements (A/B measurements)
        return False
    if not (isinstance(t, (ir.StoreItem, ir.StoreName)) and isinstance(n.value, (ir.Fused, ir.Call))) or \
            low.conditional:
        return False
    saved, lines, indent, pending = low._state(), list(low.lines), low.indent, list(low.pending)
    try:
        (contract.emit if contract.takes(n.value) else _emit)(low, n)
        return True
    except (No, K.Decline):
        low._restore(saved)
        low.lines[:], low.indent, low.pending[:] = lines, indent, pending
        return False


def _whole_inplace(low, t, value) -> bool:
    """Whether ``t = value`` is ``A op= e`` on an array ``A`` (the tree's ``A = iadd(A, e)``): NumPy updates A in
    place, so it is the store ``A[...] = A[...] op e``."""
    if t.depth != 0 or not (isinstance(value, ir.Call) and value.prim in _INPLACE and not value.kwargs):
        return False
    first = value.args[0]
    return isinstance(first, ir.Var) and first.depth == 0 and first.name == t.name and \
        type(low.env.get(t.name)) is np.ndarray


def _emit(low, n):
    t = n.target
    value = n.value
    if isinstance(t, ir.StoreName) and _whole_inplace(low, t, value):  # ``A += e`` on an array: A[...] += e
        name, tk = t.name, low.env[t.name]
        if tk.dtype not in K.DTYPES:
            raise No
        comps = [("slice", None, None)] * tk.ndim
        nest = Nest(low, name, comps)
        expr = ir.Call(_INPLACE[value.prim], (nest.read(name, comps), nest.element(value.args[1])), loc=value.loc)
    elif isinstance(t, ir.StoreName):  # ``x = <element-wise>``: a new array, filled by the nest
        if t.depth != 0 or (isinstance(value, ir.Call) and value.prim in _INPLACE):
            raise No
        name, tk, comps = None, None, None
        nest = Nest(low, None, None)
        expr = nest.element(value)
        if any(expr is placeholder for _, _, placeholder in nest.reads):
            raise No  # ``x = a[1:]`` binds a view, not a copy
    else:
        name = array_name(low, t.obj)
        tk = low.env[name]
        if tk.dtype not in K.DTYPES:
            raise No
        comps = components(low, t.key, tk.ndim)
        nest = Nest(low, name, comps)
        if nest.rank == 0:
            raise No  # one element: an ordinary store
        if isinstance(value, ir.Call) and value.prim in _INPLACE and not value.kwargs:
            first, rest = value.args
            first = resolve(low, first)
            if not (isinstance(first, ir.Call) and first.prim == "operator.getitem" and
                    array_name(low, first.args[0]) == name and
                    same_components(components(low, first.args[1], tk.ndim), comps)):
                raise No
            expr = ir.Call(_INPLACE[value.prim], (nest.read(name, comps), nest.element(rest)), loc=value.loc)
        else:
            expr = nest.element(value)
    if not nest.reads or not nest.rank:
        raise No

    conds = []
    span = Spans(low, conds)
    new = span.new

    fresh = None
    if name is None:  # the new array: indexed from 0 in every dimension
        target_index, target_lengths = None, [None] * nest.rank
    else:
        if any(c[0] == "new" for c in comps):
            raise No
        target_index, target_lengths = span(name, comps)
    loops = [new() for _ in range(nest.rank)]
    elements = {}  # id of a read's placeholder -> its element read
    disjoint = {id(comps_): dims for comps_, dims in nest.disjoint}
    for array, comps_, placeholder in nest.reads:
        index, lengths = span(array, comps_)  # a new axis's length is None: it takes any (broadcasting)
        if id(comps_) in disjoint:  # another row of the target: apart from the rows written when an index differs
            tests = [f"{index[d][1]} != {target_index[d][1]}" for d in disjoint[id(comps_)]]
            conds.append(condition(tests[0] if len(tests) == 1 else f"({' or '.join(tests)})",
                                   *(index[d][1] for d in disjoint[id(comps_)]),
                                   *(target_index[d][1] for d in disjoint[id(comps_)])))
        for d, length in enumerate(lengths):
            if length is None or length == target_lengths[d]:
                continue
            if target_lengths[d] is None:  # a new array's extent: its first operand with a slice there
                target_lengths[d] = length
            else:
                conds.append(condition(f"{length} == {target_lengths[d]}", length, target_lengths[d]))
        elements[id(placeholder)] = element_read(array, index, loops)
        if name is None and nest.rank > 1:  # a new array: C-ordered as NumPy would make it
            order = c_order_test(low, array, comps_, lengths)
            if order is not None:
                conds.append(order)
    if any(length is None for length in target_lengths):
        raise No  # a dimension that only new axes make
    if name is None:
        fresh = new()
        target_index = [("slice", zero) for zero in ["__pxz_zero"] * nest.rank]
        low.names(binds=["__pxz_zero"], holds=IDX)
        low.emit(f"__pxz_zero = {low.call_of('np.uint64', '0')}")
        low.starts.add("__pxz_zero")  # (the new array's elements' offset: kir.Access.own)
        low.env["__pxz_zero"] = IDX
    for other in sorted({a for a, _, _ in nest.reads if name is not None and a != name}):
        conds.append(condition_call("_apart", name, other, arrays=(name, other)))  # (helpers.py: extents apart)
    hoist(low, nest)
    loop_indices(low, loops)
    expr = replace(expr, elements)
    store = element_read(fresh or name, target_index, loops)
    before_unchecked = low.unchecked
    low.unchecked = low.unchecked | {id(e) for e in elements.values()} | {id(store)}
    guarded(low, conds, "an element-wise statement")
    low.indent += 1
    allocation = low.emit("") if fresh is not None else None  # the allocation, once the element's dtype is known
    for v, length in zip(loops, target_lengths):
        low.put(kir.over_range(v, length))
        low.indent += 1
    try:
        low.elementwise = True  # (NumPy computed this element in an array loop: a complex product's FMA)
        try:
            src, k, tainted = low.expr(element_forms(low, expr))
        finally:
            low.elementwise = False
        if type(k) is K.Either or not isinstance(k, np.generic) or np.dtype(type(k)) not in K.DTYPES:
            raise No
        dtype = np.dtype(type(k))
        if fresh is not None:
            allocation.tags += kir.declared("np.empty") + (kir.Name(fresh, True),) + tuple(
                kir.Name(x) for x in target_lengths)
            allocation.text = \
                f"{fresh} = np.empty(({''.join(x + ', ' for x in target_lengths)}), np.{dtype.name})"
            low.env[fresh] = K.array(dtype, nest.rank)
            low.hold(fresh, low.env[fresh], fresh=True)
        elif dtype != tk.dtype and not (dtype.kind == tk.dtype.kind == "f"):
            raise No  # a cast on the store: NumPy's casting rules, not a C cast (between floats both round alike)
        obj, _, _ = low.expr(store.args[0])
        key, kk, _ = low.expr(store.args[1])
        low.emit(f"{low.access(store, store.args[0], obj, store.args[1], key, kk, store=True)} = {src}")
        if tainted and fresh is None:  # a new array's taint is its name's (the array statement binds it)
            low.arrays_tainted = True
    finally:
        low.unchecked = before_unchecked
    low.indent -= len(loops)
    if fresh is not None:
        low.names(reads=[fresh])
        low.assign(t, fresh, K.array(dtype, nest.rank), tainted)
    low.indent -= 1
    if conds:
        otherwise_rerun(low)
    # else nothing to test (``B *= alpha`` on a whole array: its spans are its shape): no branch that stops the
    # kernel, so the statement cannot raise, and may follow a loop that changed arrays (whole_lower._may_raise)
    forget(low)
