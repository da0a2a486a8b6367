"""The evaluator: turns each IR node into a Python closure once, then runs closures over a frame.

Compiling to closures (rather than re-dispatching on node types at every step) keeps the per-node overhead near a
Python function call, so scalar loops stay within a few times plain Python. A frame is a dict of locals with
three reserved keys (not identifiers, so no user name can clash): ' ev' the Evaluation, ' up' the enclosing
function's frame, ' ret' the return value. Statements return None or a control signal (BREAK/CONTINUE/RETURN).
"""
from __future__ import annotations

from concurrent.futures import Future

from phylanx_py.primitives import lookup, name_of

from phylanx_py import ir
from phylanx_py.errors import ExecutionError

from .evaluation import run_primitive

BREAK, CONTINUE, RETURN = "break", "continue", "return"
_SCALARS = frozenset({int, float, bool})
_FAST = {"operator." + n for n in "add sub mul truediv floordiv mod pow lt le gt ge eq ne and_ or_ xor".split()}


def _fail(exc, loc, what):
    err = ExecutionError.from_exception(exc, loc, what)
    raise err from exc


def _truth(value, loc, what):
    if type(value) is Future:
        value = value.result()
    try:
        return bool(value)
    except Exception as e:
        _fail(e, loc, what)


class Closure:
    """A function value at run time: compiled code + the frame it closes over + evaluated defaults.

    Callable from Python too (``map(f, xs)``, ``sorted(key=f)``): the call runs to a concrete result."""

    __slots__ = ("code", "parent", "defaults", "kwdefaults", "ev")

    def __init__(self, code, parent, defaults, kwdefaults, ev):
        self.code, self.parent, self.defaults, self.kwdefaults, self.ev = code, parent, defaults, kwdefaults, ev

    def __call__(self, *args, **kwargs):
        return self.ev.resolve(self.code.invoke(self.ev, args, kwargs, self.parent, self.defaults, self.kwdefaults))

    def __repr__(self):
        return f"<compiled function {self.code.name}>"


class Code:
    """A compiled IR function: parameters and the body closure."""

    def __init__(self, fn: ir.Function, body=None):
        self.name, self.params, self.kwonly, self.loc = fn.name, fn.params, fn.kwonly, fn.loc
        self.body = body

    def bind(self, args, kwargs, defaults, kwdefaults) -> dict:
        """Python's argument binding, with Python's TypeError messages."""
        params, n = self.params, len(args)
        if n > len(params):
            raise TypeError(f"{self.name}() takes {len(params)} positional arguments but {n} were given")
        frame = dict(zip(params, args))
        for k, v in kwargs.items():
            if k not in params and k not in self.kwonly:
                raise TypeError(f"{self.name}() got an unexpected keyword argument '{k}'")
            if k in frame:
                raise TypeError(f"{self.name}() got multiple values for argument '{k}'")
            frame[k] = v
        first_default = len(params) - len(defaults)
        for i, p in enumerate(params):
            if p not in frame:
                if i >= first_default:
                    frame[p] = defaults[i - first_default]
        for p in self.kwonly:
            if p not in frame and p in kwdefaults:
                frame[p] = kwdefaults[p]
        missing = [p for p in params + self.kwonly if p not in frame]
        if missing:
            names = " and ".join(f"'{m}'" for m in missing)
            plural = "s" if len(missing) > 1 else ""
            raise TypeError(f"{self.name}() missing {len(missing)} required argument{plural}: {names}")
        return frame

    def invoke(self, ev, args, kwargs, parent, defaults=(), kwdefaults=None):
        if not kwargs and len(args) == len(self.params):
            frame = dict(zip(self.params, args))
        else:
            frame = self.bind(args, kwargs or {}, defaults, kwdefaults or {})
        frame[" ev"] = ev
        frame[" up"] = parent
        if self.body(frame) is RETURN:
            return frame[" ret"]
        return None


class Compiler:
    """Compiles one Program's functions to closures, each once (recursion goes through ``Code`` objects)."""

    def __init__(self, program: ir.Program, namespaces: dict):
        self.program = program
        self.namespaces = namespaces
        self.codes: dict[str, Code] = {}
        self.defaults = {name: tuple(c.value for c in d) for name, d in program.defaults}
        self.kwdefaults = {name: {k: c.value for k, c in d} for name, d in program.kwdefaults}

    def code(self, name: str) -> Code:
        c = self.codes.get(name)
        if c is None:
            fn = self.program.function(name)
            c = self.codes[name] = Code(fn)
            c.body = self.stmt(fn.body)
        return c

    def entry(self) -> Code:
        return self.code(self.program.entry)

    # ---- expressions ---------------------------------------------------------------------------------
    def expr(self, n):
        return getattr(self, "e_" + type(n).__name__)(n)

    def e_Const(self, n):
        v = n.value
        return lambda f: v

    def e_Var(self, n):
        name, depth, loc = n.name, n.depth, n.loc

        def unbound():
            _fail(UnboundLocalError(f"local variable '{name}' referenced before assignment"), loc, name)

        if depth == 0:
            def var(f):
                try:
                    return f[name]
                except KeyError:
                    unbound()
            return var

        def outer(f):
            for _ in range(depth):
                f = f[" up"]
            try:
                return f[name]
            except KeyError:
                unbound()
        return outer

    def e_Global(self, n):
        ns, name, loc = self.namespaces[n.module], n.name, n.loc

        def glob(f):
            try:
                return ns[name]
            except KeyError:
                _fail(NameError(f"name '{name}' is not defined"), loc, name)
        return glob

    def e_Call(self, n):
        prim, loc = lookup(n.prim), n.loc
        args = tuple(self.expr(a) for a in n.args)
        kws = tuple((k, self.expr(v)) for k, v in n.kwargs)
        if n.prim in _FAST and len(args) == 2 and not kws:
            op, (left, right) = prim.kernel, args

            def fast(f):
                a, b = left(f), right(f)
                if type(a) in _SCALARS and type(b) in _SCALARS:
                    try:
                        return op(a, b)
                    except Exception as e:
                        _fail(e, loc, prim.label)
                return f[" ev"].call(prim, loc, (a, b))
            return fast
        if len(args) == 1 and not kws:
            (only,) = args
            return lambda f: f[" ev"].call(prim, loc, (only(f),))
        if not kws:
            return lambda f: f[" ev"].call(prim, loc, tuple([a(f) for a in args]))
        return lambda f: f[" ev"].call(prim, loc, tuple([a(f) for a in args]), {k: v(f) for k, v in kws})

    def e_FuncRef(self, n):
        code, name = self.code(n.name), n.name
        defaults, kwdefaults = self.defaults.get(name, ()), self.kwdefaults.get(name, {})
        return lambda f: Closure(code, None, defaults, kwdefaults, f[" ev"])

    def e_Apply(self, n):
        loc = n.loc
        args = tuple(self.expr(a) for a in n.args)
        kws = tuple((k, self.expr(v)) for k, v in n.kwargs)
        if isinstance(n.func, ir.FuncRef):  # a direct call of a program function: no Closure object needed
            name = n.func.name
            code = self.code(name)
            defaults, kwdefaults = self.defaults.get(name, ()), self.kwdefaults.get(name, {})

            def direct(f):
                a = [x(f) for x in args]
                kw = {k: v(f) for k, v in kws}
                try:
                    return code.invoke(f[" ev"], a, kw, None, defaults, kwdefaults)
                except TypeError as e:
                    if "argument" in str(e) and code.name in str(e):
                        _fail(e, loc, code.name)
                    raise
            return direct
        func = self.expr(n.func)

        def apply(f):
            fn = func(f)
            a = [x(f) for x in args]
            kw = {k: v(f) for k, v in kws}
            return call_value(f[" ev"], fn, a, kw, loc)
        return apply

    def e_Lambda(self, n):
        fn = n.function
        code = Code(fn)
        code.body = self.stmt(fn.body)
        defaults = tuple(self.expr(d) for d in n.defaults)
        kwdefaults = tuple((k, self.expr(v)) for k, v in n.kwdefaults)
        if not defaults and not kwdefaults:
            return lambda f: Closure(code, f, (), None, f[" ev"])
        return lambda f: Closure(code, f, tuple(d(f) for d in defaults), {k: v(f) for k, v in kwdefaults}, f[" ev"])

    def e_IfExp(self, n):
        cond, then, orelse, loc = self.expr(n.cond), self.expr(n.then), self.expr(n.orelse), n.loc
        return lambda f: then(f) if _truth(cond(f), loc, "if") else orelse(f)

    def e_BoolOp(self, n):
        values, loc, is_and = tuple(self.expr(v) for v in n.values), n.loc, n.op == "and"

        def boolop(f):
            v = None
            for get in values:
                v = get(f)
                if type(v) is Future:
                    v = v.result()
                if _truth(v, loc, n.op) != is_and:
                    return v
            return v
        return boolop

    def e_SetVar(self, n):
        value, store = self.expr(n.value), self.store(ir.StoreName(n.name, n.depth, n.loc))

        def setvar(f):
            v = value(f)
            store(f, v)
            return v
        return setvar

    def e_List(self, n):
        items = tuple(self.expr(i) for i in n.items)
        return lambda f: [i(f) for i in items]

    def e_Tuple(self, n):
        items = tuple(self.expr(i) for i in n.items)
        return lambda f: tuple([i(f) for i in items])

    def e_Dict(self, n):
        keys, values = tuple(self.expr(k) for k in n.keys), tuple(self.expr(v) for v in n.values)

        def make(f):
            ev = f[" ev"]
            return {ev.wait(k(f)): v(f) for k, v in zip(keys, values)}
        return make

    # ---- assignment targets ----------------------------------------------------------------------------
    def store(self, t):
        if isinstance(t, ir.StoreName):
            name, depth = t.name, t.depth
            if depth == 0:
                def store0(f, v):
                    f[name] = v
                return store0

            def store_outer(f, v):
                for _ in range(depth):
                    f = f[" up"]
                f[name] = v
            return store_outer
        if isinstance(t, ir.StoreTuple):
            stores, count, unpack = tuple(self.store(s) for s in t.targets), len(t.targets), lookup("python.unpack")
            loc = t.loc

            def store_tuple(f, v):
                if type(v) is Future:
                    v = v.result()
                items = run_primitive(unpack, loc, (v, count), None)
                for s, item in zip(stores, items):
                    s(f, item)
            return store_tuple
        if isinstance(t, ir.StoreItem):
            obj, key, setitem, loc = self.expr(t.obj), self.expr(t.key), lookup("operator.setitem"), t.loc
            return lambda f, v: f[" ev"].call(setitem, loc, (obj(f), key(f), v))
        raise TypeError(f"not an assignment target: {t!r}")

    # ---- statements -------------------------------------------------------------------------------------
    def stmt(self, n):
        return getattr(self, "s_" + type(n).__name__)(n)

    def s_Block(self, n):
        stmts = tuple(self.stmt(s) for s in n.stmts)
        if len(stmts) == 1:
            return stmts[0]

        def block(f):
            for s in stmts:
                sig = s(f)
                if sig is not None:
                    return sig
            return None
        return block

    def s_Assign(self, n):
        value, store = self.expr(n.value), self.store(n.target)

        def assign(f):
            store(f, value(f))
        return assign

    def s_Expr(self, n):
        value = self.expr(n.value)

        def expr(f):
            value(f)
        return expr

    def s_If(self, n):
        cond, then, orelse, loc = self.expr(n.cond), self.stmt(n.then), self.stmt(n.orelse), n.loc
        return lambda f: then(f) if _truth(cond(f), loc, "if") else orelse(f)

    def s_While(self, n):
        cond, body, orelse, loc = self.expr(n.cond), self.stmt(n.body), self.stmt(n.orelse), n.loc

        def loop(f):
            while _truth(cond(f), loc, "while"):
                sig = body(f)
                if sig is not None and sig is not CONTINUE:
                    return None if sig is BREAK else sig
            return orelse(f)
        return loop

    def s_For(self, n):
        iterable, store, body, orelse, loc = self.expr(n.iter), self.store(n.target), self.stmt(n.body), \
            self.stmt(n.orelse), n.loc

        def loop(f):
            it = iterable(f)
            if type(it) is Future:
                it = it.result()
            try:
                it = iter(it)
            except TypeError as e:
                _fail(e, loc, "for")
            for item in it:
                store(f, item)
                sig = body(f)
                if sig is not None and sig is not CONTINUE:
                    return None if sig is BREAK else sig
            return orelse(f)
        return loop

    def s_Break(self, n):
        return lambda f: BREAK

    def s_Continue(self, n):
        return lambda f: CONTINUE

    def s_Return(self, n):
        value = self.expr(n.value)

        def ret(f):
            f[" ret"] = value(f)
            return RETURN
        return ret


def call_value(ev, fn, args, kwargs, loc):
    """Call a function *value*: a closure, a compiled or plain Python function, or a primitive's object."""
    if type(fn) is Future:
        fn = fn.result()
    if type(fn) is Closure:
        try:
            return fn.code.invoke(ev, args, kwargs, fn.parent, fn.defaults, fn.kwdefaults)
        except TypeError as e:
            if fn.code.name in str(e):
                _fail(e, loc, fn.code.name)
            raise
    prim_name = name_of(fn)
    if prim_name is not None:
        return ev.call(lookup(prim_name), loc, tuple(args), kwargs)
    compile_hook = ev.hooks.get("compile")
    if compile_hook is not None:
        hit = compile_hook(fn)  # plain Python functions and @compile'd ones, compiled on the fly
        if hit is not None:
            code, defaults, kwdefaults = hit
            return code.invoke(ev, args, kwargs, None, defaults, kwdefaults)
    _fail(TypeError(f"cannot call an object of type '{type(fn).__name__}' from compiled code"), loc, "call")
