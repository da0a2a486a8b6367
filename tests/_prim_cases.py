"""Call programs for every NumPy-namespace primitive: name -> bodies (an expression, or statements with return).

Parameter names refer to ``_prim_compare.INPUTS`` (x, y: 2x3 float; p: positive; i, j: int; m: SPD 3x3 ...).
"""
from __future__ import annotations

UNARY_FLOAT = ("negative positive exp exp2 expm1 cbrt square sin cos tan sinh cosh tanh floor ceil trunc rint "
               "sign degrees radians deg2rad rad2deg isinf isfinite signbit fabs spacing").split()
BINARY_FLOAT = ("add subtract multiply divide true_divide maximum minimum fmax fmin arctan2 hypot copysign "
                "nextafter logaddexp logaddexp2 greater greater_equal less less_equal equal not_equal "
                "heaviside").split()
DTYPES = "float64 float32 float16 int64 int32 int16 int8 uint8 uint16 uint32 uint64 bool_ complex128 complex64"
REDUCE_FLOAT = "sum prod mean var std min max amin amax argmin argmax median ptp".split()
NAN_REDUCE = "nansum nanprod nanmean nanvar nanstd nanmax nanmin nanargmax nanargmin nanmedian".split()

CASES: dict[str, list[str]] = {}


def add(name: str, *bodies: str) -> None:
    CASES.setdefault(name, []).extend(bodies)


# ---- ufuncs ----------------------------------------------------------------------------------------------
for _n in UNARY_FLOAT:
    add(_n, f"np.{_n}(x)", f"np.{_n}(v[1:])")
add("abs", "np.abs(x)", "np.abs(i)", "np.abs(z)")
add("absolute", "np.absolute(i)")
add("sqrt", "np.sqrt(p)", "np.sqrt(q)")
add("log", "np.log(p)", "np.log(f)")
add("log2", "np.log2(p)")
add("log10", "np.log10(p)")
add("log1p", "np.log1p(p)")
add("reciprocal", "np.reciprocal(p)")
add("arcsin", "np.arcsin(u)")
add("arccos", "np.arccos(u)")
add("arctan", "np.arctan(v)")
add("arcsinh", "np.arcsinh(v)")
add("arccosh", "np.arccosh(g)")
add("arctanh", "np.arctanh(u)")
add("isnan", "np.isnan(n)", "np.isnan(f)")
add("logical_not", "np.logical_not(bm)", "np.logical_not(i)")
add("invert", "np.invert(i)", "np.invert(bm)")
add("conjugate", "np.conjugate(z)")
add("conj", "np.conj(z)")
for _n in BINARY_FLOAT:
    add(_n, f"np.{_n}(x, y)", f"np.{_n}(x, c)", f"np.{_n}(i, 2)")
add("add", "np.add(x, f)", "np.add(i, j)", "np.add(x, y, dtype=np.float32)")
add("multiply", "np.multiply(i, f)")
add("floor_divide", "np.floor_divide(x, y)", "np.floor_divide(i, j)", "np.floor_divide(i, -3)")
add("power", "np.power(p, y)", "np.power(j, 2)", "np.power(x, 3)")
add("float_power", "np.float_power(p, y)", "np.float_power(j, 2)")
add("mod", "np.mod(x, y)", "np.mod(i, j)", "np.mod(i, -4)")
add("remainder", "np.remainder(i, 3)")
add("fmod", "np.fmod(x, y)", "np.fmod(i, 4)")
add("divmod", "np.divmod(x, y)", "np.divmod(i, 4)")
add("logical_and", "np.logical_and(bm, x > 0)")
add("logical_or", "np.logical_or(bm, x > 0)")
add("logical_xor", "np.logical_xor(bm, i)")
add("bitwise_and", "np.bitwise_and(i, j)", "np.bitwise_and(bm, True)")
add("bitwise_or", "np.bitwise_or(i, j)")
add("bitwise_xor", "np.bitwise_xor(i, 5)")
add("left_shift", "np.left_shift(j, 2)", "np.left_shift(i, k[:3])")
add("right_shift", "np.right_shift(j, 1)", "np.right_shift(i, k[:3])")
add("ldexp", "np.ldexp(x, j)", "np.ldexp(f, 3)")
add("gcd", "np.gcd(i, j)", "np.gcd(12, q)")
add("lcm", "np.lcm(i, j)")
add("modf", "np.modf(x)")
add("frexp", "np.frexp(x)")

# ---- reductions ------------------------------------------------------------------------------------------
for _n in REDUCE_FLOAT:
    add(_n, f"np.{_n}(x)", f"np.{_n}(x, axis=0)", f"np.{_n}(t, axis=-1, keepdims=True)", f"np.{_n}(i, axis=1)")
add("sum", "np.sum(t, axis=(0, 2))", "np.sum(i, dtype=np.float32)", "np.sum(bm)", "np.sum(x, 1)")
add("mean", "np.mean(i)", "np.mean(x, axis=(0, 1), keepdims=True)")
add("var", "np.var(x, ddof=1)")
add("std", "np.std(x, axis=1, ddof=1)")
add("prod", "np.prod(j, axis=0, keepdims=True)")
add("any", "np.any(bm)", "np.any(bm, axis=0)", "np.any(x > 3, axis=1, keepdims=True)")
add("all", "np.all(bm)", "np.all(bm, axis=1)", "np.all(j > 0, axis=0, keepdims=True)")
for _n in NAN_REDUCE:
    add(_n, f"np.{_n}(nm)", f"np.{_n}(nm, axis=0)", f"np.{_n}(n)", f"np.{_n}(nm, axis=1, keepdims=True)")
add("count_nonzero", "np.count_nonzero(i)", "np.count_nonzero(i, axis=0)",
    "np.count_nonzero(bm, axis=1, keepdims=True)")

# ---- cumulative, statistics ------------------------------------------------------------------------------
add("cumsum", "np.cumsum(x)", "np.cumsum(x, axis=1)", "np.cumsum(i, axis=0)")
add("cumprod", "np.cumprod(x, axis=0)", "np.cumprod(j)")
add("nancumsum", "np.nancumsum(nm, axis=1)", "np.nancumsum(n)")
add("nancumprod", "np.nancumprod(nm)", "np.nancumprod(nm, axis=0)")
add("average", "np.average(x)", "np.average(x, axis=1, weights=c)", "np.average(v, weights=w, returned=True)")
add("percentile", "np.percentile(x, 30)", "np.percentile(x, [10, 90], axis=0)")
add("quantile", "np.quantile(v, 0.25)", "np.quantile(x, 0.5, axis=1, method='nearest')")
add("nanpercentile", "np.nanpercentile(nm, 50, axis=1)", "np.nanpercentile(n, [25, 75])")
add("nanquantile", "np.nanquantile(nm, [0.1, 0.9])", "np.nanquantile(n, 0.5)")

# ---- creation --------------------------------------------------------------------------------------------
add("zeros", "np.zeros((2, 3))", "np.zeros(q, dtype=np.int32)", "np.zeros((q, 2), dtype=np.bool_)")
add("ones", "np.ones(4)", "np.ones((q, 2), dtype=np.float32)")
add("full", "np.full((2, 2), f)", "np.full(3, 7, dtype=np.int8)")
add("empty", "out = np.empty((2, q), dtype=np.int16)\nreturn out.shape, out.dtype")
add("ndarray", "out = np.ndarray((2, q), dtype=np.int16)\nreturn out.shape, out.dtype")
add("zeros_like", "np.zeros_like(i)", "np.zeros_like(x, dtype=np.float32)")
add("ones_like", "np.ones_like(x)", "np.ones_like(x, dtype=np.int32)")
add("full_like", "np.full_like(x, 7)", "np.full_like(i, f)")
add("empty_like", "out = np.empty_like(x)\nreturn out.shape, out.dtype")
add("arange", "np.arange(5)", "np.arange(1.0, 3.0, 0.5)", "np.arange(q, dtype=np.float32)")
add("linspace", "np.linspace(0, 1, 5)", "np.linspace(0, f, 4, endpoint=False, dtype=np.float32)",
    "np.linspace(0.0, 1.0, 3, retstep=True)")
add("logspace", "np.logspace(0, 2, 3)", "np.logspace(0, 1, 4, base=2.0)")
add("geomspace", "np.geomspace(1, 1000, 4)")
add("eye", "np.eye(3)", "np.eye(2, q, k=1, dtype=np.int64)")
add("identity", "np.identity(3)", "np.identity(q, dtype=np.int8)")
add("array", "np.array([1, 2, 3])", "np.array([[1.0, 2.0], [3.0, 4.0]])", "np.array(x, dtype=np.float32)",
    "np.array([f, q])")
add("asarray", "np.asarray(x)", "np.asarray([1, 2], dtype=np.float64)", "np.asarray(ls)")
add("ascontiguousarray", "np.ascontiguousarray(x.T)")
add("copy", "np.copy(x)", "out = np.copy(x)\nout[0, 0] = 99.0\nreturn out, x")
add("diag", "np.diag(v)", "np.diag(m)", "np.diag(m, k=1)")
add("diagflat", "np.diagflat(c)", "np.diagflat(c, 1)")
add("tri", "np.tri(3)", "np.tri(3, 4, k=1, dtype=np.int32)")
add("tril", "np.tril(m)", "np.tril(m, -1)")
add("triu", "np.triu(m, 1)", "np.triu(t)")
add("meshgrid", "np.meshgrid(c, v)", "np.meshgrid(c, v, indexing='ij')")
add("indices", "np.indices((2, 3))")
add("ndindex", "list(np.ndindex(2, q))", "list(np.ndindex((2, 3)))",
    "it = np.ndindex(m.shape)\nfirst = [p for p in it]\nreturn first, [p for p in it]")  # spent after one loop
add("ndenumerate", "[(ix, val * 2) for ix, val in np.ndenumerate(m)]")
add("fromfunction", "np.fromfunction(lambda r0, r1: r0 * 10 + r1, (2, 3))")

# ---- shape manipulation ----------------------------------------------------------------------------------
add("reshape", "np.reshape(x, (3, 2))", "np.reshape(x, -1)", "np.reshape(t, (4, -1), order='F')")
add("ravel", "np.ravel(x)", "np.ravel(x, order='F')")
add("transpose", "np.transpose(t)", "np.transpose(t, (1, 0, 2))")
add("expand_dims", "np.expand_dims(x, 1)", "np.expand_dims(v, (0, 2))")
add("squeeze", "np.squeeze(t[:1, :, :1])", "np.squeeze(x[None], axis=0)")
add("concatenate", "np.concatenate([x, y])", "np.concatenate((x, y), axis=1)", "np.concatenate([x, y], axis=None)")
add("stack", "np.stack([x, y])", "np.stack((v, w), axis=1)")
add("hstack", "np.hstack([x, y])", "np.hstack((v, w))")
add("vstack", "np.vstack([x, y])", "np.vstack((v, w))")
add("dstack", "np.dstack([x, y])")
add("column_stack", "np.column_stack((v, w))")
add("tile", "np.tile(c, (2, 2))", "np.tile(x, 2)")
add("repeat", "np.repeat(x, 2, axis=1)", "np.repeat(c, [1, 2, 3])")
add("flip", "np.flip(x)", "np.flip(t, axis=(0, 2))")
add("fliplr", "np.fliplr(x)")
add("flipud", "np.flipud(x)")
add("roll", "np.roll(v, 1)", "np.roll(x, -1, axis=1)")
add("swapaxes", "np.swapaxes(t, 0, 2)")
add("moveaxis", "np.moveaxis(t, 0, -1)")
add("atleast_1d", "np.atleast_1d(f)", "np.atleast_1d(v)")
add("atleast_2d", "np.atleast_2d(v)")
add("atleast_3d", "np.atleast_3d(x)")
add("broadcast_to", "np.broadcast_to(c, (2, 3))")
add("broadcast_arrays", "np.broadcast_arrays(x, c)")
add("split", "np.split(v, 2)", "np.split(t, [1, 3], axis=2)")
add("array_split", "np.array_split(np.arange(7), 3)")
add("hsplit", "np.hsplit(x, 3)")
add("vsplit", "np.vsplit(x, 2)")
add("rot90", "np.rot90(x)", "np.rot90(x, 2)")
add("pad", "np.pad(x, 1)", "np.pad(v, (1, 2), mode='edge')")
add("append", "np.append(v, w)", "np.append(x, y, axis=0)")
add("insert", "np.insert(v, 1, 9.0)", "np.insert(x, 0, c, axis=0)")
add("delete", "np.delete(v, [0, 2])", "np.delete(x, 1, axis=1)")
add("resize", "np.resize(c, (2, 4))")
add("shape", "np.shape(x)", "np.shape(f)")
add("size", "np.size(x)", "np.size(x, 1)")
add("ndim", "np.ndim(t)", "np.ndim(f)")

# ---- indexing, selection ---------------------------------------------------------------------------------
add("take", "np.take(v, [0, 2])", "np.take(x, [2, 0], axis=1)")
add("take_along_axis", "np.take_along_axis(x, np.argsort(x, axis=1), axis=1)")
add("where", "np.where(bm, x, y)", "np.where(x > 0)", "np.where(x > 0, x, 0.0)")
add("nonzero", "np.nonzero(i)")
add("flatnonzero", "np.flatnonzero(i)")
add("argwhere", "np.argwhere(i)")
add("clip", "np.clip(x, -1, 1)", "np.clip(i, 0, None)")
add("searchsorted", "np.searchsorted(s, 2.0)", "np.searchsorted(s, v, side='right')")
add("choose", "np.choose(np.array([0, 1, 0]), [c, r])")
add("compress", "np.compress([True, False, True], c)", "np.compress([False, True], x, axis=0)")
add("diagonal", "np.diagonal(m)", "np.diagonal(t, axis1=1, axis2=2)")
add("trace", "np.trace(m)", "np.trace(t)")
add("select", "np.select([x > 1, x < 0], [x, -x], default=0.0)")
add("extract", "np.extract(x > 0, x)")

# ---- products --------------------------------------------------------------------------------------------
add("dot", "np.dot(m, r)", "np.dot(x, 2.0)", "np.dot(v, w)", "np.dot(x, m)")
add("vdot", "np.vdot(v, w)", "np.vdot(z, z)")
add("inner", "np.inner(v, w)", "np.inner(x, y)")
add("matmul", "np.matmul(x, m)", "np.matmul(r, m)", "np.matmul(t, np.transpose(t, (0, 2, 1)))")
add("outer", "np.outer(v, c)")
add("tensordot", "np.tensordot(t, x, axes=([0, 1], [0, 1]))", "np.tensordot(m, m, 1)")
add("einsum", "np.einsum('ij,jk->ik', x, m)", "np.einsum('ii', m)")
add("kron", "np.kron(np.eye(2), x)")
add("cross", "np.cross(c, r)")

# ---- sorting, sets ---------------------------------------------------------------------------------------
add("sort", "np.sort(x)", "np.sort(x, axis=0)", "np.sort(v)[::-1]")
add("argsort", "np.argsort(v)", "np.argsort(x, axis=0, kind='stable')")
add("unique", "np.unique(k)", "np.unique(k, return_counts=True)",
    "np.unique(k, return_index=True, return_inverse=True)")
add("lexsort", "np.lexsort((v, w))")
add("partition", "np.partition(v, 2)")
add("argpartition", "np.argpartition(v, 1)")
add("union1d", "np.union1d(k, [5, 1])")
add("intersect1d", "np.intersect1d(k, np.array([1, 2, 7]))")
add("setdiff1d", "np.setdiff1d(k, [0, 3])")
add("isin", "np.isin(k, [1, 3])", "np.isin(i, k)")
add("dtype", "np.dtype('float32')", "np.zeros(3, dtype=np.dtype(i.dtype)).dtype.kind")

# ---- comparison, rounding, complex -----------------------------------------------------------------------
add("allclose", "np.allclose(x, y)", "np.allclose(x, x + 1e-12)")
add("isclose", "np.isclose(x, y, atol=1.0)")
add("array_equal", "np.array_equal(x, x)", "np.array_equal(i, j)")
add("array_equiv", "np.array_equiv(c, np.array([c, c]))")
add("round", "np.round(x, 1)", "np.round(x)", "np.round(f)")
add("around", "np.around(x, 2)")
add("fix", "np.fix(x)")
add("real", "np.real(z)", "np.real(x)")
add("imag", "np.imag(z)")
add("angle", "np.angle(z)", "np.angle(z, deg=True)")
add("iscomplex", "np.iscomplex(z)")
add("isreal", "np.isreal(z)")
add("isscalar", "np.isscalar(f)", "np.isscalar(x)")

# ---- numerical -------------------------------------------------------------------------------------------
add("interp", "np.interp(v, s, w)", "np.interp(f, s, w)")
add("diff", "np.diff(v)", "np.diff(x, axis=0)", "np.diff(v, n=2)")
add("ediff1d", "np.ediff1d(v)", "np.ediff1d(v, to_begin=0.0)")
add("gradient", "np.gradient(v)", "np.gradient(x)")
add("convolve", "np.convolve(v, c)", "np.convolve(v, c, mode='same')")
add("correlate", "np.correlate(v, c, mode='full')")
add("cov", "np.cov(x)", "np.cov(v, w)")
add("corrcoef", "np.corrcoef(x)")
add("histogram", "np.histogram(v, bins=3)", "np.histogram(x, bins=[-2, 0, 2, 4])")
add("bincount", "np.bincount(k)", "np.bincount(k, minlength=6)")
add("digitize", "np.digitize(v, s)")
add("nan_to_num", "np.nan_to_num(n)", "np.nan_to_num(n, nan=-1.0)")
add("trapezoid", "np.trapezoid(v)", "np.trapezoid(w, x=s)")

# ---- dtypes ----------------------------------------------------------------------------------------------
add("result_type", "np.result_type(x, i)", "np.result_type(np.int8, np.float32)")
add("promote_types", "np.promote_types(np.int32, np.float32)")
add("can_cast", "np.can_cast(np.int32, np.float64)", "np.can_cast(x.dtype, np.int8)")
add("iinfo", "np.iinfo(np.int16)", "np.iinfo(i.dtype)", "np.iinfo(np.int16).max", "np.iinfo(i.dtype).min")
add("finfo", "np.finfo(np.float32)", "np.finfo(x.dtype)", "np.finfo(x.dtype).eps", "np.finfo(float).tiny")
for _n in DTYPES.split():
    add(_n, f"np.{_n}(q)", f"np.{_n}(j)")
for _n in "float64 float32 float16 complex128 complex64".split():
    add(_n, f"np.{_n}(f)", f"np.{_n}(x)")

# ---- mutating --------------------------------------------------------------------------------------------
add("copyto", "out = x.copy()\nnp.copyto(out, y)\nreturn out", "np.copyto(x, 1.5)\nreturn x.sum()")
add("put", "out = x.copy()\nnp.put(out, [0, 2], [9.0, 8.0])\nreturn out")
add("fill_diagonal", "out = m.copy()\nnp.fill_diagonal(out, 0.0)\nreturn out", "np.fill_diagonal(m, f)\nreturn m")
add("putmask", "out = x.copy()\nnp.putmask(out, out > 1, 0.0)\nreturn out")

# ---- linalg ----------------------------------------------------------------------------------------------
add("linalg.solve", "np.linalg.solve(m, r)", "np.linalg.solve(a, m)")
add("linalg.inv", "np.linalg.inv(m)", "np.linalg.inv(a) @ a")
add("linalg.det", "np.linalg.det(a)", "np.linalg.det(m)")
add("linalg.norm", "np.linalg.norm(v)", "np.linalg.norm(x, ord='fro')", "np.linalg.norm(x, axis=1)",
    "np.linalg.norm(m, 2)")
add("linalg.eigh", "np.linalg.eigh(m)", "np.linalg.eigh(m).eigenvalues")
add("linalg.eigvalsh", "np.linalg.eigvalsh(m)")
add("linalg.eig", "np.linalg.eig(a)", "np.linalg.eig(m)")
add("linalg.eigvals", "np.linalg.eigvals(a)")
add("linalg.svd", "np.linalg.svd(x)", "np.linalg.svd(x).S", "np.linalg.svd(x, full_matrices=False)",
    "np.linalg.svd(m, compute_uv=False)")
add("linalg.qr", "np.linalg.qr(a)", "np.linalg.qr(a).R", "np.linalg.qr(x.T, mode='r')")
add("linalg.cholesky", "np.linalg.cholesky(m)")
add("linalg.pinv", "np.linalg.pinv(x)")
add("linalg.lstsq", "np.linalg.lstsq(a, r, rcond=None)", "np.linalg.lstsq(x.T, c, rcond=None)")
add("linalg.matrix_rank", "np.linalg.matrix_rank(x)", "np.linalg.matrix_rank(m)")
add("linalg.slogdet", "np.linalg.slogdet(a)", "np.linalg.slogdet(a).logabsdet")
add("linalg.matrix_power", "np.linalg.matrix_power(a, 3)", "np.linalg.matrix_power(m, -1)")

# ---- random: the legacy global stream and Generators ---------------------------------------------------------
add("random.seed", "np.random.seed(0)\nreturn np.random.rand(3)",
    "np.random.seed(q)\nfirst = np.random.rand(2)\nnp.random.seed(q)\nreturn first, np.random.rand(2)")
add("random.rand", "np.random.seed(1)\nreturn np.random.rand(2, 3), np.random.rand()")
add("random.randn", "np.random.seed(2)\nreturn np.random.randn(2, 2)")
add("random.random", "np.random.seed(3)\nreturn np.random.random(3), np.random.random((2, 2))")
add("random.normal", "np.random.seed(4)\nreturn np.random.normal(1.0, 2.0, size=3)")
add("random.uniform", "np.random.seed(5)\nreturn np.random.uniform(-1, 1, 4)")
add("random.randint", "np.random.seed(6)\nreturn np.random.randint(0, 10, size=5)")
add("random.choice", "np.random.seed(7)\nreturn np.random.choice(5, 3)",
    "np.random.seed(7)\nreturn np.random.choice(v, 2, replace=False)")
add("random.permutation", "np.random.seed(8)\nreturn np.random.permutation(5), np.random.permutation(v)")
add("random.standard_normal", "np.random.seed(9)\nreturn np.random.standard_normal(3)")
add("random.shuffle", "np.random.seed(10)\nout = np.arange(6)\nnp.random.shuffle(out)\nreturn out",
    "np.random.seed(11)\nnp.random.shuffle(x)\nreturn x")
add("random.default_rng", "rng = np.random.default_rng(42)\nreturn rng.normal(size=3), rng.random(2)",
    "rng = np.random.default_rng(q)\nreturn rng.integers(0, 10, 4), rng.integers(0, 10, 4)")

# ---- programs not filed under one primitive: out=, primitives as values, keyword forms, ordering ----------------
EXTRA = [
    "out = np.zeros((2, 3))\nnp.add(x, y, out=out)\nreturn out",
    "np.exp(x, out=x)\nreturn x",
    "out = np.empty(3)\nnp.sum(x, axis=0, out=out)\nreturn out",
    "out = np.zeros((2, 3))\nres = np.multiply(x, 2.0, out=out)\nreturn res is out, out",
    "out = np.zeros(4)\nnp.cumsum(v, out=out)\nout += 1.0\nreturn out",
    "np.add(x, 1.0, out=x)\nreturn x.sum()",
    "fn = np.sin\nreturn fn(x)",
    "list(map(np.sqrt, ls))",
    "[np.exp(e) for e in v]",
    "np.zeros(3, dtype='int32')",
    "np.ones(2, dtype=float)",
    "x.astype(int)",
    "np.sum(a=x, axis=0)",
    "np.linspace(start=0.0, stop=1.0, num=5)",
    "np.linalg.solve(m, np.linalg.inv(m) @ r)",
    "np.random.seed(0)\nvals = [np.random.rand() for _ in range(3)]\nreturn vals",
    "np.random.seed(0)\nrng = np.random.default_rng(0)\nreturn np.random.rand(2), rng.random(2), np.random.rand(2)",
    "(x > 0).sum(axis=0)",
    "np.mean(x > 0)",
    "total = 0.0\nfor row in x:\n    total += np.sum(row)\nreturn total",
    "view = x[0]\nview *= 2.0\nreturn x",
    "out = x.T\nout[0, 1] = 7.0\nreturn x, out",
    # reads before an in-place change see the old value, views see the new one (on every runtime)
    "out = x.copy()\ns1 = out.sum()\nout.fill(0.0)\nreturn s1, out.sum()",
    "y0 = x[0]\nx[0, 0] = 100.0\nreturn y0",
    "y0 = x[0].copy()\nx[0, 0] = 100.0\nreturn y0, x",
    "s = np.sum(x)\nnp.copyto(x, 0.0)\nreturn s",
    "s = x * 2\nnp.multiply(x, 0.0, out=x)\nreturn s, x",
    "ls2 = [x, y]\nx += 1.0\nreturn ls2[0]",
    "d = {'a': x}\nd['a'][0, 0] = 5.0\nreturn x",
    "s = x.T\nx *= 2.0\nreturn s.sum(), s",
    "z2 = x + 0.0\nfor k2 in range(3):\n    z2[0] += z2[1]\nreturn z2",
    "acc = []\nfor row in x:\n    row *= 2.0\n    acc.append(row.sum())\nreturn acc, x",
    "s1 = np.sort(v)\nv.sort()\nreturn s1, v",
    "w2 = w\nw2 = w2 + 1.0\nw2 += 1.0\nreturn w, w2",
    "p2 = x.ravel()\np2[0] = -9.0\nreturn x, p2",
    "s = t.sum(axis=0)\nt[0] = 0.0\nreturn s",
    "b2 = np.ones(100000)\ns = b2.sum()\nb2 *= 2.0\nreturn s, b2.sum()",
    "b2 = np.ones(100000)\nv2 = b2[:10]\nb2 += 1.0\nreturn v2.sum()",
    "np.random.seed(0)\na1 = np.random.rand(2)\nb1 = np.exp(a1)\nnp.random.seed(0)\nreturn b1, np.random.rand(2)",
]
