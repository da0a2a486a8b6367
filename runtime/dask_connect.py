"""Getting a ``distributed.Client``: checks that turn the usual ways of getting it wrong into one clear ClusterError.

- A script that starts a LocalCluster at its top level, outside ``if __name__ == "__main__":``: Dask's worker
  processes are *spawned* (distributed.worker.multiprocessing-method), and a spawned process imports the main
  script again, which starts another cluster in each worker... ending in "Nanny failed to start" tracebacks. Dask's
  documentation asks for the guard; we check for it before starting anything.
- A refused connection (nothing listens at the address) fails at once; only silence waits for ``timeout``.
- A ``tls://`` address without ``security=`` (distributed raises a bare TypeError about ``ssl_context``).
- The LocalCluster and its dashboard bind 127.0.0.1 only (``dashboard_address=":0"`` would mean all interfaces).
"""
from __future__ import annotations

import ast
import functools
import inspect
import os
import socket
import sys

from phylanx_py._version import __version__
from phylanx_py.errors import ClusterError


def _is_main_test(test) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


def unguarded_main_line() -> tuple[str, int] | None:
    """(script, line) when a LocalCluster is being started by the main script's top-level code outside an
    ``if __name__ == "__main__":`` block and worker processes are spawned (they would run that code again)."""
    import dask

    if dask.config.get("distributed.worker.multiprocessing-method", "spawn") == "fork":
        return None
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path:
        return None  # an interactive session or python -c: nothing is imported again
    frame, outer = sys._getframe(1), None
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") in ("__main__", "__mp_main__"):
            outer = frame
        frame = frame.f_back
    if outer is None or os.path.abspath(outer.f_code.co_filename) != os.path.abspath(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    line = outer.f_lineno
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_main_test(node.test) and node.lineno <= line <= node.end_lineno:
            return None
    return path, line


def check_main_guard():
    found = unguarded_main_line()
    if found is not None:
        path, line = found
        raise ClusterError(
            f"{path}:{line}: px.runtime.dask() starts worker processes, and each one imports this script again, "
            "so its top-level code would start clusters without end. Put the script's top-level code under "
            "`if __name__ == \"__main__\":` (as Dask's documentation asks) and start the runtime there.")


def check_address(address: str, security, timeout: float):
    """A refused connection is a ClusterError at once; ``tls://`` needs ``security=``."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme == "tls" and security is None:
        from distributed.security import Security

        if Security().get_connection_args("client").get("ssl_context") is None:
            raise ClusterError(f"{address} is a TLS address but no TLS configuration was given: pass "
                               "security=distributed.Security(tls_ca_file=..., tls_client_cert=..., "
                               "tls_client_key=..., require_encryption=True) (or set distributed.comm.tls in "
                               "Dask's configuration)")
    if scheme not in ("tcp", "tls"):
        return
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port.split("/")[0])
    except ValueError:
        return  # distributed gives its own error for a malformed address
    try:
        with socket.create_connection((host or "127.0.0.1", port), timeout=timeout):
            pass
    except ConnectionRefusedError as e:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: connection refused (nothing listens "
                           "there: start `dask scheduler`, or check the address)") from e
    except OSError:
        pass  # silence or a name lookup failure: distributed waits for its timeout and reports it


def connect(address: str, timeout: float, security):
    """``distributed.Client(address)``, bounded in time. distributed's handshake read has no timeout (a listener
    that accepts the connection and never answers hangs ``Client()`` for ever), so the client is made on a
    helper thread and abandoned (closed when it finally answers) after ``timeout`` plus a margin."""
    import threading

    import distributed

    box: dict = {}
    done = threading.Event()
    gave_up = threading.Event()

    def make():
        try:
            box["client"] = distributed.Client(address, timeout=timeout, security=security)
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            box["error"] = e
        done.set()
        if gave_up.is_set() and "client" in box:
            box["client"].close()

    threading.Thread(target=make, name="phylanx-connect", daemon=True).start()
    if not done.wait(timeout + 5.0):
        gave_up.set()
        raise ClusterError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s: it accepted the "
                           "connection but never answered (is a Dask scheduler listening there?)")
    if "error" in box:
        raise box["error"]
    return box["client"]


# glibc thresholds for the worker processes of a LocalCluster we start: Dask's nanny sets MALLOC_TRIM_THRESHOLD_ to
# 64 KiB, and every fresh multi-MB array then page-faults (3.7 MB ``p - lr*g``: 9.3 ms instead of 0.43). Only
# ``distributed.nanny.pre-spawn-environ`` is applied before the process starts (REFERENCES.md).
WORKER_MALLOC_ENV = {"MALLOC_TRIM_THRESHOLD_": str(256 << 20), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}


def start_local_cluster(n_workers, threads_per_worker, security, cluster_kwargs):
    """A LocalCluster of worker processes on 127.0.0.1, its dashboard on 127.0.0.1 too (announced on stderr)."""
    import dask
    import distributed

    check_main_guard()
    dashboard = cluster_kwargs.pop("dashboard_address", "127.0.0.1:0")
    # glibc's thresholds are read when a worker process starts: set through the nanny's pre-spawn environment
    # (LocalCluster(env=...) is applied too late), see WORKER_MALLOC_ENV
    env = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_MALLOC_ENV}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
        cluster = distributed.LocalCluster(
            n_workers=n_workers or os.cpu_count() or 1, threads_per_worker=threads_per_worker or 1,
            processes=True, host="127.0.0.1", dashboard_address=dashboard, security=security, **cluster_kwargs)
    link = getattr(cluster, "dashboard_link", None)
    print(f"[phylanx-py] Dask LocalCluster {cluster.scheduler_address} with {len(cluster.workers)} workers"
          + (f"; dashboard: {link}" if link else ""), file=sys.stderr)
    return cluster


# A probe that must run on workers that may not have phylanx-py: built from source in a module of its own
# name, so cloudpickle ships it by value instead of by reference to a phylanx_py module.
_PROBE_SOURCE = """
def probe():
    try:
        import phylanx_py
        return ("ok", phylanx_py.__version__)
    except BaseException as e:
        return ("missing", f"{type(e).__name__}: {e}")
"""


def _make_probe():
    ns = {"__name__": "__phylanx_probe__"}
    exec(_PROBE_SOURCE, ns)  # noqa: S102 - a constant defined above
    return ns["probe"]


def check_workers(client) -> dict:
    """Every worker's phylanx-py version; ClusterError naming the workers that lack it or differ."""
    answers = client.run(_make_probe(), on_error="return")
    bad = []
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, BaseException):
            bad.append(f"worker {worker} could not be probed: {type(answer).__name__}: {answer}")
        elif answer[0] != "ok":
            bad.append(f"worker {worker} cannot import phylanx-py ({answer[1]})")
        elif answer[1] != __version__:
            bad.append(f"worker {worker} has phylanx-py {answer[1]}, this client has {__version__}")
    if bad:
        raise ClusterError("; ".join(bad) + ". Install the same phylanx-py on every worker "
                           "(docs/clusters.md: What to know when you use a cluster).")
    return {w: a[1] for w, a in answers.items()}


def live_workers(client) -> dict:
    """The scheduler's workers now, ``{address: info}``, asked of the scheduler itself.

    Not ``client.scheduler_info()["workers"]``: that call refreshes the client's cached identity and then reads the
    cache back, while the client's own periodic refresh (every ``scheduler-info-interval``, 2 s) writes a worker-less
    identity into the same cache. A read that falls between the two sees no workers at all (here 375 of 54,000 calls
    with the refresh every 5 ms), and a training segment once took its live workers for dead and ran again."""
    if client.status != "running":  # closed, or reconnecting after the scheduler went: none known to be alive
        return {}
    try:
        return client.sync(client.scheduler.identity, **_every_worker())["workers"]
    except OSError:  # the scheduler went away while asked (CommClosedError is an OSError): none known alive
        return {}


@functools.cache
def _every_worker() -> dict:
    """``identity``'s argument for all workers (distributed since 2025: ``n_workers=-1``; before: none needed),
    looked up once: the watchdogs ask for the live workers twice a second."""
    from distributed.scheduler import Scheduler

    return {"n_workers": -1} if "n_workers" in inspect.signature(Scheduler.identity).parameters else {}
