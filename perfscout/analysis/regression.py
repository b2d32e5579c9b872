"""Is B faster, slower or unchanged against A? Statistics for two sets of repeats.

Pure functions over measured samples (no files, no processes): the regression runner
(:mod:`perfscout.tools.regress`), the bench command and the tuner all decide here.

A **measured** metric (a time, a benchmark figure) is compared with every repeat of both
sides: the relative change of the medians, a bootstrap confidence interval of that change
(:func:`scipy.stats.bootstrap`), a two-sided Mann–Whitney U test
(:func:`scipy.stats.mannwhitneyu`) and Cliff's delta as the effect size (the rank-biserial
correlation of the same U). A **deterministic** metric (compression ratio, max error: the
same input gives the same value) is compared value against value. A **categorical** one
(the bound held, the run succeeded) flips or it does not.

Verdicts: ``improved``, ``regressed``, ``unchanged``, ``too_noisy`` ("too noisy to tell").
The rules are deliberately conservative because the machines this runs on are shared:
spreads of 25-100 % between repeats of one configuration were measured here, and two runs
of the same configuration must never be called a regression. A change is *decided* only
when all of these hold:

- each side has at least :data:`MIN_REPEATS` repeats (with fewer, a rank test cannot reach
  the significance level and a bootstrap of a median has too few distinct values);
- the point change is beyond the threshold **and** beyond :data:`NOISE_FACTOR` times the
  repeats' own robust spread (a change smaller than the noise is not evidence);
- the whole confidence interval lies on that side of zero;
- the Mann–Whitney p-value is below ``alpha`` (default 0.01, not 0.05: a report compares
  many tasks at once, and a false "regressed" fails someone's CI pipeline).

``unchanged`` needs the whole interval inside ±threshold. Everything else is ``too_noisy``,
with the reason. Bootstraps use a fixed seed, so the same samples give the same verdict.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from perfscout.errors import InputError

Verdict = Literal["improved", "regressed", "unchanged", "too_noisy"]
Kind = Literal["measured", "deterministic", "categorical"]

#: What a verdict reads as in a sentence or a table.
VERDICT_TEXT: dict[str, str] = {
    "improved": "improved", "regressed": "regressed", "unchanged": "unchanged",
    "too_noisy": "too noisy to tell",
}

#: Fewest repeats per side before a measured metric is decided. Mann–Whitney with 5 vs 5
#: can reach p = 0.008 (complete separation); with 4 vs 4 at best 0.029, above ALPHA.
MIN_REPEATS = 5
#: Significance level of the rank test (see the module docstring for why 0.01).
ALPHA = 0.01
#: A decided change must exceed this many times the larger robust spread of the two sides.
NOISE_FACTOR = 3.0
#: Spread between repeats ((max - min) / median) from which a machine counts as noisy:
#: spreads of 25-100 % were measured between repeats of one configuration here.
NOISY_SPREAD = 0.25
CONFIDENCE = 0.95
N_RESAMPLES = 2000
SEED = 20261201
#: 1.4826 * MAD estimates the standard deviation of normal data; divided by the median it
#: is a coefficient of variation that one wild repeat cannot inflate.
_MAD_TO_SIGMA = 1.4826


class MetricComparison(BaseModel):
    """One metric of one task, baseline against candidate."""

    metric: str
    kind: Kind
    better: Literal["lower", "higher"] = "lower"
    n_baseline: int = 0
    n_candidate: int = 0
    baseline: float | str | None = None  # median (measured), value, or category
    candidate: float | str | None = None
    change: float | None = None  # relative change of the median: candidate / baseline - 1
    ci_low: float | None = None  # bootstrap CI of `change`
    ci_high: float | None = None
    p_value: float | None = None  # Mann–Whitney U, two-sided
    effect_size: float | None = None  # Cliff's delta, > 0: the candidate tends to be larger
    spread_baseline: float | None = None  # robust CV (1.4826 MAD / median)
    spread_candidate: float | None = None
    range_baseline: float | None = None  # (max - min) / median, what a human calls the spread
    range_candidate: float | None = None
    threshold: float = 0.05
    verdict: Verdict = "too_noisy"
    reason: str = ""

    @property
    def gain(self) -> float | None:
        """Fraction better (> 0) or worse (< 0): time saved for a lower-is-better metric."""
        if self.change is None:
            return None
        return -self.change if self.better == "lower" else self.change


def _clean(samples: Iterable[float | None]) -> np.ndarray:
    vals = [float(s) for s in samples if s is not None]
    return np.asarray([v for v in vals if math.isfinite(v)], dtype=float)


def robust_spread(x: np.ndarray) -> float:
    """1.4826 · MAD / |median| (0 for one sample, inf when the median is 0)."""
    if x.size < 2:
        return 0.0
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    if med == 0:
        return 0.0 if mad == 0 else math.inf
    return _MAD_TO_SIGMA * mad / abs(med)


def range_spread(x: np.ndarray) -> float:
    if x.size < 2:
        return 0.0
    med = float(np.median(x))
    return float((x.max() - x.min()) / abs(med)) if med else (0.0 if x.max() == x.min() else math.inf)


def noise_margin(spread: float) -> float:
    """The smallest change the repeats' full spread lets us call real.

    A decided change must exceed the spread of the noisier side (in log units: ln(max/min),
    scaled to what 10 repeats would show), and on a machine as noisy as :data:`NOISY_SPREAD`
    or worse, 1.25 times that spread: two runs of one configuration there drift apart by
    about as much as their repeats scatter (seen on these shared machines), so one spread
    of separation is not evidence. The factor grows linearly from 1 to 1.25 up to that
    point, so the rule has no jump. (Calibrated by simulation: with drift between runs as
    large as the scatter within them, 0 of 4000 same-configuration pairs of 10 or 20
    repeats were decided, while a 3.3x change under one-sided load noise was found in
    about 80 % of 6-repeat comparisons.)
    """
    return spread * (1.0 + min(0.25, 0.25 * spread / NOISY_SPREAD))


def _noise_bar(base: np.ndarray, cand: np.ndarray, noise_factor: float):
    """(robust CV, spread, bar, size-of-a-ratio function) for the noise rule.

    For positive samples everything is measured in log units: the spread of a side is
    ln(max / min), its robust CV 1.4826 MAD(ln x), and a median ratio r counts as beyond
    the noise when |ln r| exceeds ``max(noise_factor * CV, noise_margin(spread))``. Other
    samples (a figure that can be zero or negative) use the same rule on relative units.
    """
    if base.min() > 0 and cand.min() > 0:
        lb, lc = np.log(base), np.log(cand)
        cv = max(_MAD_TO_SIGMA * float(np.median(np.abs(x - np.median(x)))) for x in (lb, lc))
        spread = max(_range_10(x) for x in (lb, lc))
        return (cv, math.expm1(spread), max(noise_factor * cv, noise_margin(spread)),
                lambda r: abs(math.log(r)) if r > 0 else math.inf)
    cv = max(robust_spread(base), robust_spread(cand))
    spread = max(range_spread(base) * _small_sample(base.size), range_spread(cand) * _small_sample(cand.size))
    return cv, spread, max(noise_factor * cv, noise_margin(spread)), lambda r: abs(r - 1.0)


#: Expected range of n normal samples in standard deviations (d2 of control charts): the
#: range of 5 repeats understates the scatter that 10 would show by a factor 3.078 / 2.326.
_D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078}


def _small_sample(n: int) -> float:
    """Scale a range of n < 10 samples up to what 10 samples would show (never down)."""
    return _D2[10] / _D2[n] if n in _D2 else 1.0


def _range_10(x: np.ndarray) -> float:
    return float(x.max() - x.min()) * _small_sample(x.size)


def _median_change(base: np.ndarray, cand: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(cand, axis=axis) / np.median(base, axis=axis) - 1.0


def bootstrap_change_ci(base: np.ndarray, cand: np.ndarray, *, confidence: float = CONFIDENCE,
                        n_resamples: int = N_RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap CI of ``median(cand) / median(base) - 1`` (independent samples).

    Percentile rather than BCa: BCa's jackknife degenerates on the tied, tiny samples that
    timings often are (5 repeats, a coarse clock), and then returns NaN.
    """
    if np.all(base == base[0]) and np.all(cand == cand[0]):
        c = float(cand[0] / base[0] - 1.0)
        return c, c  # nothing varies: every resample gives the same change
    from scipy import stats  # here, not at import: scipy.stats takes ~1.3 s, and `bench` only measures

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((base, cand), _median_change, vectorized=True, paired=False,
                              confidence_level=confidence, n_resamples=n_resamples,
                              method="percentile", rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def mann_whitney(base: np.ndarray, cand: np.ndarray) -> tuple[float, float]:
    """(two-sided p, Cliff's delta of candidate over baseline) from one U statistic."""
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.mannwhitneyu(cand, base, alternative="two-sided")
    p = float(res.pvalue)
    delta = 2.0 * float(res.statistic) / (cand.size * base.size) - 1.0
    return (1.0 if not math.isfinite(p) else p), delta


def compare_measured(
    metric: str,
    baseline: Sequence[float | None],
    candidate: Sequence[float | None],
    *,
    better: Literal["lower", "higher"] = "lower",
    threshold: float = 0.05,
    alpha: float = ALPHA,
    min_repeats: int = MIN_REPEATS,
    noise_factor: float = NOISE_FACTOR,
    confidence: float = CONFIDENCE,
    floor: float = 0.0,
) -> MetricComparison:
    """Compare every repeat of a noisy measurement (see the module docstring for the rules).

    ``floor``: medians below it (e.g. a time under the timing floor of
    :mod:`perfscout.analysis.timing`) measure their surroundings and are not decided.
    """
    check_threshold(threshold)
    base, cand = _clean(baseline), _clean(candidate)
    out = MetricComparison(metric=metric, kind="measured", better=better, n_baseline=int(base.size),
                           n_candidate=int(cand.size), threshold=threshold)
    if base.size == 0 or cand.size == 0:
        out.reason = "no measured value on " + ("either side" if base.size == cand.size else
                                                "the baseline side" if base.size == 0 else "the candidate side")
        return out
    out.baseline, out.candidate = float(np.median(base)), float(np.median(cand))
    out.spread_baseline, out.spread_candidate = robust_spread(base), robust_spread(cand)
    out.range_baseline, out.range_candidate = range_spread(base), range_spread(cand)
    if out.baseline <= 0 or out.candidate < 0:
        out.reason = f"median baseline {out.baseline:g}: a relative change needs a positive baseline"
        return out
    out.change = out.candidate / out.baseline - 1.0
    if min(out.baseline, out.candidate) < floor:
        out.reason = (f"median {min(out.baseline, out.candidate):.3g} is below the timing floor {floor:.3g}: "
                      "such a measurement mostly measures its surroundings (time a larger input)")
        return out
    if base.size < min_repeats or cand.size < min_repeats:
        out.reason = (f"{base.size} baseline and {cand.size} candidate repeat(s): at least {min_repeats} "
                      "per side are needed to decide (run with more repeats)")
        return out
    out.ci_low, out.ci_high = bootstrap_change_ci(base, cand, confidence=confidence)
    out.p_value, out.effect_size = mann_whitney(base, cand)
    # The noise bar is set on the log scale: a speedup cannot exceed -100 % while a slowdown
    # has no limit, so "10x faster" and "10x slower" must clear the same bar.
    noise, scatter, bar, size = _noise_bar(base, cand, noise_factor)
    # "worse" is a positive number for either direction of "better"
    sign = 1.0 if better == "lower" else -1.0
    worse = sign * out.change
    w_lo, w_hi = sorted((sign * out.ci_low, sign * out.ci_high))
    ci = f"{out.ci_low:+.1%} .. {out.ci_high:+.1%}"
    beyond_noise = size(out.candidate / out.baseline) > bar
    if abs(worse) > threshold and beyond_noise and (w_lo > 0 or w_hi < 0) and out.p_value < alpha:
        out.verdict = "regressed" if worse > 0 else "improved"
        out.reason = (f"median {out.change:+.1%} (CI {ci}, p = {out.p_value:.2g}), beyond the "
                      f"{threshold:.0%} threshold and the repeats' scatter ({scatter:.0%})")
    elif -threshold < w_lo and w_hi < threshold:
        out.verdict = "unchanged"
        out.reason = f"median {out.change:+.1%}, CI {ci} inside ±{threshold:.0%}"
    elif abs(worse) > threshold and not beyond_noise:
        out.reason = (f"median {out.change:+.1%} is within the repeats' own scatter (spread {scatter:.0%}, "
                      f"robust CV {noise:.1%}): the machine's noise could explain it")
    elif w_lo <= 0 <= w_hi:
        out.reason = f"median {out.change:+.1%}, but the CI {ci} includes no change"
    elif out.p_value >= alpha:
        out.reason = f"median {out.change:+.1%} (CI {ci}) but p = {out.p_value:.2g} >= {alpha:g}"
    else:
        out.reason = f"median {out.change:+.1%}: the CI {ci} straddles the ±{threshold:.0%} threshold"
    return out


def compare_deterministic(
    metric: str,
    baseline: Sequence[float | None],
    candidate: Sequence[float | None],
    *,
    better: Literal["lower", "higher"] = "higher",
    threshold: float = 0.01,
    **measured_options: float,
) -> MetricComparison:
    """A metric that does not vary between repeats (CR, max error): value against value.

    If it does vary on either side (a non-deterministic codec), it is treated as measured.
    """
    check_threshold(threshold)
    base, cand = _clean(baseline), _clean(candidate)
    if (base.size > 1 and np.ptp(base) > 0) or (cand.size > 1 and np.ptp(cand) > 0):
        out = compare_measured(metric, baseline, candidate, better=better, threshold=threshold,
                               **measured_options)  # type: ignore[arg-type]
        out.reason = "varies between repeats, compared as a measurement: " + out.reason
        return out
    out = MetricComparison(metric=metric, kind="deterministic", better=better, n_baseline=int(base.size),
                           n_candidate=int(cand.size), threshold=threshold)
    if base.size == 0 or cand.size == 0:
        out.reason = "no value on " + ("either side" if base.size == cand.size else
                                       "the baseline side" if base.size == 0 else "the candidate side")
        return out
    b, c = float(base[0]), float(cand[0])
    out.baseline, out.candidate = b, c
    if b == c:
        out.change, out.verdict, out.reason = 0.0, "unchanged", "identical"
        return out
    if b == 0:
        worse = (c > 0) if better == "lower" else (c < 0)
        out.verdict = "regressed" if worse else "improved"
        out.reason = f"{b:g} -> {c:g}"
        return out
    out.change = c / b - 1.0
    worse = out.change if better == "lower" else -out.change
    if abs(worse) <= threshold:
        out.verdict, out.reason = "unchanged", f"{out.change:+.2%}, within ±{threshold:.0%}"
    else:
        out.verdict = "regressed" if worse > 0 else "improved"
        out.reason = f"{b:.6g} -> {c:.6g} ({out.change:+.2%}), beyond ±{threshold:.0%}"
    return out


def compare_category(metric: str, baseline: object, candidate: object, *, good: Sequence[object],
                     bad: Sequence[object] = ()) -> MetricComparison:
    """good -> not good is a regression, not good -> good an improvement.

    Values in neither ``good`` nor ``bad`` (e.g. None: not applicable) decide nothing.
    """
    out = MetricComparison(metric=metric, kind="categorical", n_baseline=1, n_candidate=1,
                           baseline=_label(baseline), candidate=_label(candidate), threshold=0.0)
    b_good, c_good = baseline in good, candidate in good
    b_known, c_known = b_good or baseline in bad, c_good or candidate in bad
    if not (b_known and c_known):
        out.verdict, out.reason = "unchanged", f"{_label(baseline)} -> {_label(candidate)}: not applicable"
    elif b_good == c_good:
        out.verdict, out.reason = "unchanged", f"{_label(candidate)} on both sides"
    else:
        out.verdict = "improved" if c_good else "regressed"
        out.reason = f"{_label(baseline)} -> {_label(candidate)}"
    return out


def _label(v: object) -> str | None:
    return None if v is None else str(v)


def check_threshold(threshold: float) -> None:
    if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and 0 <= threshold < 1):
        raise InputError(f"threshold must be a fraction in [0, 1), e.g. 0.05 for 5 %, got {threshold!r}")


#: Order in which verdicts win when several metrics of one task disagree: a faster codec
#: that breaks its bound is a regression; a task with any undecided metric is undecided
#: unless something regressed outright.
_PRECEDENCE: tuple[Verdict, ...] = ("regressed", "too_noisy", "improved", "unchanged")


def combine(verdicts: Iterable[str]) -> Verdict:
    """The verdict of several metrics (or tasks): the first of regressed, too_noisy, improved."""
    seen = set(verdicts)
    for v in _PRECEDENCE:
        if v in seen:
            return v
    return "unchanged"


class Summary(BaseModel):
    verdict: Verdict
    counts: dict[str, int] = Field(default_factory=dict)


def summarize(verdicts: Sequence[str]) -> Summary:
    counts = {v: sum(1 for x in verdicts if x == v) for v in _PRECEDENCE}
    return Summary(verdict=combine(verdicts) if verdicts else "too_noisy", counts=counts)
