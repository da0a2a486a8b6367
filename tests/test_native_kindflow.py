"""The native tier's typing fixpoint (runtime/native/kindflow.py ``settle``): what a lowering learns (a name that is
a Python scalar until a NumPy one is stored into it: an Either) is unioned into what the next lowering starts from,
all of it at once, and the first lowering that learns nothing new is the kernel."""
from __future__ import annotations

import numpy as np
from phylanx_py.runtime.native import kinds as K
from phylanx_py.runtime.native import whole_lower
from phylanx_py.runtime.native.kindflow import settle

import phylanx_py as px


def two_sums(a, b):
    s = 0.0
    t = 0
    for i in range(a.shape[0]):
        s += a[i]
        t += b[i]
    return s + t


def test_one_lowering_learns_every_either_and_the_next_is_the_kernel():
    wf = px.compile(two_sums)._compile().whole
    lowerings = []

    class Counted(whole_lower.FunctionLowerer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            lowerings.append(self)

    a, b = np.arange(4.0), np.arange(4)
    kinds = {p: K.of_value(v, p) for p, v in zip(wf.params, (a, b))}
    src, low = settle(Counted, wf.body, wf.params, kinds, [], frozenset(), ret=wf.ret, functions=wf.functions)
    # s (float, then np.float64) and t (int, then np.int64) both learned by the first lowering (a restart at each
    # took three lowerings); the second starts with both and learns nothing
    assert [sorted(x.learned) for x in lowerings] == [["s", "t"], []]
    assert low is lowerings[-1] and sorted(low.widened) == ["s", "t"]
    assert "max(__pxw_s, __pxw_t)" in src  # the result is NumPy's scalar when either flag says so


def test_the_kernel_of_two_eithers_gives_the_plain_answer_and_type(monkeypatch):
    monkeypatch.setenv("PHYLANX_NATIVE", "force")
    f = px.compile(two_sums)
    for a, b in ((np.arange(5.0), np.arange(5)), (np.arange(0.0), np.arange(0))):
        got, want = f(a, b), two_sums(a, b)
        assert got == want and type(got) is type(want)
    assert "-> native" in f.explain()
