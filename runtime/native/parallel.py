"""Loops of a generated kernel whose iterations may run on several threads, and the kernel's parallel variant.

The analysis reads the kernel's source (what Numba compiles, with every check the lowerer put in), not the IR:
a ``for v in range(...)`` loop (step 1, a start that cannot be negative) becomes ``numba.prange`` when its
iterations are independent and none can raise, so the parallel loop leaves every array and name as the
sequential one does, bit for bit:
- every array the loop stores into is stored and read only at elements whose index has ``v`` itself at one
  position, the same for every access (iterations touch disjoint parts: ``out[i, j] = ...`` over ``i``); arrays
  it does not store into are read freely; an array stored into is a parameter or an array the kernel allocated,
  and no other name in the kernel may be a view of one (the caller checks that parameters do not overlap);
- every name the body assigns is written before it is read in each iteration and is not read after the loop
  (no carried scalar, no reduction: a float sum in another order would change the last bits);
- nothing in the body may raise (no checked index, no checked Python-int helper, no allocation; only calls of
  functions that cannot raise), and no ``break``, ``continue`` or ``return`` leaves it;
- the kernel runs without Numba's boundscheck (accesses are proven in bounds).
A nest is parallel at its outermost loop that qualifies; only Numba's explicit ``prange`` is parallelised (its
other array-expression passes are off: they would reorder sums)."""
from __future__ import annotations

import ast
import functools

from .helpers import HELPERS

# Numba parallel options: only the loops marked prange run in parallel; array expressions stay as written
PARALLEL_OPTIONS = {"prange": True, "comprehension": False, "reduction": False, "inplace_binop": False,
                    "setitem": False, "numpy": False, "stencil": False, "fusion": False}
# NumPy functions that never raise in a kernel compiled with error_model='numpy' (domain errors give nan/inf)
_NP_PURE = frozenset({
    "sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos",
    "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "hypot", "floor", "ceil",
    "trunc", "rint", "abs", "absolute", "fabs", "sign", "square", "negative", "maximum", "minimum", "fmax", "fmin",
    "isnan", "isinf", "isfinite", "copysign", "float64", "float32", "int64", "int32", "int16", "int8", "uint64",
    "uint32", "uint16", "uint8", "bool_", "complex128"})
_BUILTINS_PURE = frozenset({"range", "min", "max", "abs", "len", "float", "bool", "complex"})
_ALLOCATIONS = frozenset({"zeros", "ones", "empty", "full"})
_READ_ATTRS = frozenset({"shape", "size", "ndim"})
# what the lowerer's raising helpers are, in the user's terms
_CALLS = {"_ix": "an index not proven in bounds", "_ck_": "Python-int arithmetic checked for overflow",
          "_py_": "Python's division or conversion", "_amb_": "a division by a Python or NumPy scalar"}


@functools.cache
def pure_helpers() -> frozenset:
    """The helpers (runtime/native/helpers.py) that cannot raise: no ``raise`` in them or in what they call."""
    fns = {n.name: n for n in ast.parse(HELPERS).body if isinstance(n, ast.FunctionDef)}
    calls = {name: {c.func.id for c in ast.walk(f) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
             for name, f in fns.items()}
    raising = {name for name, f in fns.items() if any(isinstance(s, ast.Raise) for s in ast.walk(f))}
    changed = True
    while changed:
        new = {name for name, called in calls.items() if called & raising} - raising
        raising |= new
        changed = bool(new)
    return frozenset(fns) - raising


class Variant:
    """A kernel's parallel variant: ``source`` (the kernel with ``prange`` loops, compiled with PARALLEL_OPTIONS),
    ``loops`` (their line numbers in the sequential source) and ``written`` (the positions of the parameters those
    loops store into: the caller runs it only when they overlap no other array argument)."""

    def __init__(self, source, loops, written):
        self.source, self.loops, self.written = source, loops, written


def variant(source: str):
    """(Variant, None) for a kernel source with a loop that may run in parallel, else (None, why not)."""
    module = ast.parse(source)
    fn = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "kernel")
    deco = fn.decorator_list[0]
    if not any(k.arg == "boundscheck" and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in deco.keywords):
        return None, "Numba checks its accesses"
    order = [a.arg for a in fn.args.args]
    params = set(order)
    finder = _Finder(fn, params)
    finder.block(fn.body, [])
    if not finder.found:
        return None, finder.why or "no loop over range"
    written = set()
    for loop, w in finder.found:
        loop.iter.func = ast.Attribute(ast.Name("numba", ast.Load()), "prange", ast.Load())
        written |= w & params
    deco.keywords = [k for k in deco.keywords if k.arg != "parallel"] + [
        ast.keyword("parallel", ast.parse(repr(PARALLEL_OPTIONS), mode="eval").body)]
    lines = sorted(loop.lineno for loop, _ in finder.found)
    return Variant(ast.unparse(ast.fix_missing_locations(module)) + "\n", lines,
                   sorted(order.index(n) for n in written)), None


class _Finder:
    """Finds the outermost loops that qualify (``found``: (loop, arrays it stores into)); ``why``: the reason the
    first loop over range did not."""

    def __init__(self, fn, params):
        self.fn, self.params = fn, params
        self.found, self.why = [], None
        self.assigned = _assignments(fn)

    def block(self, stmts, chain):
        for i, s in enumerate(stmts):
            here = chain + [(stmts, i)]
            if isinstance(s, ast.For):
                why = self.qualifies(s, here)
                if why is None:
                    self.found.append((s, self.stored))
                    continue
                if self.why is None:  # the outermost loop's reason (kernel lines mean nothing to the user)
                    name = ast.unparse(s.target)
                    self.why = f"the loop over '{name}': {why}"
            for sub in ("body", "orelse"):
                if isinstance(s, (ast.For, ast.While, ast.If)) and getattr(s, sub):
                    self.block(getattr(s, sub), here + [(s, sub)])

    def qualifies(self, loop, chain):
        self.stored = set()
        target = loop.target
        if not isinstance(target, ast.Name) or loop.orelse:
            return "not a loop over one name"
        it = loop.iter
        if not _is_range(it):
            return "not a loop over range"
        if len(it.args) == 3 and not (isinstance(it.args[2], ast.Constant) and it.args[2].value == 1):
            return "a step other than 1"
        if len(it.args) >= 2 and not self.nonneg(it.args[0]):
            return "a start that may be negative (a negative index reaches the end of an array)"
        why = _leaves_or_raises(loop.body)
        if why:
            return why
        v = target.id
        names = _stored_names(loop.body)
        if v in names:
            return f"'{v}' is assigned in the loop"
        for name in sorted(names | {v}):
            if name != v and _first_access(loop.body, name) == "read":
                return f"'{name}' is carried from one iteration to the next"
            if _live_after(chain, name):
                return f"'{name}' is read after the loop"
        return self.arrays(loop, v)

    def nonneg(self, e, depth=0) -> bool:
        """Whether ``e`` is never negative: a constant >= 0, a shape, a len, sums and products of such, or a name
        bound only as the variable of loops over ranges that start so (``range(k + 1, n)`` inside ``for k in
        range(n)``)."""
        if depth > 8:
            return False
        if isinstance(e, ast.Constant):
            return type(e.value) is int and e.value >= 0
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Mult)):
            return self.nonneg(e.left, depth + 1) and self.nonneg(e.right, depth + 1)
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
            return True
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "len":
            return True
        if isinstance(e, ast.Name):
            bindings = self.assigned.get(e.id, ())
            return bool(bindings) and all(
                isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and _is_range(stmt.iter) and
                (len(stmt.iter.args) == 1 or self.nonneg(stmt.iter.args[0], depth + 1)) for _, stmt in bindings)
        return False

    def arrays(self, loop, v):
        """None when the loop's stores touch disjoint parts of its arrays, iteration by iteration, else why not."""
        aliases, keys = _temporaries(loop.body)
        body = _Resolve(aliases, keys).visit(ast.parse(ast.unparse(ast.Module(loop.body, []))))
        stored = {_base(t) for t in ast.walk(body) if isinstance(t, ast.Subscript) and
                  isinstance(t.ctx, ast.Store)}
        if None in stored:
            return "a store into an expression"
        self.stored = stored
        for name in stored:
            if name not in self.params and not all(_is_allocation(val) for val, _ in self.assigned.get(name, ())):
                return f"'{name}' may be a view of another array"
            positions = None
            for use in _uses(body, name):
                if not isinstance(use, ast.Subscript):
                    return f"'{name}' is used whole"
                p = {k for k, e in enumerate(_key(use)) if isinstance(e, ast.Name) and e.id == v}
                positions = p if positions is None else positions & p
            if not positions:
                return f"'{name}' is accessed at other elements than the iteration's own ('{v}')"
        for node in ast.walk(body):  # arrays read: a parameter, or a name that cannot be a view of one
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                name = node.value.id
                if name in self.params or name in stored:
                    continue
                if not all(_is_allocation(val) or isinstance(val, (ast.Tuple, ast.Attribute))
                           for val, _ in self.assigned.get(name, ())):
                    return f"'{name}' may be a view of an array the loop changes"
        return None


def _assignments(fn):
    """name -> [(value, statement)] of every plain assignment in the kernel; other bindings give (None, stmt)."""
    out = {}
    for s in ast.walk(fn):
        if isinstance(s, ast.Assign):
            for t in s.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append((s.value, s))
                else:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                            out.setdefault(n.id, []).append((None, s))
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign, ast.For)):
            for n in ast.walk(s.target):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    out.setdefault(n.id, []).append((None, s))
    return out


def _is_range(it):
    return (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and
            not it.keywords and 1 <= len(it.args) <= 3)


def _is_allocation(value):
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and
            isinstance(value.func.value, ast.Name) and value.func.value.id == "np" and
            value.func.attr in _ALLOCATIONS)


def _leaves_or_raises(body):
    """Why the loop body may raise or leave the loop, or None."""
    pure = pure_helpers()

    def visit(node, nested):
        if isinstance(node, (ast.Return, ast.Raise, ast.Assert, ast.Try, ast.With, ast.Delete, ast.Global,
                             ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await, ast.FunctionDef, ast.Lambda)):
            return f"a {type(node).__name__.lower()} in the loop"
        if isinstance(node, (ast.Break, ast.Continue)) and not nested:
            return f"a {type(node).__name__.lower()} out of the loop"
        if isinstance(node, ast.Call):
            f = node.func
            ok = (isinstance(f, ast.Name) and (f.id in _BUILTINS_PURE or f.id in pure)) or \
                (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "np" and
                 f.attr in _NP_PURE)
            if not ok:
                name = ast.unparse(f)
                return f"a call that may raise ({_CALLS.get(name[:4], name)})"
        for child in ast.iter_child_nodes(node):
            why = visit(child, nested or isinstance(node, (ast.For, ast.While)))
            if why:
                return why
        return None

    for s in body:
        why = visit(s, False)
        if why:
            return why
    return None


def _stored_names(body):
    return {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _reads(node, name):
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(node))


def _binds(target, name):
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(target))


def _first_access(stmts, name):
    """"read" when a path through ``stmts`` may read ``name`` before binding it, "write" when every path binds it
    first, None when neither (it may not be touched)."""
    for s in stmts:
        r = _stmt_access(s, name)
        if r is not None:
            return r
    return None


def _stmt_access(s, name):
    if isinstance(s, (ast.Assign, ast.AnnAssign)):
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        if (s.value is not None and _reads(s.value, name)) or any(_reads(t, name) for t in targets):
            return "read"
        return "write" if any(_binds(t, name) for t in targets) else None
    if isinstance(s, ast.AugAssign):
        return "read" if _binds(s.target, name) or _reads(s, name) else None
    if isinstance(s, ast.If):
        if _reads(s.test, name):
            return "read"
        a, b = _first_access(s.body, name), _first_access(s.orelse, name)
        if "read" in (a, b):
            return "read"
        return "write" if a == b == "write" else None
    if isinstance(s, (ast.For, ast.While)):  # may run no iteration: never a definite write
        head = s.iter if isinstance(s, ast.For) else s.test
        if _reads(head, name) or any(_first_access(b, name) == "read" for b in (s.body, s.orelse)) and \
                not (isinstance(s, ast.For) and _binds(s.target, name)):
            return "read"
        return None
    return "read" if _reads(s, name) else None


def _live_after(chain, name):
    """Whether ``name`` may be read after the statement ``chain`` leads to before it is bound again. ``chain``:
    [(block, index)] of the statements around it, with (loop or if, field) between levels."""
    frames = [f for f in chain if isinstance(f[1], int)]
    owners = [f for f in chain if not isinstance(f[1], int)]
    for level in range(len(frames) - 1, -1, -1):
        block, i = frames[level]
        r = _first_access(block[i + 1:], name)
        if r is not None:
            return r == "read"
        owner = owners[level - 1][0] if level > 0 else None
        if isinstance(owner, (ast.For, ast.While)):  # the enclosing loop's next iteration
            if isinstance(owner, ast.While) and _reads(owner.test, name):
                return True
            if not (isinstance(owner, ast.For) and _binds(owner.target, name)) and \
                    _first_access(owner.body, name) == "read":
                return True
    return False


def _temporaries(body):
    """The lowerer's temporaries in a loop body, bound once: ``t = a`` (an alias of an array) and ``k = (i, j)``
    (a key)."""
    counts = {}
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                counts[n.id] = counts.get(n.id, 0) + 1
    aliases, keys = {}, {}
    for s in ast.walk(ast.Module(body, [])):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and \
                counts.get(s.targets[0].id) == 1 and _first_access(body, s.targets[0].id) != "read":
            if isinstance(s.value, ast.Name):
                aliases[s.targets[0].id] = s.value.id
            elif isinstance(s.value, ast.Tuple):
                keys[s.targets[0].id] = s.value
    return aliases, keys


class _Resolve(ast.NodeTransformer):
    """A loop body with the temporaries replaced by what they stand for (for the analysis only): an alias by its
    array, a key by its tuple; the aliasing assignments themselves dropped."""

    def __init__(self, aliases, keys):
        self.aliases, self.keys = aliases, keys

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                node.targets[0].id in self.aliases:
            return None
        return self.generic_visit(node)

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if isinstance(node.slice, ast.Name) and node.slice.id in self.keys:
            node.slice = self.keys[node.slice.id]
        return node

    def visit_Name(self, node):
        if node.id in self.aliases and isinstance(node.ctx, ast.Load):
            return ast.Name(self.aliases[node.id], node.ctx)
        return node


def _base(subscript):
    v = subscript.value
    return v.id if isinstance(v, ast.Name) else None


def _key(subscript):
    s = subscript.slice
    return list(s.elts) if isinstance(s, ast.Tuple) else [s]


def _uses(body, name):
    """Every place ``name`` is used in ``body``: the Subscript it indexes, else the Name itself (an attribute
    ``.shape``/``.size``/``.ndim`` of it is no use)."""
    parents = {}
    for node in ast.walk(body):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    out = []
    for node in ast.walk(body):
        if isinstance(node, ast.Name) and node.id == name:
            up = parents.get(id(node))
            if isinstance(up, ast.Subscript) and up.value is node:
                out.append(up)
            elif isinstance(up, ast.Attribute) and up.attr in _READ_ATTRS:
                continue
            else:
                out.append(node)
    return out
