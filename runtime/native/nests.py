"""What the loop-nest lowerings of array statements share (scalarize.py: element-wise statements; contract.py: sums
of element-wise expressions): an array statement's operands as components per dimension, the nest's reads and its
hoisted scalars (``Nest``), the emitted starts and lengths of slices (``Spans``), and the guard's parts."""
from __future__ import annotations

import numpy as np
from phylanx_py.primitives import lookup

from phylanx_py import ir

from . import kinds as K
from . import kir

# The generated indices hold uint64 values in the kernel, so Numba indexes without its test for a negative index
# (which kept LLVM from vectorizing the loop: 6 ns an element against 0.4 here). Their kind is int64 (the kinds
# take no uint64): they appear only in index sums, where both are integers that wrap and never need checks.
IDX = np.int64(3)


class No(Exception):
    """Not this statement: the array statement is lowered as before."""


def resolve(low, node):
    """A canonicalizer temporary's value in place of its name."""
    while isinstance(node, ir.Var) and node.depth == 0 and node.name in low.pxz_temps:
        node = low.pxz_temps[node.name]
    return node


def array_name(low, node) -> str:
    node = resolve(low, node)
    if not (isinstance(node, ir.Var) and node.depth == 0 and type(low.env.get(node.name)) is np.ndarray):
        raise No
    return node.name


def components(low, key, ndim):
    """The key as one component per dimension: ("slice", start, stop) with IR nodes or None, or ("int", node); a
    ``None`` (``np.newaxis``) is ("new",), a dimension of length 1 that indexes nothing."""
    key = resolve(low, key)
    if isinstance(key, ir.Tuple) or (isinstance(key, ir.Call) and key.prim == "python.tuple" and not key.kwargs):
        items = key.items if isinstance(key, ir.Tuple) else key.args
    else:
        items = (key,)
    comps = []
    for it in items:
        it = resolve(low, it)
        if isinstance(it, ir.Call) and it.prim == "python.slice" and not it.kwargs:
            start, stop, step = (tuple(it.args) + (None, None, None))[:3]
            if step is not None and not (isinstance(step, ir.Const) and step.value in (None, 1)):
                raise No
            comps.append(("slice", bound(start), bound(stop)))
        elif isinstance(it, ir.Const) and it.value is None:
            comps.append(("new",))
        elif not (isinstance(it, ir.Const) and type(it.value) is not int):
            comps.append(("int", it))  # an integer, or ``int_src`` says No
        else:
            raise No
    used = sum(1 for c in comps if c[0] != "new")
    if used > ndim:
        raise No
    return comps + [("slice", None, None)] * (ndim - used)


def unit_slice(c) -> bool:
    """Whether a ("slice", start, stop) component has length 1 by its constant bounds (``0:1``, ``k:k+1`` with
    constants, ``-1:``) on any dimension long enough for it."""
    start, stop = (None if x is None else x.value if isinstance(x, ir.Const) and type(x.value) is int else ...
                   for x in c[1:])
    if start is ... or stop is ...:
        return False
    if stop is None:
        return start == -1
    start = 0 if start is None else start
    return (start >= 0) == (stop >= 0) and stop - start == 1


def bound(node):
    return None if node is None or (isinstance(node, ir.Const) and node.value is None) else node


def token(node):
    """A hashable stand-in of an index expression: equal for equal constants and names, else its identity."""
    if node is None:
        return None
    if isinstance(node, ir.Const):
        return ("c", type(node.value).__name__, node.value)
    if isinstance(node, ir.Var):
        return ("v", node.name, node.depth)
    if isinstance(node, ir.Call) and node.prim in _PURE and not node.kwargs:
        # arithmetic of names and constants (adi's ``N - 1`` in each slice of a statement): equal when written alike,
        # so that a statement reads one span of it (one helper call, not one a read)
        args = tuple(token(a) for a in node.args)
        if all(a is not None and a[0] != "n" for a in args):
            return ("o", node.prim) + args
    return ("n", id(node))


_PURE = frozenset({"operator.add", "operator.sub", "operator.mul", "operator.floordiv", "operator.neg"})


def same(a, b) -> bool:
    """The same index expression (constants and names only): ``B[s] = B[s] op e`` reads what it writes."""
    if a is None or b is None:
        return a is b
    if isinstance(a, ir.Const) and isinstance(b, ir.Const):
        return type(a.value) is type(b.value) and a.value == b.value
    return isinstance(a, ir.Var) and isinstance(b, ir.Var) and (a.name, a.depth) == (b.name, b.depth)


def _vector(low, node):
    """(the name of a 1-d array, the slice of it) that ``node`` reads: ``u`` or ``u[a:b]``; else No (np.outer
    ravels anything else first)."""
    node = resolve(low, node) if isinstance(node, ir.Var) else node
    key = ir.Call("python.slice", (ir.Const(None),) * 3)
    if isinstance(node, ir.Call) and node.prim == "operator.getitem" and not node.kwargs:
        node, key = node.args
        node = resolve(low, node) if isinstance(node, ir.Var) else node
        key = resolve(low, key)
        if not (isinstance(key, ir.Call) and key.prim == "python.slice" and not key.kwargs):
            raise No
    k = low.env.get(node.name) if isinstance(node, ir.Var) and node.depth == 0 else None
    if type(k) is not np.ndarray or k.ndim != 1:
        raise No
    return node, key


class Nest:
    """What one statement's loop nest reads: its arrays with their components, its hoisted scalars."""

    def __init__(self, low, target, comps, frame=False):
        # frame: operands broadcast against each other (contract.py), each read's rank its own; else every read
        # has the statement's rank and no new axes
        self.low, self.target, self.comps, self.frame = low, target, comps, frame
        self.units = None  # which slice dimensions are of length 1 by their constant bounds (``unit_slice``)
        self.rank = None if comps is None else sum(1 for c in comps if c[0] == "slice")
        self.reads: list = []  # (array name, components, the element-read node)
        self.scalars: list = []  # (temporary name, IR node): evaluated once, before the loop
        # reads of the target array at other elements: (their components, the dimensions where the read's int index
        # and the target's must differ at run time for the two to share no element)
        self.disjoint: list = []

    def element(self, node):
        """The element form of an operand or an element-wise expression over operands."""
        low = self.low
        node = resolve(low, node) if isinstance(node, ir.Var) else node
        if isinstance(node, ir.Fused):
            if node.reduce:
                raise No
            leaves = [self.element(leaf) for leaf in node.leaves]
            return substitute(node.body, leaves)
        if isinstance(node, ir.Const):
            if type(node.value) not in (int, float, bool):
                raise No
            return node
        if isinstance(node, ir.Var):
            k = low.env.get(node.name) if node.depth == 0 else None
            if type(k) is np.ndarray:
                return self.read(node.name, [("slice", None, None)] * k.ndim)
            if k is None or not K.is_scalar(k):
                raise No
            return node
        if not isinstance(node, ir.Call) or node.kwargs:
            raise No
        if node.prim == "clip" and len(node.args) == 3:  # NumPy's own definition: minimum(a_max, maximum(a, a_min))
            a, a_min, a_max = node.args
            return self.element(ir.Call("minimum", (a_max, ir.Call("maximum", (a, a_min), loc=node.loc)),
                                        loc=node.loc))
        if node.prim == "outer" and len(node.args) == 2:  # of two vectors (or slices of them): u[:, None] * v[None, :]
            (u, su), (v, sv) = _vector(low, node.args[0]), _vector(low, node.args[1])
            new = ir.Const(None)
            return self.element(ir.Call("operator.mul", (
                ir.Call("operator.getitem", (u, ir.Tuple((su, new)))),
                ir.Call("operator.getitem", (v, ir.Tuple((new, sv))))), loc=node.loc))
        if node.prim == "where" and len(node.args) == 3:  # the element's choice: ``element_forms`` writes it
            return ir.Call("where", tuple(self.element(a) for a in node.args), loc=node.loc)
        if node.prim == "operator.getitem":
            name = array_name(low, node.args[0])
            comps = components(low, node.args[1], low.env[name].ndim)
            if not any(c[0] == "slice" for c in comps):
                return self.scalar(node)  # an element (``_fict_[t]``): once, before the loop
            return self.read(name, comps)
        prim = lookup(node.prim)
        if prim.int_unsafe or prim.lowering is None:
            raise No
        if prim.fused is None:  # not element-wise: a scalar (``np.dot(u, v)``), once, before the loop, or No
            return self.scalar(node)
        return ir.Call(node.prim, tuple(self.element(a) for a in node.args), loc=node.loc)

    def scalar(self, node):
        name = f"__pxz_v{next(self.low.tmp)}"
        self.scalars.append((name, node))
        return ir.Var(name, loc=node.loc)

    def read(self, name, comps):
        if self.frame:
            if name == self.target:
                raise No
            node = ir.Call("operator.getitem", (ir.Var(name), ir.Tuple(())))
            self.reads.append((name, comps, node))
            return node
        # the read's dimensions: its slices and its new axes (``u[:, None]``: broadcast along that loop), in order
        frame = [c for c in comps if c[0] != "int"]
        if self.rank is None:  # a new array: as many dimensions as its first operand's
            self.rank = len(frame)
        if len(frame) != self.rank:
            raise No  # broadcasting across ranks: the array statement
        if name == self.target and not same_components(comps, self.comps):
            # another part of the array written: NumPy reads the right side whole before writing. The nest reads
            # what NumPy reads only where no element it reads is one it writes: another row or column, by an int
            # index at the same dimension that differs at run time (adi's ``p[1:N-1, j] = ... p[1:N-1, j-1] ...``,
            # a test of the nest: ``disjoint``); anything else (``a[1:] = a[:-1] + 1``) is the array statement
            self.disjoint.append((comps, _apart_at(comps, self.comps)))
        units = tuple(unit_slice(c) if c[0] == "slice" else None for c in frame)
        if self.units is None:
            self.units = units if self.comps is None else tuple(unit_slice(c) for c in self.comps if c[0] == "slice")
        if any(u and not v for u, v in zip(units, self.units)):
            # a slice of length 1 against a longer one broadcasts (``x[:, 1:] = x[:, 1:] + y[:, 0:1]``): the nest's
            # test would fail on every call and the whole signature run interpreted, so the array statement (a
            # review measured 3.2 ms a call against 0.6)
            raise No
        node = ir.Call("operator.getitem", (ir.Var(name), ir.Tuple(())))  # a placeholder, replaced when emitted
        self.reads.append((name, comps, node))
        return node


def _apart_at(read, written) -> tuple:
    """The dimensions at which a read of the array a statement writes has an int index and so has the write's
    (``b[i - 1, 1:]`` and ``b[i, 1:]``: dimension 0): the two share no element when one of those differs at run time;
    No when there is none (another slice of the same rows: the array statement), or a new axis shifts the
    dimensions."""
    if len(read) != len(written) or any(c[0] == "new" for c in read):
        raise No
    dims = tuple(d for d, (r, w) in enumerate(zip(read, written)) if r[0] == w[0] == "int" and not same(r[1], w[1]))
    if not dims:
        raise No
    return dims


def substitute(body, leaves):
    if isinstance(body, ir.Leaf):
        return leaves[body.index]
    if isinstance(body, ir.Call):
        return ir.Call(body.prim, tuple(substitute(a, leaves) for a in body.args), body.kwargs, loc=body.loc)
    return body


def same_components(a, b) -> bool:
    return len(a) == len(b) and all(c[0] == d[0] and all(same(x, y) for x, y in zip(c[1:], d[1:]))
                                    for c, d in zip(a, b))


def int_src(low, node):
    if any(isinstance(x, (ir.SetVar, ir.Apply)) for x in ir.walk(node)):
        raise No  # evaluated again by the array statement
    src, k, _ = low.expr(node)
    if not K.is_int(k) or type(k) in (bool, K.Either):
        raise No
    return src


def _int_arg(low, node) -> str:
    """The source of an int argument of a nest's helper (``_px_span``, ``_px_at``: helpers.py), never an int literal
    (Numba compiles a dispatcher once per literal value): a constant is ``np.int64(c)``."""
    if isinstance(node, ir.Const) and type(node.value) is int:
        return low.call_of("np.int64", str(node.value))
    return int_src(low, node)


def element_read(array, index, loops):
    """The element of ``array`` at the loop indices ``loops``, one per slice (or new axis) of its ``index``
    (``Spans``): a new axis takes its loop and indexes nothing (a broadcast operand of contract.py's frame)."""
    parts, loop = [], iter(loops)
    for kind, v in index:
        if kind == "new":
            next(loop)
        elif kind == "int":
            parts.append(ir.Var(v))
        else:
            parts.append(ir.Call("operator.add", (ir.Var(v), ir.Var(next(loop)))))
    return ir.Call("operator.getitem", (ir.Var(array), ir.Tuple(tuple(parts))))


def c_order_test(low, array, comps, lengths):
    """The test that ``array``'s sliced dimensions (``comps``; ``lengths`` as ``Spans`` gives them, None for a new
    axis) are in C order (helpers._c_order), the order of a new array NumPy makes from it; None under two."""
    dims = [d for d, c in enumerate(c for c in comps if c[0] != "new") if c[0] == "slice"]
    if len(dims) < 2:
        return None
    return condition_call("_c_order", f"({''.join(f'{array}.strides[{d}], ' for d in dims)})",
                     f"({''.join(x + ', ' for x in lengths if x is not None)})", arrays=(array,),
                     reads=[x for x in lengths if x is not None])


def condition_call(name, *args, arrays=(), reads=()):
    """A condition of a nest's test calling helper ``name``: (its source, its tags: the call, the arrays it names,
    kir.Use, and the names it reads), which the test's node takes (``guarded``), not the statements emitted before
    it."""
    text, call = kir.helper_call(name, *args)
    return text, (call,) + tuple(kir.Use(a, a) for a in arrays) + tuple(kir.Name(n) for n in (*arrays, *reads))


def condition(text, *reads):
    """A condition of a nest's test that reads names (``reads``): (its source, its kir.Name tags)."""
    return text, tuple(kir.Name(n) for n in reads)


def element_forms(low, node):
    """``node`` (an element-wise expression of element reads) with each ``np.where(c, x, y)`` as the choice of one
    element, ``x if c else y``, both cast to NumPy's result dtype (np.result_type, a Python scalar weak: NEP 50):
    np.where has no call of its own on numbers (it makes a 0-d array there)."""
    if not isinstance(node, ir.Call) or node.prim == "operator.getitem":
        return node  # (the same node: the element reads are known by identity, as proven in bounds)
    args = tuple(element_forms(low, a) for a in node.args)
    if node.prim != "where":
        return node if all(a is b for a, b in zip(args, node.args)) else \
            ir.Call(node.prim, args, node.kwargs, loc=node.loc)
    kinds = [low.expr(a)[1] for a in args[1:]]
    if not all(type(k) in (int, float) or (isinstance(k, np.generic) and type(k) is not K.Either) for k in kinds):
        raise No
    dtype = np.result_type(*[k if type(k) in (int, float) else k.dtype for k in kinds])
    if dtype not in K.DTYPES or dtype.kind not in "iuf":
        raise No
    return ir.IfExp(args[0], ir.Call(dtype.name, (args[1],), loc=node.loc),
                    ir.Call(dtype.name, (args[2],), loc=node.loc), loc=node.loc)


def replace(node, elements):
    """``node`` with each read placeholder (by identity: equal placeholders are distinct reads) replaced."""
    if id(node) in elements:
        return elements[id(node)]
    if isinstance(node, ir.Call):
        return ir.Call(node.prim, tuple(replace(a, elements) for a in node.args), node.kwargs, loc=node.loc)
    return node


class Spans:
    """Emits the index parts of the arrays' components, each once per statement (compile time): an int's normalized
    index (its range test joins ``conds``), a slice's start and length. ``spans(array, comps)`` gives the index parts
    (("int", name), ("slice", start name) or ("new", None)) and the lengths of the slice and new dimensions (a new
    one's is None)."""

    def __init__(self, low, conds: list):
        self.low, self.conds, self.seen = low, conds, {}

    def new(self):
        return f"__pxz{next(self.low.tmp)}"

    def __call__(self, array, comps):
        low, index, lengths = self.low, [], []
        d = 0
        for c in comps:
            if c[0] == "new":
                index.append(("new", None))
                lengths.append(None)
                continue
            dim = f"{array}.shape[{d}]"
            d += 1
            memo = (array, d, c[0]) + tuple(token(x) for x in c[1:])
            if memo in self.seen:
                part, length = self.seen[memo]
                index.append(part)
                if length is not None:
                    lengths.append(length)
                continue
            if c[0] == "int":  # the index read from the end when negative, and its unsigned form (helpers._px_at)
                k, u = self.new(), self.new()
                src = _int_arg(low, c[1])
                low.names(reads=[array], binds=[k, u], holds=IDX)
                low.emit(f"{k}, {u} = {low.helper('_px_at', src, dim)}")
                self.conds.append(condition(f"0 <= {k} < {dim}", k, array))
                index.append(("int", u))
                self.seen[memo] = (index[-1], None)
                continue
            # the slice's start and length as Python reads its bounds (helpers._px_span)
            s, e = self.new(), self.new()
            start = low.call_of("np.int64", "0") if c[1] is None else _int_arg(low, c[1])
            stop = dim if c[2] is None else _int_arg(low, c[2])
            low.names(reads=[array], binds=[s, e], holds=IDX)
            low.emit(f"{s}, {e} = {low.helper('_px_span', start, stop, dim)}")
            low.starts.add(s)  # (an element's offset here: kir.Access.own)
            index.append(("slice", s))
            lengths.append(e)
            self.seen[memo] = (index[-1], e)
        for v in [v for _, v in index if v is not None] + [x for x in lengths if x is not None]:
            low.env[v] = IDX
            low.bounds.pop(v, None)
        return index, lengths


def hoist(low, nest) -> None:
    """Emit the nest's scalar operands (evaluated once, before the loop, as NumPy evaluates them once)."""
    for tmp, node in nest.scalars:
        src, k, tainted = low.expr(node)
        if not K.is_scalar(k) or type(k) is K.Either:
            raise No
        low.names(binds=[tmp], holds=k)
        low.emit(f"{tmp} = {src}")
        low.hoisted += 1
        low.env[tmp] = k
        (low.taint.add if tainted else low.taint.discard)(tmp)
        low.bounds.pop(tmp, None)


def loop_indices(low, loops) -> None:
    for v in loops:
        low.env[v] = IDX
        low.bounds.pop(v, None)


def forget(low) -> None:
    """The nest's temporaries live in its statement only: left in the kinds, they made the two versions of an
    enclosing loop (versions.two_versions: its names differ by the counter) "disagree on kinds" (NPBench's gramschmidt
    went back to the interpreter)."""
    for v in [v for v in low.env if v.startswith("__pxz")]:
        del low.env[v]
        low.taint.discard(v)
        low.bounds.pop(v, None)


RERUN = ("an array statement's loop nest whose operands broadcast, overlap its target, are out of range or not in C "
         "order")


def guarded(low, conds, what: str) -> None:
    """Emit the nest's test: each condition once (two operands of one array repeat theirs); a condition is its
    source, or (source, tags) of a helper's call (``condition_call``)."""
    texts = [c if type(c) is str else c[0] for c in conds]
    tags = [t for c in conds if type(c) is not str for t in c[1]]
    low.put(kir.If(0, " and ".join(dict.fromkeys(texts)) or "True", tags, note=f"{what} as one loop nest"))


def otherwise_rerun(low, why: str = RERUN, unchanged: bool = False) -> None:
    """Emit the branch taken when the nest's test fails: the kernel stops and the loop (or the call) reruns
    interpreted, its arrays put back from the copies the caller made (``low.checked``), which gives NumPy's result or
    NumPy's error at the user's line. Not the array statement: as Numba array expressions the statements took half
    of a stencil kernel's compile (NPBench's vadv: a loop of 11 statements, 44 s against 23 s at load 3-4), for a
    branch only broadcasting through a slice of length 1, aliasing views, F-ordered operands or an index error
    take."""
    low.put(kir.Else(0))
    low.indent += 1
    low.pending += kir.declared("_Overflow")  # (the prelude's: it stops the kernel)
    low.put(kir.Raise(0, f"raise _Overflow({why!r})"))
    low.indent -= 1
    if not unchanged:  # (``unchanged``: nothing the caller sees has changed before the test: nothing to put back)
        low.checked = True
