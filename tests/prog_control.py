"""Programs for the differential tests: if/while/for, break/continue/return, assert."""
# ruff: noqa: E701, E702, B007, UP031, C416, SIM
from __future__ import annotations

import numpy as np

# ---- control flow ----------------------------------------------------------------------------------------


def classify(x):
    if x < 0:
        return "neg"
    elif x == 0:
        return "zero"
    elif x < 10:
        return "small"
    else:
        return "big"


def if_no_else(x):
    y = 1
    if x > 3:
        y = 2
    return y


def ternary(x):
    return x * 2 if x > 0 else -x


def while_else(n, stop):
    i = 0
    while i < n:
        if i == stop:
            break
        i += 1
    else:
        return "finished", i
    return "broke", i


def range_forms(n):
    out = []
    for i in range(n):
        out.append(i)
    for i in range(2, n):
        out.append(i * 10)
    for i in range(1, n, 2):
        out.append(i * 100)
    for i in range(n, -1, -2):
        out.append(-i)
    for i in range(0):
        out.append(None)
    return out


def iter_list(xs):
    total = 0
    for x in xs:
        total += x
    return total


def iter_tuple(t):
    out = ""
    for s in t:
        out = out + s
    return out


def iter_array_rows(A):
    rows = []
    for row in A:
        rows.append(row.sum())
    return rows


def iter_dict_keys(d):
    keys = []
    for k in d:
        keys.append(k)
    return keys


def iter_zip(xs, ys):
    out = []
    for x, y in zip(xs, ys):
        out.append(x * y)
    return out


def iter_enumerate(xs):
    out = []
    for i, x in enumerate(xs):
        out.append((i, x))
    for i, x in enumerate(xs, 10):
        out.append((i, x))
    return out


def iter_items(d):
    out = []
    for k, v in d.items():
        out.append(k + str(v))
    return out


def loop_variable_after(n):
    for i in range(n):
        pass
    return i


def find_in_grid(grid, target):
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            if v == target:
                return i, j
    return None


def return_in_while_in_for(n):
    for i in range(n):
        j = 0
        while True:
            j += 1
            if i * j > 6:
                return i, j
            if j > 3:
                break
    return -1, -1


def break_continue(n):
    out = []
    for i in range(n):
        if i % 2 == 0:
            continue
        if i > 7:
            break
        out.append(i)
    return out


def nested_break(n):
    pairs = []
    for i in range(n):
        for j in range(n):
            if j > i:
                break
            if (i + j) % 3 == 0:
                continue
            pairs.append((i, j))
    return pairs


def while_continue(n):
    i = 0
    odd = 0
    while i < n:
        i += 1
        if i % 2 == 0:
            continue
        odd += i
    return odd


def return_both_branches(x):
    if x > 0:
        return x
    else:
        return -x


def for_else(xs, target):
    for x in xs:
        if x == target:
            found = True
            break
    else:
        found = False
    return found


def pass_stmt(x):
    if x:
        pass
    else:
        x = 1
    for _ in range(2):
        pass
    return x


def assert_ok(x):
    assert x > 0, "x must be positive"
    assert x < 100
    return x


def assert_fails(x):
    assert x > 0, f"x must be positive, got {x}"
    return x


def assert_in_loop(A, n):  # (here, not in a test module: pytest rewrites the asserts of those)
    s = 0.0
    for i in range(n):
        x = A[i] * 2.0
        assert x != 6.0, "hit six"
        s += x
    return s


def raise_when_big(A):
    B = A + 1.0
    if B[0] > 100.0:
        raise ValueError(f"too big: {B[0]}")
    return B


def no_return(lst):
    lst.append(1)


def bare_return(x):
    if x:
        return
    return x


def loop_mutating_list(xs):
    for x in xs:
        if x < 3:
            xs.append(x + 10)
    return xs


def loop_index_update(lst):
    for i in range(len(lst)):
        lst[i] *= 2
    return lst


def nested_unpack_in_for(d):
    out = []
    for i, (k, v) in enumerate(d.items()):
        out.append(f"{i}:{k}={v}")
    return out


def range_step_variants(n):
    return list(range(n, 0, -1)), list(range(-n, n, 3)), list(range(0, n, n + 5)), len(range(1, 100, 7)), range(3)


def while_converge(x, tol):
    steps = 0
    while abs(x * x - 2.0) > tol:
        x = x - (x * x - 2.0) / (2.0 * x)
        steps += 1
    return x, steps


def early_exit_from_triple_loop(n):
    count = 0
    for i in range(n):
        for j in range(n):
            for k in range(n):
                count += 1
                if i + j + k == n:
                    return count, (i, j, k)
    return count, None


def else_after_continue(xs):
    out = []
    for x in xs:
        if x % 2:
            continue
        out.append(x)
    else:
        out.append("done")
    return out


def while_true_break(limit):
    n = 0
    while True:
        n += 3
        if n > limit:
            break
    return n


def wrap_around(i, k, n):
    return (i + k) % n


def clamp_step(i, k, n):
    return min(n - 1, max(0, i + k))


def zero_step(i, k, n):
    return (i + k) // (n - n)


def noisy_step(i, k, n):
    print("step", i)
    return (i + k) % n


def stamping_step(i, k, n):
    k[0] = i
    return i


def shifted(a, mode=wrap_around):
    """A function passed in (or its default), called in a loop and in a comprehension (numpy-benchmarks'
    local_maxima passes ``mode=wrap``)."""
    n = a.shape[0]
    out = np.zeros(n)
    for i in range(n):
        out[i] = a[mode(i, 1, n)]
    return out, tuple(mode(j, 2, n) for j in range(n))


def stamped(a, mode):
    marks = np.zeros(1, dtype=np.int64)
    total = 0.0
    for i in range(a.shape[0]):
        total += a[mode(i, marks, a.shape[0])]
    return total, marks
