"""primitives/__init__.py's recipe followed with a toy primitive: one declaration, in a registry of its own, reaches
the translator (by its object), the code generator (its inline form), px.grad (its rule), fusion (its Numba
expression, compiled) and tiled arrays (its tile rule), with nothing else registered anywhere."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from cluster import DaskProcesses
from phylanx_py.primitives import REGISTRY, Inline, Registry, lookup, name_of, scoped, shapes
from phylanx_py.primitives import fused as F
from phylanx_py.primitives.registry import register
from phylanx_py.primitives.vjp import unary_rule
from phylanx_py.runtime.codegen import Generator
from phylanx_py.runtime.tiled import TiledArray, TileFallbackWarning

import phylanx_py as px
from phylanx_py import ir


def _make_cube():
    def cube(x):
        """x**3; an array type that runs primitives its own way (traced, tiled) gets the primitive instead."""
        own_way = getattr(type(x), "__phylanx_call__", None)
        if own_way is not None:
            return own_way("toy.cube", (x,), {})
        return x * x * x

    return cube


cube = _make_cube()  # made in a function, so cloudpickle sends it to Dask workers by value

# The recipe: one declaration with every rule, in a registry of the test's own over the real one.
TOY = Registry(parent=REGISTRY)
register("toy.cube", cube, registry=TOY, obj=cube, display="cube", shape_rule=shapes.elementwise(cube, 1),
         grad=unary_rule(lambda g, a, x: 3.0 * g * x * x),
         fused="{0} * {0} * {0}",
         inline=Inline("{kernel}({args})", "small"),
         tile=lambda ops, x: ops.elementwise(cube, [x]))
TOY.freeze()


@pytest.fixture(autouse=True)
def toy_registry():
    with scoped(TOY):
        yield


def poly(x):
    return cube(x) * 2.0 - x


def chain(x):
    return np.exp(-cube(x)) * 2.0 + x * 0.5 - 1.0


def test_the_translator_finds_it_by_its_object_and_registries_are_frozen():
    assert name_of(cube) == "toy.cube" and lookup("toy.cube").label == "cube"
    f = px.compile(poly)
    assert "toy.cube" in {n.prim for n in ir.walk(f.tree) if isinstance(n, ir.Call)}
    assert "cube@" in str(f.tree)
    with pytest.raises(RuntimeError, match="declared after the registry was frozen"):
        register("toy.square", lambda x: x * x, registry=TOY)
    with pytest.raises(RuntimeError, match="declared after the registry was frozen"):
        register("toy.square", lambda x: x * x)  # the real registry too


def test_the_code_generator_emits_its_inline_form():
    test, code = Generator(ir.Program("f", ()), {}).fast_path("toy.cube", lookup("toy.cube"), ["x"], [])
    assert code.endswith("(x)") and "__pxr_lim" in test  # its kernel, under the "small" guard
    x = np.linspace(-2.0, 2.0, 7)
    np.testing.assert_allclose(px.compile(poly)(x), poly(x))


def test_grad_differentiates_it_with_its_rule():
    g = px.grad(lambda x: np.sum(cube(x) * 2.0 - x))
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(g(x), 6.0 * x * x - 1.0)
    assert "cube@" in str(g.tree)  # recorded as the toy primitive, not as the multiplications inside it


def test_fusion_joins_it_and_compiles_its_expression():
    f = px.compile(chain)
    x = np.linspace(-1.0, 1.0, F.FUSE_MIN_ELEMENTS * 2)
    np.testing.assert_allclose(f(x), chain(x), rtol=1e-12)
    groups = [n for n in ir.walk(f.tree) if isinstance(n, ir.Fused) and "toy.cube" in repr(n.spec)]
    assert len(groups) == 1
    assert F._numba_kernel(groups[0].spec, [x] * len(groups[0].leaves)) is not None  # a Numba kernel from it


def test_tiled_arrays_run_its_tile_rule():
    cluster = DaskProcesses(n_workers=1)
    rt = px.runtime.dask(cluster.address)
    try:
        x = np.linspace(-2.0, 2.0, 40)
        with px.using(rt), warnings.catch_warnings():
            warnings.simplefilter("error", TileFallbackWarning)  # no gathering: the rule ran tile by tile
            t = px.tiled.from_array(x, tiles=(4,))
            # unfused: a fused group's tasks look its operations up by name on the workers, which only know
            # installed declarations (this registry lives in the test process)
            out = px.compile(poly, fuse=False)(t)
            assert isinstance(out, TiledArray)
            np.testing.assert_allclose(out.to_numpy(), poly(x))
            plain = cube(t)  # outside compiled code: the array's __phylanx_call__ runs the same rule
            assert isinstance(plain, TiledArray)
            np.testing.assert_allclose(plain.to_numpy(), x ** 3)
    finally:
        rt.close()
        cluster.stop()
