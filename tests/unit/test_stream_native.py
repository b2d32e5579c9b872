"""The metric kernels compiled ahead of time (analysis.stream_native): built with the real
numba and C compiler, loaded with ctypes in a process that never imports numba, keyed to
the machine, rebuilt when the file is damaged, and replaced by numba's JIT kernels, with
the reason kept, where no C compiler exists. That the library's figures are the JIT
kernels' is tested in test_stream_compiled.py (every figure test runs on both)."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")

from perfscout.analysis import stream_native as N  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def library() -> N.NativeKernels:
    native = N.load()
    if native is None:
        pytest.skip(f"the kernels' library cannot be built here: {N.last_failure()}")
    return native


def _run(code: str, env: dict[str, str] | None = None, cwd: Path = ROOT, timeout: int = 600) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _package_copy(tmp_path: Path) -> Path:
    """The package copied without its caches: a machine that has built nothing yet."""
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "perfscout", pkg / "perfscout", ignore=shutil.ignore_patterns("__pycache__"))
    return pkg


def test_a_fresh_process_runs_the_compiled_pass_without_importing_numba(library: N.NativeKernels) -> None:
    """A pair large enough for the compiled kernels by default, in a fresh process: the
    library ran (its kernels' type), and neither numba nor llvmlite was imported."""
    code = ("import json, sys, numpy as np; from perfscout.analysis import streaming as S; "
            "x = np.linspace(0, 1, S.COMPILED_MIN_ELEMENTS, dtype=np.float32).reshape(64, 256, -1); "
            "y = x + np.float32(1e-4) * np.sin(np.arange(x.size, dtype=np.float32)).reshape(x.shape); "
            "m = S.stream_quality_metrics(x, y, 100); C = sys.modules['perfscout.analysis.stream_compiled']; "
            "out = {'kernels': type(C.K).__name__, 'numba': 'numba' in sys.modules, "
            "'llvmlite': 'llvmlite' in sys.modules, 'max': m['max_abs_err'], 'ssim': m['ssim']}; "
            "import os; os.environ['PERFSCOUT_METRICS_BACKEND'] = 'numpy'; n = S.stream_quality_metrics(x, y, 100); "
            "out.update(numpy_max=n['max_abs_err'], numpy_ssim=n['ssim']); print(json.dumps(out))")
    out = json.loads(_run(code, {"PERFSCOUT_METRICS_BACKEND": "auto"}))
    assert out["kernels"] == "NativeKernels" and not out["numba"] and not out["llvmlite"]
    assert 0 < out["max"] == out["numpy_max"] and 0 < out["ssim"] < 1  # the exact figure: NumPy's
    assert abs(out["ssim"] - out["numpy_ssim"]) <= 1e-8 * (1 - out["numpy_ssim"])  # streaming's stated tolerance


def test_an_isolated_first_call_forks_one_child_and_leaves_numba_out(library: N.NativeKernels) -> None:
    """With the library built, evaluate()'s first call loads it (0.04-0.06 s) before its one
    child: no codec-beside-the-kernel-load second child, and no numba in the caller."""
    code = ("import json, sys, numpy as np; from perfscout.analysis import streaming as S; "
            "from perfscout.tools.evaluate import evaluate_full; "
            "z, y, x = np.ogrid[0:64, 0:256, 0:256]; "
            "f = (np.sin(x / 7.0) * np.cos(y / 5.0) + 0.1 * z).astype(np.float32); "
            "pending = S.kernels_pending(f); "
            "ev = evaluate_full(f, 'sz3', 'rel', 1e-3, repeats=1, keep_reconstruction=False); "
            "print(json.dumps({'pending': pending, 'status': ev.result.status, 'bound_ok': ev.result.bound_ok, "
            "'children': ev.extra['timing_split'].get('children', 1), 'numba': 'numba' in sys.modules}))")
    out = json.loads(_run(code, {"PERFSCOUT_METRICS_BACKEND": "auto"}))
    assert out == {"pending": False, "status": "ok", "bound_ok": True, "children": 1, "numba": False}


def test_the_library_is_keyed_to_the_cpu_and_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch,
                                                                       library: N.NativeKernels) -> None:
    here = N.library_key()
    assert len(here) == 20 and N.built()
    try:
        monkeypatch.setattr(N, "_cpu_identity", lambda: "Another CPU|avx512f sse2")
        N.library_key.cache_clear()
        assert N.library_key() not in ("", here)  # never this machine's file
        monkeypatch.setattr(N, "_cpu_identity", lambda: "")
        N.library_key.cache_clear()
        assert N.library_key() == "" and N.library_path() is None  # an unknown CPU: no library
    finally:
        monkeypatch.undo()
        N.library_key.cache_clear()
    assert N.library_key() == here
    monkeypatch.setenv(N.ENV_NATIVE, "0")
    N.load.cache_clear()
    try:
        assert not N.built() and N.load() is None
    finally:
        monkeypatch.delenv(N.ENV_NATIVE)
        N.load.cache_clear()


def test_an_unwritable_package_directory_puts_the_library_in_the_user_cache(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "analysis"
    pkg.mkdir()
    (pkg / "__pycache__").write_text("not a directory")
    monkeypatch.setattr(N, "_HERE", pkg)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = N.library_path()
    assert path is not None and path.parent == tmp_path / "cache" / "perfscout" / "kernels"
    assert path.name == f"stream_kernels-{N.library_key()}.so"
    blocked = tmp_path / "blocked"
    blocked.write_text("")  # a file where the cache directory would be: no directory, even for root
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert N.library_path() is None  # nowhere to keep it: no library, the JIT kernels run


@pytest.mark.slow
def test_a_damaged_library_is_built_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          library: N.NativeKernels) -> None:
    """A truncated file under the library's name (a copy cut short, a full disk): it does
    not load, so it is built again, once, and the kernels run."""
    path = tmp_path / f"stream_kernels-{N.library_key()}.so"
    path.write_bytes(Path(library.lib._name).read_bytes()[:4096])
    monkeypatch.setattr(N, "library_path", lambda: path)
    N.load.cache_clear()
    try:
        native = N.load()
        assert native is not None, N.last_failure()
        x = np.linspace(1, 2, 3000, dtype=np.float32)
        assert native.pass_a_kernel(x, x + np.float32(0.25), 0, 0.0)[:4] == library.pass_a_kernel(
            x, x + np.float32(0.25), 0, 0.0)[:4]
        assert path.stat().st_size > 4096 and not path.with_suffix(".failed").exists()
    finally:
        N.load.cache_clear()


@pytest.mark.slow
def test_without_a_c_compiler_the_jit_kernels_run_and_the_reason_is_kept(tmp_path: Path) -> None:
    """A machine that cannot link the library: the metric pass runs numba's JIT kernels (the
    same figures), the reason is noted beside where the library would be, a second process
    reads the note instead of trying again, and one that would run another compiler tries."""
    pkg = _package_copy(tmp_path)
    env = {"PYTHONPATH": str(pkg), "CC": str(tmp_path / "no-such-cc"), "PERFSCOUT_METRICS_BACKEND": "numba",
           "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    code = ("import json, time, numpy as np; t = time.perf_counter(); "
            "from perfscout.analysis import stream_compiled as C, stream_native as N, streaming as S; "
            "x = np.linspace(0, 1, 4000, dtype=np.float32).reshape(40, 100); "
            "m = S.stream_quality_metrics(x, x + np.float32(1e-3), 10); "
            "print(json.dumps({'kernels': getattr(C.K, '__name__', type(C.K).__name__), 'why': N.last_failure(), "
            "'file': N.__file__, 'max': m['max_abs_err'], 's': time.perf_counter() - t}))")
    first = json.loads(_run(code, env, cwd=tmp_path))
    assert first["file"].startswith(str(pkg))
    assert first["kernels"] == "perfscout.analysis.stream_kernels"
    assert "no C compiler" in first["why"] and "no-such-cc" in first["why"]
    assert first["max"] == pytest.approx(1e-3, rel=1e-3)
    notes = list((pkg / "perfscout" / "analysis" / "__pycache__").glob("stream_kernels-*.failed"))
    assert len(notes) == 1 and "no C compiler" in notes[0].read_text()
    assert not list(notes[0].parent.glob("stream_kernels-*.so"))
    second = json.loads(_run(code, env, cwd=tmp_path))
    assert second["kernels"] == "perfscout.analysis.stream_kernels" and second["why"] == first["why"]
    # Another compiler since (here one that fails): the note no longer holds, so it is tried.
    false = shutil.which("false")
    assert false
    third = json.loads(_run(code, {**env, "CC": false}, cwd=tmp_path))
    assert third["kernels"] == "perfscout.analysis.stream_kernels" and "failed (1)" in third["why"]
    assert notes[0].read_text().startswith(f"compiler: {false}\n")


# The C reshape helper linked into the library (numba's kernels call it to see a plane's
# rows as one run): its answers against NumPy's own no-copy reshape.

_RESHAPES = [
    ((4, 5, 6), (0, slice(None), slice(None)), (30,)),  # a plane of a C array: one run
    ((4, 5, 6), (slice(None), slice(1, 4), slice(None)), (4, 18)),  # rows 1-3 of every plane
    ((4, 5, 6), (slice(None), slice(1, 4), slice(None)), (72,)),  # planes apart: a copy
    ((4, 5, 6), (slice(None), slice(None), slice(0, 3)), (60,)),  # rows cut short: a copy
    ((4, 5, 6), (slice(None), slice(None), slice(0, 3)), (20, 3)),  # ... but rows of three stay
    ((3, 1, 8), (slice(None), slice(None), slice(None, None, 2)), (12,)),  # strided inner axis
    ((3, 1, 8), (slice(None), slice(None), slice(None, None, 2)), (3, 4, 1)),
    ((2, 3, 4), (Ellipsis,), (4, 1, 6, 1)),  # axes of length one anywhere
    ((2, 3, 4), (slice(None, None, -1),), (2, 12)),  # a reversed axis
    ((2, 3, 4), (slice(None, None, -1),), (24,)),
    ((2, 0, 4), (Ellipsis,), (0, 8)),  # no elements
    ((6,), (Ellipsis,), (2, 1, 3)),
]


def _numpy_nocopy_strides(view: np.ndarray, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    probe = view.view()
    try:
        probe.shape = shape  # NumPy's rule: raises where the reshape would need a copy
    except AttributeError:
        return None
    return probe.strides


@pytest.mark.parametrize(("base", "index", "shape"), _RESHAPES)
def test_the_reshape_helper_agrees_with_numpy(base, index, shape, library: N.NativeKernels) -> None:
    fn = library.lib.numba_attempt_nocopy_reshape
    P = ctypes.POINTER(ctypes.c_ssize_t)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_ssize_t, P, P, ctypes.c_ssize_t, P, P, ctypes.c_ssize_t, ctypes.c_int]
    view = np.zeros(base, np.float32)[index]
    want = _numpy_nocopy_strides(view, shape)
    arr = lambda v: (ctypes.c_ssize_t * max(1, len(v)))(*v)  # noqa: E731
    out = (ctypes.c_ssize_t * len(shape))()
    ok = fn(view.ndim, arr(view.shape), arr(view.strides), len(shape), arr(shape), out, view.itemsize, 0)
    assert bool(ok) == (want is not None), (view.shape, view.strides, shape)
    if ok and view.size:
        for n, got, expected in zip(shape, out, want):
            if n != 1:  # an axis of length one may have any stride
                assert got == expected, (shape, list(out), want)
    assert fn(view.ndim, arr(view.shape), arr(view.strides), len(shape), arr(shape), out, view.itemsize, 1) == 0


def test_kernels_refuse_outputs_they_could_not_write(library: N.NativeKernels) -> None:
    """The library writes into the caller's buffers as the JIT kernels do: a buffer it could
    not write in place (read-only, strided, another dtype, too short) is refused."""
    x = np.linspace(1, 2, 100, dtype=np.float32)
    ro = np.zeros(100, np.int64)
    ro.flags.writeable = False
    for cand in (ro, np.zeros(200, np.int64)[::2], np.zeros(100, np.int32), np.zeros(10, np.int64)):
        with pytest.raises(ValueError):
            library.beyond_kernel(x, x + np.float32(0.5), 1, 0.1, cand)
    with pytest.raises(TypeError, match="float32 or float64"):
        library.pass_a_kernel(x, x.astype(np.float64), 0, 0.0)
    cand = np.zeros(100, np.int64)
    assert library.beyond_kernel(x, x + np.float32(0.5), 1, 0.1, cand) == 100
    assert library.beyond_kernel(x[::-1], x[::-1] + np.float32(0.5), 1, 0.1, cand) == 100  # inputs: copied
