"""Compiled functions and tiled arrays handed to Dask's own APIs (``client.submit``, ``client.map``,
``dask.delayed``, ``da.map_blocks``) on real processes: a ``dask scheduler`` and two ``dask worker`` processes whose
PYTHONPATH holds tests/, so they import prog_pickling as a cluster imports an installed package.

A compiled function pickles by reference when importable, by value otherwise, and tokenizes deterministically; a
tiled array pickles as a reference to its tiles (phylanx_py/pickling.py, runtime/tiled/pickling.py)."""
from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
import textwrap

import cloudpickle
import dask
import dask.array as da
import numpy as np
import prog_pickling as P
import pytest
from cluster import DaskProcesses
from dask.base import tokenize
from phylanx_py.runtime.tiled import TiledArray

import phylanx_py as px

pytestmark = pytest.mark.timeout(300)

TESTS = os.path.dirname(os.path.abspath(__file__))
DETERMINISTIC = {"tokenize.ensure-deterministic": True}


def _pythonpath() -> str:
    return os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH", "")) if p)


@pytest.fixture(scope="module")
def cluster():
    with pytest.MonkeyPatch.context() as mp:  # the scheduler's environment is this process's
        mp.setenv("PYTHONPATH", _pythonpath())
        procs = DaskProcesses(n_workers=2)
    yield procs
    procs.stop()


@pytest.fixture(scope="module")
def rt(cluster):
    runtime = px.runtime.dask(cluster.address)
    yield runtime
    runtime.close()


@pytest.fixture(scope="module")
def client(rt):
    return rt.client


def _functions() -> dict:
    @px.compile
    def local_cubic(x):  # defined inside a function: not importable, so it travels by value
        return x * x * x - 2.0 * x

    return {"by reference": P.scaled_sin, "by value": local_cubic, "closure by value": P.make_affine(2.5)}


KINDS = ["by reference", "by value", "closure by value"]


# ---- compiled functions through Dask's APIs ----------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_client_submit_runs_a_compiled_function_on_a_worker(client, kind):
    f = _functions()[kind]
    x = np.linspace(-1.0, 1.0, 7)
    np.testing.assert_allclose(client.submit(f, x).result(), f.__wrapped__(x), rtol=1e-12)
    # the worker got a compiled function, compiled it there, and gave the plain function's answer
    name, got, compiled, pid = client.submit(P.call_on_worker, f, x).result()
    assert (name, compiled) == ("CompiledFunction", True) and pid != os.getpid()
    np.testing.assert_allclose(got, f.__wrapped__(x), rtol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_client_map_runs_a_compiled_function_over_inputs(client, kind):
    f = _functions()[kind]
    xs = [np.linspace(0.0, 1.0, 5) + i for i in range(6)]
    for x, got in zip(xs, client.gather(client.map(f, xs))):
        np.testing.assert_allclose(got, f.__wrapped__(x), rtol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_dask_delayed_of_a_compiled_function(client, kind):
    f = _functions()[kind]
    x = np.arange(5.0) / 3
    with dask.config.set(DETERMINISTIC):
        got = dask.delayed(f)(x).compute(scheduler=client)
    np.testing.assert_allclose(got, f.__wrapped__(x), rtol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_map_blocks_of_a_compiled_function(client, kind):
    f = _functions()[kind]
    a = np.arange(24.0).reshape(4, 6) / 7
    with dask.config.set(DETERMINISTIC):
        got = da.map_blocks(f, da.from_array(a, chunks=(2, 3)), dtype=float).compute(scheduler=client)
    np.testing.assert_allclose(got, f.__wrapped__(a), rtol=1e-12)


def test_closures_that_differ_are_different_tasks(client):
    x = np.arange(4.0)
    two, three = client.submit(P.make_affine(2.0), x), client.submit(P.make_affine(3.0), x)
    assert two.key != three.key  # pure tasks: the key is the token, so equal tokens would share one result
    np.testing.assert_array_equal(two.result(), x * 2.0 + 1.0)
    np.testing.assert_array_equal(three.result(), x * 3.0 + 1.0)


# ---- pickling by reference and by value -------------------------------------------------------------------
LOAD_AND_CALL = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    f, args = pickle.loads(bytes.fromhex(sys.stdin.read()))
    out = f(*args)
    print(type(f).__name__, f._code is not None, repr(np.asarray(out).tolist()))
""")


def _in_a_fresh_process(f, *args, cwd=None):
    """(type name, compiled, result) of loading ``f`` and calling it in a new interpreter."""
    out = subprocess.run([sys.executable, "-c", LOAD_AND_CALL], input=pickle.dumps((f, args)).hex(),
                         env={**os.environ, "PYTHONPATH": _pythonpath()}, cwd=cwd, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    name, compiled, values = out.stdout.strip().split(" ", 2)
    return name, compiled == "True", np.array(ast.literal_eval(values))


def test_an_importable_compiled_function_pickles_by_reference(tmp_path):
    P.scaled_sin(np.ones(3))  # compiled (its code, locks and kernels are not what travels)
    for dumps in (pickle.dumps, cloudpickle.dumps):
        data = dumps(P.scaled_sin)
        assert b"prog_pickling" in data and b"scaled_sin" in data and len(data) < 100, data
        assert pickle.loads(data) is P.scaled_sin
    x = np.linspace(0.0, 2.0, 5)
    name, compiled, got = _in_a_fresh_process(P.scaled_sin, x, cwd=tmp_path)
    assert (name, compiled) == ("CompiledFunction", True)
    np.testing.assert_allclose(got, P.scaled_sin.__wrapped__(x), rtol=1e-12)


def test_a_compiled_function_defined_in_a_function_pickles_by_value(tmp_path):
    @px.compile(fuse=False)
    def local_mix(x, y):
        return np.where(x > y, x - y, y * 2.0)

    x, y = np.arange(6.0), np.full(6, 2.5)
    data = pickle.dumps(local_mix)
    assert b"local_mix" in data
    assert pickle.loads(data) is local_mix  # the same pickle loaded in this process: the same object
    name, compiled, got = _in_a_fresh_process(local_mix, x, y, cwd=tmp_path)
    assert (name, compiled) == ("CompiledFunction", True)
    np.testing.assert_array_equal(got, local_mix.__wrapped__(x, y))
    # the options travel with it
    assert pickle.loads(cloudpickle.dumps(local_mix)).fuse is False


CELL = textwrap.dedent("""
    import numpy as np
    import phylanx_py as px

    OFFSET = 0.5

    def make(k):
        @px.compile
        def poly(x, n):
            if n == 0:
                return x * k + OFFSET
            return poly(x, n - 1) * 0.5

        return poly
""")


def test_a_function_pickled_by_value_compiles_where_its_file_does_not_exist(tmp_path):
    """A notebook cell's or a script's function sent to a worker elsewhere: the pickle carries its source (the
    receiving process compiles from source), and recursion through its closure finds the one object."""
    src = tmp_path / "cell_1.py"
    src.write_text(CELL)
    namespace = {"__name__": "cell_1"}  # not in sys.modules: not importable by name, as a notebook's cells
    exec(compile(CELL, str(src), "exec"), namespace)  # noqa: S102 - the test's own source text
    poly = namespace["make"](3.0)
    x = np.arange(4.0)
    np.testing.assert_allclose(poly(x, 2), (x * 3.0 + 0.5) * 0.25)
    src.unlink()
    name, compiled, got = _in_a_fresh_process(poly, x, 2, cwd=tmp_path)
    assert (name, compiled) == ("CompiledFunction", True)
    np.testing.assert_allclose(got, (x * 3.0 + 0.5) * 0.25)


def test_a_function_sent_again_after_its_global_changed_gives_the_new_answer(client, tmp_path):
    """A notebook's global changed between two submits: the new value travels (in the token, so a new task, and in
    the pickle, so the worker does not reuse the function it loaded before)."""
    src = tmp_path / "cell_2.py"
    src.write_text("import phylanx_py as px\n\nSCALE = 2.0\n\n@px.compile\ndef scaled(x):\n    return x * SCALE\n")
    namespace = {"__name__": "cell_2"}
    exec(compile(src.read_text(), str(src), "exec"), namespace)  # noqa: S102 - the test's own source text
    scaled, x = namespace["scaled"], np.arange(3.0)
    np.testing.assert_array_equal(client.submit(scaled, x).result(), x * 2.0)
    namespace["SCALE"] = 5.0
    np.testing.assert_array_equal(client.submit(scaled, x).result(), x * 5.0)
    np.testing.assert_array_equal(client.submit(P.call_on_worker, scaled, x).result()[1], x * 5.0)


# ---- tokens -----------------------------------------------------------------------------------------------
def test_tokens_are_deterministic_and_tell_functions_apart():
    with dask.config.set(DETERMINISTIC):
        assert tokenize(P.scaled_sin) == tokenize(P.scaled_sin)
        assert tokenize(P.make_affine(2.0)) == tokenize(P.make_affine(2.0))  # two objects, one function
        assert tokenize(P.make_affine(2.0)) != tokenize(P.make_affine(3.0))  # a closure value
        plain = P.scaled_sin.__wrapped__
        assert tokenize(px.compile(plain)) == tokenize(px.compile(plain))
        assert tokenize(px.compile(plain, fuse=False)) != tokenize(px.compile(plain))  # an option
        local = _functions()["by value"]
        assert tokenize(local) == tokenize(_functions()["by value"])


TOKENS = ("import prog_pickling as P; from dask.base import tokenize; "
          "print(tokenize(P.scaled_sin), tokenize(P.make_affine(2.0)), tokenize(P.scaled_sin_unfused))")


def test_tokens_are_the_same_in_other_processes():
    with dask.config.set(DETERMINISTIC):
        here = [tokenize(P.scaled_sin), tokenize(P.make_affine(2.0)), tokenize(P.scaled_sin_unfused)]
    for seed in ("1", "2"):  # string hashing (set order) differs between them
        env = {**os.environ, "PYTHONPATH": _pythonpath(), "PYTHONHASHSEED": seed,
               "DASK_TOKENIZE__ENSURE_DETERMINISTIC": "True"}
        out = subprocess.run([sys.executable, "-c", TOKENS], env=env, capture_output=True, text=True, timeout=120)
        assert out.stdout.split() == here, out.stderr


# ---- tiled arrays -----------------------------------------------------------------------------------------
def test_a_tiled_array_pickles_as_a_reference_to_its_tiles(rt):
    X = np.arange(4000.0).reshape(400, 10)
    with px.using(rt):
        t = px.tiled.from_array(X, tiles=(4, 1))
        data = pickle.dumps(t)
        assert len(data) < X.nbytes / 20  # the tiles' keys and the grid, not the values
        back = pickle.loads(data)
        assert type(back) is TiledArray and back.shape == t.shape and back.tiles == t.tiles
        assert [f.key for f in back.futures.flat] == [f.key for f in t.futures.flat]
        np.testing.assert_array_equal(np.asarray(back), X)
        np.testing.assert_array_equal(np.asarray(back * 2.0), 2.0 * X)
        with dask.config.set(DETERMINISTIC):
            assert tokenize(t) == tokenize(t) == tokenize(back)
            assert tokenize(t) != tokenize(t + 0.0)  # other tiles


def test_tasks_receive_tiled_arrays_through_submit_map_and_delayed(rt, client):
    X = np.arange(60.0).reshape(12, 5) / 7
    with px.using(rt):
        t = px.tiled.from_array(X, tiles=(3, 2))
        doubled = t * 2.0  # not computed yet: pickling computes its tiles
        name, values, shape = client.submit(P.tiled_summary, t).result()
        assert (name, shape) == ("TiledArray", X.shape)
        np.testing.assert_array_equal(values, X)
        for (_, values, _), want in zip(client.gather(client.map(P.tiled_summary, [t, doubled])), [X, 2 * X]):
            np.testing.assert_array_equal(values, want)
        with dask.config.set(DETERMINISTIC):
            _, values, _ = dask.delayed(P.tiled_summary)(doubled + 1.0).compute(scheduler=client)
        np.testing.assert_array_equal(values, 2 * X + 1.0)
        # tasks computing with it: more of them than worker threads, each waiting for tile tasks of its own
        want = (3.0 * X.sum(), 2.0 * X.sum())
        for got in client.gather(client.map(P.tiled_work, [t] * 3, pure=False)):
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_task_returning_a_tiled_array_must_compute_it(rt, client):
    with px.using(rt):
        t = px.tiled.from_array(np.ones((8, 2)), tiles=(2, 1))
        with pytest.raises(TypeError, match=r"which do not exist yet\. Return its values \(np\.asarray\(t\)\), or "
                                            r"compute it in the task \(return t\.persist\(\)\) and hold the task's "
                                            r"future"):
            client.submit(P.tiled_plus_one, t).result()
        # computed in the task, it comes back as a reference to tiles the task's result holds
        fut = client.submit(P.tiled_plus_one, t, persist=True)
        np.testing.assert_array_equal(np.asarray(fut.result()), np.full((8, 2), 2.0))


def test_a_tiled_array_sent_and_released_before_the_task_reads_it_is_a_clear_error(rt, client):
    with px.using(rt):
        t = px.tiled.from_array(np.ones((8, 2)), tiles=(2, 1))
        fut = client.submit(P.tiled_summary, t * 2.0, delay=1.0)  # the temporary ``t * 2.0`` is gone at once
        with pytest.raises(px.ClusterError, match=r"no longer there .* keep the array sent in a variable until the "
                                                  r"task has run"):
            fut.result()


LOAD_TILED = ("import pickle, sys\nimport numpy as np\nt = pickle.loads(bytes.fromhex(sys.stdin.read()))\n"
              "print(t.shape, t.tiles)\nnp.asarray(t)\n")


def test_a_tiled_array_loaded_without_a_client_of_its_cluster_says_why(rt, tmp_path):
    with px.using(rt):
        t = px.tiled.from_array(np.ones((8, 2)), tiles=(2, 1))
        data = pickle.dumps(t)
    env = {k: v for k, v in os.environ.items() if k != "PHYLANX_SCHEDULER"}
    out = subprocess.run([sys.executable, "-c", LOAD_TILED], input=data.hex(), env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and out.stdout.strip() == "(8, 2) (2, 1)"  # it loads; using it says why not
    assert out.stderr.strip().splitlines()[-1] == (
        "phylanx_py.errors.ClusterError: a TiledArray of shape (8, 2) (2 tiles) was unpickled as a reference to "
        f"tiles on the Dask cluster at {rt.client.scheduler.address}, and this process has no client of that "
        f"cluster: use it inside a task on that cluster, inside `with px.using(px.runtime.dask("
        f"'{rt.client.scheduler.address}')):`, or with a distributed.Client connected to it; to send the values "
        "themselves, pickle np.asarray(t)")
