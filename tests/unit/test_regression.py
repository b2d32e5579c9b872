"""The regression statistics on synthetic timings with known effects.

Every sample set is drawn from a seeded generator, so each assertion is about a fixed,
reproducible input; the noise models are the ones seen on shared machines (log-normal
scatter, heavy tails, bursts of load on some repeats, drift between runs).
"""

from __future__ import annotations

import numpy as np
import pytest

from perfscout.analysis import regression as R
from perfscout.errors import InputError


def lognormal(rng: np.random.Generator, median: float, sigma: float, n: int) -> np.ndarray:
    return median * rng.lognormal(0.0, sigma, n)


# ---- known effects at low noise ------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_detects_a_5_percent_slowdown_at_low_noise(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base, cand = lognormal(rng, 1.0, 0.005, 10), lognormal(rng, 1.05, 0.005, 10)
    r = R.compare_measured("compress_s", base, cand, threshold=0.03)
    assert r.verdict == "regressed", r.reason
    assert r.ci_low is not None and r.ci_low > 0.03 and r.ci_high < 0.07
    assert r.change == pytest.approx(0.05, abs=0.01)
    assert r.p_value < R.ALPHA and r.effect_size == pytest.approx(1.0)
    assert r.gain == pytest.approx(-r.change)


@pytest.mark.parametrize("seed", range(10))
def test_detects_a_5_percent_speedup_at_low_noise(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    base, cand = lognormal(rng, 2.0, 0.005, 10), lognormal(rng, 1.9, 0.005, 10)
    r = R.compare_measured("t", base, cand, threshold=0.03)
    assert r.verdict == "improved", r.reason
    assert r.effect_size == pytest.approx(-1.0)


def test_higher_is_better_flips_the_direction() -> None:
    rng = np.random.default_rng(7)
    base, cand = lognormal(rng, 100.0, 0.005, 8), lognormal(rng, 110.0, 0.005, 8)  # throughput up 10 %
    assert R.compare_measured("MBps", base, cand, better="higher").verdict == "improved"
    assert R.compare_measured("MBps", base, cand, better="lower").verdict == "regressed"


@pytest.mark.parametrize("seed", range(10))
def test_a_change_below_the_threshold_is_unchanged(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    base, cand = lognormal(rng, 1.0, 0.005, 10), lognormal(rng, 1.01, 0.005, 10)
    r = R.compare_measured("t", base, cand, threshold=0.05)
    assert r.verdict == "unchanged", r.reason
    assert -0.05 < r.ci_low <= r.ci_high < 0.05


def test_a_change_at_the_threshold_is_not_decided() -> None:
    """A 5 % change judged at a 5 % threshold: the CI straddles it, so neither verdict."""
    rng = np.random.default_rng(3)
    base, cand = lognormal(rng, 1.0, 0.01, 10), lognormal(rng, 1.05, 0.01, 10)
    r = R.compare_measured("t", base, cand, threshold=0.05)
    assert r.verdict == "too_noisy"
    assert r.ci_low < 0.05 < r.ci_high or abs(r.change - 0.05) < 0.01


# ---- high noise: refuse to decide ----------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_refuses_to_decide_a_real_5_percent_change_at_high_noise(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    base, cand = lognormal(rng, 1.0, 0.25, 10), lognormal(rng, 1.05, 0.25, 10)
    r = R.compare_measured("t", base, cand)
    assert r.verdict == "too_noisy", r.reason
    assert r.reason


def _same_configuration_pairs(n: int, count: int, seed0: int):
    """Two runs of one configuration on a noisy shared machine: repeats scatter by 25-100 %
    (log-normal and heavy-tailed), and the run-to-run drift is as large as that scatter."""
    for s in range(count):
        rng = np.random.default_rng(seed0 + s)
        sigma = rng.uniform(0.08, 0.35)
        drift = rng.normal(0.0, sigma)
        if s % 2:
            yield np.exp(sigma * rng.standard_t(3, n)), np.exp(drift + sigma * rng.standard_t(3, n))
        else:
            yield rng.lognormal(0.0, sigma, n), rng.lognormal(drift, sigma, n)


@pytest.mark.parametrize("n", [10, 20])
def test_two_runs_of_one_configuration_never_regress(n: int) -> None:
    verdicts = [R.compare_measured("t", b, c).verdict for b, c in _same_configuration_pairs(n, 400, 10_000 * n)]
    assert "regressed" not in verdicts
    assert "improved" not in verdicts
    assert verdicts.count("too_noisy") > 0.9 * len(verdicts)


def test_bursts_of_load_on_some_repeats_are_noise() -> None:
    """A quiet baseline; a candidate of the same program where 1-3 of 7 repeats were hit by
    another job (25-100 % slower): too noisy, never a regression."""
    for s in range(200):
        rng = np.random.default_rng(50_000 + s)
        base = 1.0 + 0.01 * rng.standard_normal(7)
        cand = 1.0 + 0.01 * rng.standard_normal(7)
        k = int(rng.integers(1, 4))
        cand[:k] *= rng.uniform(1.25, 2.0, k)
        assert R.compare_measured("t", base, cand).verdict in ("too_noisy", "unchanged")


def test_a_large_change_is_still_found_on_a_noisy_machine() -> None:
    """Noise raises the bar, it does not blind the runner: 3x slower at 25-40 % scatter."""
    rng = np.random.default_rng(11)
    r = R.compare_measured("t", lognormal(rng, 1.0, 0.1, 10), lognormal(rng, 3.0, 0.1, 10))
    assert max(r.range_baseline, r.range_candidate) > 0.25
    assert r.verdict == "regressed", r.reason


def test_too_few_repeats_are_never_decided() -> None:
    r = R.compare_measured("t", [1.0, 1.0, 1.0], [2.0, 2.0, 2.0])
    assert r.verdict == "too_noisy" and "at least 5" in r.reason
    assert r.change == pytest.approx(1.0)
    one = R.compare_measured("t", [1.0], [5.0])
    assert one.verdict == "too_noisy" and one.n_baseline == 1


def test_missing_and_non_finite_samples() -> None:
    assert R.compare_measured("t", [], [1.0] * 5).reason.startswith("no measured value on the baseline")
    r = R.compare_measured("t", [1.0, float("nan"), None, 1.0, 1.0, 1.0, 1.0], [1.0] * 5)
    assert r.n_baseline == 5 and r.verdict == "unchanged"
    assert R.compare_measured("t", [0.0] * 5, [1.0] * 5).verdict == "too_noisy"


def test_same_samples_give_the_same_verdict_and_interval() -> None:
    rng = np.random.default_rng(5)
    base, cand = lognormal(rng, 1.0, 0.03, 8), lognormal(rng, 1.2, 0.03, 8)
    a, b = R.compare_measured("t", base, cand), R.compare_measured("t", base, cand)
    assert (a.ci_low, a.ci_high, a.verdict) == (b.ci_low, b.ci_high, b.verdict)


def test_constant_samples_compare_exactly() -> None:
    """A coarse figure (printed to 2 digits) repeats exactly: the interval has no width."""
    r = R.compare_measured("t", [1.2] * 6, [1.5] * 6)
    assert r.verdict == "regressed" and r.ci_low == r.ci_high == pytest.approx(0.25)
    assert R.compare_measured("t", [1.2] * 6, [1.2] * 6).verdict == "unchanged"


def test_threshold_is_checked() -> None:
    for bad in (-0.1, 1.0, float("nan"), "5%"):
        with pytest.raises(InputError, match="threshold"):
            R.compare_measured("t", [1.0] * 5, [1.0] * 5, threshold=bad)  # type: ignore[arg-type]


def test_noise_margin_is_continuous_and_grows() -> None:
    xs = np.linspace(0, 1.0, 101)
    ys = [R.noise_margin(x) for x in xs]
    assert all(b >= a for a, b in zip(ys, ys[1:]))
    assert R.noise_margin(0.04) == pytest.approx(0.04 * 1.04)
    assert R.noise_margin(0.25) == pytest.approx(0.25 * 1.25)
    assert R.noise_margin(0.5) == pytest.approx(0.625)


# ---- deterministic and categorical metrics -------------------------------------------


def test_compression_ratio_compared_exactly() -> None:
    assert R.compare_deterministic("ratio", [10.0], [9.0], better="higher").verdict == "regressed"
    assert R.compare_deterministic("ratio", [10.0], [10.05], better="higher").verdict == "unchanged"
    assert R.compare_deterministic("ratio", [10.0], [12.0], better="higher").verdict == "improved"
    r = R.compare_deterministic("max_abs_err", [0.0], [1e-6], better="lower")
    assert r.verdict == "regressed"  # a lossless result became lossy
    assert R.compare_deterministic("max_abs_err", [0.0], [0.0], better="lower").verdict == "unchanged"


def test_a_varying_quality_metric_is_treated_as_measured() -> None:
    r = R.compare_deterministic("ratio", [10.0, 10.1, 9.9], [9.0, 9.1, 8.9], better="higher")
    assert r.kind == "measured" and r.verdict == "too_noisy" and "varies" in r.reason


def test_categories() -> None:
    assert R.compare_category("bound_ok", True, False, good=[True], bad=[False]).verdict == "regressed"
    assert R.compare_category("bound_ok", False, True, good=[True], bad=[False]).verdict == "improved"
    assert R.compare_category("bound_ok", None, True, good=[True], bad=[False]).verdict == "unchanged"


def test_combining_verdicts() -> None:
    assert R.combine(["improved", "regressed"]) == "regressed"  # faster but bound broken
    assert R.combine(["improved", "too_noisy"]) == "too_noisy"
    assert R.combine(["unchanged", "improved"]) == "improved"
    assert R.combine([]) == "unchanged"
    s = R.summarize(["unchanged", "regressed", "unchanged"])
    assert s.verdict == "regressed" and s.counts["unchanged"] == 2
