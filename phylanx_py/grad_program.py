"""The gradient's execution tree: a recorded Trace (forward and backward) turned into an ``ir.Program``
(``build_program``), and ``GradProgram``, one traced signature's tree with the constants it reads, compiled on
first use and run on the current runtime like any compiled function."""
from __future__ import annotations

import dataclasses
import threading

import numpy as np

from phylanx_py.primitives import lookup

from . import ir
from .decorator import evaluate_program, program_code
from .passes.rewrite import map_nodes
from .pytree import unflatten
from .trace import Trace, Tracer


def is_array_value(v) -> bool:
    """An array (NumPy, tiled, ...), not a NumPy scalar: met as a plain value, it becomes a hidden parameter."""
    return hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, np.generic)


class GradProgram:
    """One traced signature: the Program (value, gradients, aux outputs) and how to call it."""

    def __init__(self, program: ir.Program, consts: list, out_structure, guards):
        self.program, self.consts, self.out_structure, self.guards = program, consts, out_structure, guards
        self.data_mask: tuple = ()  # per argument leaf: is it a parameter of the tree (set by grad.Grad)
        self._code = None
        self._lock = threading.Lock()

    def __getstate__(self):  # the compiled code and the lock stay behind; the tree travels and compiles there
        return {"program": self.program, "consts": self.consts, "out_structure": self.out_structure,
                "guards": self.guards, "data_mask": self.data_mask}

    def __setstate__(self, state):
        mask = state.pop("data_mask", ())
        self.__init__(**state)
        self.data_mask = mask

    def run(self, data_leaves):
        with self._lock:
            if self._code is None:
                self._code = program_code(self.program)
        flat = evaluate_program(self._code, tuple(data_leaves) + tuple(self.consts))
        return unflatten(self.out_structure, list(flat))


class Builder:
    """Turns a Trace into IR statements: arrays met as plain values become extra (hidden) parameters."""

    def __init__(self):
        self.consts: list = []
        self.const_names: list[str] = []
        self._const_ids: dict[int, str] = {}

    def node(self, x, loc):
        if type(x) is Tracer:
            return ir.Var(x.name, 0, loc)
        if isinstance(x, list):
            return ir.List(tuple(self.node(v, loc) for v in x), loc)
        if isinstance(x, tuple):
            return ir.Tuple(tuple(self.node(v, loc) for v in x), loc)
        if isinstance(x, dict):
            return ir.Dict(tuple(ir.Const(k, loc) for k in x), tuple(self.node(v, loc) for v in x.values()), loc)
        if isinstance(x, slice):
            parts = (x.start, x.stop, x.step)
            if any(type(p) is Tracer for p in parts):
                return ir.Call("python.slice", tuple(self.node(p, loc) for p in parts), (), loc)
            return ir.Const(x, loc)
        if is_array_value(x):
            name = self._const_ids.get(id(x))
            if name is None:
                name = self._const_ids[id(x)] = f"__c{len(self.consts)}"
                self.consts.append(x)
                self.const_names.append(name)
            return ir.Var(name, 0, loc)
        return ir.Const(x, loc)


def _uses(records, out_nodes):
    """The statements needed for ``out_nodes`` (dead ones dropped) and how often each name is read by them."""
    counts: dict[str, int] = {}

    def read(node):
        for v in ir.walk(node):
            if isinstance(v, ir.Var):
                counts[v.name] = counts.get(v.name, 0) + 1

    for n in out_nodes:
        read(n)
    keep = []
    for rec, call in reversed(records):
        if rec.out.name in counts:  # read by an output or a statement kept after it
            keep.append((rec, call))
            read(call)
    keep.reverse()
    return keep, counts


def _substitute(node, inline):
    return map_nodes(node, lambda n: inline.get(n.name, n) if isinstance(n, ir.Var) else n)


def build_program(name, trace: Trace, params: list[str], outputs: list, builder: Builder, loc) -> ir.Program:
    """The Program ``name(*params, *consts) -> tuple(outputs)`` of the recorded statements it needs."""
    calls = [(rec, ir.Call(rec.prim, tuple(builder.node(a, rec.loc) for a in rec.args),
                           tuple((k, builder.node(v, rec.loc)) for k, v in rec.kwargs.items()), rec.loc))
             for rec in trace.records]
    out_nodes = [builder.node(o, loc) for o in outputs]
    keep, counts = _uses(calls, out_nodes)
    # A value read once is written into its reader (an expression tree, as the user wrote it), so element-wise
    # chains of the gradient fuse into one kernel like those of compiled code. Not into the outputs' tuple, which
    # fuses nothing: a value only an output reads (a weight's gradient ``a.T @ g``) is computed where it was
    # recorded, next to its operands. Written into the tuple, every weight gradient ran after the whole backward
    # pass, on activations and cotangents long gone from the caches: simplemlp's four such products took 3-6%
    # longer than the same products in the hand-written step (benchmarks/train_fit.py).
    outputs_read = {v.name for n in out_nodes for v in ir.walk(n) if isinstance(v, ir.Var)}
    inline: dict[str, ir.Node] = {}
    stmts = []
    for rec, call in keep:
        call = _substitute(call, inline)
        if counts.get(rec.out.name, 0) == 1 and rec.out.name not in outputs_read:
            inline[rec.out.name] = call
        else:
            stmts.append(ir.Assign(ir.StoreName(rec.out.name, 0, rec.loc), call, rec.loc))
    result = ir.Tuple(tuple(_substitute(n, inline) for n in out_nodes), loc)
    stmts.append(ir.Return(result, loc))
    all_params = tuple(params) + tuple(builder.const_names)
    local_names = tuple(sorted(set(all_params) | {s.target.name for s in stmts if isinstance(s, ir.Assign)}))
    fn = ir.Function(name, all_params, ir.Block(tuple(stmts), loc), local_names, (), loc)
    return ir.Program(name, ((name, fn),))


def operands_into_groups(program: ir.Program) -> ir.Program:
    """Each fused group's operand that only that group reads, written into the group as its own subexpression
    (``define(g, matmul(...))`` then ``fused[...](g, x)``: ``fused[...](matmul(...), x)``). Before fusion such a
    value was read twice (a ReLU's gradient reads its cotangent in two products), so ``build_program`` kept it
    as a statement; as the group's subexpression it is computed where it is read, next to its group. (It was
    made for buffer reuse, the group's kernel writing into the product's array; fused kernels no longer do:
    runtime/codegen.py's ``fused_inline`` says why.) A gradient's statements are pure, each name assigned once:
    moving a product down to its one reader changes no value."""
    fn = program.function(program.entry)
    stmts = fn.body.stmts
    reads: dict[str, int] = {}
    for s in stmts:
        for v in ir.walk(s):
            if isinstance(v, ir.Var):
                reads[v.name] = reads.get(v.name, 0) + 1
    movable = {s.target.name: s.value for s in stmts
               if isinstance(s, ir.Assign) and isinstance(s.target, ir.StoreName) and isinstance(s.value, ir.Call)
               and reads.get(s.target.name) == 1 and lookup(s.value.prim).effect is None}
    moved: dict[str, ir.Node] = {}

    def into_leaves(node):
        if not isinstance(node, ir.Fused):
            return node
        leaves = tuple(moved.setdefault(leaf.name, movable[leaf.name])
                       if isinstance(leaf, ir.Var) and leaf.name in movable else leaf for leaf in node.leaves)
        return dataclasses.replace(node, leaves=leaves) if leaves != node.leaves else node

    new = [map_nodes(s, into_leaves) for s in stmts]
    if not moved:
        return program
    new = [s for s in new if not (isinstance(s, ir.Assign) and isinstance(s.target, ir.StoreName)
                                   and s.target.name in moved)]
    fn = dataclasses.replace(fn, body=dataclasses.replace(fn.body, stmts=tuple(new)),
                             locals=tuple(n for n in fn.locals if n not in moved))
    return dataclasses.replace(program, functions=tuple((n, fn if n == program.entry else f)
                                                        for n, f in program.functions))
