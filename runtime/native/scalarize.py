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
        B[1:-1, 1:-1] = <the array expression, as before>

The element expression is lowered by the lowerer itself over element reads, so its NumPy semantics (NEP 50
promotion, inexact functions, integer helpers) are the scalar ones, which NEP 50 makes the array ones. Taken only
when that is the same computation as NumPy's: operands are slices (step 1) or int indices of arrays named in the
kernel, whole arrays, or scalars (evaluated once, before the loop, as NumPy evaluates them once); operations are
element-wise primitives (a fused form) with Numba's integer semantics equal to NumPy's; the result's dtype is the
target's; the target array is read only at the very elements it writes (``B[s] = B[s] * 2``; another slice of it
would need NumPy's temporary), and the guard tests at run time that no other operand shares its memory and that
every operand's extent equals the target's (broadcasting takes the array statement). In-place forms
(``B[s] -= e``, as the canonicalizer writes them) are the same statement with ``B[s]`` read first."""
from __future__ import annotations

import os

import numpy as np
from phylanx_py.primitives import lookup

from phylanx_py import ir

from . import kinds as K

_INPLACE = {"operator.iadd": "operator.add", "operator.isub": "operator.sub", "operator.imul": "operator.mul",
            "operator.itruediv": "operator.truediv"}
# The generated indices hold uint64 values in the kernel, so Numba indexes without its test for a negative index
# (which kept LLVM from vectorizing the loop: 6 ns an element against 0.4 here). Their kind is int64 (the kinds
# take no uint64): they appear only in index sums, where both are integers that wrap and never need checks.
_IDX = np.int64(3)


class _No(Exception):
    """Not this statement: the array statement is lowered as before."""


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
    saved, lines, indent = low._state(), list(low.lines), low.indent
    try:
        _emit(low, n)
        return True
    except (_No, K.Decline):
        low._restore(saved)
        low.lines[:], low.indent = lines, indent
        return False


def _resolve(low, node):
    """A canonicalizer temporary's value in place of its name."""
    while isinstance(node, ir.Var) and node.depth == 0 and node.name in low.pxz_temps:
        node = low.pxz_temps[node.name]
    return node


def _array_name(low, node) -> str:
    node = _resolve(low, node)
    if not (isinstance(node, ir.Var) and node.depth == 0 and type(low.env.get(node.name)) is np.ndarray):
        raise _No
    return node.name


def _components(low, key, ndim):
    """The key as one component per dimension: ("slice", start, stop) with IR nodes or None, or ("int", node)."""
    key = _resolve(low, key)
    if isinstance(key, ir.Tuple) or (isinstance(key, ir.Call) and key.prim == "python.tuple" and not key.kwargs):
        items = key.items if isinstance(key, ir.Tuple) else key.args
    else:
        items = (key,)
    comps = []
    for it in items:
        it = _resolve(low, it)
        if isinstance(it, ir.Call) and it.prim == "python.slice" and not it.kwargs:
            start, stop, step = (tuple(it.args) + (None, None, None))[:3]
            if step is not None and not (isinstance(step, ir.Const) and step.value in (None, 1)):
                raise _No
            comps.append(("slice", _bound(start), _bound(stop)))
        elif not (isinstance(it, ir.Const) and type(it.value) is not int):
            comps.append(("int", it))  # an integer, or ``_int_src`` says _No
        else:
            raise _No
    if len(comps) > ndim:
        raise _No
    return comps + [("slice", None, None)] * (ndim - len(comps))


def _bound(node):
    return None if node is None or (isinstance(node, ir.Const) and node.value is None) else node


def _token(node):
    """A hashable stand-in of an index expression: equal for equal constants and names, else its identity."""
    if node is None:
        return None
    if isinstance(node, ir.Const):
        return ("c", type(node.value).__name__, node.value)
    if isinstance(node, ir.Var):
        return ("v", node.name, node.depth)
    return ("n", id(node))


def _same(a, b) -> bool:
    """The same index expression (constants and names only): ``B[s] = B[s] op e`` reads what it writes."""
    if a is None or b is None:
        return a is b
    if isinstance(a, ir.Const) and isinstance(b, ir.Const):
        return type(a.value) is type(b.value) and a.value == b.value
    return isinstance(a, ir.Var) and isinstance(b, ir.Var) and (a.name, a.depth) == (b.name, b.depth)


class _Nest:
    """What one statement's loop nest reads: its arrays with their components, its hoisted scalars."""

    def __init__(self, low, target, comps):
        self.low, self.target, self.comps = low, target, comps
        self.rank = None if comps is None else sum(1 for c in comps if c[0] == "slice")
        self.reads: list = []  # (array name, components, the element-read node)
        self.scalars: list = []  # (temporary name, IR node): evaluated once, before the loop

    def element(self, node):
        """The element form of an operand or an element-wise expression over operands."""
        low = self.low
        node = _resolve(low, node) if isinstance(node, ir.Var) else node
        if isinstance(node, ir.Fused):
            if node.reduce:
                raise _No
            leaves = [self.element(leaf) for leaf in node.leaves]
            return _substitute(node.body, leaves)
        if isinstance(node, ir.Const):
            if type(node.value) not in (int, float, bool):
                raise _No
            return node
        if isinstance(node, ir.Var):
            k = low.env.get(node.name) if node.depth == 0 else None
            if type(k) is np.ndarray:
                return self.read(node.name, [("slice", None, None)] * k.ndim)
            if k is None or not K.is_scalar(k):
                raise _No
            return node
        if not isinstance(node, ir.Call) or node.kwargs:
            raise _No
        if node.prim == "operator.getitem":
            name = _array_name(low, node.args[0])
            comps = _components(low, node.args[1], low.env[name].ndim)
            if not any(c[0] == "slice" for c in comps):
                return self.scalar(node)  # an element (``_fict_[t]``): once, before the loop
            return self.read(name, comps)
        prim = lookup(node.prim)
        if prim.int_unsafe or prim.lowering is None:
            raise _No
        if prim.fused is None:  # not element-wise: a scalar (``np.dot(u, v)``), once, before the loop, or _No
            return self.scalar(node)
        return ir.Call(node.prim, tuple(self.element(a) for a in node.args), loc=node.loc)

    def scalar(self, node):
        name = f"__pxz_v{next(self.low.tmp)}"
        self.scalars.append((name, node))
        return ir.Var(name, loc=node.loc)

    def read(self, name, comps):
        if self.rank is None:  # a new array: as many dimensions as its first operand's slices
            self.rank = sum(1 for c in comps if c[0] == "slice")
        if sum(1 for c in comps if c[0] == "slice") != self.rank:
            raise _No  # broadcasting across ranks: the array statement
        if name == self.target and not _same_components(comps, self.comps):
            raise _No  # another part of the array written: NumPy reads it whole before writing
        node = ir.Call("operator.getitem", (ir.Var(name), ir.Tuple(())))  # a placeholder: ``_emit`` replaces it
        self.reads.append((name, comps, node))
        return node


def _substitute(body, leaves):
    if isinstance(body, ir.Leaf):
        return leaves[body.index]
    if isinstance(body, ir.Call):
        return ir.Call(body.prim, tuple(_substitute(a, leaves) for a in body.args), body.kwargs, loc=body.loc)
    return body


def _emit(low, n):
    t = n.target
    value = n.value
    if isinstance(t, ir.StoreName):  # ``x = <element-wise>``: a new array, filled by the nest
        if t.depth != 0 or (isinstance(value, ir.Call) and value.prim in _INPLACE):
            raise _No
        name, tk, comps = None, None, None
        nest = _Nest(low, None, None)
        expr = nest.element(value)
        if any(expr is placeholder for _, _, placeholder in nest.reads):
            raise _No  # ``x = a[1:]`` binds a view, not a copy
    else:
        name = _array_name(low, t.obj)
        tk = low.env[name]
        if tk.dtype not in K.DTYPES:
            raise _No
        comps = _components(low, t.key, tk.ndim)
        nest = _Nest(low, name, comps)
        if nest.rank == 0:
            raise _No  # one element: an ordinary store
        if isinstance(value, ir.Call) and value.prim in _INPLACE and not value.kwargs:
            first, rest = value.args
            first = _resolve(low, first)
            if not (isinstance(first, ir.Call) and first.prim == "operator.getitem" and
                    _array_name(low, first.args[0]) == name and
                    _same_components(_components(low, first.args[1], tk.ndim), comps)):
                raise _No
            expr = ir.Call(_INPLACE[value.prim], (nest.read(name, comps), nest.element(rest)), loc=value.loc)
        else:
            expr = nest.element(value)
    if not nest.reads or not nest.rank:
        raise _No

    new = lambda: f"__pxz{next(low.tmp)}"  # noqa: E731
    conds = []
    seen = {}  # (array, dimension, component) -> its index part and length, emitted once (compile time)

    def span(array, comps_):
        """Emit the start (and for an int, the normalized index) of each component; its index parts and the
        lengths of its slice dimensions."""
        index, lengths = [], []
        for d, c in enumerate(comps_):
            dim = f"{array}.shape[{d}]"
            memo = (array, d, c[0]) + tuple(_token(x) for x in c[1:])
            if memo in seen:
                part, length = seen[memo]
                index.append(part)
                if length is not None:
                    lengths.append(length)
                continue
            if c[0] == "int":
                k, u = new(), new()
                low.emit(f"{k} = {_int_src(low, c[1])}")
                low.emit(f"{k} = {k} + {dim} if {k} < 0 else {k}")
                low.emit(f"{u} = np.uint64({k}) if {k} >= 0 else np.uint64(0)")
                conds.append(f"0 <= {k} < {dim}")
                index.append(("int", u))
                seen[memo] = (index[-1], None)
                continue
            a, b, s, e = new(), new(), new(), new()
            _normal(low, a, c[1], dim, "0")
            _normal(low, b, c[2], dim, dim)
            low.emit(f"{s} = np.uint64({a})")
            low.emit(f"{e} = np.uint64({b} - {a} if {b} > {a} else 0)")
            index.append(("slice", s))
            lengths.append(e)
            seen[memo] = (index[-1], e)
        for v in [v for _, v in index] + lengths:
            low.env[v] = _IDX
            low.bounds.pop(v, None)
        return index, lengths

    fresh = None
    if name is None:  # the new array: indexed from 0 in every dimension
        target_index, target_lengths = None, None
    else:
        target_index, target_lengths = span(name, comps)
    loops = [new() for _ in range(nest.rank)]
    elements = {}  # id of a read's placeholder -> its element read
    for array, comps_, placeholder in nest.reads:
        index, lengths = span(array, comps_)
        if target_lengths is None:
            target_lengths = lengths
        conds += [f"{a} == {b}" for a, b in zip(lengths, target_lengths) if a != b]
        elements[id(placeholder)] = _element_read(array, index, loops)
        if name is None and nest.rank > 1:  # a new array: C-ordered as NumPy would make it (helpers._c_order)
            dims = [d for d, c in enumerate(comps_) if c[0] == "slice"]
            conds.append(f"_c_order(({''.join(f'{array}.strides[{d}], ' for d in dims)}), "
                         f"({''.join(x + ', ' for x in target_lengths)}))")
    if name is None:
        fresh = new()
        target_index = [("slice", zero) for zero in ["__pxz_zero"] * nest.rank]
        low.emit("__pxz_zero = np.uint64(0)")
        low.env["__pxz_zero"] = _IDX
    for other in sorted({a for a, _, _ in nest.reads if name is not None and a != name}):
        conds.append(f"_apart({name}, {other})")  # helpers.py: their memory extents do not meet
    for tmp, node in nest.scalars:
        src, k, tainted = low.expr(node)
        if not K.is_scalar(k) or type(k) is K.Either:
            raise _No
        low.emit(f"{tmp} = {src}")
        low.env[tmp] = k
        (low.taint.add if tainted else low.taint.discard)(tmp)
        low.bounds.pop(tmp, None)
    for v in loops:
        low.env[v] = _IDX
        low.bounds.pop(v, None)
    expr = _replace(expr, elements)
    store = _element_read(fresh or name, target_index, loops)
    before_unchecked = low.unchecked
    low.unchecked = low.unchecked | {id(e) for e in elements.values()} | {id(store)}
    low.emit(f"if {' and '.join(conds) or 'True'}:  # an element-wise statement as one loop nest")
    low.indent += 1
    allocation = len(low.lines)
    if fresh is not None:
        low.emit("")  # the allocation, once the element's dtype is known
    for v, length in zip(loops, target_lengths):
        low.emit(f"for {v} in range({length}):")
        low.indent += 1
    try:
        src, k, tainted = low.expr(expr)
        if type(k) is K.Either or not isinstance(k, np.generic) or np.dtype(type(k)) not in K.DTYPES:
            raise _No
        dtype = np.dtype(type(k))
        if fresh is not None:
            low.lines[allocation] = "    " * (low.indent - nest.rank) + \
                f"{fresh} = np.empty(({''.join(x + ', ' for x in target_lengths)}), np.{dtype.name})"
            low.env[fresh] = K.array(dtype, nest.rank)
        elif dtype != tk.dtype:
            raise _No  # a cast on the store: NumPy's casting rules, not a C cast
        obj, _, _ = low.expr(store.args[0])
        key, kk, _ = low.expr(store.args[1])
        low.emit(f"{low.access(store, store.args[0], obj, store.args[1], key, kk)} = {src}")
        if tainted and fresh is None:  # a new array's taint is its name's (the array statement binds it)
            low.arrays_tainted = True
    finally:
        low.unchecked = before_unchecked
    low.indent -= len(loops)
    if fresh is not None:
        low.emit(f"{t.name} = {fresh}")
    low.indent -= 1
    low.emit("else:")
    low.indent += 1
    start = len(low.lines)
    src, k_array, tainted_array = low.expr(n.value)
    if fresh is not None and K.key(k_array) != K.key(K.array(dtype, nest.rank)):
        raise _No  # the array statement's kind must be the nest's (both branches bind the name)
    low.assign(t, src, k_array, tainted_array)
    if len(low.lines) == start:
        low.emit("pass")
    low.indent -= 1
    # the nest's temporaries live in this statement only: left in the kinds, they made the two versions of an
    # enclosing loop (lower.two_versions: its names differ by the counter) "disagree on kinds" (NPBench's
    # gramschmidt went back to the interpreter)
    for v in [v for v in low.env if v.startswith("__pxz")]:
        del low.env[v]
        low.taint.discard(v)
        low.bounds.pop(v, None)


def _same_components(a, b) -> bool:
    return len(a) == len(b) and all(c[0] == d[0] and all(_same(x, y) for x, y in zip(c[1:], d[1:]))
                                    for c, d in zip(a, b))


def _int_src(low, node):
    if any(isinstance(x, (ir.SetVar, ir.Apply)) for x in ir.walk(node)):
        raise _No  # evaluated again by the array statement
    src, k, _ = low.expr(node)
    if not K.is_int(k) or type(k) in (bool, K.Either):
        raise _No
    return src


def _normal(low, name, node, dim, default):
    """Emit ``name = `` a slice bound as Python reads it for a dimension of length ``dim`` (negative from the end,
    clipped), in conditional expressions: Numba types a ``min``/``max`` of literal ints slowly (a 3-D stencil's
    nest took 20 s to compile with them)."""
    if node is None:
        low.emit(f"{name} = {default}")
        return
    if isinstance(node, ir.Const) and type(node.value) is int:
        c = node.value
        low.emit(f"{name} = {c} if {c} < {dim} else {dim}" if c >= 0 else
                 f"{name} = {dim} - {-c} if {dim} > {-c} else 0")
        return
    low.emit(f"{name} = {_int_src(low, node)}")
    low.emit(f"{name} = {name} + {dim} if {name} < 0 else {name}")
    low.emit(f"{name} = 0 if {name} < 0 else ({dim} if {name} > {dim} else {name})")


def _element_read(array, index, loops):
    parts, loop = [], iter(loops)
    for kind, v in index:
        parts.append(ir.Var(v) if kind == "int" else ir.Call("operator.add", (ir.Var(v), ir.Var(next(loop)))))
    return ir.Call("operator.getitem", (ir.Var(array), ir.Tuple(tuple(parts))))


def _replace(node, elements):
    """``node`` with each read placeholder (by identity: equal placeholders are distinct reads) replaced."""
    if id(node) in elements:
        return elements[id(node)]
    if isinstance(node, ir.Call):
        return ir.Call(node.prim, tuple(_replace(a, elements) for a in node.args), node.kwargs, loc=node.loc)
    return node


