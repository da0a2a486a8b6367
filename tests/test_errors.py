"""Error tests: exact messages with file:line:col for unsupported constructs and for failures at run time."""
# ruff: noqa: F821, F841, B018, E701
from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
from helpers import source_position
from prog_control import assert_fails

import phylanx_py as px

# every test here runs with the native loop tier as by default and forced (conftest.native_tier)
pytestmark = pytest.mark.usefixtures("native_tier")

FILE = os.path.abspath(__file__)


# ---- programs with constructs @compile does not support ---------------------------------------------------


def uses_class(x):
    class Inner:
        pass

    return x


def uses_try(x):
    try:
        return 1 / x
    except ZeroDivisionError:
        return 0


def uses_with(x):
    with open(x) as fh:
        return fh.read()


def uses_yield(x):
    total = x + 1
    yield total


def uses_nonlocal(x):
    def inner():
        nonlocal x
        x = 2

    inner()
    return x


COUNTER = 0


def uses_global(x):
    global COUNTER
    COUNTER = x
    return x


def uses_star_params(a, *args):
    return a


def uses_kwargs_params(a, **kwargs):
    return a


def uses_starred_call(xs):
    return max(*xs)


def uses_attribute_assignment(obj):
    obj.x = 1
    return obj


def uses_del_name(x):
    y = x
    del y
    return x


def uses_async_def(x):
    async def inner():
        return x

    return inner


def uses_import_in_a_block(x):
    if x > 0:
        import math

        return math.sqrt(x)
    return x


def uses_name_before_its_import(x):
    y = np.sum(x)  # noqa: F823 - the error under test
    import numpy as np

    return np.exp(y)


def uses_import_and_assignment(x):
    import math

    math = x  # noqa: F811 - the error under test
    return math


def uses_import_of_a_missing_module(x):
    import phylanx_no_such_module

    return phylanx_no_such_module.f(x)


def uses_match(x):
    match x:
        case 1:
            return "one"
        case _:
            return "other"


def uses_np_foo(x):
    return np.foo(x)


def uses_np_fft(x):
    return np.fft.fft(x)


def uses_undefined(x):
    return undefined_thing + x


def uses_open(name):
    return open(name)


def uses_generator_value(xs):
    g = (x for x in xs)
    return g


def uses_starred_target(xs):
    first, *rest = xs
    return first


def uses_nested_decorator(x):
    @staticmethod
    def inner():
        return x

    return inner


def uses_bare_raise(x):
    if x:
        raise
    return x


def uses_dict_unpacking(d):
    return {**d}


def uses_kwargs_call(d):
    return dict(**d)


def uses_attribute_augassign(obj):
    obj.count += 1
    return obj


def uses_module_value(x):
    m = np
    return m


def uses_unknown_method(a):
    return a.frobnicate()


def uses_unknown_attribute(a):
    return a.frobnicate


def uses_class_call(x):
    return Fraction(x, 2)


def uses_set_comprehension(xs):
    return {x * 2 for x in xs}


UNSUPPORTED = [
    (uses_class, "class Inner", "unsupported construct: class definition"),
    (uses_try, "try:", "unsupported construct: 'try' statement"),
    (uses_with, "with open", "unsupported construct: 'with' statement"),
    (uses_yield, "yield total", "unsupported construct: 'yield' (generators)"),
    (uses_nonlocal, "nonlocal x", "unsupported construct: 'nonlocal' statement"),
    (uses_global, "global COUNTER", "unsupported construct: 'global' statement"),
    (uses_star_params, "args)", "unsupported construct: *args/**kwargs parameters"),
    (uses_kwargs_params, "kwargs)", "unsupported construct: *args/**kwargs parameters"),
    (uses_starred_call, "*xs", "unsupported construct: starred argument (*args) in a call"),
    (uses_attribute_assignment, "obj.x = 1", "unsupported construct: assignment to an attribute"),
    (uses_del_name, "del y", "unsupported construct: 'del' of a name"),
    (uses_async_def, "async def", "unsupported construct: async function"),
    (uses_import_in_a_block, "import math", "unsupported construct: 'import' inside a block or a nested function "
     "of a compiled function (an import is supported as a statement of the function's own body)"),
    (uses_name_before_its_import, "np.sum", "local variable 'np' is used before the import at line "
     f"{uses_name_before_its_import.__code__.co_firstlineno + 2} binds it (Python raises UnboundLocalError)"),
    (uses_import_and_assignment, "import math", "'math' is bound by this import and also assigned in the function: "
     "give the module another name"),
    (uses_import_of_a_missing_module, "import phylanx_no", "ModuleNotFoundError: No module named "
     "'phylanx_no_such_module'"),
    (uses_match, "match x", "unsupported construct: 'match' statement"),
    (uses_np_foo, "np.foo", "unknown NumPy function 'np.foo'"),
    (uses_np_fft, "np.fft.fft", "unsupported NumPy function 'np.fft.fft'"),
    (uses_undefined, "undefined_thing", "name 'undefined_thing' is not defined"),
    (uses_open, ("open(name)", 2), "unsupported function 'open'"),
    (uses_generator_value, "(x for", "unsupported construct: generator expression (outside a call argument)"),
    (uses_starred_target, "*rest", "unsupported construct: starred assignment target"),
    (uses_nested_decorator, "staticmethod", "unsupported construct: decorator on a nested function"),
    (uses_bare_raise, ("raise", 2), "unsupported construct: bare 'raise' or 'raise ... from'"),
    (uses_dict_unpacking, "{**d}", "unsupported construct: dict unpacking (**d) in a dict literal"),
    (uses_kwargs_call, ("d)", 2), "unsupported construct: keyword unpacking (**kwargs) in a call"),
    (uses_attribute_augassign, "obj.count", "unsupported construct: augmented assignment to an attribute"),
    (uses_module_value, "np", "module 'np' used as a value"),
    (uses_unknown_method, "a.frobnicate", "unsupported method '.frobnicate()'"),
    (uses_class_call, "Fraction", "unsupported call: cannot compile a call to 'Fraction' (class)"),
]


def _position(fn, marker):
    """``marker`` is the text of the construct, or (text, occurrence) when the text also occurs earlier."""
    text, occurrence = marker if isinstance(marker, tuple) else (marker, 1)
    return source_position(fn, text, occurrence)


def _ids(cases):
    return [c[0].__name__ for c in cases]


@pytest.mark.parametrize(("fn", "marker", "message"), UNSUPPORTED, ids=_ids(UNSUPPORTED))
def test_unsupported_construct_first_line(fn, marker, message):
    f = px.compile(fn)  # compilation is lazy: decorating never fails
    line, col = _position(fn, marker)
    with pytest.raises(px.CompileError) as err:
        f.tree
    first = str(err.value).splitlines()[0]
    assert first == f"{FILE}:{line}:{col}: {message}"
    assert (err.value.filename, err.value.lineno, err.value.col) == (FILE, line, col)


@pytest.mark.parametrize(("fn", "marker", "message"), UNSUPPORTED, ids=_ids(UNSUPPORTED))
def test_unsupported_construct_traceback_lines(fn, marker, message):
    line, col = _position(fn, marker)
    with open(FILE) as fh:
        source_line = fh.read().splitlines()[line - 1]
    with pytest.raises(px.CompileError) as err:
        px.compile(fn)(1)  # the first call compiles, and fails the same way
    lines = str(err.value).splitlines()
    stripped = source_line.lstrip()
    indent = len(source_line) - len(stripped)
    function = "inner" if fn is uses_nonlocal else fn.__name__
    assert lines[1] == f'  File "{FILE}", line {line}, in {function}'
    assert lines[2] == f"    {stripped}"
    assert lines[3].rstrip("^") == "    " + " " * (col - 1 - indent)
    assert lines[3].endswith("^")
    assert isinstance(err.value, px.PhylanxError)


def test_compile_error_full_text():
    line, col = source_position(uses_try, "try:")
    with pytest.raises(px.CompileError) as err:
        px.compile(uses_try)(1)
    assert str(err.value) == (
        f"{FILE}:{line}:{col}: unsupported construct: 'try' statement\n"
        f'  File "{FILE}", line {line}, in uses_try\n'
        f"    try:\n"
        f"    ^"
    )
    assert err.value.message == "unsupported construct: 'try' statement"


def test_compile_error_is_raised_again_on_every_call():
    f = px.compile(uses_class)
    for _ in range(2):
        with pytest.raises(px.CompileError, match="class definition"):
            f(1)


def test_set_comprehension_is_supported(runtime):
    assert px.compile(uses_set_comprehension)([1, 2, 2]) == {2, 4}


# ---- failures at run time ------------------------------------------------------------------------------------


def matmul_mismatch(X, w):
    y = X + 1
    return y @ w


def int_floordiv(a, b):
    return a // b


def int_truediv(a, b):
    q = a / b
    return q


def int_mod_in_loop(xs, m):
    total = 0
    for x in xs:
        total += x % m
    return total


def big_loop_failure(a, mats):
    x = a
    for m in mats:
        x = np.tanh(x @ m)
    return x.sum()


def complex_products_mismatch(a, mats):
    x = a
    for i in range(mats.shape[0]):
        x = x @ mats[i]
    return x


def big_unused_failure(a, b):
    c = a @ b
    return 1


def fail_then_print(a, b):
    c = a @ b
    print("after the failure")
    return c


def two_failures(a, b, c):
    x = a @ b
    y = a @ c
    return x, y


def list_out_of_range(lst):
    i = len(lst)
    return lst[i]


def _divide_helper(a, b):
    return a / b


def calls_divide_helper(x):
    y = x * 2
    return _divide_helper(y, 0) + 1


def error_in_lambda(xs):
    f = lambda v: 10 // v
    return [f(x) for x in xs]


def error_in_comprehension(xs):
    return [10 // x for x in xs]


def error_in_nested_def(xs):
    def inner(v):
        return xs[v]

    return inner(5)


def calls_function_value(f, x):
    return f(x)


def _subscripts_its_argument(v):
    return v["k"]


def _plain_error(fn, *args):
    with pytest.raises(Exception) as err:
        fn(*args)
    return err.value


def _execution_error(fn, *args) -> px.ExecutionError:
    with pytest.raises(px.ExecutionError) as err:
        px.compile(fn)(*args)
    return err.value


def _assert_execution_error(err, fn, marker, primitive, cause, function=None, occurrence=1):
    """``err`` names ``fn``'s line of ``marker``, the primitive, and chains the plain run's exception."""
    line, col = source_position(fn, marker, occurrence)
    lines = str(err).splitlines()
    file = fn.__code__.co_filename
    assert lines[0] == f"{file}:{line}:{col}: in primitive '{primitive}': {type(cause).__name__}: {cause}"
    assert lines[1] == f'  File "{file}", line {line}, in {function or fn.__name__}'
    assert lines[2].strip() == open(file).read().splitlines()[line - 1].strip()
    assert lines[3].strip().startswith("^")
    assert (err.filename, err.lineno, err.col, err.primitive) == (file, line, col, primitive)
    assert type(err.__cause__) is type(cause)
    assert str(err.__cause__) == str(cause)


def test_matmul_shape_mismatch(runtime):
    X, w = np.ones((3, 4)), np.ones(3)
    cause = _plain_error(matmul_mismatch, X, w)
    assert type(cause) is ValueError
    _assert_execution_error(_execution_error(matmul_mismatch, X, w), matmul_mismatch, "y @ w", "__matmul", cause)


def test_complex_matrix_products_of_shapes_that_do_not_fit(runtime):
    """complex128 products in a loop (native by default once hot, and forced): a ValueError at the product's line,
    or at its loop's when the loop ran natively (its kernel's error: tests/test_native.py), in every tier."""
    a, mats = np.ones((2, 3), complex), np.ones((2, 3, 3), complex)
    f = px.compile(complex_products_mismatch)
    np.testing.assert_allclose(f(a, mats), complex_products_mismatch(a, mats))
    bad = np.ones((2, 2, 2), complex)
    assert type(_plain_error(complex_products_mismatch, a, bad)) is ValueError
    with pytest.raises(px.ExecutionError) as err:
        f(a, bad)
    assert type(err.value.__cause__) is ValueError and err.value.filename == FILE
    at = {source_position(complex_products_mismatch, m)[0]: p for m, p in
          [("x @ mats[i]", "__matmul"), ("for i in range", "native loop")]}
    assert at.get(err.value.lineno) == err.value.primitive


@pytest.mark.parametrize(("fn", "marker", "primitive"), [(int_floordiv, "a // b", "__floordiv"),
                                                         (int_truediv, "a / b", "__div")])
def test_division_by_zero_on_ints(runtime, fn, marker, primitive):
    cause = _plain_error(fn, 7, 0)
    assert type(cause) is ZeroDivisionError
    _assert_execution_error(_execution_error(fn, 7, 0), fn, marker, primitive, cause)


def test_modulo_by_zero_in_loop(runtime):
    cause = _plain_error(int_mod_in_loop, [1, 2], 0)
    err = _execution_error(int_mod_in_loop, [1, 2], 0)
    _assert_execution_error(err, int_mod_in_loop, "x % m", "__mod", cause)


@pytest.mark.timeout(60)
def test_failing_task_inside_loop_on_thread_pool(runtime):
    a = np.full((300, 300), 1e-3)  # 90,000 elements: x @ m runs as a task, not inline
    mats = [np.eye(300), np.eye(300), np.ones((5, 5))]
    cause = _plain_error(big_loop_failure, a, mats)
    err = _execution_error(big_loop_failure, a, mats)
    _assert_execution_error(err, big_loop_failure, "x @ m", "__matmul", cause)


@pytest.mark.timeout(60)
def test_failing_task_whose_result_is_unused_still_raises(runtime):
    a, b = np.ones((300, 300)), np.ones((299, 2))
    cause = _plain_error(big_unused_failure, a, b)
    err = _execution_error(big_unused_failure, a, b)
    _assert_execution_error(err, big_unused_failure, "a @ b", "__matmul", cause)


@pytest.mark.timeout(60)
def test_runtime_usable_after_a_failure(runtime):
    a = np.full((300, 300), 1e-3)
    with pytest.raises(px.ExecutionError):
        px.compile(big_loop_failure)(a, [np.ones((2, 2))])
    assert px.compile(big_loop_failure)(a, [np.eye(300)]) == pytest.approx(big_loop_failure(a, [np.eye(300)]))


@pytest.mark.timeout(60)
def test_no_print_after_a_failed_statement(runtime, capsys):
    """Python stops at the failing line: an effect after it (print) must not happen, even if the failure is a task."""
    a, b = np.ones((300, 300)), np.ones((5, 5))
    with pytest.raises(px.ExecutionError) as err:
        px.compile(fail_then_print)(a, b)
    assert err.value.lineno == source_position(fail_then_print, "a @ b")[0]
    assert capsys.readouterr().out == ""


@pytest.mark.timeout(60)
def test_first_failure_in_program_order_is_raised(runtime):
    a = np.ones((300, 300))
    err = _execution_error(two_failures, a, np.ones((5, 5)), np.ones((6, 6)))
    assert err.lineno == source_position(two_failures, "a @ b")[0]


def test_list_index_out_of_range(runtime):
    cause = _plain_error(list_out_of_range, [1, 2, 3])
    assert type(cause) is IndexError
    err = _execution_error(list_out_of_range, [1, 2, 3])
    _assert_execution_error(err, list_out_of_range, "lst[i]", "slice_at", cause)


def test_failing_assert_with_message(runtime):
    """From tests/prog_control.py: pytest rewrites the asserts of this file, and the first call runs the plain
    function beside its translation (runtime/beside.py), whose message would be pytest's."""
    cause = _plain_error(assert_fails, -1)
    err = _execution_error(assert_fails, -1)
    _assert_execution_error(err, assert_fails, "assert x", "assert", cause)
    assert str(err.__cause__) == "x must be positive, got -1"


def test_error_in_transitively_compiled_helper_names_its_line(runtime):
    cause = _plain_error(calls_divide_helper, 3)
    err = _execution_error(calls_divide_helper, 3)
    _assert_execution_error(err, _divide_helper, "a / b", "__div", cause)


@pytest.mark.parametrize(("fn", "args", "where", "marker", "primitive", "function"), [
    (error_in_lambda, ([1, 0],), error_in_lambda, "10 // v", "__floordiv", "<lambda>"),
    (error_in_comprehension, ([1, 0],), error_in_comprehension, "10 // x", "__floordiv", None),
    (error_in_nested_def, ([1],), error_in_nested_def, "xs[v]", "slice_at", "inner"),
    (calls_function_value, (_subscripts_its_argument, 3), _subscripts_its_argument, 'v["k"]', "slice_at", None),
], ids=["lambda", "comprehension", "nested-def", "function-value"])
def test_error_inside_nested_code_names_its_line(runtime, fn, args, where, marker, primitive, function):
    cause = _plain_error(fn, *args)
    _assert_execution_error(_execution_error(fn, *args), where, marker, primitive, cause, function)


def test_execution_error_pickles_with_cause():
    import pickle

    err = _execution_error(int_floordiv, 1, 0)
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err)
    assert (back.lineno, back.primitive, type(back.__cause__)) == (err.lineno, err.primitive, ZeroDivisionError)


def test_unknown_attribute_is_pythons_attribute_error_at_its_line():
    """Attribute reads are Python's getattr at run time (``np.finfo(t).eps``, ``eigh(a).eigenvalues``), so an
    attribute the object lacks is an ExecutionError at that line, chained to Python's AttributeError."""
    a = np.ones(3)
    with pytest.raises(px.ExecutionError) as err:
        px.compile(uses_unknown_attribute)(a)
    line, col = _position(uses_unknown_attribute, "a.frobnicate")
    assert (err.value.lineno, err.value.col) == (line, col)
    assert err.value.primitive == "getattr"
    assert isinstance(err.value.__cause__, AttributeError)
    assert str(err.value.__cause__) == "'numpy.ndarray' object has no attribute 'frobnicate'"


async def async_top(x):
    return x + 1


def test_async_function_is_a_compile_error():
    """Compiled, it would return its value where Python returns a coroutine: refused, at the ``async def``."""
    line, col = source_position(async_top, "async def")
    with pytest.raises(px.CompileError) as err:
        px.compile(async_top)(1)
    assert str(err.value).splitlines()[0] == (
        f"{FILE}:{line}:{col}: unsupported construct: async function (a compiled function runs to its result; call "
        "it from async code instead, e.g. in loop.run_in_executor)")


def _singular_then_mismatch(A, x, y):
    B = np.linalg.inv(A)  # a task (A is large): singular, Python stops here
    z = x * 2.0 + y  # a fused chain whose shapes do not broadcast
    return B, z


def test_the_first_failing_line_is_reported_when_a_fused_kernel_follows_a_failing_task():
    """Fused kernels run in the calling thread when their inputs are values, but not while a task is in flight: one
    that fails first must be the error, as in Python (a review found the fused chain's ValueError reported)."""
    A, x, y = np.zeros((300, 300)), np.ones(70_000), np.ones(70_001)
    with pytest.raises(np.linalg.LinAlgError):
        _singular_then_mismatch(A, x, y)
    f = px.compile(_singular_then_mismatch)
    assert "fused" in str(f.tree)
    line, _ = source_position(_singular_then_mismatch, "np.linalg.inv")
    with px.using(px.runtime.local(2)):
        for _ in range(3):
            with pytest.raises(px.ExecutionError) as e:
                f(A, x, y)
            assert isinstance(e.value.__cause__, np.linalg.LinAlgError) and e.value.lineno == line
