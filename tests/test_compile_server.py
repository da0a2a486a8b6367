"""The compile server (runtime/native/compile_server.py): one compile process kept per user between programs. Real
programs (subprocesses) and real servers; each test gives its servers an address of their own (a ``PHYLANX_*``
variable of the test's is part of the address) and ends them."""
from __future__ import annotations

import os
import pickle
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import numpy as np
import pytest
from phylanx_py.primitives import fused as fz
from phylanx_py.primitives import kernel_cache
from phylanx_py.runtime.native import compile_child, compile_process, compile_server

pytestmark = pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="the compile server needs SO_PEERCRED "
                                                                           "(Linux): elsewhere each program has a "
                                                                           "compile process of its own")

# A program that compiles a loop function to native code (its background compile asks the compile process) and
# prints: its answer matches the plain function's, the server's process id, whether it has a child of its own.
PROGRAM = textwrap.dedent("""
    import sys, threading, time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import compile_process, tiering

    tiering.HOT_SECONDS = 0.0

    def scaled_tanh(a, k):
        out = np.zeros(len(a))
        for i in range(len(a)):
            out[i] = np.tanh(a[i]) * k
        return out

    f = px.compile(scaled_tanh)
    x = np.linspace(-1.0, 1.0, 50, dtype=sys.argv[2])  # another dtype: another kernel to compile
    k = float(sys.argv[1])
    rtol = 1e-14 if x.dtype == np.float64 else 1e-6  # (float32's tanh: NumPy's and Numba's may differ by an ulp)
    same, deadline = True, time.monotonic() + 120
    while " -> native" not in f.explain() and time.monotonic() < deadline:  # called until a call ran natively
        same = same and bool(np.allclose(f(x.copy(), k), scaled_tanh(x.copy(), k), rtol=rtol))
        time.sleep(0.02)
    while compile_process._server[0] is None and time.monotonic() < deadline:  # (a start still connecting)
        time.sleep(0.01)
    for t in threading.enumerate():  # its other background compiles (a kernel built ahead of time) answered
        if t.name == "phylanx-native-compile":
            t.join(120)
    link = compile_process._server[0]
    print(same, " -> native" in f.explain(), link.pid if link else None, compile_process._child[0] is None)
""")


@pytest.fixture
def own_address(monkeypatch, tmp_path):
    """The server on, at an address of this test's own; every server at it ended afterwards."""
    monkeypatch.setenv("PHYLANX_COMPILE_SERVER", "1")
    monkeypatch.delenv("PHYLANX_COMPILE_PROCESS", raising=False)
    monkeypatch.delenv("PHYLANX_COMPILE_SERVER_IDLE", raising=False)
    monkeypatch.setenv("PHYLANX_TEST_SERVER", uuid.uuid4().hex)
    monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(tmp_path / "cache"))
    compile_process.close()
    path = compile_server.address()
    assert path is not None
    try:
        yield path
    finally:
        compile_process.close()
        compile_server.stop(path)


def _run(tmp_path, *args, env=None):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "PHYLANX_CACHE_DIR": str(tmp_path / "cache"), **(env or {})}
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr
    same, native, pid, no_child = done.stdout.split()
    return same == "True", native == "True", int(pid), no_child == "True"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except FileNotFoundError:
        return False


def _ends(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_programs_one_after_another_compile_in_one_server(own_address, tmp_path):
    """A program's background compiles go to the compile server, which outlives it: the next program of the same
    user, interpreter and phylanx-py compiles in the same process (ready, no start of its own), and neither has a
    compile child. Both answer as the plain function, natively. ``stop`` ends the server."""
    first = _run(tmp_path, "2.0", "float64")
    assert first[:2] == (True, True) and first[3]
    assert _alive(first[2])  # the program has ended; its server has not
    second = _run(tmp_path, "3.0", "float32")
    assert second == (True, True, first[2], True)
    assert compile_server.stop(own_address)
    assert _ends(first[2], 10)
    assert not os.path.exists(own_address)


def test_the_server_and_its_folder_are_private_and_it_is_nobodys_child(own_address):
    """The socket is its owner's alone (0600) in a folder of the owner's (0700); the server is not a child of the
    program that started it (that program never waits for it, and leaves no zombie)."""
    spec = ("add", ("multiply", ("arg", 0), ("const", 5.0)), ("arg", 0))
    dtypes, in_dtypes = fz._dtypes(spec, (np.ones(4),))
    source, _ = fz._source(spec, in_dtypes, dtypes)
    assert compile_process.warm("fused", source, ()) is True
    link = compile_process._server[0]
    assert link and compile_process._child[0] is None
    assert stat.S_IMODE(os.stat(own_address).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(own_address)).st_mode) == 0o700
    with open(f"/proc/{link.pid}/stat") as f:
        parent = int(f.read().rsplit(")", 1)[1].split()[1])
    assert parent != os.getpid()
    assert os.getpriority(os.PRIO_PROCESS, link.pid) == min(os.getpriority(os.PRIO_PROCESS, 0) + 19, 19)


def test_other_settings_are_another_server(own_address, monkeypatch):
    """A variable that reaches a compile (``NUMBA_*``, ``PHYLANX_*``) is part of the address: a program with other
    settings never gets kernels compiled under this one's. Where the cache is is not (it goes with each request)."""
    monkeypatch.setenv("PHYLANX_CACHE_DIR", "/somewhere/else")
    assert compile_server.address() == own_address
    monkeypatch.setenv("NUMBA_OPT", "1")
    assert compile_server.address() != own_address


def test_an_idle_server_ends(own_address, tmp_path):
    """With no program connected for ``PHYLANX_COMPILE_SERVER_IDLE`` seconds, the server ends and removes its
    socket."""
    same, native, pid, _ = _run(tmp_path, "1.5", "float64", env={"PHYLANX_COMPILE_SERVER_IDLE": "1"})
    assert same and native
    assert _ends(pid, 30)
    assert not os.path.exists(own_address)


def test_a_killed_server_is_replaced(own_address):
    """A server killed between two requests (or during one) is replaced by a new one for the next request; its
    socket, left behind, is taken over."""
    spec = ("add", ("multiply", ("arg", 0), ("const", 7.0)), ("arg", 0))
    dtypes, in_dtypes = fz._dtypes(spec, (np.ones(4),))
    source, _ = fz._source(spec, in_dtypes, dtypes)
    assert compile_process.warm("fused", source, ()) is True
    old = compile_process._server[0].pid
    os.kill(old, 9)
    assert _ends(old, 10)
    assert os.path.exists(own_address)  # left behind
    other = source.replace("7.0", "8.0")
    assert compile_process.warm("fused", other, ()) is True
    new = compile_process._server[0].pid
    assert new != old and _alive(new) and compile_process._child[0] is None


def test_a_request_that_rises_without_privilege_goes_to_a_child_of_our_own(own_address, monkeypatch):
    """A request the niced server has not answered within PHYLANX_COMPILE_RISE seconds, from a program that may
    not lower another process's niceness (the kernel's EPERM, as in test_native's stand-in), is compiled by a
    child of the program started at its priority; the server is left to finish it niced."""
    real = os.setpriority

    def unprivileged(which, who, prio):
        if prio < os.getpriority(which, who):
            raise PermissionError(1, "Operation not permitted")
        real(which, who, prio)

    spec = ("add", ("multiply", ("arg", 0), ("const", 9.0)), ("arg", 0))
    dtypes, in_dtypes = fz._dtypes(spec, (np.ones(4),))
    source, _ = fz._source(spec, in_dtypes, dtypes)
    monkeypatch.setattr(compile_process.os, "setpriority", unprivileged)
    monkeypatch.setenv("PHYLANX_COMPILE_RISE", "0")
    rises = compile_process.RISES[0]
    assert compile_process.warm("fused", source, ()) is True
    assert compile_process.RISES[0] == rises + 1
    child = compile_process._child[0]
    assert child and child.poll() is None
    assert os.getpriority(os.PRIO_PROCESS, child.pid) == min(os.getpriority(os.PRIO_PROCESS, 0) + 19, 19)


def test_a_request_that_rises_compiles_at_the_callers_priority_then_goes_back(own_address, monkeypatch):
    """A request the niced server has not answered within PHYLANX_COMPILE_RISE seconds is compiled at the program's
    priority: every thread of the server reniced (Linux keeps a niceness per thread, and the server compiles in a
    connection's thread: renicing its process id reached only the thread that accepts), where the program may lower
    another process's niceness; otherwise by a child of the program's own (the test above). After the answer every
    thread is back at the server's own niceness."""
    spec = ("add", ("multiply", ("arg", 0), ("const", 11.0)), ("arg", 0))
    dtypes, in_dtypes = fz._dtypes(spec, (np.ones(4),))
    source, _ = fz._source(spec, in_dtypes, dtypes)
    monkeypatch.setenv("PHYLANX_COMPILE_RISE", "1000")
    assert compile_process.warm("fused", "this is not Python", ()) is False  # the server started, answered "no"
    pid = compile_process._server[0].pid
    own, low = os.getpriority(os.PRIO_PROCESS, 0), min(os.getpriority(os.PRIO_PROCESS, 0) + 19, 19)

    def threads():
        found = {}
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                found[int(tid)] = os.getpriority(os.PRIO_PROCESS, int(tid))
            except OSError:
                pass
        return found

    seen, done = set(), threading.Event()

    def watch():
        while not done.is_set():
            seen.update(threads().values())
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    monkeypatch.setenv("PHYLANX_COMPILE_RISE", "0")
    try:
        assert compile_process.warm("fused", source, ()) is True
    finally:
        done.set()
        watcher.join()
    child = compile_process._child[0]
    assert own in seen or (child and child.poll() is None), seen  # reniced, or (unprivileged) a child compiled it
    assert set(threads().values()) == {low}


# a kernel whose compile takes seconds: many statements (5-6 s here)
SLOW = "import numba\n@numba.njit(cache=True)\ndef kernel(x):\n    y = x\n" + "".join(
    f"    y = y * 1.0001 + {i}.5 if y < {i * 7} else y - {i}.25\n" for i in range(200)) + "    return y\n"

ORPHAN = textwrap.dedent("""
    import os, pickle, sys, time
    from phylanx_py.runtime.native import compile_process, compile_server
    link = compile_server.connect(sys.argv[1])
    payload = pickle.dumps((sys.argv[2], "load_kernel", sys.argv[3], ("px-described", False, (1.5,))))
    link.send(compile_process.HEADER.pack(len(payload)) + payload)
    time.sleep(0.5)  # its compile has started
    print(link.pid)
    os._exit(0)  # gone, its kernel still compiling
""")


def test_a_compile_left_by_a_program_that_ended_gives_way_to_another_programs_request(own_address, tmp_path,
                                                                                        monkeypatch):
    """A program asks for a kernel whose compile takes seconds and ends at once; another program's request then
    waits for that compile, so the server ends (a compile cannot be stopped in a thread) and the request goes to a
    new server, answered there, instead of waiting for a kernel nobody waits for."""
    monkeypatch.setenv("PHYLANX_COMPILE_RISE", "1000")
    assert compile_process.warm("fused", "this is not Python", ()) is False  # the server started and ready
    first = compile_process._server[0].pid
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    done = subprocess.run([sys.executable, str(script), own_address, str(tmp_path / "other"), SLOW],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and int(done.stdout) == first, done.stderr
    spec = ("add", ("multiply", ("arg", 0), ("const", 13.0)), ("arg", 0))
    dtypes, in_dtypes = fz._dtypes(spec, (np.ones(4),))
    source, _ = fz._source(spec, in_dtypes, dtypes)
    assert compile_process.warm("fused", source, ()) is True
    assert compile_process._server[0].pid != first and compile_process._child[0] is None
    assert _ends(first, 10)


def _in_process_server(path, idle=60.0):
    server = compile_server.Server(path, idle, compile_child.compile_request)
    assert server.claim()
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    return server, thread


def test_a_connection_from_another_user_is_closed_unread(own_address, monkeypatch):
    """The server reads nothing from a program of another user (SO_PEERCRED): the connection is closed before
    any request. Here the server (in this process) is told it runs as another user."""
    server, thread = _in_process_server(own_address)
    try:
        assert compile_server.connect(own_address) is not None  # the same user: connected, told the pid
        monkeypatch.setattr(compile_server.os, "getuid", lambda: os.geteuid() + 1)
        assert compile_server.connect(own_address) is None
    finally:
        monkeypatch.undo()
        server.ended = True
        thread.join(10)
    assert not thread.is_alive() and not os.path.exists(own_address)


def test_a_server_retires_after_its_requests_and_the_next_program_starts_another(own_address, monkeypatch):
    """After ``RETIRE_AFTER`` requests (each compiled kernel stays loaded in it) the server takes no new
    connection: its socket goes, so the next program starts a new server, and it ends once its programs have
    gone."""
    monkeypatch.setattr(compile_server, "RETIRE_AFTER", 2)
    server, thread = _in_process_server(own_address)
    link = compile_server.connect(own_address)
    try:
        for _ in range(2):  # a request that does not compile: answered "no", counted all the same
            payload = pickle.dumps((kernel_cache.CACHE_DIR, "fused", "not Python", ()))
            link.send(compile_process.HEADER.pack(len(payload)) + payload)
            assert link.reply() == b"0"
        deadline = time.monotonic() + 10
        while os.path.exists(own_address) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(own_address) and thread.is_alive()  # withdrawn, still serving its program
        assert compile_server.connect(own_address) is None
    finally:
        link.close()
    thread.join(10)
    assert not thread.is_alive()


def test_a_kernel_asked_for_two_caches_is_compiled_into_both(own_address, tmp_path, monkeypatch):
    """Two programs with different kernel caches (``PHYLANX_CACHE_DIR``) ask the server for the same kernel: each
    cache gets its machine code. (The server answered the second from the module it had loaded for the first, and
    the second program then compiled the kernel itself, in its own process.) A program's own compile child
    answers with the same code (compile_child.compile_request)."""
    import glob

    source = "import numba\n@numba.njit(cache=True)\ndef kernel(x):\n    return x * 3 + 1\n"
    for name in ("first", "second"):
        monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(tmp_path / name))
        assert compile_process.warm("load_kernel", source, ("px-described", False, (5,))) is True
        assert glob.glob(str(tmp_path / name / "kernels" / "__pycache__" / "*kernel*.nbi")), name


AHEAD_PROGRAM = textwrap.dedent("""
    import time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import compile_process, tiering

    tiering.HOT_SECONDS = 1e9  # never hot in this program: only a compile asked ahead compiles it

    def running_sum(a):
        out = np.zeros(len(a))
        s = 0.0
        for i in range(len(a)):
            s = s + a[i]
            out[i] = s
        return out

    f = px.compile(running_sum)
    x = np.arange(20.0)
    same, deadline = True, time.monotonic() + 120
    while compile_process.AHEAD[0] == 0 and time.monotonic() < deadline:
        same = same and bool(np.array_equal(f(x), running_sum(x)))
        time.sleep(0.02)
    print(same, compile_process.AHEAD[0], " -> native" in f.explain())
""")


def test_a_kernel_is_compiled_ahead_at_its_first_run(own_address, tmp_path):
    """With the server, a signature's kernel is asked for at its first run, not only once it has run HOT_SECONDS
    interpreted (compile_process.ask_ahead): the server compiles it into the program's cache while the calls run as
    before (here never hot: they stay off native code, and give the plain function's answer)."""
    script = tmp_path / "ahead.py"
    script.write_text(AHEAD_PROGRAM)
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PHYLANX_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr
    same, ahead, native = done.stdout.split()
    assert same == "True" and int(ahead) >= 1 and native == "False"
    built = [name for _, _, names in os.walk(cache) for name in names if name.endswith(".nbi") or
             name.startswith("aot_")]
    assert built, sorted(name for _, _, names in os.walk(cache) for name in names)


def test_no_kernel_is_compiled_ahead_without_the_server(monkeypatch, tmp_path):
    """Without the server (``PHYLANX_COMPILE_SERVER=0``: a program's own child), nothing is asked ahead: a loop
    that never gets hot is never compiled."""
    script = tmp_path / "ahead.py"
    script.write_text(AHEAD_PROGRAM.replace("while compile_process.AHEAD[0] == 0", "while time.monotonic() < "
                                                                                   "deadline - 119"))
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PHYLANX_CACHE_DIR": str(cache), "PHYLANX_COMPILE_SERVER": "0"})
    assert done.returncode == 0, done.stderr
    same, ahead, native = done.stdout.split()
    assert same == "True" and ahead == "0" and native == "False"
    assert not [name for _, _, names in os.walk(cache) for name in names if name.endswith(".nbi") or
                name.startswith("aot_")]


STRAIGHT_PROGRAM = textwrap.dedent("""
    import threading
    import time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import whole

    whole.STRAIGHT_SECONDS = 1e9  # never lowered in a call: only beside the calls, with the server
    HALF = 0.5  # a module global the body reads: a parameter of its kernel after the function's own
    lowered_in = []
    _lower = whole.WholeFunction._lower

    def lower(self, *args):
        lowered_in.append(threading.current_thread().name)
        return _lower(self, *args)

    whole.WholeFunction._lower = lower

    def chain(a, b):
        return np.exp(-a * a) * b + np.sin(a) * HALF

    f = px.compile(chain)
    x, y = np.linspace(-2.0, 2.0, 20000), np.linspace(0.0, 1.0, 20000)
    same, deadline = True, time.monotonic() + 120
    while " -> native" not in f.explain() and "plain function is faster" not in f.explain() and \\
            time.monotonic() < deadline:
        same = same and bool(np.allclose(f(x, y), chain(x, y), rtol=1e-12))
    print(same, " -> native" in f.explain() or "plain function is faster" in f.explain(), lowered_in)
""")


def test_straight_line_code_is_lowered_beside_its_calls_with_the_server(own_address, tmp_path):
    """With the server, a loop-free function is lowered beside its calls once they have taken
    ``STRAIGHT_AHEAD_SECONDS`` (here ``STRAIGHT_SECONDS``, the lowering in a call, never comes), and its kernel,
    compiled by the server, is ready: timed against the plain function, and kept or declined."""
    script = tmp_path / "straight.py"
    script.write_text(STRAIGHT_PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("PHYLANX_BESIDE", "PHYLANX_FLOOR")}  # (a user's: on)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**env, "PHYLANX_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    # the signature lowered once, by the worker beside the calls (runtime/beside.py), the global's value among
    # its arguments
    assert done.stdout.split() == ["True", "True", "['phylanx-beside']"]


LOWER_PROGRAM = textwrap.dedent("""
    import time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import compile_process, tiering, whole_lower

    def smooth(a, n):
        for t in range(n):
            for i in range(1, a.shape[0] - 1):
                a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0
        return a

    f = px.compile(smooth)  # starts the server's link beside the program (compile_process.prestart)
    deadline = time.monotonic() + 60
    while not compile_process._server[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    x = np.linspace(0.0, 1.0, 40)
    same = bool(np.allclose(f(x.copy(), 3), smooth(x.copy(), 3)))  # the plain function, beside the job
    f._job[1].result(timeout=120)
    tier = f._code.whole
    args = tier.kernel_args((x, 3))
    (entry,) = tier.entries.values()
    here = whole_lower.lowering(tier.body, tier.params, entry.kinds, tiering._small(args), tier.ret,
                                tier.functions, tier.loop_free)
    while " -> native" not in f.explain() and time.monotonic() < deadline:
        same = same and bool(np.allclose(f(x.copy(), 3), smooth(x.copy(), 3)))
    print(same, compile_process.LOWERED[0], entry.source == here[1][0], " -> native" in f.explain())
""")


@pytest.mark.parametrize("lower", ["1", "0"])
def test_the_job_beside_the_first_calls_has_the_server_lower_their_signature(own_address, tmp_path, lower):
    """The whole function's signature, lowered for the job beside the first calls (runtime/beside.py), is lowered by
    the compile server (compile_child.lower_request): the same kernel source as this process makes, and native
    code from it; ``PHYLANX_COMPILE_LOWER=0`` lowers it in the program."""
    script = tmp_path / "lower.py"
    script.write_text(LOWER_PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("PHYLANX_BESIDE", "PHYLANX_FLOOR", "PHYLANX_NATIVE")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**env, "PHYLANX_CACHE_DIR": str(tmp_path / "cache"), "PHYLANX_COMPILE_LOWER": lower})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", lower, "True", "True"]
