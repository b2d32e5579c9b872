"""The bound contract: mode/bound validation, rel on constant fields, the element-wise
check and its two failure statuses, non-finite pass-through, and the searched modes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfscout.analysis.metrics import quality_metrics
from perfscout.codecs import get_codec
from perfscout.errors import InputError
from perfscout.tools import bounds as B


@pytest.mark.parametrize("bound", [0, -1e-3, math.nan, math.inf, -math.inf, "abc", None])
@pytest.mark.parametrize("mode", ["abs", "rel", "pw_rel", "psnr", "ratio", "fixed_rate"])
def test_impossible_bounds_are_input_errors(mode: str, bound: object) -> None:
    with pytest.raises(InputError, match="bound"):
        B.check_mode_bound(mode, bound)  # type: ignore[arg-type]


def test_unknown_mode_and_mode_specific_limits() -> None:
    with pytest.raises(InputError, match="unknown mode 'l2'"):
        B.check_mode_bound("l2", 1e-3)
    with pytest.raises(InputError, match="ratio must be >= 1"):
        B.check_mode_bound("ratio", 0.5)
    with pytest.raises(InputError, match="<= 64"):
        B.check_mode_bound("fixed_rate", 65)
    assert B.check_mode_bound("psnr", "80") == 80.0


def test_rel_reference_is_value_range_then_magnitude_then_absolute() -> None:
    x = np.array([-2.0, 0.5, 6.0], dtype=np.float32)
    assert B.rel_reference(x) == (8.0, "")
    ref, note = B.rel_reference(np.full((3, 4), -2.5, dtype=np.float32))
    assert ref == 2.5 and "constant field" in note
    ref, note = B.rel_reference(np.zeros((5,), dtype=np.float64))
    assert ref == 1.0 and "all-zero" in note


def test_verify_ok_records_max_error_and_index() -> None:
    x = np.zeros((3, 4), dtype=np.float32)
    y = x.copy()
    y[2, 1] = 0.5e-3
    y[0, 3] = -0.25e-3
    check = B.verify_bound(x, y, abs_bound=1e-3)
    assert check.status == "ok" and check.bound_ok is True
    assert check.max_abs_err == pytest.approx(0.5e-3, rel=1e-6)
    assert check.max_abs_err_index == (2, 1)


def test_verify_overshoot_is_within_float_rounding_only() -> None:
    # 1000 + 1e-3 is not representable in float32; the nearest float is one ulp
    # (6.1e-5) beyond the bound when the error is "exactly" the bound.
    x = np.array([1000.0, 1.0], dtype=np.float32)
    y = x.copy()
    y[0] = np.nextafter(np.float32(1000.0 + 1e-3), np.float32(np.inf))
    check = B.verify_bound(x, y, abs_bound=1e-3)
    assert check.status == "bound_overshoot" and check.bound_ok is False
    assert check.n_beyond == 1 and check.n_violations == 0
    assert check.worst_index == (0,)
    assert "within float rounding" in check.message


def test_verify_violation_beyond_rounding() -> None:
    x = np.linspace(0, 1, 10, dtype=np.float64)
    y = x.copy()
    y[7] += 2e-3
    check = B.verify_bound(x, y, abs_bound=1e-3)
    assert check.status == "bound_violated" and check.bound_ok is False
    assert check.n_violations == 1 and check.worst_index == (7,)
    assert check.worst_excess == pytest.approx(1e-3, rel=1e-6)
    assert "(7,)" in check.message


def test_verify_nan_from_codec_is_a_violation() -> None:
    x = np.ones(4, dtype=np.float32)
    y = x.copy()
    y[1] = np.nan
    check = B.verify_bound(x, y, abs_bound=1.0)
    assert check.status == "bound_violated" and check.max_abs_err == math.inf and check.max_abs_err_index == (1,)


def test_verify_pointwise_zero_must_be_exact() -> None:
    x = np.array([0.0, 2.0, -4.0], dtype=np.float64)
    within = np.array([0.0, 2.0 * (1 + 0.9e-2), -4.0 * (1 - 0.9e-2)])
    assert B.verify_bound(x, within, pw_rel_bound=1e-2).status == "ok"
    zero_moved = np.array([1e-6, 2.0, -4.0])
    check = B.verify_bound(x, zero_moved, pw_rel_bound=1e-2)
    assert check.status == "bound_violated" and check.worst_index == (0,)


def test_verify_pointwise_slack_is_per_element() -> None:
    # A 100% error on a small float32 element is a violation, whatever the largest
    # element's bound (4 eps of 1e3 * 1e-2 would otherwise excuse it as rounding).
    x = np.array([1e-6, 1e3], dtype=np.float32)
    y = np.array([2e-6, 1e3], dtype=np.float32)
    check = B.verify_bound(x, y, pw_rel_bound=1e-2)
    assert check.status == "bound_violated" and check.worst_index == (0,)
    # One ulp off at the large element is still only rounding.
    y = np.array([1e-6, np.nextafter(np.float32(1e3 * 1.01), np.float32(np.inf))], dtype=np.float32)
    assert B.verify_bound(x, y, pw_rel_bound=1e-2).status == "bound_overshoot"


def test_fixed_rate_has_no_verdict() -> None:
    x = np.arange(6, dtype=np.float32)
    check = B.verify_bound(x, x + 1, abs_bound=None, pw_rel_bound=None)
    assert check.bound_ok is None and check.max_abs_err == 1.0


def test_shape_mismatch_is_input_error() -> None:
    with pytest.raises(InputError, match="shape"):
        B.verify_bound(np.zeros(3), np.zeros(4), abs_bound=1.0)


def test_nonfinite_refusal_names_count_and_position() -> None:
    x = np.ones((2, 3), dtype=np.float32)
    x[1, 2] = np.nan
    x[0, 1] = -np.inf
    with pytest.raises(B.NonfiniteInputError, match=r"2 non-finite .*index \(0, 1\)") as info:
        B.refuse_nonfinite(x)
    assert info.value.count == 2 and info.value.first_index == (0, 1)


def test_nonfinite_split_and_restore_are_bit_exact() -> None:
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    payload_nan = np.array([0x7FC01234], dtype=np.uint32).view(np.float32)[0]  # NaN with a payload
    x[0, 0, 0], x[1, 2, 3], x[1, 0, 1] = payload_nan, np.inf, -np.inf
    split = B.split_nonfinite(x)
    assert split.count == 3 and np.isfinite(split.filled).all()
    assert split.fill_value == pytest.approx(float(np.mean(x[np.isfinite(x)], dtype=np.float64)))
    restored = B.restore_nonfinite(split.filled, split)
    assert np.array_equal(restored.view(np.uint32), np.where(split.mask, x, split.filled).view(np.uint32))
    mask, values = B.unpack_nonfinite(split.sections(), x.shape, x.dtype)  # type: ignore[misc]
    assert np.array_equal(mask, split.mask)
    assert np.array_equal(values.view(np.uint32), x[split.mask].view(np.uint32))


def test_psnr_initial_bound_follows_uniform_error_model() -> None:
    # uniform errors on [-e, e]: MSE = e^2/3, so PSNR = 20 log10(R) - 10 log10(e^2/3)
    e = B.psnr_initial_bound(60.0, 2.0)
    assert 20 * math.log10(2.0) - 10 * math.log10(e * e / 3) == pytest.approx(60.0)


def _grf(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    from perfscout.datasets import synthetic

    return synthetic("grf", shape, dtype="f32", seed=seed).array


@pytest.mark.parametrize("codec", ["sz3", "zfp"])
def test_psnr_search_reaches_target(codec: str) -> None:
    x = _grf((64, 64))
    out = B.search_psnr(
        x, 70.0, lambda eb: get_codec(codec, "abs", eb).compress(x),
        lambda c: get_codec(codec, "abs", c.bound).decompress(c),
    )
    assert out.reached and out.achieved >= 70.0 and 1 <= out.iterations <= B.PSNR_MAX_TRIALS
    assert out.achieved == pytest.approx(quality_metrics(x, out.reconstructed, 1)["psnr"])


def test_psnr_search_on_constant_field_is_input_error() -> None:
    x = np.full((8, 8), 3.0, dtype=np.float32)
    with pytest.raises(InputError, match="R is 0"):
        B.search_psnr(x, 60.0, lambda eb: get_codec("sz3", "abs", eb).compress(x), lambda c: x)


def test_ratio_search_converges_within_tolerance() -> None:
    x = _grf((64, 64))
    out = B.search_ratio(x, 8.0, lambda eb: get_codec("sz3", "abs", eb).compress(x))
    assert out.reached and abs(out.achieved - 8.0) <= B.RATIO_TOLERANCE * 8.0
    assert out.iterations <= B.RATIO_MAX_ITER and len(out.trials) == out.iterations
    assert out.compressed is not None and out.compressed.bound == out.abs_bound
    assert x.nbytes / out.compressed.nbytes == pytest.approx(out.achieved)


def test_ratio_search_reports_an_unreachable_target() -> None:
    x = _grf((32, 32))
    out = B.search_ratio(x, 1e6, lambda eb: get_codec("sz3", "abs", eb).compress(x), max_iter=6)
    assert not out.reached and out.iterations <= 6
    assert "not reached" in out.note("ratio")
    # The closest trial is the one kept, stream and all.
    assert (out.abs_bound, out.achieved) == max(out.trials, key=lambda t: t[1])
    assert out.compressed is not None and out.compressed.bound == out.abs_bound


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.float16])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_min_max_in_pieces_is_numpys_whole_array_min_and_max(dtype, threads: int) -> None:
    """Past the piece size the array is reduced in pieces on several threads; the figures
    are NumPy's own, for any thread count, a ragged last piece and the extremes anywhere."""
    rng = np.random.default_rng(7)
    n = 4 * B.MIN_MAX_CHUNK + 12346  # a multiple of 5: the strided view below
    a = (rng.standard_normal(n) * 100).astype(dtype)
    a[n - 3] = np.iinfo(dtype).max if np.issubdtype(dtype, np.integer) else 1e4  # in the ragged last piece
    a[B.MIN_MAX_CHUNK + 1] = np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else -1e4
    want = (float(np.min(a)), float(np.max(a)))
    assert B.min_max(a, threads) == want
    assert B.min_max(a.reshape(5, -1)[:, ::2], threads) == (float(np.min(a.reshape(5, -1)[:, ::2])),
                                                            float(np.max(a.reshape(5, -1)[:, ::2])))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_min_max_in_pieces_lets_a_non_finite_element_through_as_numpy_does(bad: float) -> None:
    a = np.linspace(-1, 1, 4 * B.MIN_MAX_CHUNK + 7, dtype=np.float32)
    a[3 * B.MIN_MAX_CHUNK + 5] = bad
    lo, hi = B.min_max(a, 2)
    want_lo, want_hi = float(np.min(a)), float(np.max(a))
    assert (math.isnan(lo) and math.isnan(want_lo)) or lo == want_lo
    assert (math.isnan(hi) and math.isnan(want_hi)) or hi == want_hi
    assert not (math.isfinite(lo) and math.isfinite(hi))  # what evaluate's validation reads as "not all finite"
