"""perfscout.analysis: quality metrics, timing, diagnosis rules, statistics, reports.

Only the light, dependency-free pieces are re-exported here; heavier modules are
imported by path.
"""

from perfscout.analysis.metrics import max_abs_error, quality_metrics, ssim, value_range
from perfscout.analysis.timing import TimingStats, stats_from_samples, time_callable

__all__ = [
    "TimingStats",
    "max_abs_error",
    "quality_metrics",
    "ssim",
    "stats_from_samples",
    "time_callable",
    "value_range",
]
