"""Wall-clock timing of a Python callable: warm-up, repeats, robust summary, honesty flags.

Times come from :func:`time.perf_counter_ns` (monotonic, the best resolution the OS
offers). The summary is the median (robust to one slow repeat) with min/max and the
coefficient of variation, plus two flags the diagnosis turns into findings:
``timing_noisy`` (repeats disagree too much to compare) and ``too_small_to_time``
(the region is so short that the timer and the call itself dominate).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from perfscout.errors import InputError

#: Resolution the OS reports for perf_counter, in seconds (1e-9 on Linux).
TIMER_RESOLUTION_S: float = time.get_clock_info("perf_counter").resolution

#: Repeats whose standard deviation exceeds 10% of their mean are flagged noisy: on a
#: quiet machine a CPU codec repeats within 1-3%, while differences worth reporting
#: between codecs or settings are tens of percent; above 10% the machine (other jobs,
#: frequency scaling, page faults) is visibly part of the measurement.
NOISY_CV: float = 0.10

#: Below 100 us a measurement mostly measures its surroundings: a Python call plus
#: two perf_counter_ns calls cost ~0.1-1 us, and scheduler/interrupt jitter on a
#: shared machine reaches tens of us. The floor is also at least 1000 ticks of the
#: clock, so quantisation stays below 0.1% on coarse clocks.
MIN_TIMABLE_S: float = max(1e-4, 1000 * TIMER_RESOLUTION_S)

#: The most timed repeats one measurement may ask for (eval, sweeps, bench, tune): beyond
#: ~30 the median no longer moves, and a mistyped 10**9 would otherwise run until a
#: timeout kills it hours later instead of being refused at once.
MAX_REPEATS: int = 1000


def check_repeats(repeats: Any) -> int:
    """``repeats`` if it is an integer from 1 to :data:`MAX_REPEATS`, else InputError."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise InputError(f"repeats must be an integer from 1 to {MAX_REPEATS}, got {repeats!r}")
    return repeats


@dataclass
class TimingStats:
    """Summary of ``repeats`` timed calls, in seconds.

    ``cv`` is the sample standard deviation over the mean (0 with a single sample,
    where noise cannot be judged). ``noisy``: cv > the noise threshold.
    ``too_small``: the median is below the timing floor. ``cold``: no untimed warm-up
    ran first, so first-call costs (page faults on fresh buffers, cold caches) are part
    of the samples.
    """

    samples_s: list[float]
    median_s: float
    min_s: float
    max_s: float
    cv: float
    noisy: bool
    too_small: bool
    repeats: int
    cold: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def stats_from_samples(
    samples_s: list[float], *, noisy_cv: float = NOISY_CV, floor_s: float = MIN_TIMABLE_S,
    cold: bool = False,
) -> TimingStats:
    """Summarise measured durations (seconds); pure, so the flag logic is testable."""
    samples = [float(s) for s in samples_s]
    if not samples:
        raise InputError("no timing samples to summarise")
    if any(s < 0 or s != s for s in samples):
        raise InputError(f"timing samples must be non-negative numbers, got {samples}")
    mean = statistics.fmean(samples)
    cv = statistics.stdev(samples) / mean if len(samples) > 1 and mean > 0 else 0.0
    median = statistics.median(samples)
    return TimingStats(
        samples_s=samples,
        median_s=median,
        min_s=min(samples),
        max_s=max(samples),
        cv=cv,
        noisy=cv > noisy_cv,
        too_small=median < floor_s,
        repeats=len(samples),
        cold=bool(cold),
    )


def time_callable(
    fn: Callable[[], Any],
    *,
    repeats: int = 3,
    warmup: int | None = None,
    noisy_cv: float = NOISY_CV,
    floor_s: float = MIN_TIMABLE_S,
) -> tuple[TimingStats, Any]:
    """Call ``fn()`` ``warmup`` times untimed, then ``repeats`` times timed.

    The warm-up absorbs first-call costs (imports, allocations, page faults, JIT or
    kernel caches) that the steady state does not pay. ``warmup=None`` (the default)
    means one warm-up when ``repeats > 1`` and none for a single repeat: one timed call
    is a cold measurement either way (one sample cannot show noise), and a warm-up
    would double the cost of the call the user asked to run once (for a codec: the
    whole evaluation's largest cost). The summary says ``cold=True`` then. Returns the
    summary and the value the last timed call returned (e.g. the compressed buffer).
    """
    check_repeats(repeats)
    if warmup is None:
        warmup = 1 if repeats > 1 else 0
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise InputError(f"warmup must be an integer >= 0, got {warmup!r}")
    for _ in range(warmup):
        fn()
    samples: list[float] = []
    result: Any = None
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        result = fn()
        samples.append((time.perf_counter_ns() - t0) * 1e-9)
    return stats_from_samples(samples, noisy_cv=noisy_cv, floor_s=floor_s, cold=warmup == 0), result
