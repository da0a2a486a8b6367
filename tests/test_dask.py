"""The Dask distributed runtime on real processes: a ``dask scheduler`` and two ``dask worker`` processes."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import prog_dask
import pytest
from cluster import DaskProcesses, free_port
from distributed import Client, get_task_stream
from helpers import check, source_position
from test_differential import ALL

import phylanx_py as px

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster():
    procs = DaskProcesses(n_workers=2)
    yield procs
    procs.stop()


@pytest.fixture(scope="module")
def rt(cluster):
    # inline_elements=0: every array operation is a task on the workers, so the remote path is what runs
    runtime = px.runtime.dask(cluster.address, inline_elements=0)
    yield runtime
    runtime.close()


ARRAY_CASES = [c for c in ALL if any(isinstance(a, np.ndarray) for a in c.values[1])]


@pytest.mark.parametrize(("fn", "args", "kwargs"), ARRAY_CASES)
def test_differential_programs_on_dask(rt, fn, args, kwargs):
    with px.using(rt):
        check(fn, *args, **kwargs)


def _data(rows=20_000, cols=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    y = (X @ rng.standard_normal(cols) > 0).astype(float)
    return X, y


def test_lra_and_data_dependent_control_flow(cluster):
    X, y = _data()
    with px.runtime.dask(cluster.address) as runtime, px.using(runtime):
        w = px.compile(prog_dask.lra)(X, y, 0.5, 15)
        got = px.compile(prog_dask.data_dependent)(np.ones(2_000_000), 1e8)
    np.testing.assert_allclose(w, prog_dask.lra(X, y, 0.5, 15), rtol=1e-12)
    want = prog_dask.data_dependent(np.ones(2_000_000), 1e8)
    assert got[0] == want[0] and got[1] == want[1]
    np.testing.assert_array_equal(got[2], want[2])


def test_task_keys_name_the_primitive_and_the_users_line(cluster):
    X, y = _data()
    f = px.compile(prog_dask.lra, fuse=False)  # op by op: every primitive is a task of its own
    fused = px.compile(prog_dask.lra)
    with px.runtime.dask(cluster.address, inline_elements=0) as runtime, px.using(runtime):
        with get_task_stream(runtime.executor.client) as ts:
            f(X, y, 0.5, 2)
        with get_task_stream(runtime.executor.client) as fused_ts:
            fused(X, y, 0.5, 2)
    # fused: the gradient X.T @ (sigmoid(X @ w) - y) is one row-product task per iteration, named for its line
    gradient_line, _ = source_position(prog_dask.lra, "X.T @")
    assert sum(t["key"].startswith(f"fused_rowdot@prog_dask.py:{gradient_line}-") for t in fused_ts.data) == 2
    keys = {t["key"] for t in ts.data}
    line, _ = source_position(prog_dask.lra, "X @ w")
    assert any(k.startswith(f"__matmul@prog_dask.py:{line}-") for k in keys), sorted(keys)[:5]
    assert any(k.startswith("input-") for k in keys)  # X sent once per call, as a recomputable task
    # only X (1.3 MB) is uploaded: y (160 kB) travels inside its tasks, and X.T is a view of the uploaded X
    assert sum(k.startswith("input-") for k in keys) == 1
    assert any(k.startswith("view-") for k in keys)
    # Loops with a known trip count are issued ahead: every iteration's tasks exist; per iteration two
    # matmuls, p - y, and the element-wise steps (2 x 5 at least).
    assert sum("@prog_dask.py:" in k for k in keys) >= 10


def test_lazy_returns_a_future_at_once(cluster):
    X, y = _data()
    f = px.compile(prog_dask.lra)
    with px.runtime.dask(cluster.address) as runtime, px.using(runtime):
        fut = f.lazy(X, y, 0.5, 5)
        np.testing.assert_allclose(fut.result(timeout=120), prog_dask.lra(X, y, 0.5, 5), rtol=1e-12)


def test_kernel_error_on_a_worker_names_the_line_and_the_cluster_stays_usable(rt):
    X = np.ones((300, 300))
    f = px.compile(prog_dask.shape_mismatch)
    with px.using(rt), pytest.raises(px.ExecutionError) as err:
        f(X, np.ones(7))
    line, col = source_position(prog_dask.shape_mismatch, "y @ w")
    assert (err.value.lineno, err.value.col) == (line, col)
    assert err.value.primitive == "__matmul"
    assert isinstance(err.value.__cause__, ValueError)
    assert str(err.value).startswith(f"{prog_dask.__file__}:{line}:{col}: in primitive '__matmul': ValueError: matmul")
    with px.using(rt):  # the next call on the same cluster works
        np.testing.assert_allclose(f(X, np.ones(300)), prog_dask.shape_mismatch(X, np.ones(300)))


def test_live_workers_are_all_the_workers_however_often_the_client_refreshes_its_cache(cluster):
    """``Client.scheduler_info()["workers"]`` races the client's periodic refresh, which caches an identity without
    workers: with the refresh every 5 ms some calls see none (a training segment took live workers for dead).
    ``live_workers`` asks the scheduler: both workers, every time; and none from a closed client."""
    import dask
    from phylanx_py.runtime.dask_connect import live_workers

    with dask.config.set({"distributed.client.scheduler-info-interval": "5ms"}):
        with Client(cluster.address) as client:
            seen = [len(live_workers(client)) for _ in range(300)]
            assert seen == [2] * 300
    assert live_workers(client) == {}


def test_refused_connection_is_a_clear_error_at_once():
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there: the connection is refused
    t0 = time.monotonic()
    with pytest.raises(px.ClusterError) as err:
        px.runtime.dask(address, timeout=30)
    assert time.monotonic() - t0 < 5  # not the 30 s timeout
    assert str(err.value) == (f"cannot reach the Dask scheduler at {address}: connection refused (nothing listens "
                              "there: start `dask scheduler`, or check the address)")


def test_silent_scheduler_is_a_clear_error_within_the_timeout():
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) but never says a word
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        t0 = time.monotonic()
        with pytest.raises(px.ClusterError) as err:
            px.runtime.dask(address, timeout=1)
        assert time.monotonic() - t0 < 15
    assert str(err.value).startswith(f"cannot reach the Dask scheduler at {address} within 1 s")


def test_tls_address_without_security_is_a_clear_error():
    with pytest.raises(px.ClusterError) as err:
        px.runtime.dask("tls://127.0.0.1:9", timeout=1)
    assert str(err.value).startswith("tls://127.0.0.1:9 is a TLS address but no TLS configuration was given: pass "
                                     "security=distributed.Security(")


def test_local_cluster_at_a_scripts_top_level_without_the_main_guard_is_a_clear_error(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text("import phylanx_py as px\n\nrt = px.runtime.dask(n_workers=2)\nprint('started')\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip().splitlines()[-1] == (
        f"phylanx_py.errors.ClusterError: {script}:3: px.runtime.dask() starts worker processes, and each one "
        "imports this script again, so its top-level code would start clusters without end. Put the script's "
        "top-level code under `if __name__ == \"__main__\":` (as Dask's documentation asks) and start the "
        "runtime there.")
    assert "Nanny" not in out.stderr


@pytest.mark.parametrize(("package", "expected"), [
    ("__version__ = '0.0.0+other'\n", "has phylanx-py 0.0.0+other, this client has"),
    ("raise ImportError('no phylanx here')\n", "cannot import phylanx-py (ImportError: no phylanx here)"),
])
def test_worker_without_this_phylanx_py_is_refused_by_name(tmp_path, package, expected):
    # A worker whose Python finds another package called phylanx_py: first on its PYTHONPATH, and with the
    # editable install's import hook (which would win over PYTHONPATH) taken out at start-up.
    fake = tmp_path / "phylanx_py"
    fake.mkdir()
    (fake / "__init__.py").write_text(package)
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n")
    procs = DaskProcesses(n_workers=1, extra_env={"PYTHONPATH": str(tmp_path)})
    try:
        with Client(procs.address) as c:
            (worker,) = c.nthreads()
        with pytest.raises(px.ClusterError) as err:
            px.runtime.dask(procs.address)
        assert f"worker {worker} {expected}" in str(err.value)
    finally:
        procs.stop()


def _kill_one_worker_during(procs, start_call, settle=1.0):
    """Start a compiled call, SIGKILL the worker holding its data while it runs, and return the call's result."""
    fut = start_call()
    time.sleep(settle)
    with Client(procs.address) as c:
        # wait until the call's inputs are on a worker (the first call translates and compiles first, which
        # takes seconds on a loaded machine); the worker holding most of its data is the one to kill
        deadline = time.monotonic() + 60
        while True:
            assert not fut.done(), "the computation must still be running when the worker dies"
            held = c.has_what()  # the call's inputs and intermediates (tasks follow their data)
            busiest = max(held, key=lambda w: len(held[w]))
            if any(k.startswith("input-") for k in held[busiest]):
                break
            assert time.monotonic() < deadline, f"no worker received the call's inputs in 60 s: {held}"
            time.sleep(0.1)
        pid = c.run(os.getpid, workers=[busiest])[busiest]
    (victim,) = [w for w in procs.alive_workers() if w.pid == pid]
    procs.kill_worker(victim)
    return fut.result(timeout=240)


@pytest.fixture(scope="module")
def fault_cluster():
    procs = DaskProcesses(n_workers=2)
    yield procs
    procs.stop()


@pytest.mark.parametrize("attempt", range(5))
def test_worker_killed_mid_computation_still_gives_the_right_answer(fault_cluster, attempt):
    procs = fault_cluster
    while len(procs.alive_workers()) < 2:
        procs.add_worker()
    procs.wait_for_workers(2)
    X, y = _data(rows=200_000, cols=10, seed=attempt)
    f = px.compile(prog_dask.lra)
    with px.runtime.dask(procs.address) as runtime, px.using(runtime):
        w = _kill_one_worker_during(procs, lambda: f.lazy(X, y, 0.5, 150))
    np.testing.assert_allclose(w, prog_dask.lra(X, y, 0.5, 150), rtol=1e-10)


# (all workers dead: tests/test_faults.py::test_no_worker_timeout_is_that_many_seconds)


SCRIPT = textwrap.dedent("""
    import numpy as np
    import phylanx_py as px

    @px.compile
    def total(x):
        return (x * 2.0).sum()

    print(px.runtime.current().name.split()[0], total(np.arange(100_000.0)))
""")


def test_phylanx_scheduler_variable_and_cli_select_the_cluster(cluster, tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    want = f"dask {np.arange(100_000.0).sum() * 2.0}"
    env = {**os.environ, "PHYLANX_SCHEDULER": cluster.address}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == want, out.stderr
    env = {k: v for k, v in os.environ.items() if k != "PHYLANX_SCHEDULER"}
    cli = [sys.executable, "-m", "phylanx_py.cli"]
    out = subprocess.run(cli + ["run", "--scheduler", cluster.address, str(script)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == want, out.stderr
    # after the script, the option is the script's (as with python -m): it runs locally, and is told so
    out = subprocess.run(cli + ["run", str(script), "--scheduler", cluster.address], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == want.replace("dask", "local"), out.stderr
    assert "[phylanx-py] note: --scheduler after the script goes to the script" in out.stderr
    out = subprocess.run(cli + ["info", "--scheduler", cluster.address], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.count(f"phylanx-py {px.__version__}") == 2, out.stdout + out.stderr  # both workers
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == f"local {np.arange(100_000.0).sum() * 2.0}"


def _listening(pids) -> dict:
    """Every socket listening in these processes and their children: {pid: [(ip, port), ...]}."""
    import psutil

    procs = []
    for pid in pids:
        p = psutil.Process(pid)
        procs += [p] + p.children(recursive=True)
    found = {}
    for p in procs:
        for c in p.net_connections(kind="inet"):
            if c.status == psutil.CONN_LISTEN:
                found.setdefault(p.pid, []).append((c.laddr.ip, c.laddr.port))
    return found


def test_local_cluster_runtime_closes_what_it_started(capfd):
    X, y = _data()
    before = _listening([os.getpid()])
    runtime = px.runtime.dask(n_workers=2)
    cluster = runtime.executor._owned[0]
    with px.using(runtime):
        w = px.compile(prog_dask.lra)(X, y, 0.5, 3)
    np.testing.assert_allclose(w, prog_dask.lra(X, y, 0.5, 3), rtol=1e-12)
    assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    # Nothing listens beyond loopback: the scheduler, its dashboard and the nannies (in this process), the
    # workers (child processes, two sockets each).
    opened = _listening([os.getpid()])
    new = set(opened.get(os.getpid(), ())) - set(before.get(os.getpid(), ()))
    workers = [pid for pid in opened if pid != os.getpid() and pid not in before]
    assert len(workers) == 2 and all(len(opened[w]) >= 1 for w in workers), opened
    assert len(new) >= 4, opened  # scheduler, dashboard, two nannies
    assert {ip for found in opened.values() for ip, _ in found} <= {"127.0.0.1", "::1"}, opened
    assert runtime.client is runtime.executor.client
    link = runtime.dashboard_link
    assert link.startswith("http://127.0.0.1:") and link.endswith("/status")
    assert ("127.0.0.1", int(link.split(":")[2].split("/")[0])) in new  # the dashboard is among them
    err = capfd.readouterr().err
    assert f"[phylanx-py] Dask LocalCluster {cluster.scheduler_address} with 2 workers; dashboard: {link}" in err
    runtime.close()
    assert cluster.status.name == "closed"


def test_existing_client_is_not_closed_by_the_runtime(cluster):
    with Client(cluster.address) as client:
        runtime = px.runtime.dask(client=client)
        with px.using(runtime):
            assert px.compile(prog_dask.independent_branches)(np.ones((400, 300)), np.ones((300, 300))) == \
                prog_dask.independent_branches(np.ones((400, 300)), np.ones((300, 300)))
        runtime.close()
        assert client.status == "running"


def test_info_prints_the_local_clusters_dashboard():
    out = subprocess.run([sys.executable, "-m", "phylanx_py.cli", "info", "--local-cluster", "1"],
                         capture_output=True, text=True, timeout=120)
    lines = dict(line.split(None, 1) for line in out.stdout.splitlines() if line.strip())
    assert lines["dashboard"].startswith("http://127.0.0.1:") and lines["dashboard"].endswith("/status"), out
    assert f"dashboard: {lines['dashboard']}" in out.stderr  # also announced when the cluster started


def test_threads_started_inside_using_run_on_the_cluster(rt):
    from concurrent.futures import ThreadPoolExecutor

    f = px.compile(prog_dask.independent_branches)
    a, b = np.ones((400, 300)), np.ones((300, 300))
    with px.using(rt), get_task_stream(rt.client) as ts, ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda _: f(a, b), range(2)))
    assert got == [prog_dask.independent_branches(a, b)] * 2
    line, _ = source_position(prog_dask.independent_branches, "np.sin(a)")
    assert sum(t["key"].startswith(f"sin@prog_dask.py:{line}-") for t in ts.data) == 2  # one per thread's call
