"""Differential tests of every registered primitive (compiled vs plain call programs) and of the shape rules."""
from __future__ import annotations

import contextlib
import copy
import itertools

import numpy as np
import pytest
from _method_cases import CASES as METHOD_CASES
from _prim_cases import CASES as NUMPY_CASES
from _prim_cases import EXTRA
from _prim_compare import called_primitives, function_source, params_of, run_both, write_module
from phylanx_py.primitives import shapes
from phylanx_py.primitives.operators import OPERATORS
from phylanx_py.primitives.shapes import AbstractValue

import phylanx_py as px
from phylanx_py import primitives

UNARY = {op.name for op in OPERATORS if op.kind == "unary"}
ALL_CASES = {**NUMPY_CASES, **METHOD_CASES}
FLAT = [(name, k, body) for name, bodies in {**ALL_CASES, "extra": EXTRA}.items() for k, body in enumerate(bodies)]
IDS = [f"{name}-{k}" for name, k, _ in FLAT]
FILED = [idx for idx, (name, _, _) in enumerate(FLAT) if name != "extra"]  # cases filed under one primitive


def is_numpy_namespace(name: str) -> bool:
    return "." not in name or name.startswith(("linalg.", "random."))


def numpy_object(name: str):
    obj = np
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def expected_call(name: str) -> str:
    """The primitive a call of ``np.<name>`` resolves to (aliases such as np.absolute is np.abs share one)."""
    return primitives.name_of(numpy_object(name)) if is_numpy_namespace(name) else name


# ---- the generated module of call programs -----------------------------------------------------------------
@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    sources = [function_source(f"case_{idx}", params_of(body), body) for idx, (_, _, body) in enumerate(FLAT)]
    module = write_module(tmp_path_factory.mktemp("prim_cases"), sources, prefix="px_prim_cases")
    return module, {}


@pytest.fixture(scope="module", params=["synchronous", "local", "local-tasks"])
def prim_runtime(request):
    """None for the default local runtime (small arrays run inline there), or one of ours, closed after:
    the synchronous runtime, or a thread pool that runs every array primitive as a task."""
    if request.param == "local":
        yield None
        return
    rt = px.runtime.synchronous() if request.param == "synchronous" else px.runtime.local(2, inline_elements=0)
    yield rt
    rt.close()


def in_runtime(rt):
    return px.using(rt) if rt is not None else contextlib.nullcontext()


@pytest.mark.parametrize("idx", range(len(FLAT)), ids=IDS)
def test_case(idx, cases, prim_runtime):
    module, compiled = cases
    _, _, body = FLAT[idx]
    pyfunc = getattr(module, f"case_{idx}")
    if idx not in compiled:
        compiled[idx] = px.compile(pyfunc)
    with in_runtime(prim_runtime):
        run_both(pyfunc, compiled[idx], params_of(body))
        run_both(pyfunc, compiled[idx], params_of(body))  # again: nothing of the first call leaks into the next


@pytest.mark.parametrize("idx", FILED, ids=[IDS[i] for i in FILED])
def test_case_calls_its_primitive(idx, cases):
    """Each case really reaches the primitive it is filed under (checked on the unoptimised tree)."""
    module, _ = cases
    name, _, _ = FLAT[idx]
    tree = px.compile(getattr(module, f"case_{idx}"), optimize=False).tree
    assert expected_call(name) in called_primitives(tree)


def test_every_numpy_primitive_has_a_case():
    registered = [n for n in primitives.names(internal=True) if is_numpy_namespace(n)]
    assert registered == primitives.names()  # the public list is exactly NumPy's namespaces
    assert len(registered) >= 150
    missing = [n for n in registered if n not in NUMPY_CASES]
    assert not missing, f"NumPy-namespace primitives without a call program in _prim_cases.py: {missing}"
    stale = [n for n in NUMPY_CASES if not primitives.exists(n)]
    assert not stale, f"cases for primitives that are not registered: {stale}"


def test_every_method_and_attribute_has_a_case():
    registered = [n for n in primitives.names(internal=True) if n.startswith(("method.", "attr."))]
    missing = [n for n in registered if n not in METHOD_CASES]
    assert not missing, f"method/attribute primitives without a call program in _method_cases.py: {missing}"
    assert sum(n.startswith("math.") for n in METHOD_CASES) >= 10
    stale = [n for n in METHOD_CASES if not primitives.exists(n)]
    assert not stale, f"cases for primitives that are not registered: {stale}"


def test_legacy_random_stream_continues_after_a_compiled_call(cases, prim_runtime):
    """Seeding and drawing inside a compiled function leaves NumPy's global stream where plain code would."""
    module, _ = cases
    idx = next(i for i, (name, _, _) in enumerate(FLAT) if name == "random.seed")
    compiled = px.compile(getattr(module, f"case_{idx}"))
    with in_runtime(prim_runtime):
        got = compiled()
    got_next = np.random.rand(4)
    np.random.seed(0)
    want, want_next = np.random.rand(3), np.random.rand(4)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_next, want_next)


# ---- shape rules ------------------------------------------------------------------------------------------
def rule_kind(prim) -> str | None:
    if prim.shape_rule is None:
        return None
    if prim.shape_rule is shapes.matmul:
        return "matmul"
    return prim.shape_rule.__qualname__.split(".")[0]  # "elementwise" / "reduction"


RULED = {n: rule_kind(primitives.lookup(n)) for n in primitives.names(internal=True)
         if rule_kind(primitives.lookup(n))}
ELEMENTWISE = sorted(n for n, kind in RULED.items() if kind == "elementwise")
REDUCTIONS = sorted(n for n, kind in RULED.items() if kind == "reduction")

DTYPES = [np.bool_, np.uint8, np.int32, np.int64, np.float32, np.float64]
UNARY_SHAPES = [(), (3,), (2, 3), (2, 1, 4)]
BINARY_SHAPES = [((2, 3), (2, 3)), ((3,), (2, 3)), ((1, 3), (2, 1)), ((2, 1), (3,)), ((), (2, 3)),
                 ((4, 1, 3), (2, 3)), ((2, 3), (4,))]
PY_SCALARS = [2, 2.5, True]


def sample(shape, dtype):
    return np.full(shape, 2, dtype=dtype)


def broadcastable(shape_list) -> bool:
    try:
        np.broadcast_shapes(*shape_list)
    except ValueError:
        return False
    return True


def check_rule(prim, args, kwargs, real_fn):
    """The rule's shape and dtype are those of the real result; where NumPy raises, the rule raises alike."""
    concrete = [copy.deepcopy(a) for a in args]
    abstract = [AbstractValue(a.shape, a.dtype) if isinstance(a, np.ndarray) else a for a in args]
    try:
        with np.errstate(all="ignore"):
            real = real_fn(*concrete, **kwargs)
    except Exception as e:  # noqa: BLE001 - the rule must reject the same call
        # With both a dtype and a shape problem, which one NumPy reports first is not part of the contract.
        shaped = [a.shape for a in args if isinstance(a, np.ndarray)]
        expected = type(e) if broadcastable(shaped) else (TypeError, ValueError)
        with pytest.raises(expected):
            shapes.infer(prim, abstract, kwargs)
        return
    got = shapes.infer(prim, abstract, kwargs)
    where = f"{prim.name}{tuple(abstract)} {kwargs}"
    if isinstance(real, tuple):
        assert isinstance(got, tuple) and len(got) == len(real), where
        pairs = list(zip(got, real))
    else:
        pairs = [(got, real)]
    for g, r in pairs:
        r = np.asarray(r)
        assert isinstance(g, AbstractValue), where
        assert (g.shape, np.dtype(g.dtype)) == (r.shape, r.dtype), f"{where}: {g} != {r.shape}, {r.dtype}"


def test_shape_rules_cover_the_ufuncs_and_reductions():
    assert len(ELEMENTWISE) >= 60 and len(REDUCTIONS) >= 20
    assert set(RULED.values()) <= {"elementwise", "reduction", "matmul"}, RULED


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_shape_rule(name):
    prim = primitives.lookup(name)
    fn = prim.kernel
    nin = fn.nin if isinstance(fn, np.ufunc) else (1 if name.removeprefix("operator.") in UNARY else 2)
    if nin == 1:
        for shape, dt in itertools.product(UNARY_SHAPES, DTYPES):
            check_rule(prim, [sample(shape, dt)], {}, fn)
        return
    for (sa, sb), da, db in itertools.product(BINARY_SHAPES, DTYPES, DTYPES):
        check_rule(prim, [sample(sa, da), sample(sb, db)], {}, fn)
    for shape, dt, scalar in itertools.product(UNARY_SHAPES, DTYPES, PY_SCALARS):
        check_rule(prim, [sample(shape, dt), scalar], {}, fn)
        check_rule(prim, [scalar, sample(shape, dt)], {}, fn)
    if isinstance(fn, np.ufunc):
        for da, db in itertools.product([np.int64, np.float32, np.float64], repeat=2):
            check_rule(prim, [sample((2, 3), da), sample((3,), db)], {"dtype": np.float64}, fn)
            check_rule(prim, [sample((2, 3), da), sample((3,), db)], {"dtype": np.float32}, fn)


REDUCE_SHAPES = [(5,), (2, 3), (3, 1), (2, 3, 4)]


def axis_options(ndim):
    out = [None, 0, -1]
    if ndim >= 2:
        out += [1, (0, -1)]
    if ndim >= 3:
        out += [(0, 2), (1,)]
    return out


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_shape_rule(name):
    prim = primitives.lookup(name)
    fn = prim.kernel
    for shape, dt in itertools.product(REDUCE_SHAPES, DTYPES):
        a = (np.arange(int(np.prod(shape))).reshape(shape) % 3 + 1).astype(dt)
        check_rule(prim, [a], {}, fn)
        check_rule(prim, [a, 0], {}, fn)  # axis given positionally
        for axis, keep in itertools.product(axis_options(len(shape)), [False, True]):
            check_rule(prim, [a], {"axis": axis, "keepdims": keep}, fn)


MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                 ((3,), (5, 3, 2)), ((5, 1, 2, 3), (4, 3, 2)), ((1, 2, 3), (6, 3, 1))]
MATMUL_BAD = [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3), (2,)), ((5, 2, 3), (4, 3, 2)), ((), (3,)), ((3,), ())]


@pytest.mark.parametrize("name", ["matmul", "operator.matmul"])
def test_matmul_shape_rule(name):
    prim = primitives.lookup(name)
    assert prim.shape_rule is shapes.matmul
    for (sa, sb), da, db in itertools.product(MATMUL_SHAPES, [np.bool_, np.int8, np.int64, np.float32, np.float64],
                                              [np.int32, np.float32, np.float64]):
        check_rule(prim, [sample(sa, da), sample(sb, db)], {}, np.matmul)
    for sa, sb in MATMUL_BAD:
        with pytest.raises(ValueError):
            np.matmul(sample(sa, np.float64), sample(sb, np.float64))
        with pytest.raises(ValueError):
            shapes.infer(prim, [AbstractValue(sa, np.dtype(np.float64)), AbstractValue(sb, np.dtype(np.float64))],
                         {})


def test_matmul_shape_rule_unknown_operands():
    """Nothing is inferred when an operand is not an array (a Python list, a scalar)."""
    prim = primitives.lookup("matmul")
    assert shapes.infer(prim, [[1.0, 2.0], AbstractValue((2,), np.dtype(np.float64))], {}) is None
