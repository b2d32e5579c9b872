"""Bounds never lie (issue #12, finding 1): on float64 data whose value range overflows
(values +-1e308, R = max - min > float64's largest), rel and every derived bound used to
become inf and pass every error, max_abs_err inf with bound_ok true. Each case here is the
issue's input or a direct consequence of it."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from perfscout.errors import InputError
from perfscout.tools import bounds as B
from perfscout.tools.evaluate import evaluate, evaluate_full

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

F64MAX = float(np.finfo(np.float64).max)


@pytest.fixture
def huge() -> np.ndarray:
    """The issue's field: values +-1e308 (R = 3.4e308 is beyond float64)."""
    x = np.random.default_rng(0).standard_normal(1000) * 1e308
    x = np.clip(x, -1.7e308, 1.7e308)
    x[:2] = (1.7e308, -1.7e308)
    return x


def exact(bound: float, x: np.ndarray) -> float:
    return float(Fraction(bound) * (Fraction(float(x.max())) - Fraction(float(x.min()))))


def test_range_times_needs_no_finite_range() -> None:
    assert B.range_times(1e-3, -1.7e308, 1.7e308) == pytest.approx(3.4e305, rel=1e-15)
    assert B.range_times(1.0, -1.7e308, 1.7e308) == math.inf  # R itself does not fit
    assert B.range_times(0.25, -1.0, 3.0) == 1.0
    with pytest.raises(InputError, match="exceeds float64"):
        B.rel_reference(np.array([1.7e308, -1.7e308]))


def test_rel_abs_bound_is_exact_and_finite(huge: np.ndarray) -> None:
    eb, note, fits = B.rel_abs_bound(huge, 1e-3)
    assert eb == pytest.approx(exact(1e-3, huge), rel=1e-15) and not fits and note == ""
    eb, note, _ = B.rel_abs_bound(huge, 0.9)  # 0.9 x 3.4e308 does not fit: capped, tighter, said
    assert eb == F64MAX and "tighter" in note
    eb, _, fits = B.rel_abs_bound(np.array([-2.0, 6.0], dtype=np.float32), 0.5)
    assert eb == 4.0 and fits


def test_a_non_finite_bound_is_never_verified_ok() -> None:
    x = np.ones(5)
    for bad in (math.inf, math.nan, -1.0):
        with pytest.raises(InputError, match="must be finite"):
            B.verify_bound(x, x, abs_bound=bad)
        with pytest.raises(InputError, match="must be finite"):
            B.verify_bound(x, x, pw_rel_bound=bad)


def test_a_non_finite_reconstruction_is_never_ok() -> None:
    x = np.full(6, 1e300)
    y = x.copy()
    y[3] = np.inf
    assert B.verify_bound(x, y, abs_bound=F64MAX).status == "bound_violated"  # inf beyond any finite bound
    no_bound = B.verify_bound(x, y)  # fixed_rate: no bound, but inf from finite input is broken
    assert no_bound.status == "error" and no_bound.bound_ok is None and "not finite at index (3,)" in no_bound.message
    y[3] = np.nan
    assert B.verify_bound(x, y).status == "error"


@pytest.mark.parametrize("codec", ["sz3", "sz2", "zfp", "szp-gpu"])
@pytest.mark.parametrize("mode", ["rel", "psnr", "ratio"])
def test_the_issue_case_never_reports_an_infinite_bound(huge: np.ndarray, codec: str, mode: str) -> None:
    bound = {"rel": 1e-3, "psnr": 60.0, "ratio": 10.0}[mode]
    device = "cuda" if codec == "szp-gpu" else "cpu"
    r = evaluate(huge, codec, mode, bound, device=device, repeats=1)
    assert r.abs_bound is not None and math.isfinite(r.abs_bound)
    if mode == "rel":
        assert r.abs_bound == pytest.approx(exact(1e-3, huge), rel=1e-12)  # not inf, not float64's max
    if r.bound_ok:
        assert r.max_abs_err is not None and math.isfinite(r.max_abs_err) and r.max_abs_err <= r.abs_bound
    else:
        assert r.status != "ok"


def test_sz3_h5_on_the_issue_case_is_refused_not_crashed(huge: np.ndarray) -> None:
    r = evaluate(huge, "sz3-h5", "rel", 1e-3, repeats=1)
    assert r.status == "error" and "prediction overflows float64" in r.error


def test_a_range_too_wide_for_the_dtype_runs_abs_not_the_codecs_own_rel() -> None:
    # float32 values +-3e38: R = 6e38 fits float64, not float32, in which SZ3 would compute it.
    x = np.where(np.arange(400) % 2 == 0, 3e38, -3e38).astype(np.float32) * np.linspace(0.5, 1, 400, dtype=np.float32)
    ev = evaluate_full(x, "sz3", "rel", 1e-3, repeats=1)
    assert ev.compressed is not None and ev.compressed.mode == "abs"
    assert ev.result.abs_bound == pytest.approx(exact(1e-3, x), rel=1e-12)
    assert any("too wide for the codec's own rel" in n for n in ev.notes)
    assert ev.result.status in ("ok", "bound_overshoot", "bound_violated")


def test_the_codec_is_never_handed_a_bound_beyond_its_dtype() -> None:
    assert B.codec_abs_bound(1e300, np.dtype(np.float32)) == float(np.finfo(np.float32).max)
    assert B.codec_abs_bound(1e-3, np.dtype(np.float32)) == 1e-3
    x = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    ev = evaluate_full(x, "zfp", "abs", 1e300, repeats=1)
    assert ev.compressed is not None and ev.compressed.bound == float(np.finfo(np.float32).max)
    assert ev.result.abs_bound == 1e300 and ev.result.status == "ok"  # checked against what was asked
