"""Calls of functions whose bodies are statements in native kernels (runtime/native/expressions.py): inlined as
statements before the expression that calls them, with their names renamed per call; the plain function's answer
in every tier."""
from __future__ import annotations

import numpy as np
import prog_inline as P
import pytest
from helpers import check_against

import phylanx_py as px

pytestmark = pytest.mark.usefixtures("native_tier")  # off, default and forced (conftest.native_tier)


def _lines(f, marker):
    return [line for line in f.explain().splitlines() if marker in line]


CASES = [
    (P.flow, (3, 4, np.linspace(0.0, 1.0, 12) ** 2, np.zeros(12)), True),
    (P.twice, (np.arange(1.0, 6.0), 0.5), True),
    (P.in_a_condition, (np.array([0, 5, 1, 9, -2]),), False),
    (P.returns_early, (np.array([0.5, 2.0, 0.25]),), False),
]


@pytest.mark.parametrize("fn, args, native", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_calls_of_statement_bodies_give_the_plain_answer(fn, args, native, native_tier):
    f = px.compile(fn)
    for _ in range(2):
        check_against(f, fn, *args)
    if native_tier == "force":  # the caller's kernel (whole function or its loop); a callee's own loop may be native
        first = fn.__code__.co_firstlineno
        mine = [line for line in f.explain().splitlines() if any(f"prog_inline.py:{first + d} ->" in line
                                                                  for d in range(8))]
        assert mine and all(("-> native" in line) == native for line in mine), f.explain()
        if not native:
            assert all("a call of '_" in line for line in mine), f.explain()


def test_a_call_inside_a_larger_expression_is_not_inlined(native_tier):
    # its statements would run before the parts of the expression Python reads first (a review: 66.0 against 36.0)
    f = px.compile(P.read_then_call)
    for _ in range(2):
        check_against(f, P.read_then_call, np.arange(3.0))
    if native_tier == "force":
        assert "a call of '_bump', whose body is statements, inside a larger expression" in f.explain()


def test_an_inlined_body_that_changes_values_then_raises_changes_them_once(native_tier):
    plain_a, a = np.arange(3.0), np.arange(3.0)
    with pytest.raises(IndexError) as plain:
        P.changes_then_raises(plain_a, 5)
    f = px.compile(P.changes_then_raises)
    with pytest.raises(px.ExecutionError) as e:
        f(a, 5)
    assert str(e.value.__cause__) == str(plain.value)
    np.testing.assert_array_equal(a, plain_a)  # [1, 1, 2]: changed once, as Python leaves it
    np.testing.assert_array_equal(f(np.arange(3.0), 1), P.changes_then_raises(np.arange(3.0), 1))


def test_a_call_with_an_assignment_in_its_arguments_is_not_inlined(native_tier):
    # its arguments were bound before the rest of the expression was read (a review: 38.0 against 35.0)
    f = px.compile(P.walrus_argument)
    for _ in range(2):
        check_against(f, P.walrus_argument, np.array([1.0, 2.0, 0.5]))
    if native_tier == "force":
        assert "a call of '_sq' with an assignment expression in its arguments" in f.explain()
