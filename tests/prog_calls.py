"""Programs for the differential tests: calls, lambdas, closures, builtins, lists/tuples/dicts."""
# ruff: noqa: E701, E702, B007, UP031, C416, SIM
from __future__ import annotations

import math

import numpy as np
import prog_config

import phylanx_py as px

# ---- calls -------------------------------------------------------------------------------------------------


def _kw(a, b=2, *, c=3):
    return a * 100 + b * 10 + c


def calls_kw(x):
    return _kw(x), _kw(x, 5), _kw(a=x, b=1), _kw(x, c=9), _kw(b=4, a=x, c=0)


def defaults_entry(a, b=10, *, scale=2):
    return (a + b) * scale


def kwonly_required(a, *, key):
    return a, key


def fib_rec(n):
    return n if n < 2 else fib_rec(n - 1) + fib_rec(n - 2)


def factorial(n):
    if n <= 1:
        return 1
    return n * factorial(n - 1)


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


def even_odd(n):
    return is_even(n), is_odd(n)


@px.compile
def compiled_square(x):
    return x * x


def calls_compiled(x):
    return compiled_square(x) + 1


def _helper_norm(v):
    return np.sqrt(np.sum(v * v))


def _helper_normalize(v):
    return v / _helper_norm(v)


def calls_transitive(v):
    return _helper_normalize(v), _helper_norm(v)


def lambda_assigned(x):
    f = lambda y: y * 3 + x
    return f(2)


def lambda_immediate(x):
    return (lambda y: y + 1)(x)


def lambda_default(x):
    k = 5
    f = lambda y, k=k: y * k
    k = 100
    return f(x), f(x, 2)


def closure_late_binding(x):
    k = 5
    f = lambda y: y * k
    k = 100
    return f(x)


def nested_def(n):
    total = 0

    def add(v, w=1):
        return v + n * w

    for i in range(3):
        total += add(i)
    return total, add(1, w=10)


def nested_def_recursive(n):
    def countdown(k):
        return 0 if k == 0 else k + countdown(k - 1)

    return countdown(n)


def _make_adder(k):
    def add(v):
        return v + k

    return add


def closure_factory(x):
    add10 = _make_adder(10)
    add_x = _make_adder(x)
    return add10(x), add_x(1)


def closure_reads_updated(x):
    vals = []

    def push(v):
        vals.append(v * x)

    push(1)
    push(2)
    return vals


def apply_fn(f, x):
    return f(x)


def apply_twice(f, x):
    return f(f(x))


def map_with(f, xs):
    return [f(x) for x in xs]


def sort_with_key(xs):
    return sorted(xs, key=lambda t: -t)


def double(x):
    return 2 * x


# ---- builtins --------------------------------------------------------------------------------------------


def builtins_numeric(xs):
    return len(xs), abs(-3), abs(-2.5), min(xs), max(xs), sum(xs), min(3, 1, 2), max(2.5, 1), sum(xs, 10)


def builtins_conversions(x):
    return int(x), float(3), bool(x), int("12"), float("1.5"), bool(0), int(-2.7), int(True), float(x)


def builtins_containers(xs):
    return (list(range(4)), tuple(xs), dict(a=1, b=2), dict([(1, 2)]), list(zip(xs, xs)),
            list(enumerate(xs, 1)), sorted(xs), sorted(xs, reverse=True), list(reversed(xs)), list(), tuple())


def builtins_misc(x):
    return (isinstance(x, int), isinstance(x, (float, str)), isinstance(x, bool), round(x / 3, 2), round(2.5),
            round(7.456, 1), any([0, x]), all([1, x]), any([]), all([]), isinstance([x], list))


def builtins_on_arrays(a):
    return len(a), isinstance(a, np.ndarray), sum(a), min(a), max(a), abs(a), list(a), round(float(a[0]), 1)


def printing(x, name):
    print("value", x)
    print(name, x * 2, sep="-", end="!\n")
    print()
    print([x, name], {"k": x})
    return x


# ---- lists, tuples, dicts ------------------------------------------------------------------------------


def literals_containers(x):
    return [1, x, [2]], (x,), (), {"a": x, 1: [x]}, {1, 2, x}, [], {}


def listcomp_filter(xs):
    return [x * 2 for x in xs if x % 2 == 0]


def listcomp_two_filters(xs):
    return [x for x in xs if x > 1 if x < 5]


def listcomp_multi(n):
    return [(i, j) for i in range(n) for j in range(i) if (i + j) % 2 == 1]


def listcomp_shadow(x):
    return [x for x in x]


def listcomp_shadow_outer(x):
    y = [x * 2 for x in x]
    return y, x


def listcomp_captures(xs, k):
    return [x * k for x in xs], [[k * i + j for j in range(2)] for i in range(3)]


def dict_comp(xs):
    return {x: x * x for x in xs if x != 2}


def set_comp(xs):
    return {x % 3 for x in xs}


def genexp_args(xs):
    return sum(x * x for x in xs), max(x - 1 for x in xs), any(x > 3 for x in xs), list(x for x in xs if x)


def list_methods(lst):
    lst.append(4)
    lst.extend([5, 6])
    last = lst.pop()
    first = lst.pop(0)
    lst.insert(1, 99)
    return lst, last, first


def list_ops(xs):
    return xs + [1], xs * 2, xs[1:], xs[::-1], xs[-1], len(xs[:0]), xs.index(3), xs.count(1)


def dict_methods(d):
    got = d.get("a"), d.get("zz", -1), d.get("zz"), list(d.keys()), list(d.values()), list(d.items())
    d["new"] = 5
    d["a"] = d["a"] + 1
    return got, d


def tuple_ops(t):
    return t + (1,), t[0], t[1:], len(t), t * 2


def string_ops(s):
    return s.upper(), s.split(","), "-".join(["a", s]), s[1:3], s + "!", len(s), s.replace("a", "b")


def fstrings(x, name):
    return f"{name}: {x}", f"{x:.3f}", f"{name!r}", f"{x * 2:>8}|", f"{{literal}} {x}", f"{x=}"


def nested_containers(n):
    grid = [[0] * n for _ in range(n)]
    for i in range(n):
        grid[i][i] = i + 1
    index = {"rows": grid, "total": sum(sum(r) for r in grid)}
    return index


SCALE = 3
HISTORY = []


def reads_global(x):
    return x * SCALE


def appends_to_global(x):
    HISTORY.append(x)
    return len(HISTORY)


def default_from_global(x, k=SCALE):
    return x * k


def shadow_builtins(xs):
    len = 3
    max = -1
    min = lambda a, b: a
    return len, max, min(4, 5), sum(xs)


def map_filter(xs):
    return list(map(lambda v: v + 1, xs)), list(filter(lambda v: v % 2 == 0, xs)), list(map(double, xs))


def min_max_key(pairs):
    return max(pairs, key=lambda t: t[1]), min(pairs, key=lambda t: t[0]), max([], default=-1)


def bound_method_as_key(d):
    return sorted(d, key=d.get)


def method_as_value(words):
    up = str.upper
    return [up(w) for w in words], list(map(str.lower, words))


def walrus_in_comprehension(xs):
    ys = [y for x in xs if (y := x * 2) > 2]
    return ys, y


def comprehension_does_not_leak(xs):
    x = "outer"
    squares = [x * x for x in xs]
    return x, squares


def nested_closure_counter(n):
    counts = [0]

    def bump(k):
        counts[0] += k
        return counts[0]

    def run():
        for i in range(n):
            bump(i)
        return counts[0]

    return run(), counts


def late_binding_def(x):
    def get():
        return value * 2

    value = x
    first = get()
    value = x + 1
    return first, get()


def closures_in_loop(n):
    fs = []
    for i in range(n):
        fs.append(lambda i=i: i * 10)
    late = [lambda: i for i in range(n)]  # noqa: B023 - late binding on purpose
    return [f() for f in fs], [f() for f in late]


def recursive_sum(xs):
    if not xs:
        return 0
    return xs[0] + recursive_sum(xs[1:])


def ackermann(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ackermann(m - 1, 1)
    return ackermann(m - 1, ackermann(m, n - 1))


def deep_recursion(n):
    return 0 if n == 0 else 1 + deep_recursion(n - 1)


def compiled_with_kwargs(x):
    return compiled_affine(x, b=1.5), compiled_affine(a=2, x=x)


@px.compile
def compiled_affine(x, a=2, b=0):
    return a * x + b


def dict_building(keys, vals):
    d = dict(zip(keys, vals))
    d.update({"extra": 0})
    inv = {v: k for k, v in d.items()}
    return d, inv, len(d), sorted(d.items()), d.pop("extra"), d.setdefault("new", 9), d


def list_misc(xs):
    ys = xs[:]
    ys.sort()
    ys.reverse()
    zs = sorted(xs) + list(reversed(xs))
    ys.remove(ys[0])
    return ys, zs, xs, [0] * 3, [[0] * 2] * 2, ys.copy() is ys


def math_module(x):
    return math.sqrt(x), math.floor(x / 3), math.pi, math.isclose(0.1 + 0.2, 0.3), math.log(x, 2), math.inf > x


def round_variants(x):
    return round(x), round(x, 1), round(-x), round(2.5), round(3.5), round(np.float64(x), 2), round(7, -1)


# ---- scoping ------------------------------------------------------------------------------------------------


def shadow_in_inner_def(x):
    def inner():
        x = 100
        return x

    return inner(), x


def lambda_param_shadows(x):
    f = lambda x: x * 2
    return f(5), x


def comprehension_nested_reference(n):
    return [[i * j for j in range(i)] for i in range(n)]


def walrus_in_nested_comprehension(xs):
    def g():
        return [(t := x) for x in xs], t

    return g()


def closure_sees_later_assignment():
    count = 0

    def inc():
        return count + 1

    count = 5
    return inc()


def nested_default_evaluated_at_def(x):
    def f(a, b=x * 2):
        return a + b

    x = 1000
    return f(1)


def recursion_with_accumulator(n, acc):
    if n == 0:
        return acc
    acc.append(n)
    return recursion_with_accumulator(n - 1, acc)


def nested_kwonly():
    def f(a, *, b=2, c):
        return a + b * c

    return f(1, c=3), f(1, b=0, c=5)


def _positional_only(a, b, /, c=3):
    return a + b + c


def calls_positional_only(x):
    return _positional_only(x, 2), _positional_only(x, 2, c=0)


def python_misc(xs):
    return (min([], default=None), sorted(["b", "A", "a"]), sum([[1], [2]], []), list(enumerate("ab", start=5)),
            abs(-0.0), range(5)[-1], xs[-1:], list(zip(xs, "abc", range(10))))


def reads_module_attribute(x):
    return x * prog_config.SCALE, len(prog_config.TABLE)
