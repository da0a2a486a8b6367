"""IR-level tests: hand-built trees through the passes and verify(), node values, and the printed text form."""
from __future__ import annotations

import dataclasses
import os
import pickle
import textwrap

import numpy as np
import pytest
from helpers import source_position

import phylanx_py as px
from phylanx_py import ir
from phylanx_py.ir import (
    Assign,
    Block,
    Break,
    Call,
    Const,
    Expr,
    For,
    FuncRef,
    Function,
    If,
    IfExp,
    Lambda,
    Program,
    Return,
    StoreName,
    Var,
    While,
)
from phylanx_py.passes import fold_constants, remove_dead_code, run_pipeline
from phylanx_py.printer import format_program
from phylanx_py.source import SourceLoc
from phylanx_py.verify import verify

FILE = os.path.abspath(__file__)
BASE = os.path.basename(FILE)


def program(*stmts, params=("x",), locals_=("x", "y")) -> Program:
    return Program("f", (("f", Function("f", params, Block(tuple(stmts)), locals_)),))


def add(a, b):
    return Call("operator.add", (a, b))


def mul(a, b):
    return Call("operator.mul", (a, b))


def set_y(value):
    return Assign(StoreName("y"), value)


def text(s: str) -> str:
    return textwrap.dedent(s).strip("\n")


# ---- constant folding ------------------------------------------------------------------------------------


def test_fold_constants_folds_pure_scalar_calls_only():
    p = program(
        set_y(add(Const(1), mul(Const(2), Const(3)))),  # nested: folded bottom-up
        set_y(mul(Var("x"), add(Var("y"), Const(2.0)))),  # variables: left alone
        Expr(Call("builtins.print", (Const(1),))),  # an effect: never folded
        set_y(Call("operator.truediv", (Const(1), Const(0)))),  # fails: left for run time, at its line
        set_y(Call("operator.pow", (Const(2), Const(1000)))),  # a big power: left for run time
        set_y(Call("builtins.list", (Const("ab"),))),  # a list result would be shared between calls
        set_y(IfExp(Call("operator.lt", (Const(1), Const(2))), Var("x"), Const(None))),  # constant condition
        Return(Var("y")),
    )
    assert format_program(fold_constants(p)) == text("""
        define(f, lambda(x),
            block(
                define(y, 7)
                define(y, __mul(x, __add(y, 2.0)))
                print(1)
                define(y, __div(1, 0))
                define(y, __pow(2, 1000))
                define(y, list('ab'))
                define(y, x)
                return(y)
            )
        )
    """)


def test_fold_constants_keeps_types():
    p = program(set_y(Call("operator.truediv", (Const(4), Const(2)))),
                set_y(Call("operator.floordiv", (Const(-7), Const(2)))),
                set_y(Call("exp", (Const(0.0),))), set_y(Call("operator.lt", (Const(1), Const(2)))))
    values = [s.value.value for s in fold_constants(p).function("f").body.stmts]
    assert values == [2.0, -4, 1.0, True]
    assert [type(v) for v in values] == [float, int, np.float64, bool]


def test_fold_constants_leaves_input_unchanged():
    p = program(set_y(add(Const(1), Const(2))), Return(Var("y")))
    before = pickle.dumps(p)
    folded = fold_constants(p)
    assert pickle.dumps(p) == before
    assert folded != p
    assert fold_constants(folded) == folded  # idempotent


# ---- dead code ---------------------------------------------------------------------------------------------


def test_remove_dead_code():
    p = program(
        If(Const(True), Block((set_y(Const(1)),)), Block((set_y(Const(2)),))),
        If(Const(0), Block((set_y(Const(3)),)), Block((set_y(Const(4)),))),
        While(Const(False), Block((set_y(Const(5)),)), Block((set_y(Const(6)),))),
        If(Var("x"), Block((Return(Var("x")), set_y(Const(7)))), Block(())),
        For(StoreName("y"), Var("x"), Block((Break(), Expr(Call("builtins.print", (Var("y"),))))), Block(())),
        Return(Var("y")),
        set_y(Const(8)),
    )
    assert format_program(remove_dead_code(p)) == text("""
        define(f, lambda(x),
            block(
                define(y, 1)
                define(y, 4)
                define(y, 6)
                if(x,
                    block(
                        return(x)
                    )
                )
                for(y, x,
                    block(
                        break()
                    )
                )
                return(y)
            )
        )
    """)


def test_remove_dead_code_return_in_spliced_branch_ends_the_block():
    p = program(If(Const(True), Block((Return(Const(1)),)), Block(())), set_y(Const(2)), Return(Var("y")))
    assert format_program(remove_dead_code(p)) == text("""
        define(f, lambda(x),
            block(
                return(1)
            )
        )
    """)


def test_pipeline_folds_then_removes_branches():
    p = program(If(Call("operator.lt", (Const(1), Const(2))), Block((Return(Const("yes")),)),
                   Block((Return(Const("no")),))))
    assert str(remove_dead_code(p)).count("return") == 2  # dead-code removal alone sees no constant
    assert format_program(run_pipeline(p)) == text("""
        define(f, lambda(x),
            block(
                return('yes')
            )
        )
    """)


def test_printer_shows_locations():
    loc = SourceLoc("/src/model.py", 12, 5, "f", "    y = x + 1\n")
    body = Block((
        Assign(StoreName("y", 0, loc), Call("operator.add", (Var("x"), Const(1)), (), dataclasses.replace(loc, col=9)),
               loc),
        Return(Var("y"), dataclasses.replace(loc, lineno=13)),
    ), loc)
    fn = Function("f", ("x",), body, ("x", "y"), (), dataclasses.replace(loc, lineno=11, col=1))
    p = Program("f", (("f", fn),))
    assert format_program(p) == text("""
        define(f, lambda(x),  # /src/model.py:11:1
            block(
                define(y, __add@12:9(x, 1))  # model.py:12:5
                return(y)  # model.py:13:5
            )
        )
    """)


# ---- verify ----------------------------------------------------------------------------------------------


def test_verify_accepts_a_good_tree():
    p = program(set_y(add(Var("x"), Const(1))), Return(Var("y")))
    assert verify(p) is p


def test_verify_rejects_unknown_primitive():
    loc = SourceLoc("/src/m.py", 3, 7, "f", "    y = frobnicate(x)\n")
    p = program(Assign(StoreName("y"), Call("frobnicate", (Var("x"),), (), loc)), Return(Var("y")))
    with pytest.raises(px.CompileError) as err:
        verify(p)
    assert str(err.value).splitlines()[0] == "/src/m.py:3:7: unknown primitive 'frobnicate'"
    assert err.value.lineno == 3


def test_verify_rejects_unbound_variable():
    loc = SourceLoc("/src/m.py", 4, 12, "f", "    return z\n")
    p = program(Return(Var("z", 0, loc)))
    with pytest.raises(px.CompileError) as err:
        verify(p)
    assert str(err.value).splitlines()[0] == "/src/m.py:4:12: name 'z' is not bound in this scope"


def test_verify_rejects_variable_of_missing_outer_scope():
    p = program(Return(Var("x", 1)))  # depth 1 in a top-level function: there is no enclosing frame
    with pytest.raises(px.CompileError, match="name 'x' is not bound in this scope"):
        verify(p)


def test_verify_checks_lambda_bodies_against_their_scopes():
    inner = Function("<lambda>", ("v",), Block((Return(add(Var("v"), Var("x", 1))),)), ("v",))
    good = program(set_y(Lambda(inner)), Return(Var("y")))
    assert verify(good) is good
    bad_inner = Function("<lambda>", ("v",), Block((Return(add(Var("v"), Var("w", 1))),)), ("v",))
    with pytest.raises(px.CompileError, match="name 'w' is not bound"):
        verify(program(set_y(Lambda(bad_inner)), Return(Var("y"))))


def test_verify_rejects_unknown_function():
    p = program(Return(ir.Apply(FuncRef("g"), (Var("x"),))))
    with pytest.raises(px.CompileError, match="unknown function 'g'"):
        verify(p)


# ---- nodes are values ------------------------------------------------------------------------------------


def test_nodes_are_frozen():
    c = Const(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.value = 2
    blk = Block((Return(c),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        blk.stmts = ()
    with pytest.raises((AttributeError, TypeError)):
        c.extra = 1  # slotted: no new attributes either


def test_nodes_hash_and_compare_by_value():
    a = program(set_y(add(Var("x"), Const(1))), Return(Var("y")))
    b = program(set_y(add(Var("x"), Const(1))), Return(Var("y")))
    assert a == b and a is not b
    assert hash(a) == hash(b)
    assert len({a, b, Const(1), Const(1), Const(2)}) == 3
    assert add(Var("x"), Const(1)) != add(Var("x"), Const(2))
    loc = SourceLoc("/a.py", 1, 1)
    assert Const(1, loc) != Const(1)  # the location is part of the value


def test_hand_built_tree_pickles():
    loc = SourceLoc("/a.py", 3, 5, "f", "    return x\n")
    p = program(set_y(add(Var("x", 0, loc), Const(1.5, loc))), Return(Var("y"), loc))
    back = pickle.loads(pickle.dumps(p))
    assert back == p
    assert str(back) == str(p)


def test_compiled_tree_pickles():
    tree = px.compile(small).tree
    back = pickle.loads(pickle.dumps(tree))
    assert back == tree
    assert str(back) == str(tree)


def _all_programs():
    import types

    import prog_basic
    import prog_calls
    import prog_control
    import prog_numpy

    return [obj for m in (prog_basic, prog_control, prog_calls, prog_numpy) for obj in vars(m).values()
            if isinstance(obj, types.FunctionType) and obj.__module__ == m.__name__]


@pytest.mark.parametrize("fn", _all_programs(), ids=lambda fn: fn.__name__)
def test_every_compiled_tree_is_a_picklable_hashable_value(fn):
    tree = px.compile(fn).tree
    back = pickle.loads(pickle.dumps(tree))
    assert back == tree
    assert hash(back) == hash(tree)
    assert str(back) == str(tree)


def test_walk_visits_every_node():
    p = program(set_y(add(Var("x"), Const(1))), Return(Var("y")))
    kinds = [type(n).__name__ for n in ir.walk(p.function("f"))]
    assert kinds == ["Function", "Block", "Assign", "StoreName", "Call", "Var", "Const", "Return", "Var"]


# ---- the text form of a compiled function ------------------------------------------------------------------


def small(x, y):
    z = x + y
    if z > 0:
        z = np.exp(z)
    return z * 2


def test_tree_text_of_compiled_function():
    f = px.compile(small)
    d, _ = source_position(small, "def small")
    a = source_position(small, "x + y")
    g = source_position(small, "z > 0")
    e = source_position(small, "np.exp")
    m = source_position(small, "z * 2")
    assert str(f.tree) == text(f"""
        define(small, lambda(x, y),  # {FILE}:{d}:1
            block(
                define(z, __add@{a[0]}:{a[1]}(x, y))  # {BASE}:{a[0]}:5
                if(__gt@{g[0]}:{g[1]}(z, 0),  # {BASE}:{g[0]}:5
                    block(
                        define(z, exp@{e[0]}:{e[1]}(z))  # {BASE}:{e[0]}:9
                    )
                )
                return(__mul@{m[0]}:{m[1]}(z, 2))  # {BASE}:{m[0]}:5
            )
        )
    """)


def test_tree_text_has_a_location_on_every_statement():
    lines = str(px.compile(small).tree).splitlines()
    statements = [ln for ln in lines if ln.strip().startswith(("define(z", "if(", "return("))]
    assert len(statements) == 4
    assert all(f"# {BASE}:" in ln for ln in statements)


def test_to_dot():
    dot = px.compile(small).to_dot()
    line, _ = source_position(small, "x + y")
    assert dot.startswith("digraph")
    assert dot.rstrip().endswith("}")
    assert f'label="__add\\nline {line}"' in dot
    assert f'label="exp\\nline {line + 2}"' in dot


def test_debug_option_prints_the_tree(capsys):
    f = px.compile(small, debug=True)
    tree = f.tree  # compiles, printing the tree once
    assert capsys.readouterr().out.strip() == str(tree)


def test_absorb_calls_makes_declared_pairs_one_call():
    """passes/absorb.py: nn.conv2d_patches_grad declares it absorbs nn.conv2d_grad_patches. Written into it, the
    pair becomes one nn.conv2d_grad_input_rows call (the inner call's arguments, then the outer's others); the
    inner value kept in a variable, an inner call with keyword arguments, or any other pair, is left as written."""
    from phylanx_py.passes import absorb_calls

    def grad_patches(rows, w):
        return Call("nn.conv2d_grad_patches", (Var(rows), Var(w)))

    def patches_grad(dcols):
        return Call("nn.conv2d_patches_grad", (dcols, Var("xs"), Var("ws"), Const(1)), (("padding", Const(1)),))

    p = program(
        set_y(patches_grad(grad_patches("r", "w"))),  # absorbed
        Assign(StoreName("d"), grad_patches("r", "w")),
        set_y(patches_grad(Var("d"))),  # d may be read elsewhere: kept
        set_y(Call("nn.conv2d_grad_rows", (grad_patches("r", "w"),))),  # declares nothing: kept
        set_y(patches_grad(Call("nn.conv2d_grad_patches", (Var("r"),), (("w", Var("w")),)))),  # by keyword: kept
        Return(Var("y")),
        params=("r", "w", "xs", "ws"), locals_=("r", "w", "xs", "ws", "d", "y"),
    )
    assert format_program(absorb_calls(p)) == text("""
        define(f, lambda(r, w, xs, ws),
            block(
                define(y, nn.conv2d_grad_input_rows(r, w, xs, ws, 1, padding=1))
                define(d, nn.conv2d_grad_patches(r, w))
                define(y, nn.conv2d_patches_grad(d, xs, ws, 1, padding=1))
                define(y, nn.conv2d_grad_rows(nn.conv2d_grad_patches(r, w)))
                define(y, nn.conv2d_patches_grad(nn.conv2d_grad_patches(r, w=w), xs, ws, 1, padding=1))
                return(y)
            )
        )
    """)


def test_a_functions_lines_are_read_without_tokenizing_as_inspect_reads_them(tmp_path):
    """reading._lines (the first call's source, without the tokenize module's start-up) gives inspect's lines for
    decorated, nested, dead-code and column-0-comment functions, and None where it is unsure (lambdas)."""
    import inspect
    import textwrap

    from phylanx_py.reading import _lines

    src = textwrap.dedent('''
        import functools


        @functools.lru_cache(
            maxsize=None)
        def a(x):
            y = x + 1
        # a comment at column 0, inside
            return y


        def b(x):
            s = """
        text at column 0
        """
            return len(s) + x
            print("never")


        class K:
            def m(self, x):
                def inner(z):
                    return z * 2
                return (inner(x) +
                        1)
            # after


        def d(x): return x + 1
        f = lambda x: x + 1
        ''')
    import importlib.util

    (tmp_path / "tricky_lines.py").write_text(src)
    spec = importlib.util.spec_from_file_location("tricky_lines", tmp_path / "tricky_lines.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    for fn in (m.a.__wrapped__, m.b, m.K.m, m.d):
        assert _lines(fn) == tuple(inspect.getsourcelines(fn)), fn.__name__
    assert _lines(m.f) is None


def test_a_wrapped_function_and_dead_text_at_column_0_are_read_as_inspect_reads_them(tmp_path):
    """A review: a functools.wraps wrapper was read as the wrapper's own lines, and a string at column 0 after the
    last line with bytecode cut the text short (CompileError): both are read by inspect again."""
    import importlib.util
    import textwrap

    src = textwrap.dedent('''
        import functools


        def timed(fn):
            @functools.wraps(fn)
            def wrapper(*args):
                return fn(*args)
            return wrapper


        @timed
        def step(a):
            return a * 2.0 + 1.0


        def dead(a):
            return a * 2.0 + 1.0
            """an old version, kept:
        return a * 3.0
        """
        ''')
    (tmp_path / "read_dead.py").write_text(src)
    spec = importlib.util.spec_from_file_location("read_dead", tmp_path / "read_dead.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    x = np.arange(3.0)
    np.testing.assert_array_equal(px.compile(m.step)(x), m.step(x))
    np.testing.assert_array_equal(px.compile(m.dead)(x), m.dead(x))
