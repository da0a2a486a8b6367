"""The NumPy catalogue beyond ufuncs: every ``np.<name>`` a compiled function may call, the NumPy function as kernel,
declared with its gradient rule (or as passing none), its inline form, its shape rule and its tile rule
(tile_rules.py)."""
from __future__ import annotations

import numpy as np

from . import shapes, vjp
from .registry import MUTATES, STATE, Inline, call_lowering, register
from .tile_rules import TILE
from .ufuncs import CALL, native

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


def _resolve(module, dotted):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


# Gradient rules of NumPy's non-element-wise functions (primitives/vjp.py), and those that pass no gradient.
GRADS = {
    "sum": vjp.sum_vjp, "nansum": vjp.sum_vjp, "mean": vjp.mean_vjp, "max": vjp.extreme_vjp, "amax": vjp.extreme_vjp,
    "min": vjp.extreme_vjp, "amin": vjp.extreme_vjp, "var": vjp.var_vjp, "std": vjp.std_vjp, "prod": vjp.prod_vjp,
    "matmul": vjp.matmul_vjp, "dot": vjp.dot_vjp, "tensordot": vjp.tensordot_vjp, "einsum": vjp.einsum_vjp,
    "outer": vjp.outer_vjp, "reshape": vjp.reshape_back_vjp, "ravel": vjp.reshape_back_vjp,
    "squeeze": vjp.reshape_back_vjp, "atleast_1d": vjp.reshape_back_vjp, "atleast_2d": vjp.reshape_back_vjp,
    "expand_dims": vjp.expand_dims_vjp, "transpose": vjp.transpose_vjp, "swapaxes": vjp.swapaxes_vjp,
    "moveaxis": vjp.moveaxis_vjp, "broadcast_to": vjp.broadcast_to_vjp, "concatenate": vjp.concatenate_vjp,
    "stack": vjp.stack_vjp, "hstack": vjp.hstack_vjp, "vstack": vjp.vstack_vjp, "take": vjp.take_vjp,
    "where": vjp.where_vjp, "clip": vjp.clip_vjp, "flip": vjp.flip_vjp, "copy": vjp.copy_vjp, "asarray": vjp.copy_vjp,
    "array": vjp.copy_vjp, "ascontiguousarray": vjp.copy_vjp, "float64": vjp.copy_vjp, "pad": vjp.pad_vjp,
    "tile": vjp.tile_like_vjp,
}
NONDIFF = set("""
round around fix argmax argmin nanargmax nanargmin argsort argwhere nonzero flatnonzero zeros_like ones_like
empty_like full_like shape size ndim count_nonzero any all isclose allclose array_equal searchsorted digitize
bincount unique int64 int32 int16 int8 uint8 bool_
""".split())
# Element-wise in fused kernels too (the other element-wise functions are declared in ufuncs.py).
FUSED = {"where": "({1} if {0} else {2})"}
# A view of their array argument whenever NumPy can make one (an O(1) change of shape or strides): on a NumPy
# array of any size (and no future among the other arguments) they run in the calling thread (VIEW_CALL). As a
# task, the view would be of the task's own copy of a local array (a Dask task deserialises its arguments), so a
# store through it (v = np.flip(a); v[0] = 9) would not reach ``a``, as it does in NumPy.
VIEWS = set("""
flip fliplr flipud transpose swapaxes moveaxis squeeze expand_dims atleast_1d atleast_2d atleast_3d broadcast_to
diagonal rot90 reshape ravel
""".split())
VIEW_CALL = Inline("{kernel}({args})", "view", kwargs=True)
# Always a new array, never a view of an argument (``Primitive.fresh``).
FRESH = set("""
zeros ones empty full zeros_like ones_like empty_like full_like array copy arange linspace eye identity dot matmul
""".split())

# The facts of their native forms (ufuncs.native, ``Lowering``): allocations take a dtype and may raise (memory);
# reductions choosing an element and int casts flip on a last-bit difference; casts of a number never raise.
NATIVE = {**dict.fromkeys(("zeros", "ones", "empty"), {"allocates": True, "keywords": ("dtype",)}),
          **dict.fromkeys(("min", "max", "amin", "amax", "argmin", "argmax"), {"compares": True}),
          **dict.fromkeys(("float64", "float32", "complex128"), {"raises": False}),
          **dict.fromkeys(("int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "bool_"),
                          {"raises": False, "compares": True})}


def _numpy(name, fn, **rules):
    """A NumPy function as a primitive: its rules from the tables above, plain bytecode on small inputs."""
    return register(name, fn, obj=fn, grad=GRADS.get(name), nondiff=name in NONDIFF, fused=FUSED.get(name),
                    inline=VIEW_CALL if name in VIEWS else CALL, lowering=native(name, **NATIVE.get(name, {})),
                    fresh=name in FRESH, tile=TILE.get(name), **rules)


def _register_numpy():
    for name in REDUCTIONS:
        fn = getattr(np, name, None)
        if fn is not None:
            _numpy(name, fn, shape_rule=shapes.reduction(fn))
    for name in FUNCTIONS:
        fn = getattr(np, name, None)
        if fn is None or not callable(fn):
            continue
        _numpy(name, fn, shape_rule=shapes.matmul if name == "matmul" else None)
    for name in LINALG:
        fn = _resolve(np.linalg, name)
        if fn is not None:
            register(f"linalg.{name}", fn, obj=fn, inline=CALL, tile=TILE.get(f"linalg.{name}"))
    for name in RANDOM_STATEFUL:
        fn = _resolve(np.random, name)
        register(f"random.{name}", fn, obj=fn, effect=STATE)
    for name in RANDOM_MUTATES:
        fn = _resolve(np.random, name)
        register(f"random.{name}", fn, obj=fn, effect=MUTATES)
    # A Generator is an object with state; creating one is pure (same seed, same stream as NumPy).
    register("random.default_rng", np.random.default_rng, obj=np.random.default_rng, inline=CALL)
    for name in MUTATING:
        fn = getattr(np, name, None)
        if fn is not None:
            register(name, fn, obj=fn, effect=MUTATES)
    # np.ndindex / np.ndenumerate: classes whose objects are iterators, spent after one loop as in NumPy (never
    # folded: only scalars are, passes/fold.py), made where the loop runs (an iterator does not travel to a Dask
    # worker: ndenumerate holds a flatiter, which does not pickle); numpy-benchmarks' local_maxima loops over them
    register("ndindex", np.ndindex, obj=np.ndindex, local=True)
    register("ndenumerate", np.ndenumerate, obj=np.ndenumerate, local=True)
    # np.ndarray(shape, dtype=...): an allocation like np.empty (its values are whatever the memory held)
    register("ndarray", np.ndarray, obj=np.ndarray,
             lowering=call_lowering("np.empty", allocates=True, keywords=("dtype",)))
    # dtypes are callable too: np.float64(3), np.int32(x)
    dtypes = "float64 float32 float16 int64 int32 int16 int8 uint8 uint16 uint32 uint64 bool_ complex128 complex64"
    for name in dtypes.split():
        fn = getattr(np, name, None)
        if fn is not None:
            _numpy(name, fn)


_register_numpy()
