"""Loops for the native tier's tests: each is where Numba's semantics differ from NumPy's or Python's."""
import numpy as np


def u8_add(a):
    for i in range(len(a)):
        a[i] = a[i] + 100  # NumPy 2: uint8 + 100 stays uint8 and wraps
    return a


def i32_product(a):
    acc = a[0]
    for i in range(1, len(a)):
        acc = acc * a[i]  # np.int32 * np.int32 wraps in int32
    return acc


def fnv_hash(data):
    h = 1469598103934665603
    for x in data:
        h = (h ^ int(x)) * 1099511628211  # a Python int: past 2**63 it grows, it does not wrap
    return h


def fnv_hash64(data):
    h = 1469598103934665603
    for x in data:
        h = ((h ^ int(x)) * 1099511628211) % 18446744073709551616
    return h


def ratios(a):
    out = np.zeros(len(a))
    for i in range(1, len(a)):
        out[i] = a[i] / a[i - 1]  # NumPy scalars: inf or nan with a warning
    return out


def python_division(n, d):
    s = 0.0
    for i in range(n):
        s = s + 1.0 / (d - i)  # Python floats: ZeroDivisionError
    return s


def read_past_end(a):
    s = 0.0
    for i in range(len(a)):
        s += a[i + 1]
    return s


def tanh_count(a):
    c = 0
    for i in range(len(a)):
        if np.tanh(a[i]) >= 1.0:  # tanh(19.0) is 1.0 in NumPy, 1 - 2**-53 in Numba
            c += 1
    return c


def tanh_store(a):
    out = np.zeros(len(a))
    for i in range(len(a)):
        out[i] = np.tanh(a[i])
    return out


def row_sums(x):
    out = np.zeros(x.shape[0], dtype=np.float32)
    for i in range(x.shape[0]):
        out[i] = np.sum(x[i])  # float32, pairwise in NumPy
    return out


def swap_sweeps(a, b, steps):
    for _ in range(steps):
        for i in range(1, len(a) - 1):
            b[i] = 0.5 * (a[i - 1] + a[i + 1])
        a, b = b, a
    return a, b


def over_list(items):
    s = 0
    for x in items:
        s += x
    return s


def float32_mix(a):
    s = np.float32(0)
    for i in range(len(a)):
        s = s + a[i] * 0.1  # NEP 50: 0.1 becomes float32 first
    return s


def mixed_kinds(n):
    s = 0
    for _ in range(n):
        s = s + 0.5  # int, then float: stays interpreted
    return s


def accumulate(a, k):
    s = 0.0
    c = 0
    for i in range(len(a)):
        s += a[i]  # a Python float until the first store of an np.float64
        c += k[i]
    return s, c, s / 1.0


def offset_store(a, k):
    for i in range(len(a)):
        a[i] = i + k  # i + k is a Python int: past 2**63 NumPy raises storing it
    return a


def shift_left(a, b):
    for i in range(len(b)):
        b[i] = a[i + 1] * 2.0  # the last i reads past a's end, after b[:-1] was written
    return b


def read_then_loop(a, b):
    first = a[10]  # may raise before anything changed: the interpreter's own error
    for i in range(len(b)):
        b[i] = first + i
    return b


def loop_then_read(a, b):
    for i in range(len(b)):
        b[i] = a[i] * 2.0
    return b[10]  # may raise after b changed: the whole function stays interpreted


def two_loops(a, b):
    for i in range(len(b)):
        b[i] = a[i] + 1.0
    s = 0.0
    for i in range(len(b)):
        s += b[i + 1]  # reads past the end in the second loop
    return s


def shift_by_shape(a, b):
    n = a.shape[0]
    for i in range(n - 1):
        b[i] = a[i + 1] - a[i]
    return b


def first_n(a, b, n):
    for i in range(n):  # in bounds when n <= len(a), len(b): the unchecked version; else the checked one
        b[i] = a[i] * 2.0
    return b


def bump_then_first_n(a, b, n):
    a[0] = a[0] + 1.0  # the caller's array changes before the loop: a failed test cannot rerun the call
    for i in range(n):
        b[i] = a[i] * 2.0
    return b


def bump_then_first_k(a, b, n):
    a[0] = a[0] + 1.0
    k = n + 0  # bound after the change: the loop's test reads a value the kernel's start does not fix
    for i in range(k):
        b[i] = a[i] * 2.0
    return b


def wrap_left(a, b):
    for i in range(len(a)):
        b[i] = a[i - 1]  # i - 1 = -1 reads a's last element, as NumPy does
    return b


def guarded_neighbours(a, b):
    n = len(a)
    for i in range(n):
        if i + 1 < n:  # the branch's condition keeps a[i + 1] in bounds
            b[i] += a[i + 1]
        if i - 1 >= 0 and i < n - 1:
            b[i] -= a[i - 1]
    return b


def bump_past(a, k):
    for i in range(len(a)):
        a[i + k] += 1.0  # a[k] += v keeps the array and key in temporaries: still checked
    return a


def update_rows_in_place(alpha, beta, C, A):
    """In-place updates of row slices, whole rows and elements (NPBench's syrk, and more)."""
    for i in range(A.shape[0]):
        C[i, :i + 1] *= beta
        for k in range(A.shape[1]):
            C[i, :i + 1] += alpha * A[i, k] * A[:i + 1, k]
        C[i] -= 0.5
        C[i, 0] += 1.0
        C[i, 1:] += C[i, :-1]  # the operand overlaps the updated view: NumPy reads a copy
    return C


def rows_from_products(A, B, C, D, k):
    """Arrays that are not element-wise stored into views: a row, a block of the same shape, a row broadcast down
    a block, a row into a block (more dimensions), and ``k`` rows into 2 (they do not fit when ``k`` is not 2)."""
    for i in range(A.shape[0]):
        C[i, :] = A[i, :] @ B
        C[i:i + 1, :] = A[i:i + 1, :] @ B + 1.0
        D[:, :] = A[i:i + 1, :] @ B
        D[1:, :] = A[i, :] @ B - 1.0
        D[1:, :] = A[:k, :] @ B
    return C, D


def lower_triangle_sum(A):
    n = A.shape[0]
    s = 0.0
    for i in range(n):
        for j in range(i + 1):
            s += A[i][j]  # A[i][j]: A's second dimension, j <= i < n
    return s


def fresh_then_read(a):
    b = np.zeros(3)
    b[0] = a[0]  # a store into an array made here: nothing the caller sees
    first = a[5]  # may raise: the call can still rerun interpreted
    for i in range(3):
        b[i] += first
    return b


def halvings(x):
    total = 0
    steps = 0
    while x != 0 and steps < 70:
        total += x - 1  # x - 1 cannot overflow while x >= 0, which x // 2 keeps
        x = x // 2
        steps += 1  # a counter: no check
    return total


def popcount(values):
    total = 0
    for v in values:
        x = int(v)
        while x:
            x &= x - 1
            total += 1
    return total


def abs_sum(values):
    total = 0
    for v in values:
        total += abs(int(v))  # abs(-2**63) is 2**63 for a Python int: past int64
    return total


def quotient_sum(values, d):
    total = 0
    for v in values:
        total += int(v) // d  # -2**63 // -1 is 2**63: past int64
    return total


def remainders(a, b, c):
    for i in range(a.shape[0]):
        c[i] = np.remainder(a[i], b[i]) + np.mod(a[i], b[i])
    a %= b  # on int64 -2**63 % -1 (0 in NumPy), Numba's np.remainder kills the process
    return a, c


def int_powers(a, b):
    out = np.zeros(a.shape[0], dtype=np.int64)
    for i in range(a.shape[0]):
        out[i] = a[i] ** b[i]  # NumPy raises for a negative exponent; Numba would give 0
    return out


def int_squares(a):
    out = np.zeros(a.shape[0], dtype=np.int64)
    for i in range(a.shape[0]):
        out[i] = a[i] ** 2
    a **= 2
    return out, a


def numpy_floordiv(a, b, c, d, e):
    for i in range(a.shape[0]):
        c[i] = a[i] // b[i]  # NumPy int64: -2**63 // -1 wraps to -2**63 (Numba's // gives 0)
        d[i] = np.floor_divide(a[i], b[i])
    for _ in range(2):
        e[:] = a // b
        a //= b
    return a, c, d, e


def shifts(a, s, out):
    acc = 0
    for i in range(a.shape[0]):
        x = int(a[i])
        k = int(s[i])
        acc += (x >> k) + (x >> 70) + (x >> 3)  # Python: a count past 63 gives 0 or -1
        out[i] = (a[i] >> s[i]) + (a[i] << s[i])  # NumPy int64: a count outside [0, 64) gives 0 (or -1)
    out += (a >> s) + (a << s)
    a >>= s
    return acc, out, a


def store_floats(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i] * 2.0  # NumPy: NaN, inf or past int64 raise; Numba's cast would store -2**63
    return out


def scaled_sum(a, s):
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i] * s
    return total


def damp_by_items(items, a):
    for x in items:  # over a list: the native tier takes no loop over lists
        for i in range(a.shape[0]):
            a[i] = a[i] * 0.5 + x
    return a


def sums_by_pairs(n, pairs):
    total = 0
    for i in range(n):
        for p in pairs:  # over a list: the native tier declines it each time it starts
            total += p * i
    return total


# Views written in a checked kernel (a Python int that may pass 2**63), by indices the kernel's source cannot tell
# from an element read: its caller must copy the array, so the rerun after an overflow starts from its values.
def bump_none_view(p, n):
    h = 1
    for i in range(n):
        k = None
        v = p[k]  # a (1, len(p)) view
        v[0, 0] = v[0, 0] + 1
        h = h * 1000003 + i
    return h


def bump_tuple_none_view(p, n):
    h = 1
    for i in range(n):
        k = (None,)
        v = p[k]
        v[0, 0] = v[0, 0] + 1
        h = h * 1000003 + i
    return h


def bump_row_none_view(p, n):
    h = 1
    for i in range(n):
        k = None
        v = p[0, k]  # a (1, columns) view of row 0
        v[0, 0] = v[0, 0] + 1
        h = h * 1000003 + i
    return h


def bump_empty_key_view(p, idx, n):
    h = 1
    for i in range(n):
        v = p[idx]  # idx = (): the whole array, a view
        v[0] = v[0] + 1
        h = h * 1000003 + i
    return h


def scatter_add(idx, counts):
    for i in range(idx.shape[0]):
        counts[idx[i]] += 1
    return counts


def csr_rows(indptr, indices, data, x, y):
    for i in range(y.shape[0]):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * x[indices[k]]
        y[i] = s
    return y


def rewrite_then_scatter(idx, counts):
    for i in range(idx.shape[0]):
        idx[i] = idx[i] * 3
        counts[idx[i]] += 1
    return counts


def gap_reads(x, idx):
    s = 0.0
    for i in range(idx.shape[0] - 1):
        s += x[idx[i + 1] - idx[i]]
    return s


def offset_reads(x, idx):
    s = 0.0
    for i in range(idx.shape[0]):
        s += x[idx[i] - 50]
    return s


def shifted_counts(base, off, hist):
    for i in range(base.shape[0]):
        hist[base[i] + (off[i] + 1)] += 1.0
    return hist


def from_far_start(x, idx, m):
    s = 0.0
    for k in range(idx[0] + 1024 * m, x.shape[0]):
        s += x[k]
    return s


def window_sum(x, idx, j):
    s = 0.0
    for k in range(idx[j], idx[j] + 4):
        s += x[k]
    return s


def four_from(x, idx, j):
    s = 0.0
    for i in range(4):
        s += x[idx[j + i]]
    return s


def complex_quotients(a, b, out):
    for i in range(out.shape[0]):
        out[i] = a[i] / b[i]
    return out


def running_best(a, out):
    best = a[0]
    count = 0
    for i in range(a.shape[0]):
        if a[i] > best:
            best = a[i]
            count += 1
        out[i] = best
    return best * 10 + count


def two_nests(a, b):
    s = 0.0
    for i in range(b.shape[0]):
        s += a[i]
    for i in range(b.shape[0]):
        b[i] = a[i] * s
    return b, s


# matrix products inside loops (native: Numba's np.dot; inexact, so stored but never compared)
def cholesky_dot(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= np.dot(A[i, :j], A[j, :j])
            A[i, j] /= A[j, j]
        A[i, i] -= np.dot(A[i, :i], A[i, :i])
        A[i, i] = np.sqrt(A[i, i])
    return A


def lu_matmul(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            A[i, j] -= A[i, :i] @ A[:i, j]
    return A


def matvec_steps(M, x, steps):
    for _ in range(steps):
        y = np.matmul(M, x)
        x = y / np.sqrt(np.dot(y, y))
    return x


def products_of_blocks(A, B, out):
    for k in range(out.shape[0]):
        out[k] = A[k] @ B
    return out


def dot_compared(a, b):
    c = 0
    for i in range(a.shape[0]):
        if np.dot(a[i], b) > 0.5:
            c += 1
    return c


def _doubled(x):
    # a return inside an ``if`` and another at the end: a kernel inlines neither form (one returned expression, or
    # statements ending in the only return), so the programs calling this one are not whole-function kernels (they
    # test the loop tier)
    if x.shape[0] == 0:
        return x * 2.0
    y = x * 2.0
    return y


def rebound_targets(x):
    """Two loops bind ``j`` in turn and nothing reads the value either leaves (the call of ``_doubled`` keeps the
    whole-function tier out: these are the loop tier's)."""
    y = _doubled(x)
    for j in range(1, x.shape[0]):
        y[j] = y[j] + 0.5 * y[j - 1]
    for j in range(x.shape[0] - 2, -1, -1):
        y[j] = y[j] - 0.25 * y[j + 1]
    return y


def target_read_after(x, n):
    y = _doubled(x)
    j = -1
    for j in range(n):
        y[j] += 1.0
    return y, j


def target_maybe_unbound(x, n):
    y = _doubled(x)
    for j in range(n):
        y[j] += 1.0
    return y[0] + j


def prefix_sums(x):
    y = x * 1.0  # with every array operation a task (inline_elements=1), ``y`` is a future when the loop starts
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] + x[i]
    return _doubled(y)


def cumulate(x):
    for i in range(1, x.shape[0]):
        x[i] += x[i - 1]
    return x


def rebound_temporaries(x):
    """Each loop binds ``t`` and ``u`` before reading them and the next loop binds them again (NPBench's vadv):
    neither loop takes them as arguments."""
    y = _doubled(x)
    for k in range(1):
        t = 0.5 * y[k + 1]
        u = t * 2.0
        y[k] = t + u
    for k in range(1, x.shape[0] - 1):
        t = 0.25 * (y[k - 1] + y[k + 1])
        if t > 0.5:
            u = t
        else:
            u = -t
        y[k] = t - u * 0.5
    return y


def temporary_read_by_later_loop(x):
    y = _doubled(x)
    for i in range(3):
        t = y[i] * 2.0
        y[i] = t
    for i in range(3, 5):
        y[i] = t + y[i]
        t = y[i]
    return y


def temporary_through_empty_loop(x, n):
    y = _doubled(x)
    for i in range(3):
        t = y[i] * 2.0
    for _ in range(n):
        t = 1.0
    return y + t


def temporary_bound_on_one_path(x):
    y = _doubled(x)
    t = 0.0
    for i in range(x.shape[0]):
        if y[i] > 1.0:
            t = y[i]
        y[i] = t
    for i in range(2):
        t = 3.0
        y[i] += t
    return y


DAMPING = 0.5  # module data globals that loops read (tests change them between calls)
WEIGHTS = np.array([0.25, 0.5, 0.25])


def damped_smoothing(x):
    y = _doubled(x)
    for i in range(1, x.shape[0] - 1):
        y[i] = DAMPING * (WEIGHTS[0] * y[i - 1] + WEIGHTS[1] * y[i] + WEIGHTS[2] * y[i + 1])
    return y


def scale_into_global(x):
    y = _doubled(x)
    for i in range(WEIGHTS.shape[0]):
        WEIGHTS[i] = WEIGHTS[i] * y[i]
    return y


def damped_whole(x):
    # the same loop in a function the whole-function tier takes (no call of _doubled): the globals are its
    # kernel's parameters, read at each call
    y = x * 2.0
    for i in range(1, x.shape[0] - 1):
        y[i] = DAMPING * (WEIGHTS[0] * y[i - 1] + WEIGHTS[1] * y[i] + WEIGHTS[2] * y[i + 1])
    return y


def whole_reads_missing_global(x):
    y = x * 2.0
    for i in range(x.shape[0]):
        y[i] += NOT_DEFINED_YET  # noqa: F821 - a test defines it, then deletes it
    return y


def reads_missing_global(x):
    y = _doubled(x)
    for i in range(x.shape[0]):
        y[i] += NOT_DEFINED_YET  # noqa: F821 - a test defines it, then deletes it
    return y


# NEP 50: a Python int operand of small-int arithmetic takes the other operand's dtype (uint8 ^ int is uint8);
# NumPy raises OverflowError when it does not fit, and compares it exactly
def crc16(data, poly=0x8408):
    crc = 0xFFFF
    for b in data:
        cur_byte = 0xFF & b
        for _ in range(0, 8):
            if (crc & 0x0001) ^ (cur_byte & 0x0001):
                crc = (crc >> 1) ^ poly
            else:
                crc >>= 1
            cur_byte >>= 1
    crc = (~crc & 0xFFFF)
    crc = (crc << 8) | ((crc >> 8) & 0xFF)
    return crc & 0xFFFF


def small_int_plus_int(a, k):
    for i in range(len(a)):
        a[i] = a[i] + k  # k outside the dtype's range: OverflowError
    return a


def small_int_below_int(a, k):
    c = 0
    for i in range(len(a)):
        if a[i] < k:  # exact, whatever k
            c += 1
    return c


# a 1-D array indexed by an int array (NPBench's spmv: uint32 CSR indices); the dtype of an array as an argument
def spmv(A_row, A_col, A_val, x):
    y = np.empty(A_row.size - 1, A_val.dtype)
    for i in range(A_row.size - 1):
        cols = A_col[A_row[i]:A_row[i + 1]]
        vals = A_val[A_row[i]:A_row[i + 1]]
        y[i] = vals @ x[cols]
    return y


def gather_sum(x, idx):
    s = 0.0
    for k in range(3):
        g = x[idx]
        s += g[k]
    return s


def scatter_store(x, idx):
    for k in range(2):
        x[idx] = k
    return x


# arrays moved, copied or allocated in a loop, any dtype: np.flip (a view), .copy(), np.copy, np.*_like
def durbin(r):
    y = np.empty_like(r)
    alpha = -r[0]
    beta = 1.0
    y[0] = -r[0]
    for k in range(1, r.shape[0]):
        beta *= 1.0 - alpha * alpha
        alpha = -(r[k] + np.dot(np.flip(r[:k]), y[:k])) / beta
        y[:k] += alpha * np.flip(y[:k])
        y[k] = alpha
    return y


def moved_arrays(a):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        f = np.flip(a)
        c = a.copy()
        d = np.copy(a)
        e = np.empty_like(a)
        e[:] = f
        o = np.ones_like(a)
        out[i] = f[i] + c[i] + d[i] + e[i] + o[i]
    return out


def store_through_flip(a, n):
    for i in range(n):
        v = np.flip(a)
        v[0] = v[0] + i
    return a


# calls of the program's functions whose body is one returned expression: inlined in a native kernel
def match(b1, b2):
    if b1 + b2 == 3:
        return 1
    else:
        return 0


def nussinov(N, seq):
    table = np.zeros((N, N), np.int32)
    for i in range(N - 1, -1, -1):
        for j in range(i + 1, N):
            if j - 1 >= 0:
                table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < N:
                table[i, j] = max(table[i, j], table[i + 1, j])
            if j - 1 >= 0 and i + 1 < N:
                if i < j - 1:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1] + match(seq[i], seq[j]))
                else:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
    return table


def weight(a, i):
    return a[i] * 2.0 + 1.0


def clipped(x, lo):
    if x < lo:
        return lo
    return x


def weighted_sum(a, lo):
    s = 0.0
    for i in range(a.shape[0]):
        s += clipped(weight(a, i), lo)
    return s


def guarded_call(a, n):
    s = 0.0
    for i in range(n):
        if i < a.shape[0] and weight(a, i) > 2.0:
            s += 1.0
    return s


def with_local(x):
    y = x + 1.0
    return y * y


def calls_with_local(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += with_local(a[i])
    return s


def reads_past_the_end(a):
    s = 0.0
    for i in range(a.shape[0] + 1):
        s += weight(a, i)
    return s


# array arithmetic in float32 and small ints: NumPy computes in the arrays' dtype (Python scalars take it)
def relu_steps(x, w, b):
    for _ in range(3):
        x = np.maximum(x * w + b, 0)
        x = x / 2 + 0.1
        x = np.sqrt(x * x + 1e-3)
    return x


def small_int_arrays(a, k):
    m = a < 0
    for _ in range(3):
        a = a * 3 + k
        a = a // 2 - 1
        m = a < k
        a += 7
    return a, m


def float32_compared(a):
    c = 0
    for i in range(a.shape[0]):
        m = a[i] < 0.1  # 0.1 as float32: NEP 50
        c += int(m[0]) + int(m[1])
    return c


def mixed_array_dtypes(a, b):
    s = a[0] * 0
    for _ in range(a.shape[0]):
        s = s + a * b
    return s


def float32_inplace(a, x):
    for _ in range(4):
        a += 0.1
        a *= x
    return a


# np.add.outer of 1-D arrays (NPBench's floyd_warshall)
def floyd_warshall(path):
    for k in range(path.shape[0]):
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))
    return path


def outer_products_of_rows(a, b):
    out = np.zeros((a.shape[1], b.shape[1]), a.dtype)
    for i in range(a.shape[0]):
        out += np.multiply.outer(a[i], b[i]) - np.subtract.outer(a[i], b[i])
    return out


def outer_of_2d(a, b):
    s = 0.0
    for i in range(2):
        x = np.add.outer(a, b)
        s = s + x[i, 0, 0, 0]
    return s


def ufunc_out_then_raise(a, b, n):
    for _ in range(n):
        np.add(a, 1.0, a)
    return a[n]


def twice(i):
    return i * 2


def first(a, b):
    return a


def calls_sharing_names(x, n):
    s = 0
    for i in range(n):
        s += twice(i + 1) + twice(i) + first(i, x[i])  # the callee's 'i' is not the loop's; x[i] is read
    return s


# np.mean of 1-D float arrays: NumPy's pairwise sum over the count
def centred_rows(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        m = np.mean(a[i])
        out[i] = a[i] - m
    return out


def bump(a):
    return np.add(a, 1.0, a)


def bumps_then_raises(a, n):
    for _ in range(n):
        bump(a)
    return a[n]


# NPBench's trmm: a whole-array in-place statement after a loop that changed B (a nest with nothing to test)
def triangular_product(alpha, A, B):
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            B[i, j] += np.dot(A[i + 1:, i], B[i + 1:, j])
    B *= alpha


# the same, then a store that may raise (an index out of range): the loops then run one by one
def triangular_product_then_store(alpha, A, B, k):
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            B[i, j] += np.dot(A[i + 1:, i], B[i + 1:, j])
    B *= alpha
    B[k, 0] = 1.0


# np.linspace of numbers: float64 in NumPy's steps
def linspace_rows(out, a, b):
    for i in range(out.shape[0]):
        out[i] = np.linspace(a * i, b, out.shape[1])
    return out, np.linspace(a, a, 1, dtype=np.float64), np.linspace(0, 5e-324, 3)  # a step that underflows to 0


def linspace_without_endpoint(out, a):
    for i in range(out.shape[0]):
        out[i] = np.linspace(a, 1.0, out.shape[1], endpoint=False)
    return out


def small_int_divided(a, out):
    for i in range(out.shape[0]):
        out[i] = (a / 3)[i] + np.sqrt(a)[i]
    return out


def float32_plus_int32(a, b):
    for _ in range(2):
        a += b
    return a


def sqrt_into_itself(y, n):
    h = 1
    for _ in range(n):
        np.sqrt(y, y)  # a ufunc's second positional argument is its output: y changes
        h = h * 1000003  # a Python int past 2**63 at the fourth step: the kernel stops, the call reruns
    return h


def floordiv_after_store(a, x, n):
    q = 0
    for i in range(n):
        a[i] += 1.0
        q = x // -1  # -2**63 // -1 is 2**63, a Python int: the kernel stops, the call reruns
    return q


def complex_rows(z, c, out):
    for i in range(z.shape[0]):
        out[i] = z[i] * c[i] + c[i] - (-z[i])  # complex128 rows: + - * and negation, as NumPy computes them
        out[i] += z[i] * 2.0
    return out


def complex_products(a, b, out):
    for i in range(a.shape[0]):
        out[i] += a[i] @ b[i]  # 2-D complex128 matrix products (BLAS's zgemm)
    return out


def complex_compared(z, out):
    n = 0
    for i in range(z.shape[0]):
        out[i] = z[i] * z[i]  # a complex product: its last bit may differ from NumPy's loops
        if out[i, 0] == out[i, 1]:
            n += 1
    return n


def complex_row_quotients(z, c, out):
    for i in range(z.shape[0]):
        out[i] = z[i] / c[i]  # NumPy gives inf/nan at zero, Numba raises
    return out
