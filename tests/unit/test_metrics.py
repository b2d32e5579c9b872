"""Quality metrics: hand-computed values, pysz's own verification, brute-force SSIM, edge cases."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from perfscout.analysis import metrics as metrics_module
from perfscout.analysis.metrics import (
    ERR_HIST_BINS,
    max_abs_error,
    psnr,
    quality_metrics,
    ssim,
    value_range,
)
from perfscout.errors import InputError

# -- hand-computed values ------------------------------------------------------------

X4 = np.array([0.0, 1.0, 2.0, 3.0])
Y4 = np.array([0.0, 1.5, 2.0, 2.0])  # e = [0, 0.5, 0, -1]


def test_hand_computed_1d() -> None:
    m = quality_metrics(X4, Y4, compressed_nbytes=8)
    # R = 3, MSE = (0.25 + 1) / 4, var(x) = 1.25
    assert m["ratio"] == 32 / 8
    assert m["bitrate"] == 8 * 8 / 4
    assert m["value_range"] == 3.0
    assert m["max_abs_err"] == 1.0
    assert m["max_abs_err_index"] == (3,)
    assert m["max_rel_err"] == pytest.approx(1 / 3, rel=1e-15)
    assert m["max_pw_rel_err"] == 0.5  # |0.5|/1 beats 0/2 and 1/3
    assert m["mse"] == 0.3125
    assert m["rmse"] == pytest.approx(math.sqrt(0.3125), rel=1e-15)
    assert m["nrmse"] == pytest.approx(math.sqrt(0.3125) / 3, rel=1e-15)
    assert m["psnr"] == pytest.approx(20 * math.log10(3) - 10 * math.log10(0.3125), rel=1e-14)
    assert m["snr"] == pytest.approx(10 * math.log10(1.25 / 0.3125), rel=1e-14)  # 6.0206 dB
    # x - mean = [-1.5, -0.5, 0.5, 1.5], y - mean = [-1.375, 0.125, 0.625, 0.625]
    assert m["pearson"] == pytest.approx(0.8125 / math.sqrt(1.25 * 0.671875), rel=1e-14)
    # e - mean(e) = [0.125, 0.625, 0.125, -0.875]
    assert m["err_autocorr_lag1"] == pytest.approx(0.046875 / 1.1875, rel=1e-14)
    # one 4-wide window (the axis is shorter than 7): sample (N-1) moments
    c1, c2 = (0.01 * 3) ** 2, (0.03 * 3) ** 2
    mx, my = 1.5, 1.375
    vx, vy, cxy = 1.25 * 4 / 3, 0.671875 * 4 / 3, 0.8125 * 4 / 3
    expected_ssim = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    # the record's SSIM sums its windows in float64 on the error: 1e-8 of 1 - SSIM (stated tolerance)
    assert abs(m["ssim"] - expected_ssim) <= 1e-8 * (1 - expected_ssim)
    assert m["nonfinite_count"] == 0
    assert m["zero_changed_count"] == 0


def test_hand_computed_2d_index_and_float32_input() -> None:
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    y = x.copy()
    y[1, 0] += 0.25  # exactly representable: the only error
    m = quality_metrics(x, y, compressed_nbytes=6)
    assert m["ratio"] == 24 / 6
    assert m["bitrate"] == 8.0
    assert m["max_abs_err"] == 0.25
    assert m["max_abs_err_index"] == (1, 0)
    assert all(isinstance(i, int) for i in m["max_abs_err_index"])
    assert m["max_rel_err"] == 0.25 / 5
    assert m["max_pw_rel_err"] == 0.25 / 4
    assert m["mse"] == 0.0625 / 6
    assert m["psnr"] == pytest.approx(20 * math.log10(5) - 10 * math.log10(0.0625 / 6), rel=1e-14)


def test_err_hist_summary_is_small_and_json_able() -> None:
    m = quality_metrics(X4, Y4, compressed_nbytes=8)
    h = m["err_hist"]
    json.dumps(m)  # every value is a plain Python type
    assert h["n"] == 4
    assert sum(h["counts"]) == 4
    assert len(h["counts"]) == ERR_HIST_BINS and len(h["edges"]) == ERR_HIST_BINS + 1
    assert h["edges"][0] == -1.0 and h["edges"][-1] == 1.0
    assert h["quantiles"]["0"] == -1.0 and h["quantiles"]["1"] == 0.5
    assert h["quantiles"]["0.5"] == 0.0
    assert h["mean"] == -0.125
    assert h["zero_fraction"] == 0.5
    # -1 lands in the first bin, 0.5 in bin 12 of 16 over [-1, 1]; the two zeros in bin 8
    assert h["counts"][0] == 1 and h["counts"][8] == 2 and h["counts"][12] == 1


def test_value_range_and_max_abs_error_helpers() -> None:
    assert value_range(np.array([3.0, -2.0, 7.5])) == 9.5
    assert value_range(np.array([1.0, np.nan, 4.0])) == 3.0  # finite elements only
    err, idx = max_abs_error(np.zeros((2, 3, 4)), np.pad(np.ones((1, 1, 1)) * -2, ((1, 0), (2, 0), (3, 0))))
    assert (err, idx) == (2.0, (1, 2, 3))


def test_first_occurrence_of_the_max_is_reported() -> None:
    x = np.zeros(5)
    y = np.array([0.0, 1.0, 0.0, -1.0, 0.0])
    assert max_abs_error(x, y) == (1.0, (1,))


@given(
    x=arrays(np.float64, array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9),
             elements=st.floats(-1e6, 1e6, allow_nan=False)),
    noise=st.floats(0, 10),
    seed=st.integers(0, 2**16),
)
def test_metrics_properties_on_random_arrays(x: np.ndarray, noise: float, seed: int) -> None:
    y = x + noise * np.random.default_rng(seed).standard_normal(x.shape)
    m = quality_metrics(x, y, compressed_nbytes=3)
    e = y - x
    assert m["max_abs_err"] == np.abs(e).max()
    assert np.abs(e)[m["max_abs_err_index"]] == m["max_abs_err"]
    assert m["mse"] == pytest.approx(np.mean(e * e), rel=1e-9, abs=1e-300)
    assert m["value_range"] == x.max() - x.min()
    assert m["rmse"] <= m["max_abs_err"] * (1 + 1e-12)
    assert -1 - 1e-9 <= m["ssim"] <= 1 + 1e-9
    assert math.isnan(m["pearson"]) or -1 - 1e-9 <= m["pearson"] <= 1 + 1e-9
    assert -1 - 1e-9 <= m["err_autocorr_lag1"] <= 1 + 1e-9
    assert sum(m["err_hist"]["counts"]) == x.size
    if m["max_abs_err"] == 0:
        assert m["psnr"] == math.inf and m["ssim"] == 1.0
    elif m["value_range"] > 0 and m["mse"] > 0:  # (squares of subnormal errors underflow)
        R = m["value_range"]
        assert m["psnr"] == pytest.approx(20 * math.log10(R) - 10 * math.log10(m["mse"]), rel=1e-9, abs=1e-9)
        assert m["nrmse"] == pytest.approx(m["rmse"] / R, rel=1e-12)


# -- edge cases -----------------------------------------------------------------------


def test_identical_arrays() -> None:
    x = np.linspace(-1, 1, 50, dtype=np.float32).reshape(5, 10)
    m = quality_metrics(x, x.copy(), compressed_nbytes=100)
    assert m["max_abs_err"] == 0.0
    assert m["mse"] == 0.0 and m["rmse"] == 0.0 and m["nrmse"] == 0.0
    assert m["psnr"] == math.inf and m["snr"] == math.inf
    assert m["pearson"] == 1.0 and m["ssim"] == 1.0
    assert m["err_autocorr_lag1"] == 0.0
    assert m["err_hist"]["counts"] == [50] and m["err_hist"]["zero_fraction"] == 1.0


def test_constant_field_exact_and_perturbed() -> None:
    x = np.full((8, 8), 3.0)
    exact = quality_metrics(x, x.copy(), compressed_nbytes=16)
    assert exact["value_range"] == 0.0
    assert exact["max_rel_err"] == 0.0 and exact["nrmse"] == 0.0
    assert exact["psnr"] == math.inf and exact["ssim"] == 1.0 and exact["pearson"] == 1.0
    y = x.copy()
    y[2, 5] = 3.5
    m = quality_metrics(x, y, compressed_nbytes=16)
    assert m["max_abs_err"] == 0.5 and m["max_abs_err_index"] == (2, 5)
    assert m["max_rel_err"] == math.inf and m["nrmse"] == math.inf
    assert m["psnr"] == -math.inf  # R = 0 < MSE
    assert math.isnan(m["pearson"])  # x constant, y not: undefined
    assert -1.0 <= m["ssim"] < 1.0  # falls back to the pair's range, stays finite
    assert m["max_pw_rel_err"] == pytest.approx(0.5 / 3)


def test_pointwise_relative_ignores_zeros_but_counts_changed_zeros() -> None:
    x = np.array([0.0, 2.0, -4.0, 0.0])
    y = np.array([0.1, 2.2, -4.0, 0.0])
    m = quality_metrics(x, y, compressed_nbytes=4)
    assert m["max_pw_rel_err"] == pytest.approx(0.1)  # 0.2/2; x=0 elements excluded
    assert m["zero_changed_count"] == 1
    all_zero = quality_metrics(np.zeros(3), np.zeros(3), compressed_nbytes=1)
    assert all_zero["max_pw_rel_err"] == 0.0


def test_nonfinite_passed_through_exactly_is_not_an_error() -> None:
    x = np.array([1.0, np.nan, 3.0, np.inf, 5.0])
    y = np.array([1.5, np.nan, 3.0, np.inf, 5.0])
    m = quality_metrics(x, y, compressed_nbytes=4)
    assert m["nonfinite_count"] == 2
    assert m["max_abs_err"] == 0.5 and m["max_abs_err_index"] == (0,)
    assert m["value_range"] == 4.0  # over the finite elements 1, 3, 5
    assert m["mse"] == pytest.approx(0.25 / 3)  # three finite pairs


def test_nonfinite_mismatch_is_an_infinite_error_at_its_index() -> None:
    x = np.array([1.0, np.nan, 3.0, 4.0])
    lost_nan = np.array([1.0, 0.0, 3.0, 4.0])
    assert max_abs_error(x, lost_nan) == (math.inf, (1,))
    introduced = np.array([1.0, np.nan, 3.0, np.inf])
    m = quality_metrics(x, introduced, compressed_nbytes=4)
    assert m["max_abs_err"] == math.inf and m["max_abs_err_index"] == (3,)
    sign_flip = np.array([1.0, np.nan, 3.0, 4.0])
    xi = np.array([1.0, np.nan, 3.0, np.inf])
    assert max_abs_error(xi, np.where(np.isinf(xi), -np.inf, sign_flip)) == (math.inf, (3,))


@pytest.mark.parametrize("exp2", [1000, -1000, -1070])
def test_extreme_magnitudes_scale_exactly(exp2: int) -> None:
    """Near 1e+-308 (and in subnormals) squares over/underflow; metrics must not care.

    Scaling x and y by 2**exp2 is exact, so every scale-free metric must be unchanged
    and every dimensional one scaled by exactly 2**exp2.
    """
    rng = np.random.default_rng(11)
    x = np.cumsum(rng.standard_normal((20, 30)), axis=1)
    y = x + 1e-3 * rng.standard_normal(x.shape)
    base = quality_metrics(x, y, compressed_nbytes=100)
    xs, ys = np.ldexp(x, exp2), np.ldexp(y, exp2)
    if exp2 == -1070:  # subnormal: only ~50 bits left, so compare to what survived
        x, y = np.ldexp(xs, -exp2), np.ldexp(ys, -exp2)
        base = quality_metrics(x, y, compressed_nbytes=100)
    m = quality_metrics(xs, ys, compressed_nbytes=100)
    for key in ("psnr", "snr", "nrmse", "max_rel_err", "max_pw_rel_err", "pearson", "ssim", "err_autocorr_lag1"):
        assert math.isfinite(m[key]), key
        assert m[key] == pytest.approx(base[key], rel=1e-9), key
    assert m["max_abs_err"] == math.ldexp(base["max_abs_err"], exp2)
    assert m["max_abs_err_index"] == base["max_abs_err_index"]
    assert m["value_range"] == math.ldexp(base["value_range"], exp2)
    assert m["err_hist"]["counts"] == base["err_hist"]["counts"]
    assert ssim(xs, ys) == pytest.approx(ssim(x, y), rel=1e-9)


def test_pointwise_error_over_a_range_wider_than_float64_exponents() -> None:
    x = np.array([1e300, -1e300, 1e-300, 5.0])
    y = x * (1 + 2**-40)  # the same relative error everywhere
    m = quality_metrics(x, y, compressed_nbytes=8)
    assert m["max_pw_rel_err"] == pytest.approx(2**-40, rel=1e-3)  # 1e-300 not flushed to 0
    assert m["max_rel_err"] == pytest.approx(2**-41, rel=1e-3)  # |e| of 1e300 over R = 2e300
    assert m["mse"] == math.inf and math.isfinite(m["psnr"])  # MSE itself overflows float64


@pytest.mark.parametrize(
    ("x", "y"),
    [
        (X4, Y4),
        (X4, X4.copy()),  # exact: +inf
        (np.full(4, 2.0), np.array([2.0, 2.0, 2.0, 2.5])),  # R = 0 < MSE: -inf
        (np.array([1.0, 2.0, 3.0, 1e-200]), np.array([1.0, 2.0, 3.0, 1.5e-200])),  # e^2 underflows
        (np.array([1e300, -1e300, 5.0]), np.array([1e300, -1e300, 5.0]) * (1 + 2**-40)),  # e^2 overflows
        (np.array([1.0, np.nan, 3.0]), np.array([1.5, np.nan, 3.0])),  # NaN passed through
    ],
)
def test_psnr_alone_is_the_records_psnr(x: np.ndarray, y: np.ndarray) -> None:
    # The psnr-mode search uses psnr(); its verdict must agree with the record's figure.
    assert psnr(x, y) == quality_metrics(x, y, compressed_nbytes=8)["psnr"]


def test_tiny_errors_never_look_exact() -> None:
    x = np.array([1.0, 2.0, 3.0, 1e-200])
    y = x.copy()
    y[3] = 1.5e-200  # its square underflows to 0 in float64
    m = quality_metrics(x, y, compressed_nbytes=4)
    assert m["max_abs_err"] == pytest.approx(0.5e-200)
    assert math.isfinite(m["psnr"]) and m["psnr"] > 1000
    assert m["pearson"] == pytest.approx(1.0) and m["ssim"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("x", "y", "nbytes", "message"),
    [
        (np.zeros(4), np.zeros(5), 1, "differ in shape"),
        (np.zeros((2, 2)), np.zeros(4), 1, "differ in shape"),
        (np.zeros(0), np.zeros(0), 1, "non-empty"),
        (np.array(1.0), np.array(1.0), 1, "0-d"),
        (np.zeros(4), np.zeros(4), 0, "> 0 bytes"),
        (np.zeros(4), np.zeros(4), 2.5, "integer byte count"),
        (np.full(3, np.nan), np.full(3, np.nan), 1, "no element is finite"),
    ],
)
def test_bad_inputs_raise_input_error(x, y, nbytes, message) -> None:
    with pytest.raises(InputError, match=message):
        quality_metrics(x, y, nbytes)


def test_value_range_refusals() -> None:
    with pytest.raises(InputError, match="empty"):
        value_range(np.zeros(0))
    with pytest.raises(InputError, match="no element is finite"):
        value_range(np.array([np.nan, np.inf]))


# -- SSIM against a brute-force reference ----------------------------------------------


def _ssim_brute_force(a: np.ndarray, b: np.ndarray, window: int, data_range: float) -> float:
    """Every fully contained window, one at a time, with NumPy's own mean/var/cov."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    win = [min(window, n) for n in a.shape]
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    values = []
    for start in itertools.product(*[range(n - w + 1) for n, w in zip(a.shape, win)]):
        sl = tuple(slice(s, s + w) for s, w in zip(start, win))
        wa, wb = a[sl].ravel(), b[sl].ravel()
        ddof = 1 if wa.size > 1 else 0
        mx, my = wa.mean(), wb.mean()
        vx, vy = wa.var(ddof=ddof), wb.var(ddof=ddof)
        cxy = np.cov(wa, wb, ddof=ddof)[0, 1] if wa.size > 1 else 0.0
        values.append(((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2)))
    return float(np.mean(values))


@pytest.mark.parametrize(
    ("shape", "window"),
    [((40,), 7), ((10, 12), 7), ((8, 9, 10), 7), ((3, 12), 7), ((1, 9, 11), 7), ((6, 6), 3),
     ((2, 3, 8, 9), 7), ((60,), 20), ((24, 30), 18)],  # the last two: cumulative-sum path
)
def test_ssim_matches_brute_force(shape: tuple[int, ...], window: int) -> None:
    rng = np.random.default_rng(7)
    a = np.cumsum(rng.standard_normal(shape), axis=-1) + 10.0  # offset: luminance term matters
    b = a + 0.3 * rng.standard_normal(shape)
    R = float(a.max() - a.min())
    got = ssim(a, b, window=window)
    assert got == pytest.approx(_ssim_brute_force(a, b, window, R), rel=1e-10)
    assert got == pytest.approx(ssim(a, b, window=window, data_range=R), rel=1e-15)
    assert ssim(a, b, window=window, data_range=5 * R) == pytest.approx(
        _ssim_brute_force(a, b, window, 5 * R), rel=1e-10
    )


@pytest.mark.parametrize("slab", [1, 100, 500, 10**9])
@pytest.mark.parametrize("shape", [(15, 9, 10), (60,), (12, 13)])
def test_ssim_in_slabs_matches_whole_array(monkeypatch: pytest.MonkeyPatch, slab: int, shape) -> None:
    rng = np.random.default_rng(5)
    a = np.cumsum(rng.standard_normal(shape), axis=0)
    b = a + 0.5 * rng.standard_normal(shape)
    expected = _ssim_brute_force(a, b, 7, float(a.max() - a.min()))
    monkeypatch.setattr(metrics_module, "SSIM_SLAB_ELEMENTS", slab)
    assert ssim(a, b) == pytest.approx(expected, rel=1e-10)


def test_ssim_float32_large_offset_is_accurate() -> None:
    # Values ~1e4 with local variance ~1: the naive E[x^2] - E[x]^2 would lose digits.
    rng = np.random.default_rng(3)
    a = (1e4 + rng.standard_normal((12, 12))).astype(np.float32)
    b = (a + rng.standard_normal((12, 12)).astype(np.float32) * 0.1).astype(np.float32)
    R = float(a.astype(np.float64).max() - a.astype(np.float64).min())
    assert ssim(a, b) == pytest.approx(_ssim_brute_force(a, b, 7, R), rel=1e-9)


def test_ssim_degrades_with_noise_and_rejects_bad_args() -> None:
    rng = np.random.default_rng(0)
    a = np.cumsum(rng.standard_normal((32, 32)), axis=1)
    noise = rng.standard_normal(a.shape)
    scores = [ssim(a, a + s * noise) for s in (0.01, 0.1, 1.0)]
    assert scores[0] > scores[1] > scores[2]
    assert ssim(a, a) == 1.0
    with pytest.raises(InputError, match="window"):
        ssim(a, a + noise, window=0)
    with pytest.raises(InputError, match="data_range"):
        ssim(a, a + noise, data_range=0.0)
    with pytest.raises(InputError, match="finite"):
        ssim(np.array([1.0, np.nan]), np.array([1.0, 2.0]))


# -- against pysz's own verification on real fields -------------------------------------


@pytest.mark.parametrize(
    "name", ["vorticity.512_512", "vorticity.128_128_41", "999x999.float", "const32x32x59.float"]
)
def test_metrics_agree_with_pysz_verify(shared_fields: dict[str, np.ndarray], name: str) -> None:
    from pysz import sz, szConfig, szErrorBoundMode

    data = shared_fields[name]
    conf = szConfig(data.shape)
    conf.errorBoundMode = szErrorBoundMode.REL
    conf.relErrorBound = 1e-3
    compressed, _ratio = sz.compress(data, conf)
    dec, _ = sz.decompress(compressed, data.dtype, data.shape)
    dec = dec.reshape(data.shape)
    max_diff, psnr, nrmse = sz.verify(data, dec)

    m = quality_metrics(data, dec, compressed_nbytes=int(compressed.nbytes))
    # pysz differences are float32; ours float64 (exact for f32 inputs), hence a tiny tolerance.
    assert m["max_abs_err"] == pytest.approx(max_diff, rel=1e-6)
    assert m["psnr"] == pytest.approx(psnr, rel=1e-6)
    assert m["nrmse"] == pytest.approx(nrmse, rel=1e-5)
    assert m["ratio"] == pytest.approx(data.nbytes / compressed.nbytes)
    # SZ3 honours a REL 1e-3 bound; its PSNR at that bound is well above 60 dB (the
    # piecewise-constant const32x32x59 field even comes back exact: PSNR = inf on both sides)
    assert m["max_rel_err"] <= 1e-3 * (1 + 1e-6)
    assert m["psnr"] > 60
    assert 0.9 < m["ssim"] <= 1.0 and 0.99 < m["pearson"] <= 1.0


# -- the same code on CuPy -------------------------------------------------------------


@pytest.mark.gpu
def test_cupy_arrays_give_the_same_metrics() -> None:
    import cupy

    rng = np.random.default_rng(1)
    x = np.cumsum(rng.standard_normal((16, 20, 24)), axis=2).astype(np.float32)
    y = (x + 1e-2 * rng.standard_normal(x.shape)).astype(np.float32)
    cpu = quality_metrics(x, y, 1000)
    gpu = quality_metrics(cupy.asarray(x), cupy.asarray(y), 1000)
    for key, value in cpu.items():
        if key == "err_hist":
            assert gpu[key]["counts"] == value["counts"]
        elif isinstance(value, float):
            assert gpu[key] == pytest.approx(value, rel=1e-9), key
        else:
            assert gpu[key] == value, key
