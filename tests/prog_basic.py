"""Programs for the differential tests: literals, operators, assignment (a real file: the compiler reads source)."""
# ruff: noqa: E701, E702, B007, UP031, C416, SIM
from __future__ import annotations

# ---- literals and operators -------------------------------------------------------------------------------


def lit_int():
    return 42


def lit_float():
    return 2.5


def lit_bool():
    return True


def lit_none():
    return None


def lit_str():
    return "hello"


def lit_mixed():
    return 0, -1, 1.0e-3, False, None, "", "a'b", 10**20


def arith(a, b):
    return a + b, a - b, a * b, a / b, a // b, a % b, a**2, a**b


def arith_pow_neg(a):
    return a**-1, 2**-2, (-8) ** 2, 2**0.5


def arith_mixed_types(i, x):
    return i + x, i * x, i / i, i // x, x % i, True + 1, True + True, 3 * "ab"


def unary(a, b):
    return -a, +a, not a, ~a, not b, -b, +b


def unary_array(a, m):
    return -a, +a, ~m, ~(a > 0)


def compare_basic(a, b):
    return a < b, a <= b, a > b, a >= b, a == b, a != b


def compare_chained(a, b, c):
    return a < b <= c, a < b > c, a == b == c, 0 <= a < b < c < 100, a < b < c is not None


def _record(log, v):
    log.append(v)
    return v


def chain_call_once(x):
    log = []
    r = 0 < _record(log, x) <= 10
    return r, log


def chain_short_circuit(x):
    log = []
    r = 0 < x < _record(log, 10)
    return r, log


def compare_arrays(a, b):
    return a < b, a == b, (a <= b) & (b > 1)


def _boom():
    return 1 // 0


def or_default(x):
    return x or 5


def and_short(x):
    return x and _boom()


def or_short(x):
    return x or _boom()


def bool_operand_values(a, b):
    return a and b, a or b, (a and b) or "neither", [] or {} or 0, 1 and 2 and 3


def is_none(x):
    return x is None, x is not None, None if x is None else x + 1


def membership(xs, d, s):
    return 2 in xs, 7 not in xs, "k" in d, "z" not in d, "ell" in s, "q" in s, 3 in d.values()


# ---- assignment ------------------------------------------------------------------------------------------


def fib_unpack(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def nested_unpack(t):
    (a, (b, c)), d = t
    [e, f] = [d, a]
    return a + b * c - d, e, f


def aug_int(x):
    x += 3
    x -= 1
    x *= 4
    x //= 3
    x %= 5
    x **= 2
    x <<= 2
    x |= 1
    return x


def aug_float(x):
    x += 0.5
    x *= 3
    x /= 4
    x -= 1.25
    x //= 0.5
    return x


def aug_array_alias(a):
    b = a
    a += 1
    a *= 2
    return b, b is a


def aug_float_array_alias(a):
    b = a
    a /= 2
    a -= 0.25
    return b


def plain_binop_no_alias(a):
    b = a
    a = a + 1
    return a, b


def aug_list_alias(lst):
    other = lst
    lst += [1]
    lst += (2, 3)
    return other, other is lst


def aug_tuple_rebinds(t):
    u = t
    t += (9,)
    return t, u


def setitem_array(a, i, v):
    a[i] = v
    return a


def slice_aug(a):
    a[1:3] *= 2
    return a


def mask_assign(a):
    a[a > 2] = 0
    return a


def tuple_index_aug(a, i, j):
    a[i, j] += 1
    a[0, :] -= 5
    return a


def dict_setitem(d, k, v):
    d[k] = v
    d[k] += 1
    return d


def list_setitem(lst, i, v):
    lst[i] = v
    lst[-1] = lst[0]
    lst[1:2] = [7, 8, 9]
    return lst


def multi_target():
    a = b = 0
    a += 1
    return a, b


def multi_target_alias():
    a = b = []
    a.append(1)
    return b, a is b


def walrus(xs):
    if (n := len(xs)) > 2:
        return n * 10
    return n


def walrus_loop():
    total = 0
    i = 0
    while (i := i + 1) < 5:
        total += i
    return total, i


def annotated(x):
    y: int = x + 1
    return y


# ---- more operators and scalar semantics --------------------------------------------------------------------


def pow_negative_base(a):
    return a**0.5, (-8) ** (1 / 3), a**2, 2**-1


def big_ints(n):
    x = 2**n
    return x, x % 7, x // 3, -x // 7, x * x - 1, sum([2**62, 2**62]), x.bit_length()


def float_specials():
    inf = float("inf")
    nan = float("nan")
    return inf > 1e308, -inf < 0, nan == nan, nan != nan, inf - inf != inf - inf, 1e308 * 10


def string_operators(s, n):
    return s * n, s + "!", "%d items" % n, "%s-%s" % (s, n), s < "b", s in "abc", not s, not ""


def truthiness(xs, d, s):
    return not xs, not d, not s, bool(xs), bool(d), bool(0.0), bool(None), 1 if xs else 2


def compare_mixed(i, f):
    return i == f, i < f, 1 == 1.0, True == 1, (1, 2) < (1, 3), [1, 2] == [1, 2], "a" != "b", None == 0


def bitwise(a, b):
    return a & b, a | b, a ^ b, a << 3, a >> 1, ~b, -a >> 1


def chained_with_arrays_elementwise(a):
    return (0 < a) & (a < 3), a[(a > 0) & (a < 3)]


def unbound_local(flag):
    if flag:
        y = 1
    return y


def unpack_mismatch(xs):
    a, b = xs
    return a + b


def missing_key(d):
    return d["missing"]


def add_str_int(s):
    return s + 1


def raise_value_error(x):
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x


def chained_array_truth(a):
    return 0 < a < 3


def constant_membership():
    return "a" in "abc", "x" not in "xyz", "ab" in "b", "" in "q"
