"""primitives/fused_update.py: in-place statements fused into one pass give what the same statements give in NumPy,
to the last bit, and fall back to NumPy where a pass element by element would not (shared memory, casts); the
optimizers' updates through it equal the in-place NumPy updates they replace."""
from __future__ import annotations

import copy

import numpy as np
import phylanx_py.primitives.fused_update as FU
import pytest

from phylanx_py import nn

MOMENTUM = (("add", ("multiply", ("arg", 2), ("arg", 4)), ("arg", 1)),  # v = v * m + g
            ("subtract", ("arg", 0), ("multiply", ("arg", 3), ("arg", 2))))  # p = p - lr * v
STATEMENTS = ((2, MOMENTUM[0]), (0, MOMENTUM[1]))


def numpy_momentum(p, g, v, lr, m):
    v *= m
    v += g
    p -= lr * v


def arrays(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (300, 129)])
def test_momentum_update_is_numpys_to_the_bit_and_runs_compiled(dtype, shape):
    p, g, v = arrays(shape, dtype)
    p2, v2 = p.copy(), v.copy()
    for _ in range(3):
        FU.fused_update(STATEMENTS, p, g, v, 0.01, 0.9)
        numpy_momentum(p2, g, v2, 0.01, 0.9)
    np.testing.assert_array_equal(v, v2)
    np.testing.assert_array_equal(p, p2)
    found = [hit for (stmts, sig), hit in FU._found.items() if stmts == STATEMENTS and sig[0] == np.dtype(dtype)]
    assert found and all(hit is not None for hit in found)  # the compiled kernel ran, not the NumPy fallback


def test_large_update_in_parallel_blocks_is_numpys(monkeypatch):
    monkeypatch.setenv("PHYLANX_NUM_THREADS", "2")
    monkeypatch.setattr(FU, "UPDATE_PARALLEL_MIN_ELEMENTS", 1 << 12)  # (the blocks' path, on small arrays)
    p, g, v = arrays((FU.UPDATE_PARALLEL_MIN_ELEMENTS + 3,), np.float32, seed=1)
    p2, v2 = p.copy(), v.copy()
    FU.fused_update(STATEMENTS, p, g, v, 0.5, 0.9)
    numpy_momentum(p2, g, v2, 0.5, 0.9)
    np.testing.assert_array_equal(p, p2)
    np.testing.assert_array_equal(v, v2)


def test_overlapping_inputs_take_numpys_statement_by_statement_answer():
    """x[1:] = x[1:] + x[:-1]: NumPy adds the old values; a pass element by element would carry a running sum."""
    x = np.arange(10.0)
    want = x.copy()
    want[1:] = x[1:] + x[:-1]
    FU.fused_update(((0, ("add", ("arg", 0), ("arg", 1))),), x[1:], x[:-1])
    np.testing.assert_array_equal(x, want)


def test_a_value_cast_into_its_target_is_numpys_same_kind_cast():
    """float32 v += float64 g computes in float64 and rounds into v, as ``v += g`` does."""
    p, _, v = arrays((50,), np.float32)
    g = np.random.default_rng(3).standard_normal(50) * 1e-3
    p2, v2 = p.copy(), v.copy()
    FU.fused_update(STATEMENTS, p, g, v, 0.1, 0.9)
    numpy_momentum(p2, g, v2, 0.1, 0.9)
    np.testing.assert_array_equal(v, v2)
    np.testing.assert_array_equal(p, p2)
    with pytest.raises(TypeError):  # float into int: NumPy refuses, and so does the fallback
        FU.fused_update(((0, ("add", ("arg", 0), ("arg", 1))),), np.zeros(4, np.int64), np.ones(4))


def _old_updates(opt, params, grads, state, step):
    """The optimizers' updates as they were written before fused_update: NumPy statements in place."""
    lr = opt.rate(step)
    for p, g, s in zip(params, grads, state):
        if isinstance(opt, nn.SGD):
            if opt.weight_decay:
                g = g + opt.weight_decay * p
            if opt.momentum:
                s *= opt.momentum
                s += g
                g = g + opt.momentum * s if opt.nesterov else s
            p -= lr * g
        elif isinstance(opt, nn.Adam):
            m, v = s
            c1, c2 = 1 - opt.beta1 ** (step + 1), 1 - opt.beta2 ** (step + 1)
            if opt.weight_decay:
                g = g + opt.weight_decay * p
            m *= opt.beta1
            m += (1 - opt.beta1) * g
            v *= opt.beta2
            v += (1 - opt.beta2) * g * g
            p -= lr * (m / c1) / (np.sqrt(v / c2) + opt.eps)
        else:
            sq, buf = s
            sq *= opt.rho
            sq += (1 - opt.rho) * g * g
            d = g / (np.sqrt(sq) + opt.eps)
            if opt.momentum:
                buf *= opt.momentum
                buf += d
                d = buf
            p -= lr * d


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opt", [nn.SGD(0.01), nn.SGD(0.01, momentum=0.9),
                                 nn.SGD(0.01, momentum=0.9, nesterov=True, weight_decay=1e-3), nn.Adam(1e-3),
                                 nn.Adam(1e-3, weight_decay=0.01), nn.RMSprop(1e-3), nn.RMSprop(1e-3, momentum=0.9)],
                         ids=repr)
def test_optimizers_equal_their_numpy_statements_to_the_bit(opt, dtype):
    rng = np.random.default_rng(0)
    shapes = [(40, 30), (30,), (3, 4, 5)]
    params = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ref = copy.deepcopy(params)
    state, ref_state = opt.init(params), opt.init(ref)
    for step in range(4):
        grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
        opt.update(params, grads, state, step)
        _old_updates(opt, ref, grads, ref_state, step)
    for a, b in zip(params, ref):
        assert a.dtype == dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opt", [nn.SGD(0.01, momentum=0.9),
                                 nn.SGD(0.01, momentum=0.9, nesterov=True, weight_decay=1e-3), nn.Adam(1e-3),
                                 nn.RMSprop(1e-3, momentum=0.9)], ids=repr)
def test_a_gradient_given_as_a_sum_of_parts_is_the_summed_gradients_update_to_the_bit(opt, dtype, parts,
                                                                                     monkeypatch):
    """What data-parallel ranks sharing memory give their optimizer (runtime/training/shard.py): their chunk of every
    rank's gradient, added in the update's own pass; the bits of np.add then += into a buffer, the update after."""
    monkeypatch.setattr(FU, "_found", {})
    rng = np.random.default_rng(1)
    p = rng.standard_normal(1001).astype(dtype)
    ref = p.copy()
    state, ref_state = opt.init([p]), opt.init([ref])
    for step in range(3):
        rows = [rng.standard_normal(1001).astype(dtype) for _ in range(parts)]
        total = np.add(rows[0], rows[1])
        for r in rows[2:]:
            total += r
        opt.update([p], [FU.Sum(rows)], state, step)
        opt.update([ref], [total], ref_state, step)
    np.testing.assert_array_equal(p, ref)
    # two kernels ran, not the NumPy fallback: the summed gradient's and the parts' (its inputs after the others)
    assert len(FU._found) == 2 and all(hit is not None for hit in FU._found.values())
    lengths = sorted(len(sig) for _, sig in FU._found)
    assert lengths[1] - lengths[0] == parts - 1


def test_sums_over_several_groups_are_the_summed_gradients_updates():
    """An optimizer's update of several parameters whose gradients are Sums: each parameter's update runs on its
    own (the one-call kernel over groups takes arrays) and reads its Sum's parts, with the bits of the summed
    gradients' update."""
    rng = np.random.default_rng(2)
    opt = nn.SGD(0.01, momentum=0.9)
    shapes = [(30, 20), (20,)]
    params = [rng.standard_normal(sh).astype(np.float32) for sh in shapes]
    ref = copy.deepcopy(params)
    state, ref_state = opt.init(params), opt.init(ref)
    for step in range(3):
        parts = [[rng.standard_normal(sh).astype(np.float32) for _ in range(2)] for sh in shapes]
        opt.update(params, [FU.Sum(p) for p in parts], state, step)
        opt.update(ref, [np.add(*p) for p in parts], ref_state, step)
    for a, b in zip(params, ref):
        np.testing.assert_array_equal(a, b)


def test_a_sum_is_not_a_target():
    p, g, v = arrays((5,), np.float64)
    with pytest.raises(ValueError, match="a Sum is an input of an update, not a target"):
        FU.fused_update(STATEMENTS, p, g, FU.Sum([v, v.copy()]), 0.01, 0.9)


def test_an_update_built_in_the_background_is_numpys_meanwhile_and_compiled_after(monkeypatch):
    # the default outside the suite (primitives/fused.py): NumPy's statements run until the kernel is built; a None
    # met while it builds is not remembered for these inputs, so the call after the build gets the kernel
    import phylanx_py.primitives.fused as F

    monkeypatch.setenv("PHYLANX_FUSE_WAIT", "0")
    monkeypatch.setenv("PHYLANX_NATIVE", "1")
    monkeypatch.setattr(FU, "_kernels", {})
    monkeypatch.setattr(FU, "_found", {})
    p, g, v = arrays((300, 129), np.float64, seed=3)
    p2, v2 = p.copy(), v.copy()
    FU.fused_update(STATEMENTS, p, g, v, 0.01, 0.9)
    numpy_momentum(p2, g, v2, 0.01, 0.9)
    assert not FU._found  # pending: not remembered
    assert F.wait_for_builds(60)
    FU.fused_update(STATEMENTS, p, g, v, 0.01, 0.9)
    numpy_momentum(p2, g, v2, 0.01, 0.9)
    np.testing.assert_array_equal(v, v2)
    np.testing.assert_array_equal(p, p2)
    assert list(FU._found.values()) and all(hit is not None for hit in FU._found.values())


def _groups(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    return [tuple(rng.standard_normal(s).astype(dtype) for _ in range(3)) for s in shapes]


def _groups_are_numpys(groups, want, steps):
    """``steps`` momentum updates of (p, g, v) ``groups`` in one call each equal NumPy's statements on ``want``
    (copies), group after group, to the bit; the one-call kernel ran."""
    for _ in range(steps):
        FU.fused_update_groups(STATEMENTS, [(p, g, v, 0.01, 0.9) for p, g, v in groups])
        for p, g, v in want:
            numpy_momentum(p, g, v, 0.01, 0.9)
    for got, ref in zip(groups, want):
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[2], ref[2])
    assert list(FU._found_groups.values()) and all(hit is not None for hit in FU._found_groups.values())


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_call_over_groups_is_numpys_per_group_and_runs_compiled(monkeypatch, dtype, threads):
    """Several parameters in one compiled call (an optimizer's update): with two threads the blocks of the whole
    run cut through the groups (the first group alone is past the parallel size), and each element is still
    updated once, as NumPy's statements group after group update it."""
    monkeypatch.setenv("PHYLANX_NUM_THREADS", threads)
    monkeypatch.setattr(FU, "_found_groups", {})
    monkeypatch.setattr(FU, "UPDATE_PARALLEL_MIN_ELEMENTS", 1 << 12)  # (the blocks' path, on small arrays)
    shapes = [(FU.UPDATE_PARALLEL_MIN_ELEMENTS // 100 + 7, 100), (13,), (5, 4, 3), (1,)]
    groups = _groups(shapes, dtype, seed=4)
    _groups_are_numpys(groups, [tuple(a.copy() for a in g) for g in groups], steps=2)


def test_groups_sharing_memory_run_group_after_group(monkeypatch):
    """The same array in two groups, or overlapping views of one buffer: one pass over the groups on two threads
    would update the shared elements from both threads at once; such groups run one after the other, as NumPy's
    statements do, and are never handed to the one-call kernel."""
    monkeypatch.setenv("PHYLANX_NUM_THREADS", "2")
    add = ((0, ("add", ("arg", 0), ("arg", 1))),)
    monkeypatch.setattr(FU, "UPDATE_PARALLEL_MIN_ELEMENTS", 1 << 12)
    n = FU.UPDATE_PARALLEL_MIN_ELEMENTS
    p, g1, g2 = np.zeros(n), np.ones(n), np.full(n, 2.0)
    buf = np.random.default_rng(5).standard_normal(2 * n)
    views = [(buf[:n], g1), (buf[n // 2:n // 2 + n], g2)]
    assert FU._groups_kernel(add, [(p, g1), (p, g2)]) is None
    assert FU._groups_kernel(add, views) is None
    assert FU._groups_kernel(add, [(np.zeros(n), g1), (np.zeros(n), g2)]) is not None  # distinct arrays: one call
    FU.fused_update_groups(add, [(p, g1), (p, g2)])
    np.testing.assert_array_equal(p, np.full(n, 3.0))
    want = buf.copy()
    want[:n] += 1
    want[n // 2:n // 2 + n] += 2
    FU.fused_update_groups(add, views)
    np.testing.assert_array_equal(buf, want)


def test_groups_with_read_only_gradients_are_numpys(monkeypatch):
    """Gradients in read-only memory (data-parallel training hands the summed gradient over so; another Numba
    type): compiled for them too, with the same answer."""
    monkeypatch.setattr(FU, "_found_groups", {})
    groups = _groups([(40, 30), (30,)], np.float32, seed=6)
    want = [tuple(a.copy() for a in g) for g in groups]
    for _, g, _ in groups:
        g.flags.writeable = False
    _groups_are_numpys(groups, want, steps=1)


def test_arrays_met_again_are_checked_again_for_what_changes_in_place(monkeypatch):
    """An optimizer updates the same parameters and buffers every step (their ownership checks are kept from the
    last call): a parameter made read-only since is refused as NumPy's ``p -= lr * v`` refuses it, and a new
    gradient that is one of the kept arrays takes the group-after-group path (NumPy's answer), not the one call."""
    monkeypatch.setattr(FU, "_found_groups", {})
    monkeypatch.setattr(FU, "_last_groups", {})
    groups = _groups([(40, 30), (30,)], np.float64, seed=7)
    want = [tuple(a.copy() for a in g) for g in groups]
    _groups_are_numpys(groups, want, steps=2)  # the second call meets the same arrays
    (p1, g1, v1), (p2, g2, v2) = groups
    shared = [(p1, g1, v1, 0.01, 0.9), (p2, p1[0], v2, 0.01, 0.9)]  # group 2's gradient reads group 1's parameter
    assert FU._groups_kernel(STATEMENTS, shared) is None
    (q1, h1, w1), (q2, _, w2) = want
    FU.fused_update_groups(STATEMENTS, shared)
    numpy_momentum(q1, h1, w1, 0.01, 0.9)
    numpy_momentum(q2, q1[0], w2, 0.01, 0.9)
    for got, ref in zip((p1, v1, p2, v2), (q1, w1, q2, w2)):
        np.testing.assert_array_equal(got, ref)
    assert FU._groups_kernel(STATEMENTS, [(p1, g1, v1, 0.01, 0.9), (p2, g2, v2, 0.01, 0.9)]) is not None
    p2.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        FU.fused_update_groups(STATEMENTS, [(p1, g1, v1, 0.01, 0.9), (p2, g2, v2, 0.01, 0.9)])
