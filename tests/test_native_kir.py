"""The native tier's kernel IR (runtime/native/kir.py): what the lowerer tags on a kernel's statements (helper calls
with whether they may raise, array accesses with how they stay in bounds, the test of a loop's two versions) is
what a kernel's module, its outlining and the printer are made from; the compiled function still gives the plain
answer."""
from __future__ import annotations

import ast
import re

import numpy as np
import prog_native_kir as P
import pytest
from phylanx_py.primitives import lookup
from phylanx_py.runtime.native import kir, tiering, versions
from phylanx_py.runtime.native.facts import operations

import phylanx_py as px


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv("PHYLANX_NATIVE", "force")


def _entry(fn, *args):
    f = px.compile(fn)
    assert f(*args) == fn(*args)
    (entry,) = f._compile().whole.entries.values()
    assert entry.declined is None and entry.printed.source == entry.source
    return entry


def _tags(entry, kind):
    return [t for node in entry.printed.nodes.values() for t in node.tags if type(t) is kind]


def test_a_kernel_module_defines_the_helpers_its_ir_calls_and_theirs(forced):
    entry = _entry(P.floor_steps, np.zeros(5), 7)
    tags = {c.name: c for c in _tags(entry, kir.Call)}
    # a helper's facts are read from its code; range's from its declaration (primitives/python_ops.py)
    assert tags["_py_floordiv"] == kir.Call("_py_floordiv", True, "Python's division or conversion")
    assert tags["range"] == kir.Call("range", False, "range")
    calls = {name for name in tags if kir.is_helper(name)}
    assert entry.printed.helpers == frozenset(calls) == {"_ck_add", "_py_floordiv"}  # (s + ...: s is a Python int)
    module = tiering.sequential_module(entry.printed)
    # the helpers it calls, taken from the process's module of helpers (which defines theirs): none defined here
    assert set(re.findall(r"^def (\w+)", module, re.M)) == {"kernel"}
    assert set(re.search(r"^(.*), = _pxshared\(", module, re.M).group(1).split(", ")) == calls


def test_accesses_are_tagged_proven_or_checked_and_the_fast_version_is_outlined(forced):
    entry = _entry(P.gather, np.arange(10.0), np.array([3, 1, 4, 1, 5, 9, 2, 6]))
    hows = {(a.array, a.how) for a in _tags(entry, kir.Access)}
    # idx[i] is proven by the loop's range; a[idx[i]] by idx's range, under the test; the loop as it is is not
    # compiled (the kernel stops where the test fails: versions.py), so no access is checked
    assert hows == {("idx", "proven"), ("a", "proven")}, hows
    raises = [n.text for n in entry.printed.nodes.values() if type(n) is kir.Raise]
    assert raises == [f"raise _Overflow({versions.RERUN_BOUNDS!r})"]
    (line,) = entry.printed.versions()
    node = entry.printed.nodes[line]
    assert node.version == "unchecked" and entry.source.split("\n")[line - 1].endswith("# unchecked version")
    assert "def __pxfast0(" in tiering.sequential_module(entry.printed)
    with pytest.raises(px.ExecutionError) as e:  # rerun interpreted: NumPy's error
        px.compile(P.gather)(np.arange(10.0), np.array([3, 10]))
    assert isinstance(e.value.__cause__, IndexError)


def test_operations_are_tagged_from_the_declarations_and_end_a_whole_functions_stage(forced):
    # what a form writes is read once from its declaration's template
    assert operations(lookup("operator.mod").lowering) == ("modulo",)
    assert operations(lookup("mean").lowering) == ("division",)  # (_px_sum(a) / a.shape[0])
    assert operations(lookup("math.floor").lowering) == ("math",)
    assert operations(lookup("exp").lowering) == ()
    entry = _entry(P.scaled_total, np.arange(6.0), np.float64(3.0))
    (node,) = [n for n in entry.printed.nodes.values() if kir.Op("division") in n.tags]
    assert node.line() == "t = (d / 2.0)" and not node.calls and not node.accesses
    # the division may raise (whole_lower.py): a stage of its own before the loop's, numbered in the kernel
    assert [type(s).__name__ for s, _ in entry.stages] == ["Assign", "For"]
    assert "def kernel(__pxs, a, d):\n" in entry.source and "\n    __pxs[0] = 0\n    t = (d / 2.0)\n" in entry.source


def test_the_printer_writes_each_node_at_its_depth_and_maps_lines_back():
    call = kir.helper_call("_ck_add", "s", "i")
    nodes = [kir.Stmt(1, "s = 0"),
             kir.For(1, "i", "range(n)"),
             kir.If(2, "n >= 0", version="nonneg"),
             kir.Stmt(3, f"s = {call[0]}", (call[1], kir.Access("a", "proven"))),
             kir.Else(2)]
    printed = kir.print_kernel(["n"], nodes, "(s, )")
    assert printed.source == ("@numba.njit(cache=True, nogil=True, boundscheck=False, error_model='numpy')\n"
                              "def kernel(n):\n"
                              "    s = 0\n"
                              "    for i in range(n):\n"
                              "        if n >= 0:  # nonneg version\n"
                              "            s = _ck_add(s, i)\n"
                              "        else:\n"
                              "            pass\n"
                              "    return (s, )\n")
    assert [printed.nodes[i] for i in (3, 4, 5, 6, 7)] == nodes and 8 not in printed.nodes
    assert printed.versions() == {5} and printed.helpers == {"_ck_add"}
    assert call[1] == kir.Call("_ck_add", True, "Python-int arithmetic checked for overflow")
    ns = {}
    exec(printed.source.split("\n", 1)[1].replace("_ck_add", "(lambda x, y: x + y)"), ns)  # noqa: S102
    assert ns["kernel"](4) == (6,)


def test_two_versions_are_one_when_their_lowerings_decided_alike():
    """versions.py keeps a loop's fast version only when the lowering decided something differently under its
    assumption: the nodes and their tags say so, not the printed lines (whose temporaries' numbers differ)."""
    ix = kir.helper_call("_ix", "i", "a.shape[0]")

    def nest(tmp, index, how, calls=()):
        return [kir.For(1, f"__pxz{tmp}", "range(n)", kir.declared("range")),
                kir.Stmt(2, f"a[{index}] = 0.0", tuple(calls) + (kir.Access("a", how),))]

    proven = nest(3, "__pxz3", "proven")
    assert kir.decided_alike(proven, nest(7, "__pxz7", "proven"))  # the temporaries' numbers alone differ
    assert kir.decided_alike(proven, nest(7, "__pxz7", "numba"))  # written as it is either way
    assert not kir.decided_alike(proven, nest(7, ix[0], "checked", [ix[1]]))
    assert not kir.decided_alike(proven, proven[:1])
    # a nested loop in two versions in one lowering, in one in the other
    assert not kir.decided_alike([kir.If(1, "n >= 0", version="nonneg"), kir.Else(1)],
                                 [kir.If(1, "n >= 0"), kir.Else(1)])


def _own_calls(node):
    """The functions a node's own line calls by name (its text read only by the test; not a method of a call's
    result, ``f(x).reshape``)."""
    return {name for name in re.findall(r"([\w.]+)\(", node.line()) if not name.startswith(".")}


def _own_names(node):
    """(read, bound) variable names of a node's own text (of a block's opener: its header), by ``ast``: the
    test's reading of what the kernel IR's kir.Name tags say."""
    text = f"if {node.cond}:" if isinstance(node, kir.If) else node.line()
    if isinstance(node, kir.Else):
        return set(), set()
    tree = ast.parse(text + ("\n    pass" if text.endswith(":") else ""))
    head = tree.body[0]
    parts = [head.target, head.iter] if isinstance(head, ast.For) else [head.test] if isinstance(
        head, (ast.If, ast.While)) else [head]
    called = {id(c.func) for p in parts for c in ast.walk(p) if isinstance(c, ast.Call)}
    names = [n for p in parts for n in ast.walk(p) if isinstance(n, ast.Name) and id(n) not in called and
             n.id not in ("np", "math")]
    return {n.id for n in names if isinstance(n.ctx, ast.Load)}, {n.id for n in names if isinstance(n.ctx, ast.Store)}


@pytest.mark.parametrize("program, args", [
    (P.two_means, (np.arange(24.0).reshape(2, 3, 4), np.zeros((2, 3)))),
    (P.shifted_rows, (np.zeros((4, 5)), np.arange(20.0).reshape(4, 5))),
])
def test_each_statement_carries_the_tags_of_its_own_text(forced, program, args):
    """A statement written while an expression is lowered (a reduction's temporary) or before a nest's test (the
    nest's set-up) takes only its own text's tags: the helper calls of the expression's other parts and of the
    test's conditions stay for the statements that write them (before, they landed on the temporary or the
    set-up: ``__pxr1 = x[i]`` tagged with _pxr_sum_rows, ``__pxz3 = 0`` with _c_order); every call a line
    writes is tagged, one the declarations do not know (np.uint64, the nest's _Overflow) as one that may raise;
    and the names it reads and binds are its kir.Name tags (the nest's temporaries, its test's lengths)."""
    f = px.compile(program)
    np.testing.assert_array_equal(f(*[a.copy() for a in args]), program(*[a.copy() for a in args]))
    (entry,) = [e for e in f._compile().whole.entries.values() if e.printed is not None]
    for node in entry.printed.nodes.values():
        tagged = {c.name for c in node.calls if kir.is_helper(c.name)}
        assert tagged <= _own_calls(node) <= {c.name for c in node.calls}, (node.line(), node.calls)
        assert _own_names(node) == (node.reads, node.binds), node.line()  # what liveness will ask of the IR
    nest_test = [n for n in entry.printed.nodes.values() if isinstance(n, kir.If) and "_apart(" in n.cond]
    assert all({"_apart"} <= {c.name for c in n.calls} for n in nest_test)
    assert nest_test or program is not P.shifted_rows
    raised = [c for n in entry.printed.nodes.values() for c in n.calls if c.name in ("np.uint64", "_Overflow")]
    assert all(c.raises for c in raised) and (raised or program is not P.shifted_rows)


def test_the_arrays_a_kernel_may_change_are_asked_of_its_mentions(forced):
    """kir.Printed.arrays_written: an array only read (its elements, ``len``, a loop over it) is not copied before
    a kernel that may stop runs; one stored into, bound again or indexed into a view kept may change; a slice held
    by a name could make a view of any array."""
    keys, idx, out = np.arange(5), np.arange(5), np.zeros(5, dtype=np.int64)
    entry = _entry(P.hashes, keys, idx, out.copy(), 2)
    uses = {(u.array, u.read or u.element) for u in _tags(entry, kir.Use)}
    assert ("keys", True) in uses and ("keys", False) not in uses and ("out", False) in uses
    assert entry.writes == (1, 2)  # idx (a view kept) and out; keys is only read
    assert entry.printed.arrays_written(list(entry.kinds), frozenset({"*"})) == (0, 1, 2)  # (a view of any)
    f = px.compile(P.sliced)
    np.testing.assert_array_equal(f(keys, out.copy()), P.sliced(keys, out.copy()))
    (entry,) = f._compile().whole.entries.values()
    assert entry.declined is None and entry.writes == (0, 1)


_A1, _A2 = (lambda: np.arange(1.0, 4.0)), (lambda: np.arange(1.0, 13.0).reshape(3, 4))


@pytest.mark.parametrize("program, makes, written", [
    (P.w_reads, [_A1], ()),  # elements, len, shape, size, iteration of a 1-d array: only read
    (P.w_element_2d, [_A2], ()),
    (P.w_store, [_A1], (0,)),
    (P.w_update, [_A1], (0,)),
    (P.w_other_name, [_A1], (0,)),  # another name for it
    (P.w_view, [_A1], (0,)),  # a view kept
    (P.w_new_axis, [_A1], (0,)),  # p0[None]: a view too
    (P.w_row, [_A2], (0,)),  # a row of a 2-d array is a view
    (P.w_rows, [_A2], (0,)),  # rows of a 2-d array, views
    (P.w_one_of_two, [_A1, _A1], (1,)),
    (P.w_scalar, [_A1, lambda: 2], ()),  # (scalars are never copied)
    # a view or the array itself only read where it stands: an operand of arithmetic (a new array) or of a NumPy
    # function that reads (np.dot: NPBench's trisolv copied its 32 MB matrix before each plain run)
    (P.w_arithmetic, [_A1], ()),
    (P.w_new_array, [_A1], ()),
    (P.w_dot, [_A2, _A1], ()),
    (P.w_flip, [_A1], (0,)),  # np.flip makes a view
    (P.w_sum_axis, [_A2], (0,)),  # (keywords, a helper's argument: not known to only read)
])
def test_each_use_of_an_array_says_whether_the_kernel_may_change_it(forced, program, makes, written):
    """Moved from test_native.py's text-reader cases (analysis.arrays_written read the printed kernel; the kernel IR's
    mentions, kir.Use, say it now): the same programs' uses, the same answers."""
    f = px.compile(program)
    np.testing.assert_array_equal(f(*[m() for m in makes]), program(*[m() for m in makes]))
    (entry,) = f._compile().whole.entries.values()
    assert entry.declined is None and entry.writes == written


def test_liveness_asks_the_names_each_node_reads_and_binds():
    """liveness.py (parallel.py's: a name carried between iterations, or read after a loop) reads each node's
    kir.Name tags, not the printed source: a break leaves, a name bound by ``:=`` counts as read, the return ends
    a path."""
    from phylanx_py.runtime.native import liveness

    def stmt(text, reads=(), binds=(), walrus=()):
        return kir.Stmt(1, text, tuple(kir.Name(n) for n in reads) + tuple(kir.Name(n, True) for n in binds) +
                        tuple(kir.Name(n, True, True) for n in walrus))

    body = [(stmt("t = a[i]", ["a", "i"], ["t"]), []), (stmt("s = s + t", ["s", "t"], ["s"]), [])]
    loop = (kir.For(1, "i", "range(n)", (kir.Name("n"),)), body)
    block = [(stmt("s = 0.0", binds=["s"]), []), loop, (kir.Return(1, (kir.Name("s"),)), [])]
    assert liveness.stored_names(body) == {"t", "s"}
    assert liveness.scan(body, "t") == (False, True, False)  # bound before read in each iteration
    assert liveness.scan(body, "s")[0]  # carried
    assert liveness.live_after([(block, 1), (loop, "body"), (body, 1)], "s")  # read by the return
    assert liveness.live_after([(block, 1), (loop, "body"), (body, 0)], "t")  # the next statement reads it
    assert not liveness.live_after([(block, 1), (loop, "body"), (body, 1)], "t")  # bound again first, or dead
    jump = [(kir.If(1, "c", (kir.Name("c"),)), [(kir.Jump(2, "break"), [])]), (kir.Else(1), []),
            (stmt("t = 1", binds=["t"]), [])]
    assert liveness.scan(jump, "t") == (False, True, True)  # bound where the path goes on; a break may skip it
    assert liveness.scan([(stmt("u = (t := 2)", binds=["u"], walrus=["t"]), [])], "t")[0]


def test_every_helpers_text_is_its_source_as_inspect_reads_it():
    """helpers._def_lines reads a helper's lines from the file up to the next line at column 0 (inspect.getsource
    tokenizes, ~15 ms for the 47 helpers in a process's first kernel key), _comments_above the comments above it:
    the same text as inspect's for every helper."""
    import inspect

    from phylanx_py.runtime.native import helpers

    assert len(helpers._DEFS) > 40
    for name, fn in helpers._DEFS.items():
        lines = inspect.getsource(fn).splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("def "))
        assert helpers._def_lines(fn) == lines[first:], name
        assert helpers._comments_above(fn) == (inspect.getcomments(fn) or ""), name
