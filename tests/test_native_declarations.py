"""A toy primitive declared once, with a native form and its native rules (primitives/registry.py's ``Lowering``),
in a registry of the test's own (test_declare.py's recipe): the native tier lowers it from that declaration alone,
and takes from it whether the call may raise (parallel.py: a loop calling it may run its iterations on several
threads only when it never raises) and the interval of its value (bounds.py: an index proven in bounds runs
unchecked). Nothing under runtime/ names it."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same
from phylanx_py.primitives import REGISTRY, Registry, lookup, scoped
from phylanx_py.primitives.registry import Lowering, register

import phylanx_py as px


def _make_step():
    def step(i):
        """An int index, unchanged (``+i``): its interval is its argument's."""
        return +i

    return step


step = _make_step()


def toy(**native_rules):
    """A registry over the real one holding ``toy.step``: the user's ``step`` is the primitive, written in a
    kernel as ``np.positive(i)``, with these rules of its native form."""
    reg = Registry(parent=REGISTRY)
    register("toy.step", step, registry=reg, obj=step, display="step",
             lowering=Lowering("np.positive({0})", **native_rules))
    return reg.freeze()


def same_interval(ops, i):
    return ops.interval(i)


# the declaration: never raises on a number, and its value lies where its argument's does
TOY = toy(raises=False, interval=same_interval)


def gather(x, out):
    for i in range(out.shape[0]):
        out[i] = x[step(i)] * 2.0 + 1.0
    return out


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv("PHYLANX_NATIVE", "force")


def run(registry):
    """``gather`` compiled under ``registry``, run natively (forced) against the plain function: (the compiled
    function, its kernel's entry)."""
    with scoped(registry):
        f = px.compile(gather)
        x = np.linspace(-1.0, 1.0, 300)
        assert_same(f(x, np.zeros(300)), gather(x, np.zeros(300)))
        assert_same(f(x, np.zeros(7)), gather(x, np.zeros(7)))  # fewer outputs than inputs: still in bounds
        (entry,) = [e for e in f._compile().whole.entries.values() if e.kernel is not None]
        return f, entry


def test_the_toy_runs_natively_with_its_declared_form(forced):
    f, entry = run(TOY)
    assert "-> native" in f.explain()
    assert "x[np.positive(i)]" in entry.source  # its template, proven in bounds: unchecked
    with scoped(TOY):
        assert lookup("toy.step").lowering.called == "np.positive"
    with scoped(TOY), pytest.raises(px.ExecutionError) as e:  # past the end: the plain function's error, there
        px.compile(gather)(np.zeros(3), np.zeros(5))
    assert isinstance(e.value.__cause__, IndexError) and e.value.filename == __file__


def test_its_interval_rule_proves_its_index_in_bounds(forced):
    _, proven = run(TOY)
    assert "# unchecked version" in proven.source and "x[np.positive(i)]" in proven.source
    _, unknown = run(toy(raises=False))  # the same primitive without the rule: every access checked
    assert "# unchecked version" not in unknown.source
    assert "x[_ix(np.positive(i), x.shape[0])]" in unknown.source


def test_its_raise_rule_decides_whether_the_loop_may_run_in_parallel(forced):
    _, pure = run(TOY)
    assert pure.serial_why in (None, "one thread"), pure.serial_why  # one core: no variant, whatever the loop
    _, raising = run(toy(interval=same_interval))  # declared as it defaults: may raise
    assert raising.parallel is None
    assert "a call that may raise (np.positive)" in raising.serial_why
