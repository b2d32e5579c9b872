"""The streaming metric pass against today's whole-array definitions (kept here as the oracle).

``reference_quality_metrics`` below is the whole-array implementation that
``perfscout.analysis.metrics.quality_metrics`` used before the streaming pass
(float64 copies of both inputs, ``numpy.quantile``, ``numpy.histogram``); the streaming
pass must agree with it: exactly for maxima, indices, counts and the coarse histogram,
to ~1e-11 relative for sums, SSIM to 1e-8 of its dissimilarity 1 - SSIM (float64 window
sums centred on a value of each tile), and to one fine bin for the error quantiles.
"""

from __future__ import annotations

import math
import tracemalloc
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from perfscout.analysis import metrics as M
from perfscout.analysis import streaming as S
from perfscout.analysis.metrics import psnr, quality_metrics
from perfscout.analysis.xp import to_float
from perfscout.errors import InputError

# -- the oracle: the whole-array implementation, verbatim apart from the M. prefixes -------

def _error_summary(xp: ModuleType, e: Any, exp2: int = 0) -> dict[str, Any]:
    """Quantiles, moments and a coarse symmetric histogram of the signed error ``e`` (1-D).

    ``e`` holds the error times 2**exp2; the reported figures are in the data's units.
    """
    q = xp.quantile(e, xp.asarray(M.ERR_QUANTILES, dtype=xp.float64))
    peak = to_float(xp.max(xp.abs(e)))
    if peak > 0:
        # Bin on the error scaled so that its peak is in [0.5, 1): exact (a power of
        # two), and numpy cannot form 16 bins over a range of a few subnormals.
        j = -math.frexp(peak)[1]
        top = math.ldexp(peak, j)
        counts, edges = xp.histogram(xp.ldexp(e, j), bins=M.ERR_HIST_BINS, range=(-top, top))
        counts_l = [int(c) for c in counts.tolist()]
        edges_l = [M._unscale(float(v), exp2 + j) for v in edges.tolist()]
    else:  # exact reconstruction: one degenerate bin holding everything
        counts_l = [int(e.size)]
        edges_l = [0.0, 0.0]
    return {
        "n": int(e.size),
        "mean": M._unscale(to_float(xp.mean(e)), exp2),
        "std": M._unscale(to_float(xp.std(e)), exp2),
        "zero_fraction": to_float(xp.count_nonzero(e == 0)) / int(e.size),
        "quantiles": {f"{p:g}": M._unscale(float(v), exp2) for p, v in zip(M.ERR_QUANTILES, q.tolist())},
        "edges": edges_l,
        "counts": counts_l,
    }


def _lag1_autocorr(xp: ModuleType, e: Any) -> float:
    """Lag-1 autocorrelation of the error in flattened C order (Z-checker's definition).

    r1 = sum_i (e_i - m)(e_{i+1} - m) / sum_i (e_i - m)^2 with m = mean(e). An error
    with zero variance (exact, or a pure constant bias) has no structure to correlate
    and is reported as 0.
    """
    flat = e.reshape(-1)
    if flat.size < 2:
        return 0.0
    d = flat - xp.mean(flat)
    den = to_float(xp.sum(d * d))
    if den == 0:
        return 0.0
    return to_float(xp.sum(d[:-1] * d[1:])) / den



def reference_quality_metrics(original: Any, reconstructed: Any, compressed_nbytes: int) -> dict[str, Any]:
    """Every quality figure of a reconstruction, as plain Python values.

    Definitions (x original, y reconstruction, e = y - x, n elements, R = max x - min x):

    - ``ratio`` = nbytes(x) / compressed_nbytes (x's own dtype size, e.g. 4 for f32)
    - ``bitrate`` = 8 * compressed_nbytes / n (bits per value; 32 = uncompressed f32)
    - ``max_abs_err`` = max |e|; ``max_abs_err_index`` its C-order index
    - ``max_rel_err`` = max |e| / R (value-range relative, the ``rel`` bound's metric);
      R = 0: 0 when exact, else inf
    - ``max_pw_rel_err`` = max |e_i| / |x_i| over the elements with x_i != 0 (point-wise
      relative; 0 when there is none). ``zero_changed_count`` counts elements with
      x_i = 0 whose reconstruction is not 0 (infinite point-wise error, reported apart)
    - ``rmse`` = sqrt(MSE), MSE = mean(e^2); ``mse`` is included too
    - ``nrmse`` = sqrt(MSE) / R (R = 0: 0 when exact, else inf)
    - ``psnr`` = 20 log10(R) - 10 log10(MSE) dB; MSE = 0 -> +inf; R = 0 < MSE -> -inf
    - ``snr`` = 10 log10(var(x) / MSE) dB, var the population variance; MSE = 0 -> +inf
    - ``pearson`` = cov(x, y) / (std x * std y); 1 for identical arrays, NaN when one of
      them is constant and they differ (undefined)
    - ``ssim``: :func:`ssim` with 7-wide windows and data range R
    - ``err_autocorr_lag1``: lag-1 autocorrelation of e in flattened C order
    - ``err_hist``: error quantiles, mean/std, zero fraction and a 16-bin histogram
    - ``value_range`` (R), ``nonfinite_count`` (non-finite elements of x)
    """
    if isinstance(compressed_nbytes, bool) or int(compressed_nbytes) != compressed_nbytes:
        raise InputError(f"compressed size must be an integer byte count, got {compressed_nbytes!r}")
    if compressed_nbytes <= 0:
        raise InputError(f"compressed size must be > 0 bytes, got {compressed_nbytes}")
    p = M._prepare(original, reconstructed)
    xp = p.xp
    orig_nbytes = int(xp.asarray(original).nbytes)
    n_total = int(p.x.size)

    # Everything below is in scaled units (inputs times 2**k, k = p.exp2, usually 0);
    # dimensional results go through M._unscale on the way out.
    k = p.exp2
    xv = p.flat_valid(p.x)
    yv = p.flat_valid(p.y)
    ev = yv - xv
    n = p.n_valid

    R = to_float(xp.max(xv)) - to_float(xp.min(xv))
    max_abs, max_idx = M._max_abs_scaled(p)
    mse = to_float(xp.sum(ev * ev)) / n
    log_mse = M._log10_mse(mse, max_abs, n)

    # Point-wise ratios on the unscaled values: scaling a field spanning more than
    # float64's exponent range could flush its smallest elements to zero.
    # Overflow here is honest: |y - x| or |e| / |x| beyond float64 is reported as inf.
    with np.errstate(over="ignore"):
        xr = p.flat_valid(p.x_raw)
        er = p.flat_valid(p.y_raw) - xr
        nonzero = xr != 0
        if bool(xp.any(nonzero)):
            max_pw = to_float(xp.max(xp.abs(er[nonzero]) / xp.abs(xr[nonzero])))
        else:
            max_pw = 0.0
    zero_changed = int(xp.count_nonzero(~nonzero & (er != 0)))
    del xr, er

    mean_x = to_float(xp.mean(xv))
    mean_y = to_float(xp.mean(yv))
    dx = xv - mean_x
    dy = yv - mean_y
    var_x = to_float(xp.sum(dx * dx)) / n
    var_y = to_float(xp.sum(dy * dy)) / n
    cov = to_float(xp.sum(dx * dy)) / n
    exact = max_abs == 0
    if exact:
        pearson = 1.0
    elif var_x > 0 and var_y > 0:
        pearson = cov / (math.sqrt(var_x) * math.sqrt(var_y))
    else:
        pearson = math.nan

    rmse = math.sqrt(mse)
    return {
        "ratio": orig_nbytes / int(compressed_nbytes),
        "bitrate": 8.0 * int(compressed_nbytes) / n_total,
        "max_abs_err": M._unscale(max_abs, k),
        "max_abs_err_index": max_idx,
        "max_rel_err": M._ratio_or_limit(max_abs, R),
        "max_pw_rel_err": max_pw,
        "zero_changed_count": zero_changed,
        "mse": M._unscale(M._unscale(mse, k), k),
        "rmse": M._unscale(rmse, k),
        "nrmse": M._ratio_or_limit(rmse if mse > 0 or exact else 10.0 ** min(log_mse / 2, 300.0), R),
        "psnr": M._psnr_db(R, log_mse, exact),
        "snr": math.inf if exact else 10 * M._log10(var_x) - 10 * log_mse,
        "pearson": pearson,
        "ssim": 1.0 if exact else M._ssim_prepared(xp, p.x, p.y, M.SSIM_WINDOW, R if R > 0 else None),
        "err_autocorr_lag1": _lag1_autocorr(xp, p.y - p.x),
        "err_hist": _error_summary(xp, ev, k),
        "value_range": M._unscale(R, k),
        "nonfinite_count": p.nonfinite_count,
    }


# -- comparison --------------------------------------------------------------------------

#: Sums in a different order: float64 rounding of a few ulps per chunk.
SUM_RTOL = 1e-11
#: SSIM agrees with the float64 oracle to this fraction of 1 - SSIM (the stated tolerance of
#: stream_fast.fast_ssim, whose worst case is ~4e-10).
SSIM_DISSIM_RTOL = 1e-8
EXACT_KEYS = ("ratio", "bitrate", "max_abs_err", "max_abs_err_index", "max_rel_err", "max_pw_rel_err",
              "zero_changed_count", "value_range", "nonfinite_count")


def _close(a: float, b: float, rtol: float = SUM_RTOL, atol: float = 0.0) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if a == b:
        return True
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def assert_matches_reference(x: np.ndarray, y: np.ndarray, nbytes: int = 100) -> dict[str, Any]:
    ref = reference_quality_metrics(x, y, nbytes)
    got = S.stream_quality_metrics(x, y, nbytes)
    assert set(got) == set(ref)
    for key in EXACT_KEYS:
        assert got[key] == ref[key] or _close(got[key], ref[key], 0.0), (key, got[key], ref[key])
    # SNR and the autocorrelation of an exact or near-exact error are differences of
    # tiny sums: compare them on the scale of their magnitudes (dB / unit range).
    spread_keys = ("snr", "pearson")
    finite = np.isfinite(x) & np.isfinite(y)
    if np.ptp(x[finite]) == 0 or np.ptp(y[finite]) == 0:
        # A constant array: the whole-array var() may keep its mean's rounding (SNR of
        # -321 dB instead of -inf); the streaming pass says 0, the definition.
        spread_keys = ()
        assert got["snr"] == (math.inf if got["max_abs_err"] == 0 else -math.inf) or np.ptp(x[finite]) > 0
    # SSIM: the fast pass (stream_fast.fast_ssim) is exact to a small fraction of the
    # dissimilarity 1 - SSIM, the figure that distinguishes reconstructions.
    ds = abs(got["ssim"] - ref["ssim"])
    assert ds <= SSIM_DISSIM_RTOL * abs(1 - ref["ssim"]) + 1e-12, ("ssim", got["ssim"], ref["ssim"])
    for key in ("mse", "rmse", "nrmse", "psnr", *spread_keys, "err_autocorr_lag1"):
        atol = 1e-12 if key in ("err_autocorr_lag1", "pearson", "ssim", "psnr", "snr") else 0.0
        assert _close(got[key], ref[key], atol=atol), (key, got[key], ref[key])
    gh, rh = got["err_hist"], ref["err_hist"]
    assert gh["n"] == rh["n"] and gh["counts"] == rh["counts"] and gh["edges"] == rh["edges"]
    assert gh["zero_fraction"] == rh["zero_fraction"]
    peak = max(abs(v) for v in rh["edges"]) if rh["edges"] else 0.0
    assert _close(gh["mean"], rh["mean"], atol=1e-13 * peak), (gh["mean"], rh["mean"])
    assert _close(gh["std"], rh["std"], atol=1e-13 * peak), (gh["std"], rh["std"])
    width = 2 * peak / S.FINE_HIST_BINS  # the stated tolerance: one fine bin
    for q, v in rh["quantiles"].items():
        tol = 0.0 if q in ("0", "1") else width * (1 + 1e-9)
        assert abs(gh["quantiles"][q] - v) <= tol, (q, gh["quantiles"][q], v, tol)
    return got


@pytest.fixture(params=["default", "tiny"])
def chunking(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run each case with the real chunk sizes and with tiny ones (many chunk seams)."""
    if request.param == "tiny":
        monkeypatch.setattr(S, "STREAM_CHUNK_ELEMENTS", 7)
        monkeypatch.setattr(S, "SSIM_TILE_ELEMENTS", 60)
        monkeypatch.setattr(S, "SSIM_FAST_TILE_ELEMENTS", 60)
    return request.param


def _field(shape: tuple[int, ...], dtype: Any = np.float64, seed: int = 0, noise: float = 1e-2):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.standard_normal(shape), axis=-1) + 3.0
    y = x + noise * rng.standard_normal(shape)
    return x.astype(dtype), y.astype(dtype)


@pytest.mark.parametrize("shape", [(1,), (2,), (50,), (9, 11), (1, 30), (30, 1), (6, 7, 8), (13, 9, 10),
                                   (2, 3, 8, 9)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_streaming_matches_whole_array(shape, dtype, chunking) -> None:
    x, y = _field(shape, dtype)
    assert_matches_reference(x, y)


def test_streaming_hand_computed_quantiles_are_exact_where_the_ranks_are_zeros() -> None:
    # e = [0, 0.5, 0, -1]: the median sits between the two exact zeros.
    m = S.stream_quality_metrics(np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 1.5, 2.0, 2.0]), 8)
    q = m["err_hist"]["quantiles"]
    assert q["0"] == -1.0 and q["1"] == 0.5 and q["0.5"] == 0.0


@pytest.mark.parametrize(
    ("x", "y"),
    [
        (np.array([1.0, np.nan, 3.0, np.inf, 5.0]), np.array([1.5, np.nan, 3.0, np.inf, 5.0])),
        (np.array([1.0, np.nan, 3.0, 4.0]), np.array([1.0, np.nan, 3.0, np.inf])),  # introduced inf
        (np.array([1.0, np.nan, 3.0, 4.0]), np.array([1.0, 0.0, 3.0, 4.0])),  # lost NaN
        (np.full((8, 8), 3.0), np.where(np.arange(64).reshape(8, 8) == 21, 3.5, 3.0)),  # constant x
        (np.full(5, 2.0), np.full(5, 2.0)),  # exact constant
        (np.zeros(6), np.array([0.0, 0.0, 1e-3, 0.0, 0.0, 0.0])),  # all-zero x, a changed zero
        (np.array([0.0, 2.0, -4.0, 0.0]), np.array([0.1, 2.2, -4.0, 0.0])),
        (np.array([1e300, -1e300, 1e-300, 5.0]), np.array([1e300, -1e300, 1e-300, 5.0]) * (1 + 2**-40)),
        (np.array([1.0, 2.0, 3.0, 1e-200]), np.array([1.0, 2.0, 3.0, 1.5e-200])),  # e^2 underflows
        (np.array([np.nan, 2.0, 2.0, np.nan, 2.0]), np.array([np.nan, 2.0, 2.5, np.nan, 2.0])),
    ],
)
def test_streaming_edge_cases_match(x: np.ndarray, y: np.ndarray, chunking: str) -> None:
    assert_matches_reference(x, y)


@pytest.mark.parametrize("exp2", [1000, -1000, -1070])
def test_streaming_extreme_magnitudes_match(exp2: int, chunking: str) -> None:
    x, y = _field((20, 30), seed=11, noise=1e-3)
    assert_matches_reference(np.ldexp(x, exp2), np.ldexp(y, exp2))


@settings(max_examples=60, deadline=None)
@given(
    x=arrays(np.float64, array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=12),
             elements=st.floats(-1e6, 1e6, allow_nan=False)),
    noise=st.floats(0, 10),
    seed=st.integers(0, 2**16),
    chunk=st.integers(1, 40),
    tile=st.integers(1, 400),
    quantised=st.booleans(),
)
def test_streaming_matches_on_random_arrays(x, noise, seed, chunk, tile, quantised) -> None:
    y = x + noise * np.random.default_rng(seed).standard_normal(x.shape)
    if quantised:  # ties and exact zeros, as a quantiser makes them
        y = x + np.round(y - x)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "STREAM_CHUNK_ELEMENTS", chunk)
        mp.setattr(S, "SSIM_TILE_ELEMENTS", tile)
        mp.setattr(S, "SSIM_FAST_TILE_ELEMENTS", tile)
        assert_matches_reference(x, y, nbytes=3)


def test_public_entry_points_are_the_streaming_pass() -> None:
    x, y = _field((12, 13, 14), np.float32, seed=4)
    assert quality_metrics(x, y, 77) == S.stream_quality_metrics(x, y, 77)
    assert psnr(x, y) == quality_metrics(x, y, 77)["psnr"]
    assert psnr(x, y) == pytest.approx(reference_quality_metrics(x, y, 77)["psnr"], rel=1e-12)


@pytest.mark.parametrize(
    ("x", "y", "nbytes", "message"),
    [
        (np.zeros(4), np.zeros(5), 1, "differ in shape"),
        (np.zeros(0), np.zeros(0), 1, "non-empty"),
        (np.array(1.0), np.array(1.0), 1, "0-d"),
        (np.zeros(4), np.zeros(4), 0, "> 0 bytes"),
        (np.full(3, np.nan), np.full(3, np.nan), 1, "no element is finite"),
    ],
)
def test_streaming_refuses_bad_input(x, y, nbytes, message) -> None:
    with pytest.raises(InputError, match=message):
        S.stream_quality_metrics(x, y, nbytes)


def test_non_contiguous_inputs_are_read_in_c_order() -> None:
    x, y = _field((16, 18), seed=2)
    xf, yf = np.asfortranarray(x), np.asfortranarray(y)
    assert_matches_reference(xf, yf)
    xt, yt = x.T, y.T  # a transposed view: indices refer to the view's shape
    got = assert_matches_reference(xt, yt)
    assert len(got["max_abs_err_index"]) == 2


@pytest.mark.parametrize(
    ("shape", "target"),
    [((256, 256, 256), 1 << 16), ((4, 1000, 1000), 1 << 16), ((10**6,), 1 << 16), ((3, 5), 1 << 16),
     ((512, 512), 1 << 10), ((2, 3, 8, 9), 20)],
)
def test_ssim_tiles_cover_the_field_and_stay_near_their_size(shape, target) -> None:
    win = tuple(min(7, n) for n in shape)
    lengths = S._tile_lengths(shape, win, target)
    assert all(1 <= t <= n for t, n in zip(lengths, shape))
    assert all(t >= min(n, w) for t, n, w in zip(lengths, shape, win))  # a whole window fits
    if math.prod(shape) > target:
        assert math.prod(lengths) <= max(target, math.prod(4 * w for w in win)) * 2


# -- bounded memory: tracemalloc sees every NumPy buffer ---------------------------------


def _peak_allocation(shape: tuple[int, ...]) -> tuple[int, int]:
    x, y = _field(shape, np.float32, seed=9, noise=1e-3)
    tracemalloc.start()
    try:
        # two threads for every field: each thread keeps its own tile buffers, so at the
        # default (every core) a larger field would fill more threads than a small one does
        S.stream_quality_metrics(x, y, 1000, threads=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, x.nbytes


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_streaming_pass_allocates_chunks_not_fields(backend, monkeypatch) -> None:
    """The pass's own allocations are chunk and tile temporaries (~20 MiB on two threads,
    fixed): four times the field gives the same peak (the whole-array oracle needs ~18x the input).
    Each backend is pinned: under ``auto`` the larger field (2^22 elements) would take the
    compiled kernels and the smaller one NumPy, and numba's first call (import, cache
    load) would be counted as the pass's. A warm-up call keeps that out of both peaks."""
    if backend == "numba" and S._compiled_module() is None:
        pytest.skip("numba does not import here")
    monkeypatch.setenv(S.ENV_BACKEND, backend)
    assert S.metrics_backend(16 * 256 * 256) == backend
    _peak_allocation((4, 64, 64))
    small, small_nbytes = _peak_allocation((16, 256, 256))
    large, large_nbytes = _peak_allocation((64, 256, 256))
    assert large_nbytes == 4 * small_nbytes
    assert large < 1.2 * small + 2**20, f"{small / 2**20:.1f} MiB -> {large / 2**20:.1f} MiB"
    assert large < 32 * 2**20, f"peak {large / 2**20:.1f} MiB"


# -- real codec output ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["vorticity.512_512", "vorticity.128_128_41", "const32x32x59.float"])
def test_streaming_matches_on_pysz_output(shared_fields: dict[str, np.ndarray], name: str) -> None:
    from pysz import sz, szConfig, szErrorBoundMode

    data = shared_fields[name]
    conf = szConfig(data.shape)
    conf.errorBoundMode = szErrorBoundMode.REL
    conf.relErrorBound = 1e-3
    compressed, _ = sz.compress(data, conf)
    dec, _ = sz.decompress(compressed, data.dtype, data.shape)
    assert_matches_reference(data, dec.reshape(data.shape), int(compressed.nbytes))


# -- the same code on CuPy -----------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("nonfinite", [False, True])
def test_streaming_on_cupy_matches_numpy(nonfinite: bool) -> None:
    import cupy

    x, y = _field((40, 50, 60), np.float32, seed=1)
    if nonfinite:
        x[3, 4, 5] = y[3, 4, 5] = np.nan
    cpu = S.stream_quality_metrics(x, y, 1000)
    before = cupy.cuda.runtime.memGetInfo()[0]
    gpu = S.stream_quality_metrics(cupy.asarray(x), cupy.asarray(y), 1000)
    assert cupy.cuda.runtime.memGetInfo()[0] > 0 and before > 0
    width = 2 * cpu["max_abs_err"] / S.FINE_HIST_BINS
    for key, value in cpu.items():
        if key == "err_hist":
            assert gpu[key]["counts"] == value["counts"] and gpu[key]["edges"] == value["edges"]
            for q, v in value["quantiles"].items():
                # fine bins by a multiply-add: a fused one on the GPU may move an element
                # on a fine edge to its neighbour (the stated tolerance: one fine bin)
                assert abs(gpu[key]["quantiles"][q] - v) <= width * (1 + 1e-9) + 1e-12, q
        elif key == "ssim":  # float32 window sums, fused multiply-adds on the GPU
            assert abs(gpu[key] - value) <= SSIM_DISSIM_RTOL * abs(1 - value) + 1e-12, key
        elif isinstance(value, float):
            assert gpu[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
        else:
            assert gpu[key] == value, key


def test_ssim_on_one_far_value_among_zeros_within_the_stated_tolerance() -> None:
    """Found by hypothesis in test_streaming_matches_on_random_arrays: a one-window 1-D
    field, one value far from the rest. Float32 window sums were 1.69e-4 of 1 - SSIM off."""
    x = np.array([208.0, 0, 0, 0, 0, 0, 0, 0])
    y = x + np.random.default_rng(1).standard_normal(x.shape)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "STREAM_CHUNK_ELEMENTS", 1)
        mp.setattr(S, "SSIM_TILE_ELEMENTS", 1)
        mp.setattr(S, "SSIM_FAST_TILE_ELEMENTS", 1)
        assert_matches_reference(x, y, nbytes=3)


def _plateaus(shape: tuple[int, ...], dtype: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two smooth regions a data range apart (a material interface, a front): windows far
    from their tile's first value whose spread is tiny against C2, the float32 sums'
    worst case; a uniform error of 1e-5 data ranges."""
    rng = np.random.default_rng(seed)
    g = np.indices(shape).sum(0) / 50.0
    x = np.where(np.indices(shape)[-1] < shape[-1] // 2, 0.0, 1000.0) + 1e-3 * np.sin(g)
    y = x + rng.uniform(-1e-2, 1e-2, shape)
    return x.astype(dtype), y.astype(dtype)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ssim_on_two_plateaus_within_the_stated_tolerance(backend, dtype, monkeypatch) -> None:
    """Float32 window sums were 6.3e-5 (NumPy) and 1.8e-4 (compiled) of 1 - SSIM off here."""
    monkeypatch.setenv("PERFSCOUT_METRICS_BACKEND", backend)
    x, y = _plateaus((40, 60, 70), dtype, seed=0)
    assert_matches_reference(x, y)


def _adversarial(kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Fields whose windows sit far from their tile's first value against their spread and
    C2 (float32 window sums lost up to 6.2e-4 of 1 - SSIM on such fields), with an error
    from 1e-7 to 1 data range, sometimes biased."""
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 4))
    shape = tuple(int(v) for v in rng.integers(2, 20 if nd > 1 else 300, size=nd))
    idx = np.indices(shape)
    scale = 10.0 ** rng.uniform(-3, 6)
    if kind == "plateaus":
        x = np.where(idx[-1] < shape[-1] // 2, 0.0, scale) + 1e-4 * scale * np.sin(idx.sum(0) / 9.0)
    elif kind == "speckles":
        x = np.where(rng.random(shape) < 0.5, 0.0, scale)
    elif kind == "spike":
        x = np.zeros(shape)
        x.flat[int(rng.integers(0, x.size))] = scale
    else:  # steps
        x = np.floor(idx.sum(0) / rng.uniform(3, 30)) * scale
    R = float(np.ptp(x)) or 1.0
    err = 10.0 ** rng.uniform(-7, 0) * R
    y = x + err * rng.uniform(-1, 1, shape) + (err * rng.uniform(-3, 3) if rng.random() < 0.3 else 0.0)
    dtype = np.float32 if seed % 2 else np.float64
    return x.astype(dtype), y.astype(dtype)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("kind", ["plateaus", "speckles", "spike", "steps"])
@pytest.mark.parametrize("seed", range(4))
def test_ssim_on_fields_far_from_their_tiles_centre_within_the_stated_tolerance(kind, seed, backend,
                                                                               monkeypatch) -> None:
    monkeypatch.setenv("PERFSCOUT_METRICS_BACKEND", backend)
    x, y = _adversarial(kind, seed)
    assert_matches_reference(x, y)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_ssim_of_a_biased_error_far_from_zero_within_the_stated_tolerance(backend, monkeypatch) -> None:
    """An error whose mean dwarfs its spread, on a field far from zero (a codec with an
    offset): var d is a small difference of large sums of d^2."""
    monkeypatch.setenv("PERFSCOUT_METRICS_BACKEND", backend)
    rng = np.random.default_rng(3)
    g = np.indices((30, 40, 50)).sum(0) / 50.0
    x = 300.0 + np.sin(g)
    y = x + 1e-2 + 1e-6 * rng.standard_normal(x.shape)
    assert_matches_reference(x, y)
