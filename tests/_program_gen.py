"""Random well-typed NumPy programs as source text, for the hypothesis property tests.

Every generated expression has a known shape from a small universe that is closed under the operations used, so
broadcasting is valid by construction. ``draw`` is hypothesis' ``data.draw``; choices shrink towards simple code.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

PARAM_SHAPES = [(3,), (2, 3), (1, 3), (2, 1)]
UNIVERSE = [(), (2,), (3,), (1, 3), (2, 1), (2, 3)]


def _bshape(*shapes):
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None


# Operand shape pairs whose broadcast is exactly the target.
PAIRS = {t: [(a, b) for a in UNIVERSE for b in UNIVERSE if _bshape(a, b) == t] for t in UNIVERSE}
# Target shape -> (source shape, template) producing it by a reduction or a static slice.
REDUCE = {
    (): [((3,), "({}).sum()"), ((2, 3), "np.sum({})"), ((2, 3), "({}).max()"), ((2,), "({}).mean()")],
    (3,): [((2, 3), "({}).sum(axis=0)"), ((1, 3), "({}).sum(axis=0)"), ((2, 3), "np.max({}, axis=0)")],
    (2,): [((2, 3), "({}).sum(axis=1)"), ((2, 1), "({}).mean(axis=1)"), ((2, 3), "({}).min(axis=-1)")],
    (1, 3): [((2, 3), "({}).sum(axis=0, keepdims=True)")],
    (2, 1): [((2, 3), "({}).sum(axis=1, keepdims=True)"), ((2, 3), "np.mean({}, axis=1, keepdims=True)")],
    (2, 3): [],
}
SLICE = {
    (): [((3,), "({})[1]"), ((2, 3), "({})[1, 2]")],
    (3,): [((3,), "({})[::-1]"), ((2, 3), "({})[0]"), ((2, 3), "({})[-1]"), ((1, 3), "({})[0]")],
    (2,): [((3,), "({})[1:]"), ((3,), "({})[:2]"), ((2, 3), "({})[:, 0]"), ((2, 1), "({})[:, 0]"),
           ((2,), "({})[::-1]")],
    (1, 3): [((2, 3), "({})[1:]"), ((2, 3), "({})[:1]"), ((1, 3), "({})[:, ::-1]")],
    (2, 1): [((2, 3), "({})[:, 2:]"), ((2, 3), "({})[:, :1]"), ((2, 1), "({})[::-1]")],
    (2, 3): [((2, 3), "({})[::-1]"), ((2, 3), "({})[:, ::-1]")],
}
INT_REDUCE = {t: [(s, tpl) for s, tpl in opts if "mean" not in tpl] for t, opts in REDUCE.items()}


class ProgramGen:
    """Draws one program: parameters with shapes, straight-line code, an ``if``, a ``for`` loop, augmented
    assignment and a returned tuple. ``kind`` is "float" or "int" (int uses // and % with nonzero divisors)."""

    def __init__(self, draw, kind: str = "float", max_depth: int = 3):
        self.draw, self.kind, self.max_depth = draw, kind, max_depth
        self.env: dict[str, tuple] = {}
        self.lines: list[str] = []
        self.counter = 0

    def choice(self, options, label=None):
        return self.draw(st.sampled_from(options), label=label)

    def const(self) -> str:
        return self.choice(["2.0", "0.5", "-1.5", "3.0", "-0.25"] if self.kind == "float" else ["2", "-3", "1", "5"])

    def nonzero_const(self) -> str:
        return self.choice(["2", "-3", "5", "-1", "7"])

    # ---- expressions of a given shape --------------------------------------------------------------------------
    def leaf(self, shape) -> str:
        names = [n for n, s in self.env.items() if s == shape]
        options = names + ([self.const()] if shape == () else [])
        if not options:
            fill = self.const()
            return f"np.full({shape}, {fill})"
        return self.choice(options)

    def expr(self, shape, depth=None) -> str:
        depth = self.max_depth if depth is None else depth
        if depth <= 0:
            return self.leaf(shape)
        ops = ["leaf", "binop", "binop", "div", "unary", "maximum", "where"]
        ops += ["reduce"] if (INT_REDUCE if self.kind == "int" else REDUCE)[shape] else []
        ops += ["slice"] if SLICE[shape] else []
        op = self.choice(ops)
        d = depth - 1
        if op == "leaf":
            return self.leaf(shape)
        if op == "div" and self.kind == "int" and self.draw(st.booleans(), label="constant divisor"):
            return f"({self.expr(shape, d)} {self.choice(['//', '%'])} {self.nonzero_const()})"
        if op in ("binop", "div", "maximum", "where"):
            sa, sb = self.choice(PAIRS[shape])
            x, y = self.expr(sa, d), self.expr(sb, d)
            if op == "binop":
                return f"({x} {self.choice(['+', '-', '*'])} {y})"
            if op == "maximum":
                return f"np.maximum({x}, {y})"
            if op == "where":
                return f"np.where({x} > {y}, {x}, {y})"
            return self.division(x, y)
        if op == "unary":
            x = self.expr(shape, d)
            if self.kind == "int":
                return self.choice([f"(-{x})", f"abs({x})", f"np.abs({x})"])
            return self.choice([f"np.exp(np.clip({x}, -5.0, 5.0))", f"np.sin({x})", f"(-{x})", f"abs({x})"])
        table = (INT_REDUCE if self.kind == "int" else REDUCE) if op == "reduce" else SLICE
        source, template = self.choice(table[shape])
        return template.format(self.expr(source, d))

    def division(self, x, y) -> str:
        if self.kind == "float":
            return self.choice([f"({x} / (abs({y}) + 1.0))", f"({x} / (np.abs({y}) + 0.5))"])
        op = self.choice(["//", "%"])
        divisor = self.choice([f"(abs({y}) + 1)", f"(-(abs({y}) + 1))"])
        return f"({x} {op} {divisor})"

    # ---- statements --------------------------------------------------------------------------------------------
    def fresh(self, shape) -> str:
        name = f"t{self.counter}"
        self.counter += 1
        self.env[name] = shape
        return name

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)

    def program(self, fname: str) -> tuple[str, dict[str, tuple]]:
        """Source text of ``def fname(...)`` and its parameters' shapes."""
        n_params = self.draw(st.integers(1, 3), label="n_params")
        params = {f"a{k}": self.choice(PARAM_SHAPES, label=f"shape a{k}") for k in range(n_params)}
        self.env.update(params)
        results = []
        t = self.fresh_assign()
        results.append(t)
        if self.draw(st.booleans(), label="if"):
            cond_shape = self.choice(UNIVERSE[1:])
            self.emit(f"if ({self.expr(cond_shape, 2)}).sum() > 0:")
            shape = self.choice(UNIVERSE)
            then, orelse = self.expr(shape, 2), self.expr(shape, 2)
            name = self.fresh(shape)
            self.emit(f"{name} = {then}", 2)
            self.emit("else:")
            self.emit(f"{name} = {orelse}", 2)
            results.append(name)
        if self.draw(st.booleans(), label="for"):
            shape = self.choice(UNIVERSE)
            init = self.expr(shape, 1)
            acc = self.fresh(shape)
            self.emit(f"{acc} = {init}")
            k = self.draw(st.integers(0, 3), label="range")
            self.emit(f"for i in range({k}):")
            self.env["i"] = ()
            step = self.expr(self.choice([s for s in UNIVERSE if _bshape(s, shape) == shape]), 2)
            del self.env["i"]
            aug = self.draw(st.booleans(), label="augmented")
            self.emit(f"{acc} += {step}" if aug else f"{acc} = {acc} + {step}", 2)
            if self.draw(st.booleans(), label="if in loop"):  # a data-dependent branch inside the loop
                self.emit(f"if np.sum({acc}) > i:", 2)
                self.emit(f"{acc} = {acc} {'* 0.5' if self.kind == 'float' else '// 2'}", 3)
            results.append(acc)
        if self.draw(st.booleans(), label="augassign"):
            target = self.choice(results)
            shape = self.env[target]
            op = self.choice(["+=", "-=", "*="])
            value = self.expr(self.choice([s for s in UNIVERSE if _bshape(s, shape) == shape]), 2)
            self.emit(f"{target} {op} {value}")
        arrays = [n for n in results if self.env[n] != ()]
        if arrays and self.draw(st.booleans(), label="store item"):  # item assignment, plain and augmented
            target = self.choice(arrays)
            key = "0" if len(self.env[target]) == 1 else self.choice(["0", "-1", "0, 0", ":, 0", "..., -1"])
            op = self.choice(["=", "+=", "*="])
            self.emit(f"{target}[{key}] {op} {self.expr((), 2)}")
        final = self.expr(self.choice(UNIVERSE))
        self.emit(f"return ({', '.join(results)}, {final})")
        header = f"def {fname}({', '.join(params)}):"
        return "\n".join([header] + self.lines) + "\n", params

    def fresh_assign(self) -> str:
        shape = self.choice(UNIVERSE, label="first shape")
        value = self.expr(shape)
        name = self.fresh(shape)
        self.emit(f"{name} = {value}")
        return name
