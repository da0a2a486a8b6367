"""IR → Python source, the statements: stores, blocks, if/while/for (and the native loop tier's hand-over),
break/continue/return. A mixin of codegen.Generator, which owns the expressions, the inline forms and the output."""
from __future__ import annotations

import contextlib
import keyword

from phylanx_py import ir
from phylanx_py.turns import turn

from . import loop_tiers
from .loop_tiers import HandOver
from .source_blocks import BlockWriter


class StatementEmitter(BlockWriter):
    """Statement emitters; ``self`` is a codegen.Generator (``emit``, ``expr``, ``temp``, ``site``, ``indent``...)."""

    # ---- stores ------------------------------------------------------------------------------------------
    def store(self, target, value: str, loc):
        if isinstance(target, ir.StoreName):
            self.emit(f"{_ident(target.name)} = {value}", loc, "define")
            if value in self.tuple_len and target.name[5:].isdigit() and target.name.startswith("__px_"):
                # the canonicaliser's numbered temps are stored once
                self.tuple_len[target.name] = self.tuple_len[value]
        elif isinstance(target, ir.StoreTuple):
            v = self.resolved(value, loc, "unpack")
            temps = [self.temp() for _ in target.targets]
            self.emit(f"{', '.join(temps)}, = {v}", loc, "unpack")
            for t, sub in zip(temps, target.targets):
                self.store(sub, t, loc)
        elif isinstance(target, ir.StoreItem):
            obj, key = self.expr(target.obj), self.expr(target.key)
            keytest = self.key_test(key) or "True"
            fast = (f"__pxr_type({obj}) in __pxr_MUT and not __pxr_pending and {keytest}"
                    f" and __pxr_type({value}) not in __pxr_F")
            # arrays: scalars and arrays stored with any basic key (tuples of ints/slices too)
            ndfast = (f"__pxr_type({obj}) is __pxr_ndarray and not __pxr_pending and {keytest} and "
                      f"(__pxr_type({value}) in __pxr_S or __pxr_type({value}) is __pxr_ndarray)")
            self.emit(f"if ({fast}) or ({ndfast}):" if self.fast else "if False:", target.loc, "store_at")
            self.emit(f"    {obj}[{key}] = {value}", target.loc, "store_at")
            self.emit("else:")
            self.emit(f"    __pxr_call({self.site('operator.setitem', target.loc)}, ({obj}, {key}, {value}))",
                      target.loc, "store_at")
        else:
            raise TypeError(f"not an assignment target: {target!r}")

    # ---- statements --------------------------------------------------------------------------------------
    def stmt(self, n):
        turn()  # (code generated beside the calls takes its turns here: phylanx_py/turns.py)
        getattr(self, "s_" + type(n).__name__)(n)

    def s_Assign(self, n):
        self.store(n.target, self.expr(n.value), n.loc)

    def s_Expr(self, n):
        self.expr(n.value)

    def s_If(self, n):
        c = self.resolved(self.expr(n.cond), n.loc, "if")
        self.emit(f"if {c}:", n.loc, "if")
        self.block(n.then)
        if n.orelse.stmts:
            self.emit("else:")
            self.block(n.orelse)

    @contextlib.contextmanager
    def native_loop(self, n):
        """Before an outermost loop: offer it to the loop tiers (loop_tiers.py: the SPMD tier on tiled inputs,
        then the native tier, as registered); the interpreted loop (emitted inside this context) runs when none
        takes it.
        Loops inside a loop that a tier may take are part of that loop."""
        plan = None
        if self.native_depth <= 1 and self.fn_stack:
            where = f"{n.loc.filename.rsplit('/', 1)[-1]}:{n.loc.lineno}"
            fn = self.fn_stack[-1]
            # a loop directly inside a loop that a tier may take is offered to the nested tiers (native) each time
            # it starts: while the outer loop runs interpreted (its kernel is used from its next start, the next
            # call), this one goes native as soon as its kernel is ready, at the outer loop's next iteration
            tiers = loop_tiers.tiers_for(fn, n, where, self.program, self.raw_namespaces,
                                         inner=bool(self.native_depth), native=self.native)
            self.native_loops += [t for t in tiers if getattr(t, "native_code", False)]
            if tiers:
                plan = HandOver(tiers, where)
                self.loop_hooks.append(plan)
        if plan is None or plan.reason:
            yield
            return
        k, out, t0 = self.const(plan, "nat"), self.temp(), self.temp()
        names = []
        self.emit(f"{out} = None")
        self.emit(f"if {k}.live:")
        self.indent += 1
        for p in plan.params:
            if p in plan.globals:  # a module's data global: read as every read of it is (a NameError if unset)
                names.append(f"__pxr_global({self.namespaces[plan.globals[p]]}, {p!r})")
            elif p in plan.outputs:  # assigned by the loop: it may not be bound yet
                v = self.temp()
                self.emit("try:")
                self.emit(f"    {v} = {p}")
                self.emit("except __pxr_NameError:")
                self.emit(f"    {v} = __pxr_UNBOUND")
                names.append(v)
            else:
                names.append(p)
        params = "".join(f"{p}, " for p in names)
        self.emit("try:")
        self.emit(f"    {out} = {k}(__pxr_ev, ({params}))", n.loc, "loop tier")
        self.emit("except __pxr_NameError:")  # a free variable not bound yet: the interpreted loop says so
        self.emit("    pass")
        self.indent -= 1
        self.emit(f"if {out} is None:")
        self.indent += 1
        self.emit(f"{t0} = __pxr_clock()")
        self.native_depth += 1
        try:
            yield
        finally:
            self.native_depth -= 1
        self.emit(f"{k}.ran({t0})")
        self.indent -= 1
        if plan.outputs:
            self.emit("else:")
            self.emit(f"    {''.join(o + ', ' for o in plan.outputs)}= {out}", n.loc, "loop tier")

    def s_While(self, n):
        with self.native_loop(n):
            self._while(n)

    def _while(self, n):
        flag = self.temp() if n.orelse.stmts else None
        if flag:
            self.emit(f"{flag} = False")
        self.emit("while True:", n.loc, "while")
        self.indent += 1
        c = self.resolved(self.expr(n.cond), n.loc, "while")
        self.emit(f"if not {c}:", n.loc, "while")
        if flag:
            self.emit(f"    {flag} = True")
        self.emit("    break")
        self.stmt(n.body)
        self.indent -= 1
        if flag:
            self.emit(f"if {flag}:")
            self.block(n.orelse)

    def s_For(self, n):
        with self.native_loop(n):
            self._for(n)

    def _for(self, n):
        it = self.resolved(self.expr(n.iter), n.loc, "for")
        if isinstance(n.target, ir.StoreName):
            self.emit(f"for {_ident(n.target.name)} in {it}:", n.loc, "for")
            self.block(n.body)
        else:
            item = self.temp()
            self.emit(f"for {item} in {it}:", n.loc, "for")
            self.indent += 1
            self.store(n.target, item, n.loc)
            self.stmt(n.body)
            self.indent -= 1
        if n.orelse.stmts:
            self.emit("else:")
            self.block(n.orelse)

    def s_Break(self, n):
        self.emit("break")

    def s_Continue(self, n):
        self.emit("continue")

    def s_Return(self, n):
        self.emit(f"return {self.expr(n.value)}", n.loc, "return")


def _ident(name: str) -> str:
    if keyword.iskeyword(name) or not name.isidentifier():
        raise ValueError(f"not a Python identifier: {name!r}")
    return name


def _is_literal(atom: str) -> bool:
    return not atom.startswith("__px") and not atom.isidentifier() or atom in ("None", "True", "False")


def _plain_tuple(value) -> bool:
    """A tuple of Python scalars (nested tuples of them too): a value no guard needs to test."""
    return all(type(v) in (int, float, bool) or v is None or (type(v) is tuple and _plain_tuple(v)) for v in value)


def _stores(body) -> tuple[set[str], set[str]]:
    """Names this function stores to in outer functions (depth > 0), and in its own frame (depth 0)."""
    outer, own = set(), set()

    def walk(n):
        if isinstance(n, ir.Lambda):
            for d in n.defaults + tuple(v for _, v in n.kwdefaults):
                walk(d)
            return
        if isinstance(n, (ir.StoreName, ir.SetVar)):
            (outer if n.depth > 0 else own).add(n.name)
        for c in ir.children(n):
            walk(c)

    walk(body)
    return outer, own
