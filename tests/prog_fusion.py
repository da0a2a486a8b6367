"""Programs for tests/test_fusion.py: element-wise chains the fusion pass turns into one Fused node.

Line and column positions matter to the error tests (they look them up with helpers.source_position)."""
from __future__ import annotations

import numpy as np

LOG: list = []
G = np.linspace(-1.0, 1.0, 20_000)


def note(x):
    LOG.append("note")
    return x + 1.0


def gauss_sine(x):
    return np.exp(-x * x) * np.sin(x) + 2 * x - 1


def same_var_twice(x, y):
    return x * x + y * x - x


def global_twice(x):
    return G * x + G


def single_op(x):
    return x + 1.0


def impure_leaf(x):
    return note(x) * 2.0 + x


def impure_leaf_inside(x):
    return np.sin(x) * 2.0 + note(x) * x


def lambda_leaf(x):
    k = lambda t: t * 3.0
    return k(x) * 2.0 + x


def effect_after_failure(a, b):
    return (a * 2.0 + b) + note(a) * a


def effect_before_failure(a, b):
    return note(a) * 2.0 + (a * b + 1.0)


def two_groups(x, y):
    s = np.sqrt(np.abs(x)) * 2.0 + 1.0
    t = np.tanh(y) - y * 0.5
    return s.sum() + t.sum(), s * t


# ---- differential --------------------------------------------------------------------------------------
def arith(x, y):
    return (x + y) * (x - y) - 3 * x + y * y


def transcendental(x, y):
    return np.exp(-x * x) * np.sin(y) + np.tanh(x - y) * np.cos(x) - np.sqrt(np.abs(y)) / (np.abs(x) + 1.0)


def with_scalars(x, s, k):
    return (x * s + k) * 2 - s / (abs(x) + 1) + k * k


def chains(x, y, z):
    m = np.maximum(x, y) - np.minimum(y, z) * 2
    w = np.where(x > y, x * 2, y - z) + np.where(z <= 0, 1, z)
    c = (x < y) * 1.0 + (y >= z) * 2.0 - (x == z) * 4.0 + (x != y)
    return m, w, c, np.maximum(np.minimum(x, 0.5), -0.5) * 3 + 1


def comparisons(x, y):
    return (x * 2 < y + 1) == (y - x > 0)


def int_div_mod(x, y):
    return (x // y) * 2 + x % y - (x + 1) // 3 + (x * 2) % 5


def true_div(x, y):
    return x / y + y / 4 - 1


def powers(x):
    return x ** 2 + x * 3 - 1


def masks(m, x):
    return np.where(m, x, -x) * 2 + m * 1.5 + (m == (x > 0))


def bool_sum(m, n):
    return (m + n) * 3 + m * n


def nan_inf(x, y):
    return np.maximum(x, y) * 2 + np.minimum(x, y) - np.where(x > y, x, y) + (x == y) + np.exp(x) * 0.5


def unary(x):
    return -np.abs(x) * 2 + np.floor(x) - np.ceil(x * 0.5) + np.log1p(np.abs(x)) + np.expm1(x * 0.1)


def eq_const(x):
    return (x == 0.1) * 1.0 + x


def eq_scalar(x, s):
    return (x == s) * 1.0 + x


def exp_small_int(x):
    return np.exp(x) * 2.0 + 1


def complex_max(z, w):
    return np.maximum(z, w) * 2 + 1


def complex_lt(z, w):
    return (z < w) * 1.0 + 1


def with_list(x, lst):
    return x * 2.0 + lst - x


def sliced(x):
    return x[::-1] * 2.0 + x.T.sum(axis=1) - x[:, :1]


# ---- errors --------------------------------------------------------------------------------------------
def mismatch_add(a, b):
    return (a * 2.0) + b


def mismatch_inner(a, b):
    return 1.0 + np.sin(a) * b


# ---- more programs --------------------------------------------------------------------------------------
def loop_closure(x, n):
    def inner(y):
        return np.sqrt(np.abs(x * y)) + x - y

    acc = x * 0.0
    for i in range(n):
        acc = acc * 0.5 + inner(acc + i) * 0.25
    acc += x * 2.0 - 1.0
    return acc


def nan_in_where(x):
    return np.where(x > 0, x, np.nan) * 2.0 + 1


def inf_constant(x):
    return np.minimum(x * 2.0, np.inf) - 1


def big_int_constant(x):
    return x * 2**70 + 1.0


def big_int_arg(x, k):
    return x * k + 1.0


def sigmoid(t):
    return 1.0 / (1.0 + np.exp(-t))


def tanh_below(a, b):
    return ((np.tanh(b) + 0.0) * 1.0 - 0.0) < a  # five operations: enough to be fused
