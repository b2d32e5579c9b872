"""Diagnosis engine: from ncu / perf stat counters to a primary bottleneck and
evidence-backed, verifiable advice (see engine.py for how the primary is chosen)."""

from perfscout.analysis.diagnosis.engine import diagnose, diagnose_kernel

__all__ = ["diagnose", "diagnose_kernel", "diagnose_perf"]


def diagnose_perf(profile, platform=None):  # noqa: ANN001, ANN201 - lazy re-export keeps imports light
    from perfscout.analysis.diagnosis.cpu import diagnose_perf as _impl

    return _impl(profile, platform=platform)
