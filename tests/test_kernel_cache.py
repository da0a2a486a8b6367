"""The kernel disk cache (primitives/kernel_cache.py) trusts nothing it reads: a tampered kernel file never runs,
temporary names are unpredictable, and a folder other users can write to is refused."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
import types

import numpy as np
import pytest
from phylanx_py.primitives import kernel_cache
from phylanx_py.runtime.native import tiering as native_tiering
from phylanx_py.runtime.native import tuning as native_tuning

import phylanx_py as px

SOURCE = "import numba\n\n\n@numba.njit(cache=True)\ndef kernel(x):\n    return x * 2.0 + 1.0\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(folder))
    return folder


def _unload(source):
    sys.modules.pop(f"phylanx_test_{kernel_cache.digest(source)}", None)


def test_a_kernel_file_that_differs_from_its_source_is_rewritten_and_never_runs(cache, tmp_path):
    _unload(SOURCE)
    assert kernel_cache.load_or_build("test", SOURCE).kernel(3.0) == 7.0
    (path,) = (cache / "kernels").glob("test_*.py")
    assert path.read_text() == SOURCE
    marker = tmp_path / "ran"
    path.write_text(SOURCE + f"open({str(marker)!r}, 'w').write('tampered')\n")
    _unload(SOURCE)
    assert kernel_cache.load_or_build("test", SOURCE).kernel(3.0) == 7.0
    assert not marker.exists()
    assert path.read_text() == SOURCE  # regenerated
    assert [p.name for p in (cache / "kernels").iterdir() if p.name.startswith(".tmp")] == []
    _unload(SOURCE)


def test_folders_are_private_and_one_others_can_write_to_is_refused(cache):
    _unload(SOURCE)
    kernel_cache.load_or_build("test", SOURCE)
    assert (os.stat(cache).st_mode & 0o777, os.stat(cache / "kernels").st_mode & 0o777) == (0o700, 0o700)
    _unload(SOURCE)
    os.chmod(cache / "kernels", 0o777)
    with pytest.raises(kernel_cache.UnsafeCacheError) as err:
        kernel_cache.load_or_build("test", SOURCE)
    folder = cache / "kernels"
    assert str(err.value) == (
        f"the kernel cache folder {folder} is writable by all users: phylanx-py imports and runs the kernels "
        "cached there, so it refuses a folder that others can write to. Set PHYLANX_CACHE_DIR to a folder only "
        f"you can write to (e.g. one made with mode 0700), or remove the write permission (chmod go-w {folder}).")
    os.chmod(cache / "kernels", 0o775)  # group-writable but ours: our own choice (a user-private group)
    assert kernel_cache.load_or_build("test", SOURCE).kernel(1.0) == 3.0
    _unload(SOURCE)
    if os.getuid() == 0:  # root can give the folder to another user: group-writable and someone else's
        os.chown(cache, 65534, -1)
        os.chmod(cache, 0o770)
        with pytest.raises(kernel_cache.UnsafeCacheError, match="writable by its group .and it belongs to another"):
            kernel_cache.load_or_build("test", SOURCE)


CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import phylanx_py as px
    import phylanx_py.primitives.fused as F

    F.FUSE_MIN_OPS = 2

    @px.compile
    def chain(x):
        return np.tanh(x * 0.5) * np.cos(x) - x * x / 3.0 + 0.25

    x = np.linspace(-2.0, 2.0, 40_000)
    want = np.tanh(x * 0.5) * np.cos(x) - x * x / 3.0 + 0.25
    print(bool(np.allclose(chain(x), want, rtol=1e-12, atol=1e-14)), len(F._kernels))
""")


def _child_script(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return str(script)


def test_a_tampered_cached_kernel_does_not_run_in_the_next_process(tmp_path):
    env = {**os.environ, "PHYLANX_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PHYLANX_FUSE", None)
    script = _child_script(tmp_path)

    def child():
        out = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=120,
                             cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert child() == ["True", "1"]
    (path,) = (tmp_path / "cache" / "kernels").glob("fused_*.py")
    original = path.read_text()
    marker = tmp_path / "ran"
    path.write_text(original + f"open({str(marker)!r}, 'w').write('tampered')\n")
    assert child() == ["True", "1"]
    assert not marker.exists()
    assert path.read_text() == original


def test_an_unsafe_cache_folder_is_the_callers_error_naming_it_and_left_empty(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    env = {**os.environ, "PHYLANX_CACHE_DIR": str(folder)}
    env.pop("PHYLANX_FUSE", None)
    out = subprocess.run([sys.executable, _child_script(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1
    # the refusal itself, unwrapped: a configuration error, not an ExecutionError blamed on the fused line
    assert out.stderr.splitlines()[-1] == (
        f"phylanx_py.errors.UnsafeCacheError: the kernel cache folder {folder} is writable by all users: "
        "phylanx-py imports and runs the kernels cached there, so it refuses a folder that others can write to. "
        "Set PHYLANX_CACHE_DIR to a folder only you can write to (e.g. one made with mode 0700), or remove the "
        f"write permission (chmod go-w {folder}).")
    assert "ExecutionError" not in out.stderr and "in primitive" not in out.stderr
    assert os.listdir(folder) == []  # checked before anything is made in it


def test_the_refusal_is_a_configuration_error_that_pickles():
    err = kernel_cache.UnsafeCacheError("the folder is unsafe", folder="/x", variable="NUMBA_CACHE_DIR")
    assert isinstance(err, px.ConfigurationError) and isinstance(err, px.PhylanxError)
    assert not isinstance(err, OSError)  # no `except OSError` (a closed connection) may take it for another error
    assert kernel_cache.UnsafeCacheError is px.UnsafeCacheError
    back = pickle.loads(pickle.dumps(err))  # from a Dask worker
    assert (type(back), str(back), back.folder, back.variable) == (
        px.UnsafeCacheError, "the folder is unsafe", "/x", "NUMBA_CACHE_DIR")


def test_nothing_is_made_in_a_refused_folder(cache):
    cache.mkdir()
    os.chmod(cache, 0o777)
    with pytest.raises(px.UnsafeCacheError) as err:
        kernel_cache.kernel_dir()
    assert (err.value.folder, err.value.variable, err.value.loc) == (str(cache), "PHYLANX_CACHE_DIR", None)
    assert os.listdir(cache) == []
    os.chmod(cache, 0o700)
    (cache / "kernels").mkdir(mode=0o700)
    os.chmod(cache / "kernels", 0o777)
    with pytest.raises(px.UnsafeCacheError, match=f"the kernel cache folder {cache / 'kernels'} is writable"):
        kernel_cache.kernel_dir()
    assert os.listdir(cache / "kernels") == []  # no __pycache__ for Numba either


def _modes(top):
    """{folder relative to ``top``: its mode} for ``top`` and every folder under it."""
    out = {".": os.stat(top).st_mode & 0o7777}
    for dirpath, dirnames, _ in os.walk(top):
        for d in dirnames:
            path = os.path.join(dirpath, d)
            out[os.path.relpath(path, top)] = os.stat(path).st_mode & 0o7777
    return out


def test_every_folder_the_cache_makes_is_private_where_numba_writes_too(tmp_path, monkeypatch):
    import numba
    from numba.core.caching import _CacheLocator

    monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(tmp_path / "a" / "b" / "cache"))
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "numba" / "x"))  # as NUMBA_CACHE_DIR sets it
    old = os.umask(0o022)
    try:
        source = SOURCE.replace("1.0", "5.0")
        sys.modules.pop(f"phylanx_test_{kernel_cache.digest(source)}", None)
        assert kernel_cache.load_or_build("test", source).kernel(3.0) == 11.0  # Numba writes its cache files
    finally:
        os.umask(old)
        sys.modules.pop(f"phylanx_test_{kernel_cache.digest(source)}", None)
    kernels = tmp_path / "a" / "b" / "cache" / "kernels"
    sub = kernel_cache.numba_subfolder(str(kernels))
    assert sub == _CacheLocator.get_suitable_cache_subpath(str(kernels / "test_0.py"))  # Numba's own name
    assert list((tmp_path / "numba" / "x" / sub).glob("test_*.nbi"))  # where Numba keeps our machine code
    assert _modes(tmp_path / "a") == dict.fromkeys(
        [".", "b", "b/cache", "b/cache/kernels", "b/cache/kernels/__pycache__"], 0o700)
    assert _modes(tmp_path / "numba") == dict.fromkeys([".", "x", f"x/{sub}"], 0o700)


def test_numba_cache_dir_that_others_can_write_to_is_refused_by_name(cache, tmp_path, monkeypatch):
    import numba

    shared = tmp_path / "numba"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(shared))
    with pytest.raises(px.UnsafeCacheError) as err:
        kernel_cache.kernel_dir()
    assert str(err.value) == (
        f"the folder {shared} (NUMBA_CACHE_DIR) is writable by all users: phylanx-py loads its kernels' machine "
        "code from there (Numba's pickles: loading one runs code), so it refuses a folder that others can write "
        "to. Set NUMBA_CACHE_DIR to a folder only you can write to, or unset it (Numba then keeps that machine "
        f"code in the kernel cache), or remove the write permission (chmod go-w {shared}).")
    assert (err.value.folder, err.value.variable) == (str(shared), "NUMBA_CACHE_DIR")
    assert os.listdir(shared) == []
    os.chmod(shared, 0o1777)  # sticky, as /tmp: others cannot touch the private folder we keep in it
    kernel_cache.kernel_dir()
    (ours,) = os.listdir(shared)
    assert os.stat(shared / ours).st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_of_another_user_is_refused(cache):
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, -1)
    with pytest.raises(px.UnsafeCacheError) as err:
        kernel_cache.kernel_dir()
    assert str(err.value).startswith(
        f"the kernel cache folder {cache} is writable by the user it belongs to (uid 65534; you are uid 0): ")
    assert str(err.value).endswith(", or use a folder of your own.")
    assert os.listdir(cache) == []


# ---- the native tier: its compiles (also those in background threads) meet the refusal as the caller's error -----
def _hot_loop(n):
    s = 0.0
    for i in range(n):
        s += i * 0.4375
    return s


def _loop_then_print(x, n):
    s = 0.0
    for i in range(n):
        s += x[i % 4] * 0.8125  # a loop of the loop tier: print below keeps the whole function interpreted
    print("done")
    return s


@pytest.fixture
def refused(cache):
    cache.mkdir()
    os.chmod(cache, 0o777)
    return cache


@pytest.mark.parametrize("fn", [_hot_loop, _loop_then_print])
def test_a_native_compile_on_a_refused_folder_raises_at_the_call(refused, fn, monkeypatch, capsys):
    args = (1000,) if fn is _hot_loop else (np.arange(4.0), 1000)
    monkeypatch.setenv("PHYLANX_NATIVE", "force")  # compiled in the caller's thread
    with pytest.raises(px.UnsafeCacheError, match="PHYLANX_CACHE_DIR"):
        px.compile(fn)(*args)
    monkeypatch.delenv("PHYLANX_NATIVE")  # tiered: the call that finds the loop hot raises, before the thread
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    f = px.compile(fn)
    for _ in range(2):  # at every call while the folder is unsafe
        with pytest.raises(px.UnsafeCacheError, match="PHYLANX_CACHE_DIR"):
            f(*args)
    assert os.listdir(refused) == []
    os.chmod(refused, 0o700)  # fixed: the same function runs (its loop compiling in the background)
    assert f(*args) == fn(*args)
    _wait_for_compiles()


def _wait_for_compiles(deadline=120):
    end = time.monotonic() + deadline
    while any(t.name == "phylanx-native-compile" for t in threading.enumerate()) and time.monotonic() < end:
        time.sleep(0.02)


def _another_hot_loop(n):
    s = 0.0
    for i in range(n):
        s += i * 0.6875  # another kernel's source: not one loaded in this process already (never refused)
    return s


def test_a_refusal_met_in_the_background_compile_is_raised_at_the_next_call(refused, monkeypatch):
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    monkeypatch.setattr(kernel_cache, "check", lambda: None)  # the folder turns unsafe after the caller checked
    f = px.compile(_another_hot_loop)
    with pytest.raises(px.UnsafeCacheError, match=str(refused)):
        for _ in range(2):
            # the compile starts in the background, is refused there, and the refusal is raised by this call (when
            # the thread was that quick) or the next; an answer given meanwhile is the plain function's
            assert f(500) == _another_hot_loop(500)
            _wait_for_compiles()
    assert "interpreted: Numba" not in f.explain()  # not a decline: the signature is compiled again once hot


def test_a_refused_parallel_variant_is_raised_at_the_next_call_then_probed_again():
    def load(source):
        raise px.UnsafeCacheError("refused", folder="/x")

    variant = types.SimpleNamespace(source="", written=(), loops=[1])
    choice = native_tuning.Choice(variant, (), load, force=True)  # built at once: meets the refusal
    assert choice.state == "refused"
    with pytest.raises(px.UnsafeCacheError, match="refused"):
        choice.runner(lambda x: x + 1)(1)
    assert choice.state == "probing" and choice.runner(lambda x: x + 1)(1) == 2
