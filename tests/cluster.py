"""Real Dask processes for tests: a ``dask scheduler`` and ``dask worker`` subprocesses on free loopback
ports, started and stopped by the test (every process started here is ended here)."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import phylanx_py as px

# One BLAS/OpenMP thread per worker process: two workers must not fight over the two cores.
THREAD_CAPS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "NUMBA_NUM_THREADS": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dask_cli(*args) -> list[str]:
    # ``python -m distributed.cli.*`` is what the ``dask scheduler`` / ``dask worker`` commands run
    return [sys.executable, "-m", *args]


class DaskProcesses:
    """A scheduler and ``n_workers`` single-threaded workers: without a nanny (the default) a killed worker stays
    dead; with ``nanny=True`` each ``dask worker`` process is a nanny that starts the worker in a child process and
    starts it again when it dies (``kill_worker_under_nanny``), at a new address, or at the same one with
    ``worker_port=True`` (each worker given a fixed port)."""

    def __init__(self, n_workers: int = 2, extra_env: dict | None = None, nanny: bool = False,
                 worker_port: bool = False):
        self.nanny = nanny
        self.worker_port = worker_port  # each worker on a fixed port (free when it starts): its restarts keep it
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.env = {**os.environ, **THREAD_CAPS, **(extra_env or {})}
        # ``python -m`` puts the working directory first on sys.path: run outside the source tree, so workers
        # import phylanx-py as installed (what a real cluster does), not the repository's folders.
        self.cwd = tempfile.gettempdir()
        self.scheduler = subprocess.Popen(
            # --dashboard-address: even without the dashboard, Dask serves /health and /metrics over HTTP, by
            # default on all interfaces
            _dask_cli("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                      "--no-dashboard", "--dashboard-address", "127.0.0.1:0"),
            env={**os.environ, **THREAD_CAPS}, cwd=self.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.workers: list[subprocess.Popen] = []
        try:
            self._wait_for_port()
            for _ in range(n_workers):
                self.add_worker()
            self.wait_for_workers(n_workers)
        except BaseException:
            self.stop()
            raise

    def _wait_for_port(self, timeout=60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.scheduler.poll() is not None:
                raise RuntimeError(f"dask scheduler exited with {self.scheduler.returncode}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise TimeoutError("dask scheduler did not open its port")

    def add_worker(self, extra_env: dict | None = None) -> subprocess.Popen:
        port = ("--worker-port", str(free_port())) if self.worker_port else ()
        w = subprocess.Popen(
            _dask_cli("distributed.cli.dask_worker", self.address, "--nthreads", "1",
                      "--nanny" if self.nanny else "--no-nanny", *port,
                      "--no-dashboard", "--dashboard-address", "127.0.0.1:0", "--host", "127.0.0.1"),
            env={**self.env, **(extra_env or {})}, cwd=self.cwd, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.workers.append(w)
        return w

    def alive_workers(self) -> list[subprocess.Popen]:
        return [w for w in self.workers if w.poll() is None]

    def wait_for_workers(self, n: int, timeout: float = 60.0):
        from distributed import Client

        with Client(self.address, timeout=timeout) as c:
            c.wait_for_workers(n, timeout=timeout)

    def kill_worker(self, w: subprocess.Popen):
        w.send_signal(signal.SIGKILL)
        w.wait(timeout=30)

    def kill_worker_under_nanny(self, address: str, timeout: float = 60.0) -> str:
        """SIGKILL the worker process at ``address`` (``nanny=True``: its nanny stays and starts a new one); wait
        until the new worker has joined the scheduler and return its address (the same one with ``worker_port``)."""
        from distributed import Client

        assert self.nanny, "kill_worker_under_nanny needs DaskProcesses(nanny=True)"

        def ids(dask_scheduler=None):  # address -> the worker process's identity, as the scheduler knows it
            return {a: ws.server_id for a, ws in dask_scheduler.workers.items()}

        with Client(self.address, timeout=timeout) as c:
            before = c.run_on_scheduler(ids)
            pid = c.run(os.getpid, workers=[address])[address]
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
            while True:
                now = c.run_on_scheduler(ids)
                new = [a for a, i in now.items() if i not in before.values()]
                if before[address] not in now.values() and new and len(now) == len(before):
                    return new[0]
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the nanny of {address} did not start a new worker (workers: {now})")
                time.sleep(0.05)

    def kill_scheduler(self):
        self.scheduler.send_signal(signal.SIGKILL)
        self.scheduler.wait(timeout=30)

    def stop(self):
        # workers first: a worker whose scheduler is gone keeps trying to reconnect before it exits
        for group in (self.workers, [self.scheduler]):
            for p in group:
                if p.poll() is None:
                    p.terminate()
            for p in group:
                try:
                    p.wait(timeout=3)
                except subprocess.TimeoutExpired:  # test processes: no need to wait for a graceful close
                    p.kill()
                    p.wait(timeout=10)


@contextlib.contextmanager
def current_dask_runtime(n_workers: int = 2, **options):
    """A ``px.runtime.dask`` on fresh ``DaskProcesses``, current (``px.using``) inside the block; closed and the
    processes stopped after it (a module fixture's body: ``with current_dask_runtime() as rt: yield rt``)."""
    procs = DaskProcesses(n_workers=n_workers)
    runtime = px.runtime.dask(procs.address, **options)
    try:
        with px.using(runtime):
            yield runtime
    finally:
        runtime.close()
        procs.stop()
