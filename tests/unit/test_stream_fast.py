"""The fused fast path of the streaming metric pass (analysis.stream_fast): when it runs,
that it agrees with the whole-array oracle, and its pieces against simpler definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfscout.analysis import metric_defs as M
from perfscout.analysis import stream_fast as F
from perfscout.analysis import streaming as S
from tests.unit.test_metrics_streaming import _field, assert_matches_reference


@pytest.fixture(autouse=True)
def numpy_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """This module tests the NumPy fast path: keep the compiled kernels
    (analysis.stream_compiled, tested in test_stream_compiled) out of it."""
    monkeypatch.setenv(S.ENV_BACKEND, "numpy")


def _no_general_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a, **_k):
        raise AssertionError("the general pass ran")

    for name in ("_scan", "_sums", "_spread", "stream_ssim"):
        monkeypatch.setattr(S, name, refuse)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_finite_fields_take_the_fast_path_and_match_the_oracle(dtype, monkeypatch) -> None:
    x, y = _field((20, 24, 30), dtype, seed=3, noise=1e-3)
    _no_general_pass(monkeypatch)
    monkeypatch.setattr(S, "STREAM_CHUNK_ELEMENTS", 1000)  # many chunk seams
    monkeypatch.setattr(S, "SSIM_FAST_TILE_ELEMENTS", 3000)
    assert_matches_reference(x, y)


@pytest.mark.parametrize(
    ("x", "y"),
    [
        (np.array([1.0, np.nan, 3.0]), np.array([1.5, np.nan, 3.0])),  # NaN: general pass
        (np.array([1e300, 2.0, 3.0]), np.array([1e300, 2.5, 3.0])),  # needs the rescale
        (np.array([0.0, 1.0, 3.0]), np.array([5e-310, 1.0, 3.0])),  # subnormal max |e|
    ],
)
def test_cases_outside_the_fast_path_say_so(x, y) -> None:
    step = S.STREAM_CHUNK_ELEMENTS
    assert F.fast_point_stats(np, x, y, x.shape, step, S.FINE_HIST_BINS) is None
    assert_matches_reference(x, y)


def test_errors_on_the_coarse_edges_are_binned_as_numpy_histogram_bins_them() -> None:
    """Errors exactly on (and one ulp beside) every coarse edge, both signs, and the peak:
    the 16 counts must be numpy.histogram's, whatever the fine bins' own rounding."""
    peak = 0.7
    edges = np.linspace(-peak, peak, M.ERR_HIST_BINS + 1)
    e = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf),
                        [peak, -peak, 0.0, 0.0, -1e-300, 1e-300]])
    e = np.clip(e, -peak, peak)
    rng = np.random.default_rng(0)
    x = rng.uniform(1.0, 2.0, e.size)
    y = x + e  # the realised error is y - x; the oracle bins that
    got = assert_matches_reference(x, y)
    real = y - x
    j = -math.frexp(np.abs(real).max())[1]
    top = math.ldexp(float(np.abs(real).max()), j)
    want, _ = np.histogram(np.ldexp(real, j), bins=M.ERR_HIST_BINS, range=(-top, top))
    assert got["err_hist"]["counts"] == want.tolist()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), w=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_doubling_box_sums_equal_the_shifted_adds(n, w, seed) -> None:
    a = np.random.default_rng(seed).integers(-50, 50, size=(n, max(1, n // 2) + 3)).astype(np.float64)
    win = (min(w, a.shape[0]), min(w, a.shape[1]))
    got = F.box_sums_doubling(a, win)
    want = M._box_sums(np, a, win)
    np.testing.assert_array_equal(got, want)  # integers: every order of addition is exact
    assert got is not a and not np.shares_memory(got, a)


def test_fast_ssim_refuses_an_error_past_its_range() -> None:
    x, y = _field((10, 12), np.float64, seed=1, noise=1e-3)
    flat_x, flat_y = x.reshape(-1), y.reshape(-1)
    scan, sums, _ = F.fast_point_stats(np, flat_x, flat_y, x.shape, 64, S.FINE_HIST_BINS)
    R = scan.x_max - scan.x_min
    tiles = list(S._tiles(*S._tile_plan(np, x.shape, 50)))
    assert F.fast_ssim(np, x, y, scan, sums.max_abs, R, iter(tiles)) is not None
    # an error past 2^SSIM_MAX_ERR_EXP2 data ranges: B's cancellation could eat float64's digits
    assert F.fast_ssim(np, x, y, scan, math.ldexp(R, F.SSIM_MAX_ERR_EXP2 + 1), R, iter(tiles)) is None
    # no data range (C1 = C2 = 0): the general pass's handling of 0/0 windows
    assert F.fast_ssim(np, x, y, scan, sums.max_abs, 0.0, iter(tiles)) is None


@pytest.mark.parametrize("shape", [(256, 256, 256), (4, 1000, 1000), (10**6,), (3, 5), (512, 512),
                                   (3, 1000, 256), (100, 100, 5000), (2, 3, 8, 9)])
def test_row_tiles_keep_rows_whole_and_cover_whole_windows(shape) -> None:
    win = tuple(min(7, n) for n in shape)
    target = S.SSIM_FAST_TILE_ELEMENTS
    lengths = S._row_tile_lengths(shape, win, target)
    assert all(min(n, w) <= t <= n for t, n, w in zip(lengths, shape, win))
    assert math.prod(lengths) <= max(4 * target, math.prod(shape))
    n_out, tile_out, win2 = S._tile_plan(np, shape, target)
    covered = sum(math.prod(max(1, s.stop - s.start - w + 1) for s, w in zip(sl, win2))
                  for sl in S._tiles(n_out, tile_out, win2))
    assert covered == math.prod(n_out)  # every output window exactly once


@pytest.mark.parametrize("factor", [1e-30, 1e-7, 1e7, 1e30])
@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_fast_path_on_ranges_far_from_one(factor, offset, monkeypatch) -> None:
    """Data ranges far from 1 (and a mean far from zero relative to the range): still
    the oracle's figures."""
    x, y = _field((12, 14, 16), np.float64, seed=8, noise=1e-3)
    _no_general_pass(monkeypatch)
    assert_matches_reference((x + offset) * factor, (y + offset) * factor)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int64])
def test_integer_inputs_are_differenced_in_float64(dtype) -> None:
    """Integer arrays (a quantised field): y - x must not wrap around in the input type."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 100, size=(9, 10, 11)).astype(dtype)
    y = (x.astype(np.int64) + rng.integers(-3, 4, size=x.shape)).clip(0, 120).astype(dtype)
    got = assert_matches_reference(x, y)
    assert got["max_abs_err"] <= 3


@settings(max_examples=80, deadline=None)
@given(
    shape=st.lists(st.integers(1, 11), min_size=1, max_size=3).map(tuple),
    scale_exp=st.integers(-35, 35),
    rel_noise=st.sampled_from([0.0, 1e-7, 1e-4, 1e-2, 1.0]),
    zeros=st.booleans(),
    seed=st.integers(0, 2**16),
    chunk=st.integers(1, 64),
    tile=st.integers(1, 500),
)
def test_float32_fields_of_any_magnitude_match_the_oracle(shape, scale_exp, rel_noise, zeros, seed, chunk, tile) -> None:
    _check_any_magnitude(np.float32, shape, scale_exp, rel_noise, zeros, seed, chunk, tile)


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 11), min_size=1, max_size=3).map(tuple),
    scale_exp=st.integers(-300, 300),
    rel_noise=st.sampled_from([0.0, 1e-12, 1e-7, 1e-2, 1.0]),
    zeros=st.booleans(),
    seed=st.integers(0, 2**16),
    chunk=st.integers(1, 64),
    tile=st.integers(1, 500),
)
def test_float64_fields_of_any_magnitude_match_the_oracle(shape, scale_exp, rel_noise, zeros, seed, chunk, tile) -> None:
    """Across float64's range: the fast path, its SSIM's limits and the general pass's
    rescale all meet the oracle."""
    _check_any_magnitude(np.float64, shape, scale_exp, rel_noise, zeros, seed, chunk, tile)


def _check_any_magnitude(dtype, shape, scale_exp, rel_noise, zeros, seed, chunk, tile) -> None:
    rng = np.random.default_rng(seed)
    x = (np.cumsum(rng.standard_normal(shape), axis=-1) * 10.0**scale_exp).astype(dtype)
    if zeros:
        x[rng.random(shape) < 0.3] = 0
    y = (x + rel_noise * np.abs(x).max() * rng.uniform(-1, 1, shape)).astype(dtype)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "STREAM_CHUNK_ELEMENTS", chunk)
        mp.setattr(S, "SSIM_FAST_TILE_ELEMENTS", tile)
        assert_matches_reference(x, y, nbytes=5)
