"""The compile process kept per user between programs (the compile server): one process, reached through a Unix
socket in this user's private folder, that compiles for every program of this user which runs the same
interpreter, Numba and phylanx-py, so that a program's first native code does not wait for a compile process to
start.

A compile process's start is an interpreter, phylanx-py's compile modules, Numba's import and its CPU target made
ready: about 0.8 s on an idle core here, niced and beside a busy caller 1-1.5 s, and it was most of a small
kernel's time to native code (NPBench's lu: 1.3-1.4 s from its first call to native code, 0.7 s of it the
compile; Numba's own first call 0.46 s). A program that starts while the server of an earlier one still runs sends
its first request to a process that is ready.

What decides which server a program uses (``address``): the socket's name is a digest of the host, the interpreter,
phylanx-py's files (their names, sizes and modification times) and those of Numba, llvmlite, NumPy and SciPy where
this program finds them (the server is started with its Python path), and the ``NUMBA_*`` and ``PHYLANX_*``
variables that reach a compile; a program that differs in any of them starts its own
server, and an old server ends by itself. Trust: the folder is ``~/.cache/phylanx-py/run``, checked and made
private as the kernel cache's folders are (kernel_cache); the socket is the owner's alone (0600), and the server
closes a connection from any other user (``SO_PEERCRED``) before reading from it. What it compiles goes into the
asker's kernel cache, which the asker verifies as it loads (kernel_cache's trust model, unchanged).

Its life: it ends after ``PHYLANX_COMPILE_SERVER_IDLE`` seconds (default 300) with no program connected, once it
has answered ``RETIRE_AFTER`` requests (each compiled kernel stays loaded in it: a bounded size) and its programs
have gone (a new request starts a new server meanwhile), when its socket is removed or replaced, or when asked
(``stop``). A compile running when its asker ends is finished (its kernel is cached for the next run) unless another
program's request has waited for it ``ORPHAN_WAIT`` seconds: the server then ends, and that request goes to a new
one (``_watch``); requests waiting from programs that have ended are dropped. ``PHYLANX_COMPILE_SERVER=0`` gives
each program a compile process of its own that ends with it (compile_process.py), as before."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time

from phylanx_py.primitives import kernel_cache

IDLE_SECONDS = 300.0
RETIRE_AFTER = 200  # requests; each compiled kernel stays loaded in the server (a few MB of Numba's objects)
# how long another program's request waits behind a compile whose program has ended before the server gives up
# that compile and ends (the waiting program then starts a new server: about as long again)
ORPHAN_WAIT = 1.0
START_SECONDS = 20.0  # how long a program waits for a server it started to listen (it listens before its imports)
PEERCRED = struct.Struct("3i")  # Linux's ucred: pid, uid, gid
HEADER = struct.Struct("<Q")  # a request's length (0: ``stop``); the pid the server tells as it accepts
# a request's length with this bit: a lowering (``Server.lowers``), answered beside the compile running, with a
# HEADER-sized length and its pickled result (compile_child.lower_request)
LOWERING = 1 << 63
# variables that do not change a compile: where the asker's cache is (sent with each request), how the asker
# waits, and these settings themselves
_NOT_KEYS = frozenset({"PHYLANX_CACHE_DIR", "PHYLANX_COMPILE_LOWER", "PHYLANX_COMPILE_RISE", "PHYLANX_COMPILE_SERVER",
                       "PHYLANX_COMPILE_SERVER_IDLE", "PHYLANX_COMPILE_TARGET_NICE", "PHYLANX_COMPILE_BLAS_CAP"})


def enabled() -> bool:
    return os.environ.get("PHYLANX_COMPILE_SERVER", "1") != "0" and hasattr(socket, "AF_UNIX") and \
        hasattr(socket, "SO_PEERCRED")


def idle_seconds() -> float:
    try:
        return max(float(os.environ.get("PHYLANX_COMPILE_SERVER_IDLE", IDLE_SECONDS)), 0.0)
    except ValueError:
        return IDLE_SECONDS


def search_path() -> list[str]:
    """This program's Python path, absolute (the server starts in ``/``): the server imports what it would."""
    return [os.path.abspath(p) for p in sys.path]


def _package_files(key) -> None:
    """The files of phylanx-py's packages, and the ``__init__`` of Numba, llvmlite, NumPy and SciPy, into ``key``:
    their names, sizes and modification times (an edit, an upgrade or another checkout is another server; the
    server imports them from where this program does). Found without importing Numba (its import costs the caller
    0.3-0.6 s)."""
    frontend = importlib.util.find_spec("phylanx_py")  # (the runtime imports no frontend module)
    folders = [*(frontend.submodule_search_locations or ()),
               os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # runtime/
               os.path.dirname(os.path.abspath(kernel_cache.__file__))]  # primitives/
    for name in ("numba", "llvmlite", "numpy", "scipy"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            folders.append(spec.origin)  # its __init__.py: a new version rewrites it
    for top in folders:
        if os.path.isfile(top):
            st = os.stat(top)
            key.update(f"{top}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            continue
        for folder, subfolders, files in os.walk(top):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".so", ".pyd")):
                    st = os.stat(os.path.join(folder, name))
                    key.update(f"{folder}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())


def address() -> str | None:
    """This program's server's socket (made private: UnsafeCacheError when refused), or None when there cannot be
    one here (a path too long for a Unix socket, a folder that cannot be made)."""
    key = hashlib.sha256()
    # the host too: a home folder shared by the nodes of a cluster holds one socket a node, not one they take turns at
    key.update(f"{socket.gethostname()}\0{sys.executable}\0{sys.version}\n".encode())
    for name in sorted(os.environ):
        if name.startswith(("NUMBA_", "PHYLANX_")) and name not in _NOT_KEYS:
            key.update(f"{name}={os.environ[name]}\n".encode())
    try:
        _package_files(key)
        folder = os.path.join(kernel_cache.USER_DIR, "run")
        kernel_cache._private_dir(kernel_cache.USER_DIR, "PHYLANX_CACHE_DIR")
        kernel_cache._private_dir(folder, "PHYLANX_CACHE_DIR")
    except OSError:
        return None
    path = os.path.join(folder, f"compile-{key.hexdigest()[:24]}.sock")
    return path if len(os.fsencode(path)) < 104 else None  # sun_path: 108 bytes on Linux, 104 on the BSDs


class Link:
    """A program's connection to the server: requests as compile_process sends them to its own child (a header,
    the pickled request), one reply byte each. ``pid``: the server's (told when it accepted the connection)."""

    def __init__(self, sock: socket.socket, pid: int):
        self.sock, self.pid = sock, pid

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answered(self, seconds: float | None) -> bool:
        return bool(select.select([self.sock], [], [], None if seconds is None else max(seconds, 0.0))[0])

    def reply(self) -> bytes:
        """The reply byte; b"" when the server ended."""
        try:
            return self.sock.recv(1)
        except OSError:
            return b""

    def sized_reply(self) -> bytes | None:
        """A lowering's reply (its pickled result); None when the server ended."""
        try:
            header = _exactly(self.sock, HEADER.size)
            return None if header is None else _exactly(self.sock, HEADER.unpack(header)[0])
        except OSError:
            return None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def renice(pid: int, niceness: int) -> None:
    """Set the niceness of every thread of process ``pid`` (Linux keeps a niceness per thread: ``setpriority`` on
    the process id reaches its main thread alone, and the server compiles in a connection's thread). OSError
    (PermissionError: lowering another process's niceness without the right) as ``os.setpriority`` raises it."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        tids = [pid]
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, niceness)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass


def connect(path: str, seconds: float = 5.0) -> Link | None:
    """A link to the server listening at ``path``, or None when none does."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(seconds)
        sock.connect(path)
        told = _exactly(sock, HEADER.size)
        sock.settimeout(None)
    except OSError:
        sock.close()
        return None
    if told is None:  # it closed the connection: ending, or not ours
        sock.close()
        return None
    return Link(sock, HEADER.unpack(told)[0])


# The server's start. The program's Python path first (the server imports the phylanx-py this program runs); its
# priority lowered before anything else; then a second fork, so that the server is nobody's child (the program that
# started it never waits for it and leaves no zombie when it ends); then its packages made bare as the compile
# child's are (compile_process.BOOT: only what compiling needs is imported); compile_child runs it (``serve_at``).
BOOT = """
import json, os, sys
sys.path[:] = json.loads(sys.argv[2])
try:
    os.setpriority(os.PRIO_PROCESS, 0, int(os.environ.get("PHYLANX_COMPILE_TARGET_NICE", "19")))
except (OSError, ValueError, AttributeError):
    pass
if os.fork():
    os._exit(0)
os.chdir("/")
import importlib.util, runpy
for name in ("phylanx_py", "phylanx_py.runtime", "phylanx_py.runtime.native"):
    sys.modules[name] = importlib.util.module_from_spec(importlib.util.find_spec(name))
runpy.run_module("phylanx_py.runtime.native.compile_child", run_name="__main__", alter_sys=True)
"""


def start(path: str, env: dict) -> Link | None:
    """Start a server at ``path`` (``env``: its environment) and connect to it; None when it does not listen
    within ``START_SECONDS`` (another program's server may have won the race: it is then the one connected to)."""
    try:
        starter = subprocess.Popen([sys.executable, "-c", BOOT, path, json.dumps(search_path())],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   close_fds=True, start_new_session=True, env=env)
        starter.wait(timeout=START_SECONDS)
    except (OSError, subprocess.SubprocessError):
        return None
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        link = connect(path)
        if link is not None:
            return link
        time.sleep(0.01)
    return None


def stop(path: str | None = None) -> bool:
    """Ask the server at ``path`` (this program's by default) to end now; True when one answered."""
    path = path or address()
    link = connect(path) if path else None
    if link is None:
        return False
    try:
        link.send(HEADER.pack(0))  # an empty request: end
        return link.reply() == b"1"
    except OSError:
        return False
    finally:
        link.close()


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        try:
            got = sock.recv(n - len(data))
        except OSError:
            return None
        if not got:
            return None
        data += got
    return data


class Server:
    """The server's side: an accepting loop (the main thread), a thread per connection, one compile at a time.
    ``handle``: a request's payload to its reply byte; ``ready``: run once before the first (compile_child's)."""

    def __init__(self, path: str, idle: float, handle, ready=None, lowers=None):
        self.path, self.idle, self.handle, self.prepare = path, idle, handle, ready
        self.lowers = lowers  # a lowering's payload to its reply (compile_child.lower_request)
        self.compiling = threading.Lock()
        self.state = threading.Lock()
        self.connections = 0
        self.served = 0
        self.last = time.monotonic()
        self.retiring = False
        self.ended = False
        self.waiting = 0  # requests waiting for the compile running now
        self.listener = None
        self.inode = None
        self.lock_fd = None
        self._withdrawing = threading.Lock()
        # its own niceness (set as it started): a program whose request rose raised its threads to the program's
        # priority (compile_process._server_risen); they go back down after that request, and at once when that
        # program ends while its compile runs (``_watch``)
        self.niceness = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else 0

    def claim(self) -> bool:
        """The folder's lock for this address (one server an address), and the socket listening; False when
        another server holds it."""
        import fcntl

        self.lock_fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + 5.0
        while True:
            try:
                fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # a live server holds it (then the program connects to that one), or one is retiring (its lock
                # goes right after its socket)
                live = connect(self.path, 0.5)
                if live is not None:
                    live.close()
                    return False
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
        try:
            os.unlink(self.path)  # a socket left by a server that was killed
        except FileNotFoundError:
            pass
        old = os.umask(0o177)
        try:
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self.inode = os.stat(self.path).st_ino
        self.listener.listen(64)
        self.listener.settimeout(0.5)
        return True

    def ours(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def withdraw(self) -> None:
        """No new connections: the socket removed (if it is still ours) and the lock let go, so that the next
        program starts a server of its own."""
        with self._withdrawing:
            listener, self.listener = self.listener, None
            if listener is None:
                return
            if self.ours():
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
            listener.close()
            try:  # the lock file too, while it is held (a server starting meanwhile holds another: it wins the socket)
                if os.stat(self.path + ".lock").st_ino == os.fstat(self.lock_fd).st_ino:
                    os.unlink(self.path + ".lock")
            except OSError:
                pass
            os.close(self.lock_fd)

    def run(self) -> None:
        """Accept connections until the server ends (the socket listens before the compile modules and Numba are
        imported: a program connects at once, and its first request waits for them)."""
        threading.Thread(target=self.ready, daemon=True).start()
        while not self.ended:
            listener = self.listener
            if listener is not None:
                try:
                    conn, _ = listener.accept()
                except OSError:  # a timeout, or the socket closed meanwhile (``stop``)
                    conn = None
                if conn is not None:
                    self.admit(conn)
            else:
                time.sleep(0.5)
            with self.state:
                alone, quiet = self.connections == 0, time.monotonic() - self.last
            if self.listener is not None and (self.retiring or not self.ours()):
                self.withdraw()
            if alone and (self.listener is None or quiet > self.idle):
                break
        self.withdraw()

    def ready(self) -> None:
        if self.prepare is not None:
            with self.compiling:  # the first request waits for Numba's CPU target, as a compile child's does
                self.prepare()

    def lower(self) -> None:
        """Every thread back to the server's own niceness (raising one's niceness is always allowed)."""
        try:
            renice(os.getpid(), self.niceness)
        except OSError:
            pass

    def _watch(self, conn: socket.socket, done: threading.Event) -> None:
        """While a request compiles: once its program has ended, the server goes back to its own niceness (a
        program that ended after its request rose would have left it compiling at that program's priority), and
        finishes the compile only while no other program waits: its kernel is cached for that program's next run,
        but a compile of seconds would hold up another program's first kernel (NPBench's harness runs one kernel
        a program, one after another). Then the server ends (Numba's compile cannot be stopped in a thread), and
        the waiting program's request goes to a new one."""
        orphan, since = False, None
        while not done.wait(0.1 if orphan else 0.5):
            if not orphan and _gone(conn):
                orphan = True
                self.lower()
            if orphan and self.waiting:
                since = since or time.monotonic()
                if time.monotonic() - since > ORPHAN_WAIT:
                    self.abandon()
                    return
            else:
                since = None

    def abandon(self) -> None:
        self.withdraw()
        os._exit(0)

    def admit(self, conn: socket.socket) -> None:
        conn.settimeout(None)
        try:
            _, uid, _ = PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size))
            if uid != os.getuid():
                raise PermissionError("another user")
            conn.sendall(HEADER.pack(os.getpid()))
        except OSError:
            conn.close()
            return
        with self.state:
            self.connections += 1
        threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn: socket.socket) -> None:
        try:
            while True:
                header = _exactly(conn, HEADER.size)
                if header is None:
                    return
                size = HEADER.unpack(header)[0]
                if size == 0:  # ``stop``: answered before the accepting loop may end the process
                    self.withdraw()
                    try:
                        conn.sendall(b"1")
                    finally:
                        self.ended = True
                    return
                if size & LOWERING:
                    # a lowering (the asker's job beside its calls waits for it): not behind the compile running,
                    # whose thread it shares this process's interpreter lock with
                    payload = _exactly(conn, size & ~LOWERING)
                    if payload is None or self.lowers is None:
                        return
                    try:
                        conn.sendall(self.lowers(payload))
                    except OSError:
                        return
                    continue
                payload = _exactly(conn, size)
                if payload is None:
                    return
                with self.state:
                    self.waiting += 1
                try:
                    self.compiling.acquire()
                finally:
                    with self.state:
                        self.waiting -= 1
                try:
                    if _gone(conn):  # its program ended while the request waited: nobody to compile it for
                        return
                    done = threading.Event()
                    threading.Thread(target=self._watch, args=(conn, done), daemon=True).start()
                    try:
                        reply = self.handle(payload)
                    finally:
                        done.set()
                        self.lower()
                    with self.state:
                        self.served += 1
                        self.retiring = self.served >= RETIRE_AFTER
                finally:
                    self.compiling.release()
                try:
                    conn.sendall(reply)
                except OSError:
                    return
        finally:
            conn.close()
            with self.state:
                self.connections -= 1
                self.last = time.monotonic()


def _gone(conn: socket.socket) -> bool:
    """The program at the other end has closed it (it never sends a request before the last one's reply)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def main(path: str, handle, ready, lowers=None) -> None:
    """The server's life (compile_child runs it as ``__main__`` with a socket's path)."""
    server = Server(path, idle_seconds(), handle, ready, lowers)
    if server.claim():
        server.run()
    os._exit(0)  # a compile still running for a program that has ended is not waited for
