"""The NumPy catalogue: every ``np.<name>`` a compiled function may call, with the NumPy function as kernel."""
from __future__ import annotations

import numpy as np

from . import shapes
from .registry import MUTATES, STATE, Lowering, call_lowering, register

UFUNCS = """
abs absolute negative positive exp exp2 expm1 log log2 log10 log1p sqrt cbrt square sin cos tan arcsin arccos
arctan sinh cosh tanh arcsinh arccosh arctanh floor ceil trunc rint sign reciprocal degrees radians deg2rad
rad2deg isnan isinf isfinite logical_not invert signbit fabs conjugate conj spacing
add subtract multiply divide true_divide floor_divide power float_power mod remainder fmod divmod maximum minimum
fmax fmin arctan2 hypot logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor left_shift
right_shift greater greater_equal less less_equal equal not_equal copysign nextafter ldexp heaviside gcd lcm
logaddexp logaddexp2 modf frexp
""".split()

REDUCTIONS = """
sum prod mean var std min max amin amax argmin argmax any all nansum nanprod nanmean nanvar nanstd nanmax nanmin
nanargmax nanargmin median nanmedian count_nonzero ptp
""".split()

FUNCTIONS = """
cumsum cumprod nancumsum nancumprod average percentile quantile nanpercentile nanquantile
zeros ones full empty zeros_like ones_like full_like empty_like arange linspace logspace geomspace eye identity
array asarray ascontiguousarray copy diag diagflat tri tril triu meshgrid indices fromfunction
reshape ravel transpose expand_dims squeeze concatenate stack hstack vstack dstack column_stack tile repeat flip
fliplr flipud roll swapaxes moveaxis atleast_1d atleast_2d atleast_3d broadcast_to broadcast_arrays split
array_split hsplit vsplit rot90 pad append insert delete resize shape size ndim
take take_along_axis where nonzero flatnonzero argwhere clip searchsorted choose compress diagonal trace select
extract
dot vdot inner matmul outer tensordot einsum kron cross
sort argsort unique lexsort partition argpartition
allclose isclose array_equal array_equiv round around fix real imag angle iscomplex isreal isscalar
interp diff ediff1d gradient convolve correlate cov corrcoef histogram bincount digitize nan_to_num trapezoid
result_type promote_types can_cast iinfo finfo
union1d intersect1d setdiff1d isin in1d dtype
""".split()

LINALG = ("solve inv det norm eigh eigvalsh eig eigvals svd qr cholesky pinv lstsq matrix_rank slogdet "
          "matrix_power").split()

# np.random's legacy global stream: ordered calls (STATE) keep NumPy's exact stream.
RANDOM_STATEFUL = "seed rand randn random normal uniform randint choice permutation standard_normal".split()
RANDOM_MUTATES = ["shuffle"]
MUTATING = ["copyto", "put", "fill_diagonal", "putmask"]


# What a native loop kernel (runtime/native) may call, written as the same np.<name> call in Numba; results of
# the inexact ones may differ from NumPy's in the last bit, so native loops never compare them.
NATIVE = set("""
exp exp2 expm1 log log2 log10 log1p sqrt sin cos tan arcsin arccos arctan sinh cosh tanh abs absolute fabs
floor ceil trunc negative square sign isnan isinf isfinite add subtract multiply divide true_divide maximum
minimum arctan2 hypot power floor_divide remainder mod zeros ones empty min max amin amax argmin argmax
float64 float32 int64 int32 int16 int8 uint8 uint16 uint32 bool_ complex128
""".split())
INEXACT = set("exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan sinh cosh tanh arctan2 hypot "
              "power".split())


def _lowering(name):
    if name == "sum":  # NumPy sums floats pairwise: the kernel uses the same order (runtime/native/helpers.py)
        return Lowering("_px_sum({0})")
    return call_lowering(f"np.{name}", inexact=name in INEXACT) if name in NATIVE else None


# Methods of the two-input ufuncs, as primitives ``add.outer`` ...; ``at`` changes its first argument in place.
UFUNC_METHODS = ("outer", "reduce", "accumulate", "reduceat", "at")


class UfuncMethod:
    """``np.<ufunc>.<method>``; an instance (not a bound method) so it pickles by name to other processes."""

    __slots__ = ("ufunc", "method")

    def __init__(self, ufunc, method):
        self.ufunc, self.method = ufunc, method

    def __call__(self, *args, **kwargs):
        return getattr(getattr(np, self.ufunc), self.method)(*args, **kwargs)

    def __reduce__(self):
        return (UfuncMethod, (self.ufunc, self.method))


def _resolve(module, dotted):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _register_numpy():
    for name in UFUNCS:
        fn = getattr(np, name, None)
        if fn is None:
            continue
        rule = shapes.elementwise(fn) if isinstance(fn, np.ufunc) else None
        register(name, fn, obj=fn, shape_rule=rule, lowering=_lowering(name))
        if isinstance(fn, np.ufunc) and fn.nin == 2 and fn.nout == 1:
            for method in UFUNC_METHODS:
                register(f"{name}.{method}", UfuncMethod(name, method), effect=MUTATES if method == "at" else None)
    for name in REDUCTIONS:
        fn = getattr(np, name, None)
        if fn is not None:
            register(name, fn, obj=fn, shape_rule=shapes.reduction(fn), lowering=_lowering(name))
    for name in FUNCTIONS:
        fn = getattr(np, name, None)
        if fn is None or not callable(fn):
            continue
        register(name, fn, obj=fn, shape_rule=shapes.matmul if name == "matmul" else None, lowering=_lowering(name))
    for name in LINALG:
        fn = _resolve(np.linalg, name)
        if fn is not None:
            register(f"linalg.{name}", fn, obj=fn)
    for name in RANDOM_STATEFUL:
        fn = _resolve(np.random, name)
        register(f"random.{name}", fn, obj=fn, effect=STATE)
    for name in RANDOM_MUTATES:
        fn = _resolve(np.random, name)
        register(f"random.{name}", fn, obj=fn, effect=MUTATES)
    # A Generator is an object with state; creating one is pure (same seed, same stream as NumPy).
    register("random.default_rng", np.random.default_rng, obj=np.random.default_rng)
    for name in MUTATING:
        fn = getattr(np, name, None)
        if fn is not None:
            register(name, fn, obj=fn, effect=MUTATES)
    # np.ndarray(shape, dtype=...): an allocation like np.empty (its values are whatever the memory held)
    register("ndarray", np.ndarray, obj=np.ndarray, lowering=Lowering("np.empty({0})"))
    # dtypes are callable too: np.float64(3), np.int32(x)
    dtypes = "float64 float32 float16 int64 int32 int16 int8 uint8 uint16 uint32 uint64 bool_ complex128 complex64"
    for name in dtypes.split():
        fn = getattr(np, name, None)
        if fn is not None:
            register(name, fn, obj=fn, lowering=_lowering(name))


_register_numpy()
