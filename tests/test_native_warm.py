"""Kernels compiled before are native from a signature's first call (runtime/native/warm.py): in this process and
in a later one, for loops, whole functions and straight-line code; a mark changes only when a kernel compiles,
never what runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from phylanx_py.primitives import kernel_cache
from phylanx_py.runtime import loop_tiers
from phylanx_py.runtime.native import argtypes, warm, whole
from phylanx_py.runtime.native import tiering as native_tiering

import phylanx_py as px


def smooth(a, steps):
    for _ in range(steps):
        for i in range(1, a.shape[0] - 1):
            a[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1]
    return a


def mix(a, b):
    return np.sqrt(a * a + b * b) * 0.5 + np.where(a > b, a, b)


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """A cache folder of the test's own, marks followed (conftest.py turns them off for the rest of the suite)."""
    monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PHYLANX_NATIVE_WARM", "1")
    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    return tmp_path / "cache" / "kernels"


def _native_runs(f) -> int:
    line = next(s for s in f.explain().splitlines() if s.startswith("function at"))
    assert " -> native (whole function" in line, line
    return int(line.split(" native runs")[0].rsplit("; ", 1)[1])


def test_a_kernel_compiled_before_is_native_from_the_first_call_in_this_process(cache, monkeypatch):
    a = np.linspace(0.0, 1.0, 200)
    monkeypatch.setenv("PHYLANX_NATIVE", "force")
    first = px.compile(smooth)
    np.testing.assert_allclose(first(a.copy(), 3), smooth(a.copy(), 3), rtol=1e-15)
    entry = next(iter(first._code.whole.entries.values()))
    with open(cache / f"native_{warm.kernel_key(entry.printed)}.ok") as f:
        assert f.read().splitlines() == ["numba " + __import__("numba").__version__ + ": array(float64, 1d, C), int64"]
    monkeypatch.delenv("PHYLANX_NATIVE")  # the default tier: a new signature waits HOT_SECONDS interpreted
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)  # so never, but for its mark
    again = px.compile(smooth)
    np.testing.assert_allclose(again(a.copy(), 3), smooth(a.copy(), 3), rtol=1e-15)
    assert _native_runs(again) == 1  # its first call ran the kernel, loaded from the disk cache
    # marks not followed: the same first call runs as the plain function
    monkeypatch.setenv("PHYLANX_NATIVE_WARM", "0")
    cold = px.compile(smooth)
    np.testing.assert_allclose(cold(a.copy(), 3), smooth(a.copy(), 3), rtol=1e-15)
    assert "the plain function (1 runs) so far" in cold.explain()


def smooth_again(a, steps):  # smooth's loops under another name: a kernel text no other test compiles
    for _ in range(steps):
        for i in range(1, a.shape[0] - 1):
            a[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1]
    return a * 1.0


def test_a_mark_without_numbas_machine_code_is_no_compile_in_the_call(cache, monkeypatch):
    """A mark says that some process compiled the kernel, not that Numba's cache here holds it (another
    NUMBA_CACHE_DIR, a cleaned cache): the first call then neither compiles (seconds, in a review's run) nor runs
    anything read from disk; the kernel is compiled in the background from the source made here, soon
    (MARKED_SECONDS), and the answers are the plain function's."""
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)
    a = np.linspace(0.0, 1.0, 50)
    probe = px.compile(smooth_again)
    probe(a.copy(), 2)  # lowered (its kernel's digest is known now), not compiled
    entry = next(iter(probe._code.whole.entries.values()))
    key = warm.kernel_key(entry.printed)
    os.makedirs(cache, exist_ok=True)
    with open(cache / f"native_{key}.ok", "w") as f:  # forged: no process compiled it into this cache
        f.write("numba " + __import__("numba").__version__ + ": array(float64, 1d, C), int64\nimport os\n")
    warm._MARKS.clear()  # this process read the folder before the mark was written (as another process's would be)
    f = px.compile(smooth_again)
    np.testing.assert_allclose(f(a.copy(), 2), smooth_again(a.copy(), 2), rtol=1e-15)
    assert " -> native" not in f.explain()  # the plain function ran; the compile starts soon, in the background
    deadline = time.monotonic() + 120
    while " -> native" not in f.explain() and time.monotonic() < deadline:
        np.testing.assert_allclose(f(a.copy(), 2), smooth_again(a.copy(), 2), rtol=1e-15)
        time.sleep(0.01)
    for _ in range(4):  # the new kernel's runs, timed against the plain function's
        np.testing.assert_allclose(f(a.copy(), 2), smooth_again(a.copy(), 2), rtol=1e-15)
    assert _native_runs(f) >= 1


def test_a_straight_line_kernel_kept_before_is_lowered_at_the_first_call(cache, monkeypatch):
    """Straight-line code waits STRAIGHT_SECONDS of calls before its kernel is lowered; one whose kernel was kept
    (timed faster than the floor's choice: marked so by ``_decide``, written here through warm.py as it does, the
    timing being the machine's) is lowered at its first call, loaded, and not timed again."""
    a, b = np.linspace(-1.0, 1.0, 3000), np.linspace(1.0, -1.0, 3000)
    monkeypatch.setattr(whole, "STRAIGHT_SECONDS", 0.0)
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    probe = px.compile(mix)
    deadline = time.monotonic() + 120
    while " -> native" not in probe.explain() and "interpreted:" not in probe.explain() and \
            time.monotonic() < deadline:  # compiled in the background (its argument types marked), then timed
        np.testing.assert_allclose(probe(a, b), mix(a, b), rtol=1e-15)
        time.sleep(0.01)
    tier = probe._code.whole
    entry = next(iter(tier.entries.values()))
    assert entry.kernel is not None or "plain function is faster" in (entry.declined or ""), probe.explain()
    warm.mark(warm.kernel_key(entry.printed), warm.KEPT)
    warm.mark(warm.function_key(tier.fn, native_tiering._fast_key((a, b))), warm.KEPT)
    monkeypatch.setattr(whole, "STRAIGHT_SECONDS", 1e9)
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)
    warm.unmark(warm.code_key(mix))  # as a cache kept before the Python function's own mark was written
    again = px.compile(mix)
    np.testing.assert_allclose(again(a, b), mix(a, b), rtol=1e-15)
    assert _native_runs(again) == 1
    assert "measuring" not in again.explain()
    assert warm.kept_code(mix)  # marked when the kept kernel loaded: the next process's first call loads it
    other = px.compile(mix)  # other argument kinds: no mark, the floor's choice
    np.testing.assert_allclose(other(a[::2], b[::2]), mix(a[::2], b[::2]), rtol=1e-15)
    assert "the floor's choice so far" in other.explain()
    # a kernel that loses to the floor's choice later drops its kept lines, not its argument types
    warm.unmark(warm.kernel_key(entry.printed))
    with open(cache / f"native_{warm.kernel_key(entry.printed)}.ok") as f:
        assert [line for line in f.read().splitlines()] == [warm.sig_line(argtypes.signature_of(*entry.sig)
                                                                         if type(entry.sig[0]) is tuple
                                                                         else entry.sig)]


def test_marks_written_by_another_process_are_kept(cache, monkeypatch):
    """A mark is read again before a line is added: a line another process wrote since this one read the file is
    kept (a review saw it overwritten)."""
    key = "0" * 24
    assert warm.marks(key) == frozenset()  # read (and remembered) by this process: none
    os.makedirs(cache, exist_ok=True)
    with open(cache / f"native_{key}.ok", "w") as f:
        f.write("numba x: written by another process\n")
    warm.mark(key, "numba x: this process's")
    with open(cache / f"native_{key}.ok") as f:
        assert f.read().splitlines() == ["numba x: this process's", "numba x: written by another process"]


def test_a_later_process_loads_the_kernel_once_numba_runs_and_never_imports_it_for_a_first_call(tmp_path):
    script = tmp_path / "later.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        import numpy as np
        import phylanx_py as px

        def smooth(a, steps):
            for _ in range(steps):
                for i in range(1, a.shape[0] - 1):
                    a[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1]
            return a

        if sys.argv[1] == "numba":
            import numba
            numba.njit(lambda x: x + 1)(1)  # Numba running: a marked kernel loads in the call
        else:
            from phylanx_py.runtime.native import tiering
            tiering.HOT_SECONDS = 1e9  # only a mark makes it native
        f = px.compile(smooth)
        a = np.linspace(0.0, 1.0, 2000)
        assert np.allclose(f(a.copy(), 3), smooth(a.copy(), 3), rtol=1e-15)
        print("numba imported:", "numba" in sys.modules)
        print(f.explain().splitlines()[-1].split(" -> ")[1].split(" (")[0])
        deadline = time.monotonic() + (120 if "wait" in sys.argv else 0.5)
        while " -> native" not in f.explain() and time.monotonic() < deadline:  # MARKED_SECONDS, in the background
            assert np.allclose(f(a.copy(), 3), smooth(a.copy(), 3), rtol=1e-15)
            time.sleep(0.01)
        print(f.explain().splitlines()[-1].split(" -> ")[1].split(" (")[0])
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("PHYLANX_FLOOR", "PHYLANX_NATIVE")}
    env.update(PHYLANX_CACHE_DIR=str(tmp_path / "cache"), PHYLANX_NATIVE_WARM="1")

    def run(*args, extra=None):
        done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300,
                              env={**env, **(extra or {})})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    # compiled and marked; then loaded in its first call
    assert run("numba", extra={"PHYLANX_NATIVE": "force"}) == ["numba imported: True", "native", "native"]
    assert run("numba") == ["numba imported: True", "native", "native"]
    # Numba not running: the first call is the plain function and does not import it; the kernel is loaded in the
    # background after MARKED_SECONDS (HOT_SECONDS is out of reach in this run)
    first = run("plain", "wait")
    assert first[0] == "numba imported: False" and first[1].startswith("the plain function") and \
        first[2] == "native", first
    assert run("plain", extra={"PHYLANX_NATIVE_WARM": "0"})[2].startswith("the plain function")


def smooth_kept(a, steps):  # smooth's loops under another name: a kernel text no other test compiles
    for _ in range(steps):
        for i in range(1, a.shape[0] - 1):
            a[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1]
    return a + 0.0


def test_a_kernel_clearly_faster_at_its_first_run_is_kept_for_later_processes(cache, monkeypatch):
    """A kernel whose first run is CLEARLY_FASTER than every plain run before it is trusted without alternating
    timings; it is marked kept then too, as after a timing. (It was not: NPBench's crc16, seidel_2d, lu and
    gramschmidt, settled native in one process, alternated plain runs with native ones in the next one's calls 2-6
    while they were timed again: early 0.9-1.3x NumPy with a warm cache, 55-430x settled.)"""
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    a = np.linspace(0.0, 1.0, 3000)
    f = px.compile(smooth_kept)
    deadline = time.monotonic() + 120
    while " -> native" not in f.explain() and time.monotonic() < deadline:  # plain runs while it compiles
        np.testing.assert_allclose(f(a.copy(), 4), smooth_kept(a.copy(), 4), rtol=1e-15)
        time.sleep(0.01)
    entry = next(iter(f._code.whole.entries.values()))
    np.testing.assert_allclose(f(a.copy(), 4), smooth_kept(a.copy(), 4), rtol=1e-15)  # its first native run
    if entry.measuring or entry.plain_times:  # not clearly faster on a loaded machine: timed as usual
        for _ in range(2 * whole.MEASURED):
            np.testing.assert_allclose(f(a.copy(), 4), smooth_kept(a.copy(), 4), rtol=1e-15)
    assert not entry.measuring and entry.declined is None, f.explain()
    assert warm.KEPT in warm.marks(warm.kernel_key(entry.printed))
    # a later compile of it (as a later process's): native in every call, none timed against the plain function
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)
    again = px.compile(smooth_kept)
    for _ in range(5):
        np.testing.assert_allclose(again(a.copy(), 4), smooth_kept(a.copy(), 4), rtol=1e-15)
    assert _native_runs(again) == 5, again.explain()


def test_remembered_lines_are_followed_only_when_they_are_this_translation_and_their_kernel_is_there(cache):
    """runtime/native/early.py: what a first call runs before the translation is read as data, field by field; a
    damaged line, one written by other phylanx-py sources, or one whose kernel file is not in the cache is not
    followed (the function translates, as any other)."""
    from phylanx_py.runtime.native import aot, early

    key = warm.code_key(smooth)
    good = {"kernel": "k" * 24, "description": "<f81C,int", "own": 2, "staged": False, "writes": [0],
            "checked": False, "ret": {"array": True}, "names": {"range": "builtin"}, "blas": False,
            "fast": repr(native_tiering._fast_key((np.zeros(5), 3))), "translator": early.translator()}

    def remembered(*lines):
        warm.rewrite(key, lambda _: {warm.KEPT, *lines})
        return early.for_function(smooth)

    line = early.PREFIX + "f" * 16 + " "
    assert remembered(line + "{not json") is None
    assert remembered(line + json.dumps({**good, "translator": "another"})) is None
    assert remembered(line + json.dumps(good)) is None  # its kernel file is not there
    path = aot.path_of(good["kernel"], good["description"])
    open(path, "wb").close()  # (an empty file: found, and loaded only at a call)
    found = remembered(line + json.dumps(good))
    assert found is not None and list(found.specs) == [good["fast"]]
    assert remembered(line + json.dumps({**good, "own": "two"})) is None
    # a call whose signature is not remembered, or whose kernel does not load, is the translation's
    assert found((np.zeros(5, np.float32), 3)) is loop_tiers.MISS
    assert found((np.zeros(5), 3)) is loop_tiers.MISS and found.specs[good["fast"]].run() is None
    warm.unmark(key)  # a kernel that lost to the floor's choice: nothing is followed any more
    assert early.for_function(smooth) is None


@pytest.mark.parametrize("kind", [None, np.float32(0), 0, 0.0, True, np.empty(0),
                                  (0, np.int64(0)), whole.K.Either(0.0, np.float64(0), "s"),
                                  (whole.K.Either(0, np.int64(0), "s"), np.empty(0))])
def test_a_remembered_result_kind_converts_as_the_translated_one(kind):
    from phylanx_py.runtime.native import early

    again = early._decode(json.loads(json.dumps(early._encode(kind))))
    conv, conv2 = whole.K.converter(kind), whole.K.converter(again)
    assert (conv is None) == (conv2 is None)
    if conv is None:
        return
    items = kind if type(kind) is tuple else (kind,)
    flagged = any(type(x) is whole.K.Either for x in items)
    value = tuple(2 for _ in items) if type(kind) is tuple else 2
    for flag in ((0, 1) if flagged else (None,)):
        out = (value, flag) if flagged else value
        got, want = conv2(out), conv(out)
        assert type(got) is type(want) and got == want
