"""Timing: warm-up and repeat counts, returned value, flag logic on injected samples."""

from __future__ import annotations

import statistics

import pytest

from perfscout.analysis.timing import (
    MIN_TIMABLE_S,
    NOISY_CV,
    TIMER_RESOLUTION_S,
    TimingStats,
    stats_from_samples,
    time_callable,
)
from perfscout.errors import InputError


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


@pytest.mark.parametrize(("warmup", "repeats"), [(0, 1), (1, 3), (2, 5)])
def test_warmup_and_repeats_are_honoured(warmup: int, repeats: int) -> None:
    fn = Counter()
    stats, result = time_callable(fn, repeats=repeats, warmup=warmup)
    assert fn.calls == warmup + repeats
    assert result == warmup + repeats  # the last timed call's return value
    assert stats.repeats == repeats == len(stats.samples_s)
    assert all(s >= 0 for s in stats.samples_s)
    assert stats.min_s == min(stats.samples_s) and stats.max_s == max(stats.samples_s)
    assert stats.median_s == statistics.median(stats.samples_s)
    assert stats.cold == (warmup == 0)


@pytest.mark.parametrize(("repeats", "calls", "cold"), [(1, 1, True), (2, 3, False), (5, 6, False)])
def test_default_warmup_only_when_repeating(repeats: int, calls: int, cold: bool) -> None:
    """One timed call is cold either way: no warm-up doubling its cost, and it says so."""
    fn = Counter()
    stats, result = time_callable(fn, repeats=repeats)
    assert fn.calls == calls and result == calls
    assert stats.cold is cold and stats.as_dict()["cold"] is cold


def test_floor_reaches_the_flag_of_a_measured_call() -> None:
    # Floors far on either side of any real duration: no assertion on how fast the
    # machine is, only that time_callable hands its floor to the summary.
    stats, result = time_callable(lambda: None, repeats=5, floor_s=3600.0)
    assert result is None
    assert stats.too_small
    stats, _ = time_callable(lambda: None, repeats=5, floor_s=0.0)
    assert not stats.too_small


def test_floor_is_sane_for_this_clock() -> None:
    assert 0 < TIMER_RESOLUTION_S <= 1e-3
    assert MIN_TIMABLE_S >= 1000 * TIMER_RESOLUTION_S
    assert MIN_TIMABLE_S >= 1e-4


def test_stats_from_samples_values() -> None:
    samples = [0.010, 0.012, 0.011]
    s = stats_from_samples(samples)
    assert isinstance(s, TimingStats)
    assert s.median_s == 0.011 and s.min_s == 0.010 and s.max_s == 0.012
    assert s.cv == pytest.approx(statistics.stdev(samples) / statistics.fmean(samples))
    assert s.cv == pytest.approx(0.001 / 0.011)  # sample stdev of 10/11/12 ms is 1 ms
    assert not s.noisy and not s.too_small
    assert s.repeats == 3
    assert s.as_dict()["samples_s"] == samples


def test_noisy_flag_threshold() -> None:
    calm = stats_from_samples([1.0, 1.05, 0.95])  # cv = 0.05
    assert calm.cv == pytest.approx(0.05) and not calm.noisy
    spread = stats_from_samples([1.0, 1.3, 0.7])  # cv = 0.3
    assert spread.cv == pytest.approx(0.3) and spread.noisy
    assert NOISY_CV == 0.10
    # the threshold is a parameter: the same samples judged against a stricter limit
    assert stats_from_samples([1.0, 1.05, 0.95], noisy_cv=0.04).noisy


def test_single_sample_cannot_be_noisy() -> None:
    s = stats_from_samples([0.5])
    assert s.cv == 0.0 and not s.noisy and s.median_s == 0.5


def test_too_small_flag_from_samples() -> None:
    assert stats_from_samples([1e-6, 2e-6, 1.5e-6]).too_small
    assert not stats_from_samples([1e-3, 1e-3]).too_small
    assert stats_from_samples([1e-3, 1e-3], floor_s=1e-2).too_small


def test_median_is_robust_to_one_outlier() -> None:
    s = stats_from_samples([0.10, 0.11, 5.0])
    assert s.median_s == 0.11 and s.max_s == 5.0 and s.noisy


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"repeats": 0}, "repeats"),
        ({"repeats": 2.5}, "repeats"),
        ({"repeats": True}, "repeats"),
        ({"warmup": -1}, "warmup"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    fn = Counter()
    with pytest.raises(InputError, match=message):
        time_callable(fn, **kwargs)
    assert fn.calls == 0


@pytest.mark.parametrize("samples", [[], [-1.0], [float("nan")]])
def test_bad_samples(samples: list[float]) -> None:
    with pytest.raises(InputError):
        stats_from_samples(samples)


def test_exceptions_from_the_callable_propagate() -> None:
    def boom() -> None:
        raise RuntimeError("codec crashed")

    with pytest.raises(RuntimeError, match="codec crashed"):
        time_callable(boom)
