"""TiledArray's NumPy face finds its implementations in runtime/tiled/dispatch.py's table (in process, no cluster):
every name TiledArray's methods look up is registered once the package is imported (a registering module missing
from runtime/tiled/__init__.py's imports would leave a hole found only when that method is called), each name has
one implementation, and a missing one is a clear error."""
from __future__ import annotations

import ast
import os

import phylanx_py.runtime.tiled as tiled
import pytest
from phylanx_py.runtime.tiled import common, dispatch, elementwise, fallback, indexing, kind, rules


def _looked_up() -> set[str]:
    """The names passed to ``implementation("...")`` anywhere in runtime/tiled/."""
    folder = os.path.dirname(tiled.__file__)
    names = set()
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".py"):
            continue
        with open(os.path.join(folder, f)) as fh:
            tree = ast.parse(fh.read(), f)
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "implementation":
                assert isinstance(n.args[0], ast.Constant), f"{f}:{n.lineno}: look implementations up by a literal"
                names.add(n.args[0].value)
    return names


def test_every_name_tiled_arrays_look_up_is_registered_where_it_is_written():
    names = _looked_up()
    assert names == {"array_ufunc", "array_function", "tile_rule", "getitem", "setitem", "fallback", "astype",
                     "retile"}
    where = {"array_ufunc": rules.array_ufunc, "array_function": rules.array_function, "tile_rule": kind.run_tile_rule,
             "getitem": indexing.getitem, "setitem": indexing.setitem, "fallback": fallback.fallback,
             "astype": elementwise.astype, "retile": common.retile}
    for name in names:
        assert dispatch.implementation(name) is where[name], name


def test_a_second_implementation_of_a_name_is_refused():
    def getitem(t, key):
        return None

    with pytest.raises(RuntimeError, match="two tile implementations of 'getitem'"):
        dispatch.implements("getitem")(getitem)
    assert dispatch.implementation("getitem") is indexing.getitem


def test_a_missing_implementation_names_the_import_to_add():
    with pytest.raises(RuntimeError, match="no tile implementation of 'nonesuch' is registered"):
        dispatch.implementation("nonesuch")
