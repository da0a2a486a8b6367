"""The kernel disk cache (primitives/kernel_cache.py) trusts nothing it reads: a tampered kernel file never runs,
temporary names are unpredictable, and a folder other users can write to is refused."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from phylanx_py.primitives import kernel_cache

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


def test_an_unsafe_cache_folder_is_an_error_that_names_it(tmp_path):
    folder = tmp_path / "shared"
    (folder / "kernels").mkdir(parents=True)
    os.chmod(folder, 0o777)
    env = {**os.environ, "PHYLANX_CACHE_DIR": str(folder)}
    env.pop("PHYLANX_FUSE", None)
    out = subprocess.run([sys.executable, _child_script(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1
    assert (f"UnsafeCacheError: the kernel cache folder {folder} is writable by all users: phylanx-py imports "
            "and runs the kernels cached there") in out.stderr, out.stderr
