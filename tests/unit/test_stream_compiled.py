"""The metric pass's compiled kernels (analysis.stream_compiled) against the NumPy fast path
(analysis.stream_fast: identical where that path is exact) and the whole-array oracle
(tests.unit.test_metrics_streaming: within its stated tolerances), the bound verdicts
they carry, thread counts, the backend switch, each in both forms of the kernels (the
library compiled ahead of time and numba's JIT), and that numba is imported only by the
metric pass and caches its kernels where the package directory is not writable."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

from perfscout.analysis import stream_compiled as C  # noqa: E402
from perfscout.analysis import stream_fast as F  # noqa: E402
from perfscout.analysis import stream_kernels  # noqa: E402
from perfscout.analysis import stream_native as N  # noqa: E402
from perfscout.analysis import streaming as S  # noqa: E402
from perfscout.errors import InputError  # noqa: E402
from perfscout.tools import bounds as B  # noqa: E402
from tests.unit.test_metrics_streaming import SUM_RTOL, assert_matches_reference  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

#: What the NumPy fast path computes exactly, so the kernels must give it bit for bit.
EXACT_SCAN = ("x_min", "x_max", "y_min", "y_max", "peak", "n_total", "n_valid")
EXACT_SUMS = ("max_abs", "max_flat", "e_min", "e_max", "zero_e", "max_pw", "zero_changed", "any_nonzero_x")


#: Tests of how the module loads (in a fresh process, or of numba's JIT cache): once,
#: not once per kernel set.
LOADING_TESTS = {"test_without_numba_or_the_library_the_numpy_path_runs", "test_a_numba_that_fails_to_load_falls_back_to_numpy",
                 "test_cli_import_does_not_import_numba", "test_kernels_cache_outside_an_unwritable_package_directory",
                 "test_warm_compiles_every_jit_kernel_on_a_tiny_pair"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every figure test runs on both forms of the kernels: the library compiled ahead of
    time (analysis.stream_native) and numba's JIT dispatchers (analysis.stream_kernels)."""
    if metafunc.function.__name__ not in LOADING_TESTS:
        metafunc.parametrize("kernel_set", ["native", "jit"], indirect=True)


@pytest.fixture(autouse=True)
def kernel_set(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The compiled kernels for every size (by default only pairs of at least
    streaming.COMPILED_MIN_ELEMENTS take them: the fields here are small), in the form
    the test is parametrized with (the process's own for a loading test)."""
    monkeypatch.setenv(S.ENV_BACKEND, "numba")
    form = getattr(request, "param", "")
    if form == "native":
        native = N.load()
        if native is None:
            pytest.skip(f"the kernels' library cannot be built here: {N.last_failure()}")
        monkeypatch.setattr(C, "K", native)
    elif form == "jit":
        monkeypatch.setattr(C, "K", stream_kernels)
    return form


def _pair(shape: tuple[int, ...], dtype: type, seed: int, noise: float = 1e-3, scale: float = 1.0,
          offset: float = 3.0, zeros: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (np.cumsum(rng.standard_normal(shape), axis=-1) + offset) * scale
    if zeros:
        x[rng.random(shape) < zeros] = 0.0
    y = x + noise * scale * rng.uniform(-1, 1, shape)
    if zeros:
        y[rng.random(shape) < zeros / 2] = 0.0
    return x.astype(dtype), y.astype(dtype)


def _assert_same_point_stats(x: np.ndarray, y: np.ndarray, step: int, threads: int = 1) -> None:
    xf, yf = x.reshape(-1), y.reshape(-1)
    got = C.compiled_point_stats(xf, yf, x.shape, step, S.FINE_HIST_BINS, threads=threads)
    want = F.fast_point_stats(np, xf, yf, x.shape, step, S.FINE_HIST_BINS)
    assert (got is None) == (want is None)
    if got is None:
        return
    (gs, gu, gp), (ws, wu, wp) = got, want
    for key in EXACT_SCAN:
        assert getattr(gs, key) == getattr(ws, key), key
    for key in EXACT_SUMS:
        assert getattr(gu, key) == getattr(wu, key), (key, getattr(gu, key), getattr(wu, key))
    assert (gp.fine is None) == (wp.fine is None)
    if gp.fine is not None:
        np.testing.assert_array_equal(gp.fine, wp.fine)  # the fine histogram: every count
    assert (gp.fine_j, gp.fine_top) == (wp.fine_j, wp.fine_top)
    # Sums in another order: the oracle's tolerance, on the scale of the terms summed.
    n = xf.size
    e = yf.astype(np.float64) - xf
    scales = {"sum_x": np.abs(xf).sum(), "sum_y": np.abs(yf).sum(), "sum_e": np.abs(e).sum(),
              "sum_e2": (e * e).sum()}
    for key, scale in scales.items():
        assert abs(getattr(gu, key) - getattr(wu, key)) <= 1e3 * SUM_RTOL * max(scale, 1e-300), key
    xd = xf - xf.mean(dtype=np.float64)
    spread_scale = {"sxx": (xd * xd).sum(), "see": ((e - e.mean()) ** 2).sum()}
    for key, scale in spread_scale.items():
        assert abs(getattr(gp, key) - getattr(wp, key)) <= 1e3 * SUM_RTOL * scale + 1e-300, key
    assert abs(gp.ac_num - wp.ac_num) <= 1e3 * SUM_RTOL * n * float(np.abs(e).max()) ** 2 + 1e-300


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (2,), (7,), (50,), (9, 11), (1, 30), (30, 1), (6, 7, 8),
                                   (13, 9, 10), (2, 3, 8, 9), (3, 2, 2, 2, 5)])
@pytest.mark.parametrize("step", [1, 5, 64, S.STREAM_CHUNK_ELEMENTS])
def test_point_stats_equal_the_numpy_fast_path(shape, dtype, step) -> None:
    x, y = _pair(shape, dtype, seed=len(shape) * 7 + step, zeros=0.2)
    _assert_same_point_stats(x, y, step)


@settings(deadline=None)
@given(shape=st.lists(st.integers(1, 12), min_size=1, max_size=4).map(tuple),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16),
       noise=st.sampled_from([0.0, 1e-7, 1e-3, 1.0]), scale_exp=st.integers(-30, 30),
       zeros=st.sampled_from([0.0, 0.3, 1.0]), step=st.integers(1, 100))
def test_point_stats_equal_the_numpy_fast_path_on_random_fields(shape, dtype, seed, noise, scale_exp, zeros,
                                                                step) -> None:
    x, y = _pair(shape, dtype, seed, noise=noise, scale=10.0**scale_exp, zeros=zeros)
    _assert_same_point_stats(x, y, step)


def test_errors_on_the_coarse_edges_are_binned_as_the_numpy_path_bins_them() -> None:
    """Errors exactly on (and one ulp beside) every coarse edge: the kernels' re-binning
    must agree with numpy.histogram's own comparison, as stream_fast's does."""
    peak = 0.7
    edges = np.linspace(-peak, peak, 17)
    e = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf), [0.0, -1e-300, 1e-300]])
    e = np.clip(e, -peak, peak)
    x = np.random.default_rng(0).uniform(1.0, 2.0, e.size)
    y = x + e
    for step in (3, 1000):
        _assert_same_point_stats(x, y, step)
    assert_matches_reference(x, y)


@pytest.mark.parametrize(("x", "y"), [
    (np.array([1.0, np.nan, 3.0]), np.array([1.5, np.nan, 3.0])),  # NaN
    (np.array([1.0, 2.0, 3.0], np.float32), np.array([1.0, np.inf, 3.0], np.float32)),  # inf out
    (np.array([1e300, 2.0, 3.0]), np.array([1e300, 2.5, 3.0])),  # the rescale
    (np.array([0.0, 1.0, 3.0]), np.array([5e-310, 1.0, 3.0])),  # a subnormal max |e|
    (np.array([-1.7e308, 1.7e308]), np.array([1.7e308, -1.7e308])),  # e overflows float64
])
def test_cases_outside_the_fast_path_return_none_and_still_match_the_oracle(x, y) -> None:
    assert C.compiled_point_stats(x, y, x.shape, 2, S.FINE_HIST_BINS) is None
    with np.errstate(over="ignore", invalid="ignore"):
        finite = bool(np.isfinite(y.astype(np.float64) - x).all())
    if finite:
        assert_matches_reference(x, y)


@pytest.fixture
def many_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small chunks and SSIM tiles: seams and halos everywhere in a small field."""
    monkeypatch.setattr(S, "STREAM_CHUNK_ELEMENTS", 37)
    monkeypatch.setattr(C, "SSIM_ROW_MAX", 9)
    monkeypatch.setattr(C, "SSIM_ROW_MAX_1D", 11)
    monkeypatch.setattr(C, "SSIM_PLANE_ELEMENTS", 60)
    monkeypatch.setattr(C, "SSIM_TILE_PLANES", 3)


def _compiled_must_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the compiled entry points the metric pass calls (and refuse the NumPy ones)."""
    calls: list[str] = []
    for name in ("compiled_point_stats", "compiled_ssim"):
        real = getattr(C, name)

        def spy(*a, _real=real, _name=name, **k):  # type: ignore[no-untyped-def]
            calls.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(C, name, spy)

    def refuse(*_a, **_k):  # type: ignore[no-untyped-def]
        raise AssertionError("the NumPy fast path ran")

    monkeypatch.setattr(S, "fast_point_stats", refuse)
    return calls


@pytest.mark.parametrize("tiles", ["default", "many"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (50,), (9, 11), (1, 30), (30, 1), (6, 7, 8), (13, 9, 10), (3, 20, 40)])
def test_compiled_metric_pass_matches_the_oracle(shape, dtype, tiles, monkeypatch, request) -> None:
    if tiles == "many":
        request.getfixturevalue("many_tiles")
    calls = _compiled_must_run(monkeypatch)
    x, y = _pair(shape, dtype, seed=sum(shape), noise=1e-2)
    assert_matches_reference(x, y)
    assert calls == ["compiled_point_stats", "compiled_ssim"]


@pytest.mark.parametrize("factor", [1e-30, 1e-7, 1e7, 1e30])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_ssim_on_ranges_far_from_one(factor, dtype, monkeypatch) -> None:
    """Data ranges far from 1, and a mean far from zero against the range: still the
    oracle's figures."""
    _compiled_must_run(monkeypatch)
    x, y = _pair((12, 14, 16), np.float64, seed=8, offset=1e3)
    assert_matches_reference((x * factor).astype(dtype), (y * factor).astype(dtype))


@settings(deadline=None)
@given(shape=st.lists(st.integers(1, 11), min_size=1, max_size=3).map(tuple),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16),
       noise=st.sampled_from([0.0, 1e-7, 1e-4, 1e-2, 1.0]), scale_exp=st.integers(-30, 30),
       zeros=st.booleans(), chunk=st.integers(1, 64), row=st.integers(1, 12), plane=st.integers(1, 200),
       planes=st.integers(1, 9))
def test_compiled_metric_pass_on_random_fields_and_tiles(shape, dtype, seed, noise, scale_exp, zeros, chunk, row,
                                                         plane, planes) -> None:
    x, y = _pair(shape, dtype, seed, noise=noise, scale=10.0**scale_exp, zeros=0.3 if zeros else 0.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "STREAM_CHUNK_ELEMENTS", chunk)
        mp.setattr(C, "SSIM_ROW_MAX", row)
        mp.setattr(C, "SSIM_ROW_MAX_1D", row)
        mp.setattr(C, "SSIM_PLANE_ELEMENTS", plane)
        mp.setattr(C, "SSIM_TILE_PLANES", planes)
        assert_matches_reference(x, y, nbytes=5)


def test_compiled_ssim_agrees_with_the_numpy_ssim() -> None:
    x, y = _pair((20, 30, 40), np.float32, seed=4, noise=1e-2)
    xf, yf = x.reshape(-1), y.reshape(-1)
    scan, sums, _ = C.compiled_point_stats(xf, yf, x.shape, 1 << 18, S.FINE_HIST_BINS)
    R = scan.x_max - scan.x_min
    got = C.compiled_ssim(x, y, scan, sums.max_abs, R)
    want = F.fast_ssim(np, x, y, scan, sums.max_abs, R, S._tiles(*S._tile_plan(np, x.shape, S.SSIM_FAST_TILE_ELEMENTS)))
    assert abs(got - want) <= 1e-10 * (1 - want)
    # The same refusals: a worst error past 2^SSIM_MAX_ERR_EXP2 data ranges; more than three dimensions.
    limit = math.ldexp(R, F.SSIM_MAX_ERR_EXP2)
    assert C.compiled_ssim(x, y, scan, limit, R) is not None
    assert C.compiled_ssim(x, y, scan, limit * (1 + 2**-40), R) is None
    assert F.fast_ssim(np, x, y, scan, limit * (1 + 2**-40), R, iter([])) is None
    x4 = x.reshape(2, 10, 30, 40)
    scan4, sums4, _ = C.compiled_point_stats(xf, yf, x4.shape, 1 << 18, S.FINE_HIST_BINS)
    assert C.compiled_ssim(x4, y.reshape(x4.shape), scan4, sums4.max_abs, R) is None


def test_four_dimensional_fields_take_the_numpy_ssim_and_match_the_oracle(monkeypatch) -> None:
    calls = _compiled_must_run(monkeypatch)
    x, y = _pair((3, 8, 9, 10), np.float32, seed=2, noise=1e-2)
    assert_matches_reference(x, y)
    assert calls == ["compiled_point_stats", "compiled_ssim"]  # which said None: fast_ssim ran


@pytest.mark.parametrize("shape", [(1, 8, 9, 10), (8, 1, 9, 10, 1), (1, 1, 1, 40), (1, 5), (5, 1, 1)])
def test_axes_of_length_one_are_dropped_for_the_compiled_ssim(shape, monkeypatch) -> None:
    x, y = _pair(shape, np.float32, seed=3, noise=1e-2)
    xf, yf = x.reshape(-1), y.reshape(-1)
    scan, sums, _ = C.compiled_point_stats(xf, yf, x.shape, 1 << 18, S.FINE_HIST_BINS)
    got = C.compiled_ssim(x, y, scan, sums.max_abs, scan.x_max - scan.x_min)
    assert got is not None
    assert_matches_reference(x, y)


def test_non_contiguous_inputs_give_the_contiguous_figures() -> None:
    x, y = _pair((20, 30, 16), np.float32, seed=5)
    want = S.stream_quality_metrics(np.ascontiguousarray(x[::2, :, 1::3]), np.ascontiguousarray(y[::2, :, 1::3]), 10)
    assert S.stream_quality_metrics(x[::2, :, 1::3], y[::2, :, 1::3], 10) == want
    xf, yf = np.asfortranarray(x), np.asfortranarray(y)
    assert S.stream_quality_metrics(xf, yf, 10) == S.stream_quality_metrics(x, y, 10)


def test_integer_and_mixed_dtypes_take_the_numpy_fast_path(monkeypatch) -> None:
    assert not C.supported(np.zeros(3, np.int16), np.zeros(3, np.int16))
    assert not C.supported(np.zeros(3, np.float32), np.zeros(3, np.float64))
    assert C.supported(np.zeros(3, np.float32), np.zeros(3, np.float32))
    x = np.arange(60, dtype=np.int16).reshape(6, 10)
    assert_matches_reference(x, (x + 1).astype(np.int16))
    xf, yf = _pair((9, 10), np.float64, seed=1)
    assert_matches_reference(xf, yf.astype(np.float32))
    big = np.dtype(">f4")  # another byte order: not the kernels' float32
    assert not C.supported(xf.astype(big), yf.astype(big))
    assert_matches_reference(xf.astype(big), yf.astype(big))


def _spoiled(x: np.ndarray, eb: float, pw: bool, where: list[int], seed: int) -> np.ndarray:
    """Within the bound everywhere but at ``where``: a rounding step beyond it (overshoot)
    at even positions of the list, ten bounds beyond it (violation) at odd ones."""
    rng = np.random.default_rng(seed)
    noise = rng.uniform(-eb, eb, x.shape) * 0.9
    y = (x + (noise * np.abs(x) if pw else noise)).astype(x.dtype)
    xf, yf = x.reshape(-1), y.reshape(-1)
    for k, i in enumerate(where):
        allowed = eb * abs(float(xf[i])) if pw else eb
        if k % 2 == 0:
            yf[i] = np.nextafter(np.asarray(xf[i] + allowed, x.dtype), np.asarray(np.inf, x.dtype))
        else:
            yf[i] = xf[i] - 10 * allowed - 10 * eb
    return y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["abs", "pw_rel", "none"])
@pytest.mark.parametrize("where", [[], [0], [63, 64], [127, 128, 129, 191, 192], [5, 700, 1399]])
def test_bound_verdicts_equal_verify_bound_with_elements_at_chunk_seams(dtype, mode, where, monkeypatch) -> None:
    monkeypatch.setattr(S, "STREAM_CHUNK_ELEMENTS", 64)  # seams at multiples of 64
    x, _ = _pair((14, 100), dtype, seed=3)
    eb = 1e-3
    y = _spoiled(x, eb, mode == "pw_rel", where, seed=len(where))
    bound = {"abs": {"abs_bound": eb}, "pw_rel": {"pw_rel_bound": eb}, "none": {}}[mode]
    want = B.verify_bound(x, y, **bound)
    seen: list[int] = []
    real = C.K.beyond_kernel

    def spy(xc, yc, kind, value, cand):  # type: ignore[no-untyped-def]
        k = real(xc, yc, kind, value, cand)
        seen.append(k)
        return k

    monkeypatch.setattr(C.K, "beyond_kernel", spy)
    for threads in (1, 2, 3):
        got = B.verify_and_measure(x, y, 100, threads=threads, **bound)
        assert got.one_pass and got.check == want
    monkeypatch.setenv(S.ENV_BACKEND, "numpy")
    assert B.verify_and_measure(x, y, 100, **bound).check == want
    if mode != "none" and where:
        assert want.n_beyond >= 1 and sum(seen) == 3 * want.n_beyond  # only beyond-bound elements
    else:
        assert not seen


def test_thread_counts_give_identical_figures() -> None:
    x, y = _pair((40, 50, 60), np.float32, seed=9, noise=1e-2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "STREAM_CHUNK_ELEMENTS", 4096)
        mp.setattr(C, "SSIM_PLANE_ELEMENTS", 700)
        mp.setattr(C, "SSIM_TILE_PLANES", 8)
        one = S.stream_quality_metrics(x, y, 100, threads=1)
        for threads in (2, 3):
            assert S.stream_quality_metrics(x, y, 100, threads=threads) == one


def test_backend_switch(monkeypatch) -> None:
    x, y = _pair((10, 12), np.float32, seed=1)
    assert S.metrics_backend() == S.metrics_backend(x.size) == "numba"  # forced: any size
    calls = _compiled_must_run(monkeypatch)
    S.stream_quality_metrics(x, y, 10)
    assert calls
    monkeypatch.undo()

    def refuse(*_a, **_k):  # type: ignore[no-untyped-def]
        raise AssertionError("the compiled path ran")

    # Unset (or auto): by size. Small pairs take the NumPy path (numba not even needed).
    for value in ("", "auto"):
        monkeypatch.setenv(S.ENV_BACKEND, value)
        assert S.metrics_backend(S.COMPILED_MIN_ELEMENTS - 1) == "numpy"
        assert S.metrics_backend(S.COMPILED_MIN_ELEMENTS) == S.metrics_backend() == "numba"
    with monkeypatch.context() as mp:
        mp.setattr(C, "compiled_point_stats", refuse)
        mp.setattr(C, "compiled_ssim", refuse)
        assert_matches_reference(x, y)
    monkeypatch.setattr(S, "COMPILED_MIN_ELEMENTS", x.size)
    calls = _compiled_must_run(monkeypatch)
    S.stream_quality_metrics(x, y, 10)
    assert calls == ["compiled_point_stats", "compiled_ssim"]
    monkeypatch.undo()
    # numpy: never.
    monkeypatch.setenv(S.ENV_BACKEND, "numpy")
    assert S.metrics_backend() == S.metrics_backend(10**12) == "numpy"
    monkeypatch.setattr(C, "compiled_point_stats", refuse)
    monkeypatch.setattr(C, "compiled_ssim", refuse)
    assert_matches_reference(x, y)
    monkeypatch.setenv(S.ENV_BACKEND, "fortran")
    with pytest.raises(InputError, match="PERFSCOUT_METRICS_BACKEND"):
        S.stream_quality_metrics(x, y, 10)
    with pytest.raises(InputError, match="PERFSCOUT_METRICS_BACKEND"):  # raised, not a failed metric pass
        B.verify_and_measure(x, y, 10, abs_bound=1.0)


def test_without_numba_or_the_library_the_numpy_path_runs(monkeypatch) -> None:
    S._compiled_module.cache_clear()
    monkeypatch.setenv(N.ENV_NATIVE, "0")
    N.load.cache_clear()
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    monkeypatch.delitem(sys.modules, "perfscout.analysis.stream_compiled")  # imported again: fails
    monkeypatch.delitem(sys.modules, "perfscout.analysis.stream_kernels")  # (it imports numba)
    monkeypatch.delattr(sys.modules["perfscout.analysis"], "stream_kernels")
    try:
        assert S.metrics_backend() == S.metrics_backend(10**9) == "numpy"  # even when asked for numba
        x, y = _pair((10, 12), np.float32, seed=1)
        assert_matches_reference(x, y)
    finally:
        S._compiled_module.cache_clear()
        N.load.cache_clear()


def test_a_numba_that_fails_to_load_falls_back_to_numpy(monkeypatch) -> None:
    def broken(name: str):  # type: ignore[no-untyped-def]
        raise OSError("libllvmlite.so: cannot open shared object file")  # a broken llvmlite install

    S._compiled_module.cache_clear()
    monkeypatch.setattr(S.importlib, "import_module", broken)
    try:
        assert S.metrics_backend() == "numpy"
        x, y = _pair((10, 12), np.float32, seed=1)
        assert_matches_reference(x, y)
    finally:
        monkeypatch.undo()
        S._compiled_module.cache_clear()


def test_a_large_pair_takes_the_compiled_path_by_default(monkeypatch) -> None:
    n = S.COMPILED_MIN_ELEMENTS
    x = np.linspace(0, 1, n, dtype=np.float32).reshape(64, -1)
    y = x + np.float32(1e-4)
    monkeypatch.setenv(S.ENV_BACKEND, "numpy")
    want = S.stream_quality_metrics(x, y, 10)
    monkeypatch.delenv(S.ENV_BACKEND)
    calls = _compiled_must_run(monkeypatch)
    got = S.stream_quality_metrics(x, y, 10)
    assert calls == ["compiled_point_stats", "compiled_ssim"]
    assert 0 < got["max_abs_err"] <= 2e-4 and got["ssim"] < 1
    for key in ("max_abs_err", "max_abs_err_index", "max_pw_rel_err", "zero_changed_count", "value_range"):
        assert got[key] == want[key], key
    assert got["err_hist"]["counts"] == want["err_hist"]["counts"]
    assert abs(got["ssim"] - want["ssim"]) <= 1e-8 * (1 - want["ssim"])


def _run(code: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_cli_import_does_not_import_numba() -> None:
    out = _run("import sys, perfscout.cli, perfscout.tools.bounds, perfscout.analysis.streaming; "
               "print('numba' in sys.modules)")
    assert out.strip() == "False"


@pytest.mark.slow
def test_kernels_cache_outside_an_unwritable_package_directory(tmp_path) -> None:
    """A copy of the package whose analysis/__pycache__ cannot be created: numba caches
    the kernels in its per-user cache directory instead (a second process loads them),
    and with no writable cache directory at all the kernels still run, uncached."""
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "perfscout", pkg / "perfscout", ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "perfscout" / "analysis" / "__pycache__").write_text("not a directory")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PYTHONPATH": str(pkg), "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "NUMBA_CACHE_DIR": "", "PYTHONDONTWRITEBYTECODE": "1", N.ENV_NATIVE: "0"}  # numba's JIT cache
    code = ("import json, time; t = time.perf_counter(); "
            "from perfscout.analysis import stream_compiled as C; C.warm(); "
            "print(json.dumps({'file': C.__file__, 's': time.perf_counter() - t}))")
    first = json.loads(_run(code, env, cwd=tmp_path))
    assert first["file"].startswith(str(pkg))
    cached = list((home / ".cache").rglob("*.nbi"))
    assert cached, "no numba index in the per-user cache directory"
    second = json.loads(_run(code, env, cwd=tmp_path))
    assert second["s"] < first["s"]  # loaded, not compiled again
    print(f"compile {first['s']:.2f} s, cached load {second['s']:.2f} s")
    # No writable cache at all: XDG_CACHE_HOME is a file.
    blocked = tmp_path / "blocked"
    blocked.write_text("")
    env_none = {**env, "HOME": str(blocked), "XDG_CACHE_HOME": str(blocked)}
    out = _run("from perfscout.analysis import stream_compiled as C; import numpy as np; C.warm(); "
               "from perfscout.analysis.streaming import stream_quality_metrics as q; "
               "x = np.linspace(0, 1, 1000, dtype=np.float32); print(q(x, x + np.float32(1e-3), 10)['max_abs_err'] > 0)",
               env_none, cwd=tmp_path)
    assert out.strip() == "True"


def test_warm_compiles_every_jit_kernel_on_a_tiny_pair(monkeypatch) -> None:
    monkeypatch.setattr(C, "K", stream_kernels)
    C.warm()
    for name in ("pass_a_kernel", "pass_b_kernel", "scatter_kernel", "ssim_tile_kernel", "beyond_kernel"):
        sigs = getattr(stream_kernels, name).signatures
        dtypes = {str(sig[0].dtype) for sig in sigs}
        assert {"float32", "float64"} <= dtypes, (name, dtypes)


class _RecordingWatch:
    """A ChunkWatch without ``bounds``: it must be shown every chunk, as stream_fast does."""

    def __init__(self) -> None:
        self.views: list[tuple[int, float, float, float, float, bool]] = []
        self.finished: tuple[int, float, int] | None = None

    def chunk(self, view):  # type: ignore[no-untyped-def]
        want_e = np.subtract(view.y, view.x, dtype=np.float64)
        self.views.append((view.start, view.x_min, view.x_max, view.e_min, view.e_max,
                           bool(np.array_equal(view.e, want_e))))
        return view.start

    def finish(self, partials, max_abs, max_flat):  # type: ignore[no-untyped-def]
        self.finished = (len(partials), max_abs, max_flat)
        assert partials == [v[0] for v in self.views]


@pytest.mark.parametrize("known_x", [False, True])
def test_a_watch_without_bounds_sees_every_chunk_as_the_numpy_path_shows_it(known_x) -> None:
    x, y = _pair((7, 50), np.float32, seed=6)
    xf, yf = x.reshape(-1), y.reshape(-1)
    extremes = (float(x.min()), float(x.max())) if known_x else None
    got, want = _RecordingWatch(), _RecordingWatch()
    C.compiled_point_stats(xf, yf, x.shape, 64, S.FINE_HIST_BINS, watch=got, x_extremes=extremes)
    F.fast_point_stats(np, xf, yf, x.shape, 64, S.FINE_HIST_BINS, watch=want, x_extremes=extremes)
    assert got.views == want.views and got.finished == want.finished
    assert len(got.views) == -(-xf.size // 64) and all(v[5] for v in got.views)


@pytest.mark.parametrize("name", ["vorticity.512_512", "vorticity.128_128_41", "999x999.float", "const32x32x59.float"])
def test_real_fields_through_sz3_match_the_oracle_and_the_verdict(name, shared_fields) -> None:
    """The real fields (../shared/data), reconstructed by pysz's SZ3 at REL 1e-3: the
    compiled pass's figures against the whole-array oracle, its verdict against
    verify_bound, and the same record as the NumPy fast path where that is exact."""
    pysz = pytest.importorskip("pysz")
    x = np.ascontiguousarray(shared_fields[name])
    conf = pysz.szConfig()
    conf.errorBoundMode = pysz.szErrorBoundMode.REL
    conf.relErrorBound = 1e-3
    stream = pysz.sz.compress(x, conf)[0]
    y = pysz.sz.decompress(stream, x.dtype, x.shape)[0].reshape(x.shape)
    eb = B.rel_abs_bound(x, 1e-3)[0]
    got = B.verify_and_measure(x, y, int(stream.nbytes), abs_bound=eb)
    assert got.one_pass and got.check == B.verify_bound(x, y, abs_bound=eb)
    assert_matches_reference(x, y, nbytes=int(stream.nbytes))
    _assert_same_point_stats(x, y, S.STREAM_CHUNK_ELEMENTS)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("step", [1, 2, 1000])
def test_pearson_of_a_nearly_constant_reconstruction_stays_in_range(backend, step, monkeypatch) -> None:
    """y varies ~1e7 times less than x (hypothesis found it): y's spread from its own
    shifted sums, not as sxx + 2 cov(x, e) + see, which cancelled to noise (Pearson 1.10)."""
    monkeypatch.setenv(S.ENV_BACKEND, backend)
    monkeypatch.setattr(S, "STREAM_CHUNK_ELEMENTS", step)
    x = np.array([3.4029684, 0.0], dtype=np.float32)
    y = np.array([0.0, -9.273633e-08], dtype=np.float32)
    got = assert_matches_reference(x, y, nbytes=5)
    assert got["pearson"] == pytest.approx(1.0, abs=1e-12)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(5000)
    y = 1e-9 * x + 2.0  # perfectly correlated, a tiny spread on a large mean
    assert_matches_reference(x, y)
