"""Shared by the primitive and property tests: sample inputs, source-text modules, and deep result comparison."""
from __future__ import annotations

import ast
import copy
import dataclasses
import importlib.util
import itertools
import math
import sys
import textwrap

import numpy as np
import pytest

import phylanx_py as px
from phylanx_py import ir

RTOL = 1e-12

# Inputs a case may read, by parameter name (each call gets deep copies, so mutation stays per call).
INPUTS = {
    "x": np.array([[0.5, -1.25, 2.0], [3.5, 0.25, -0.75]]),
    "y": np.array([[1.5, 0.5, -2.0], [-0.5, 2.25, 1.0]]),
    "p": np.array([[0.5, 1.25, 2.0], [3.5, 0.25, 4.0]]),  # positive
    "u": np.array([-0.9, -0.3, 0.2, 0.8]),  # inside (-1, 1)
    "g": np.array([1.0, 1.5, 2.0, 4.0]),  # >= 1
    "v": np.array([0.1, 0.7, -0.4, 1.3]),
    "w": np.array([2.0, 1.0, 3.0, 0.5]),
    "c": np.array([3.0, 1.0, 2.0]),
    "r": np.array([1.0, -2.0, 0.5]),
    "i": np.array([[3, -7, 4], [0, 9, -2]]),  # int64 with negatives
    "j": np.array([[1, 2, 3], [4, 5, 6]]),  # positive int64
    "k": np.array([0, 3, 1, 3, 2, 0]),  # small non-negative int64
    "bm": np.array([[True, False, True], [False, False, True]]),
    "m": np.array([[4.0, 1.0, 0.5], [1.0, 3.0, -0.5], [0.5, -0.5, 2.0]]),  # symmetric positive definite
    "a": np.array([[2.0, -1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]),  # non-symmetric, well conditioned
    "z": np.array([1 + 2j, -0.5 + 0j, 3 - 1j]),
    "n": np.array([1.0, np.nan, 3.0, -2.0]),
    "nm": np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, -2.0]]),
    "s": np.array([0.0, 1.0, 2.5, 4.0]),  # sorted
    "t": np.arange(24.0).reshape(2, 3, 4),
    "f": 2.5,
    "q": 3,
    "st": "  Hello, World  ",
    "ls": [3, 1, 3, 2],
    "dd": {"a": 1, "b": 2},
    "se": {1, 2, 3},
}


# ---- source-text modules ---------------------------------------------------------------------------------
def params_of(body: str) -> list[str]:
    """The INPUTS a body reads (names loaded before any assignment in the body are parameters)."""
    tree = ast.parse(textwrap.dedent(body))
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return sorted((loaded - stored) & set(INPUTS))


def as_statements(body: str) -> str:
    """An expression body becomes ``return <expr>``; a multi-line body is taken as statements."""
    body = textwrap.dedent(body).strip("\n")
    if "\n" in body or body.startswith("return "):
        return body
    return f"return {body}"


def function_source(fname: str, params, body: str) -> str:
    return f"def {fname}({', '.join(params)}):\n" + textwrap.indent(as_statements(body), "    ") + "\n"


_counter = itertools.count()


def write_module(directory, sources: list[str], prefix: str = "px_gen", header: str = "import math\n\n"
                 "import numpy as np\n") -> object:
    """Write ``sources`` (function definitions) to a new module file under ``directory`` and import it."""
    name = f"{prefix}_{next(_counter)}"
    path = directory / f"{name}.py"
    path.write_text(header + "\n\n" + "\n\n".join(sources))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def called_primitives(node) -> set[str]:
    """Names of every primitive an IR tree calls."""
    out: set[str] = set()

    def walk(n):
        if isinstance(n, ir.Call):
            out.add(n.prim)
        if isinstance(n, ir.Node):
            for fld in dataclasses.fields(n):
                walk(getattr(n, fld.name))
        elif isinstance(n, (tuple, list)):
            for item in n:
                walk(item)

    walk(node)
    return out


# ---- comparison ------------------------------------------------------------------------------------------
def assert_same(got, want, path="result", rtol=RTOL, atol=0.0):
    """Compiled result ``got`` equals plain ``want``: same types, shapes, dtypes; floats to ``rtol``/``atol``."""
    assert type(got) is type(want), f"{path}: type {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype, f"{path}: dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{path}: shape {got.shape} != {want.shape}"
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=path)
        else:
            np.testing.assert_array_equal(got, want, err_msg=path)
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for idx, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{idx}]", rtol, atol)
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{path}: keys {list(got)} != {list(want)}"
        for key in want:
            assert_same(got[key], want[key], f"{path}[{key!r}]", rtol, atol)
    elif isinstance(want, (type({}.keys()), type({}.values()), type({}.items()))):
        assert_same(list(got), list(want), path, rtol, atol)
    elif isinstance(want, (float, complex, np.floating, np.complexfloating)):
        assert _close(got, want, rtol, atol), f"{path}: {got!r} != {want!r}"
    elif isinstance(want, (np.finfo, np.iinfo)):
        assert repr(got) == repr(want), f"{path}: {got!r} != {want!r}"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def _close(got, want, rtol=RTOL, atol=0.0) -> bool:
    if isinstance(want, (complex, np.complexfloating)):
        return _close(got.real, want.real, rtol, atol) and _close(got.imag, want.imag, rtol, atol)
    if math.isnan(want):
        return math.isnan(got)
    return got == want or math.isclose(got, want, rel_tol=rtol, abs_tol=atol)


def run_both(pyfunc, compiled, params, inputs=INPUTS):
    """Call plain and compiled functions on deep copies of the inputs; compare results and arguments after."""
    plain_args = [copy.deepcopy(inputs[p]) for p in params]
    comp_args = [copy.deepcopy(inputs[p]) for p in params]
    try:
        want = pyfunc(*plain_args)
    except Exception as expected:  # the compiled function must fail the same way, as an ExecutionError
        with pytest.raises(px.ExecutionError) as info:
            compiled(*comp_args)
        cause = info.value.__cause__
        assert type(cause) is type(expected) and str(cause) == str(expected), f"{cause!r} != {expected!r}"
        return None
    got = compiled(*comp_args)
    assert_same(got, want)
    for p, g, w in zip(params, comp_args, plain_args):
        assert_same(g, w, f"argument {p!r} after the call")
    return got


def make_runtime(kind: str):
    """("synchronous" | "local") -> (context manager runtime or None for the default, closer)."""
    if kind == "synchronous":
        return px.runtime.synchronous()
    return None  # the process-wide default runtime (a local thread pool), not ours to close
