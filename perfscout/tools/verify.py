"""Closed loop: did the fix move what the finding predicted?

For a finding on a kernel ("before") and the profile of its fixed variant ("after"), the
predicted change (the finding's expected gain, and the metrics its verify step names)
is compared with the measured one. Time comes from ncu's gpu__time_duration of both
launches, or from host/CUDA-event timings when given (ncu flushes caches and serialises
launches, so events are closer to production). A prediction that misses, in either
direction, is reported as missed with the numbers, never rounded into a hit.

Profiles come from CSVs (``ncu --csv --page raw``: committed fixtures work without a
GPU) or are taken live by running ncu through the sandbox around two commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from perfscout.analysis.diagnosis.engine import diagnose_kernel
from perfscout.errors import InputError, ToolRefused
from perfscout.state.profiles import KernelProfile
from perfscout.tools.ncu import NcuOptions, run_ncu
from perfscout.tools.ncu_parse import kernel_duration_s, load_raw_csv
from perfscout.tools.sandbox import Sandbox

#: A prediction holds when the measured gain is within this much of the predicted gain
#: (absolute), or within half of the prediction, whichever is larger: timing noise on a
#: GPU is a few percent, and a model of "time saved" is a rough estimate by nature.
ABS_TOLERANCE = 0.10
REL_TOLERANCE = 0.5

Verdict = Literal["hit", "missed_low", "missed_high", "unsized"]


class MetricCheck(BaseModel):
    metric: str
    expected: str  # "decrease" | "increase"
    before: float | None = None
    after: float | None = None
    ok: bool | None = None  # None: the metric is absent from one of the profiles


class VerifyResult(BaseModel):
    kernel: str
    after_kernel: str
    finding: str
    predicted_gain: float | None = None  # fraction of time saved, from the finding
    measured_gain: float | None = None
    time_before_s: float | None = None
    time_after_s: float | None = None
    time_source: str = ""
    ncu_gain: float | None = None  # from gpu__time_duration, reported beside events
    metrics: list[MetricCheck] = Field(default_factory=list)
    verdict: Verdict = "unsized"
    note: str = ""


def find_kernel(kernels: list[KernelProfile], name: str) -> KernelProfile:
    """The first launch whose name is ``name`` (or starts with it: demangled signatures)."""
    for k in kernels:
        if k.name == name:
            return k
    for k in kernels:
        if k.name.startswith(name + "(") or k.name.startswith(name + "<"):
            return k
    known = sorted({k.name for k in kernels})
    raise InputError(f"kernel {name!r} not in the profile; it has: {', '.join(known[:20])}")


def judge(predicted: float | None, measured: float | None) -> Verdict:
    if predicted is None or measured is None:
        return "unsized"
    tol = max(ABS_TOLERANCE, REL_TOLERANCE * predicted)
    if measured < predicted - tol:
        return "missed_low"
    if measured > predicted + tol:
        return "missed_high"
    return "hit"


def _roof_prediction(finding: dict, before: KernelProfile, after: KernelProfile) -> float | None:
    """For a roof finding (fewer bytes/instructions at a roof), time scales with the named
    metric, until the next-busiest unit reaches its roof (``next_roof_gain``)."""
    plan = finding.get("extra", {}).get("verify_plan", {})
    metric = plan.get("time_scales_with")
    if not metric:
        return None
    b, a = before.value(metric), after.value(metric)
    if not b or a is None or b <= 0:
        return None
    gain = 1.0 - a / b
    cap = plan.get("next_roof_gain")
    return min(gain, cap) if isinstance(cap, (int, float)) else gain


def verify_pair(before: KernelProfile, after: KernelProfile, finding_id: str | None = None, *,
                times_s: tuple[float, float] | None = None, time_source: str = "",
                host_timing: dict[str, Any] | None = None) -> VerifyResult:
    """Compare the predicted and measured change for one finding (default: the primary)."""
    diag = diagnose_kernel(before, host_timing=host_timing)
    findings = {f["id"]: f for f in diag["findings"]}
    if not findings:
        raise InputError(f"no finding on {before.name}: nothing to verify")
    fid = finding_id or diag["primary"]["id"]
    if fid not in findings:
        raise InputError(f"finding {fid!r} not raised on {before.name}; raised: {', '.join(findings)}")
    f = findings[fid]
    predicted = f.get("expected_gain")
    note = ""
    roof_pred = _roof_prediction(f, before, after)
    if roof_pred is not None:
        predicted = roof_pred
        plan = f["extra"]["verify_plan"]
        note = (f"roof finding: time scales with {plan['time_scales_with']} until the next unit's "
                f"roof (at most {plan['next_roof_gain']:.0%} saved)" if plan.get("next_roof_gain") is not None
                else f"roof finding: time scales with {plan['time_scales_with']}")
    tb, ta = kernel_duration_s(before), kernel_duration_s(after)
    ncu_gain = (1.0 - ta / tb) if tb and ta is not None else None
    if times_s is not None:
        t0, t1 = times_s
        source = time_source or "host"
    else:
        t0, t1, source = tb, ta, "ncu gpu__time_duration"
    measured = (1.0 - t1 / t0) if t0 and t1 is not None else None
    checks = []
    for metric, direction in f.get("extra", {}).get("verify_plan", {}).get("metrics", {}).items():
        if not metric:
            continue
        b, a = before.value(metric), after.value(metric)
        ok = None
        if b is not None and a is not None:
            ok = a < b if direction == "decrease" else a > b
        checks.append(MetricCheck(metric=metric, expected=direction, before=b, after=a, ok=ok))
    return VerifyResult(
        kernel=before.name, after_kernel=after.name, finding=fid,
        predicted_gain=None if predicted is None else round(predicted, 3),
        measured_gain=None if measured is None else round(measured, 3),
        time_before_s=t0, time_after_s=t1, time_source=source,
        ncu_gain=None if ncu_gain is None else round(ncu_gain, 3),
        metrics=checks, verdict=judge(predicted, measured), note=note,
    )


def verify_csv(before_csv: str | Path, after_csv: str | Path, kernel: str,
               after_kernel: str | None = None, finding_id: str | None = None,
               timings: dict[str, Any] | None = None) -> VerifyResult:
    """Verify from committed CSVs. ``timings``: ``{"kernels_ms": {name: ms}}`` (run_suite.py)."""
    before = find_kernel(load_raw_csv(before_csv).kernels, kernel)
    after = find_kernel(load_raw_csv(after_csv).kernels, after_kernel or kernel)
    return verify_with_timings(before, after, finding_id, timings)


def verify_with_timings(before: KernelProfile, after: KernelProfile, finding_id: str | None,
                        timings: dict[str, Any] | None) -> VerifyResult:
    times, source, host = None, "", None
    if timings:
        host = timings.get("launch_overhead", {}).get(before.name)
        ms = timings.get("kernels_ms", {})
        if host and host.get("launches"):
            # Launch overhead: the unit of work is all the launches, on the host clock.
            times = (host["host_wall_s"], host["batched_wall_s"])
            source = f"host wall time of {host['launches']} launches vs one batched launch"
        elif before.name in ms and after.name in ms:
            times = (ms[before.name] / 1e3, ms[after.name] / 1e3)
            source = "CUDA events (median)"
    return verify_pair(before, after, finding_id, times_s=times, time_source=source, host_timing=host)


def profile_live(command: list[str], kernel: str, run_dir: str | Path, timeout_s: float = 600.0,
                 inputs: list[str | Path] = (), cwd: str | Path | None = None) -> list[KernelProfile]:
    """Run ``command`` under ncu (full set, clocks untouched) through the sandbox; parse it.

    ``cwd`` (default: the run directory) is where the command runs and relative paths in
    it resolve; it must be the run directory or one of ``inputs``.
    """
    if not command:
        raise InputError("empty command to profile")
    sb = Sandbox(run_dir, inputs=list(inputs), cwd=cwd)
    exe = command[0]
    if "/" in exe or (sb.cwd / exe).exists():
        try:
            sb.register(exe)
        except ToolRefused as exc:
            raise InputError(str(exc)) from exc
    opts = NcuOptions(kernel_regex=f"^{kernel}", launch_count=1, details=False, timeout_s=timeout_s)
    run = run_ncu(sb, command, opts)
    res = run.results[0]
    if res.status == "refused":
        raise ToolRefused(f"refused to profile {command[0]}: {res.reason}")
    if not res.ok or run.report is None:
        raise InputError(f"ncu run failed ({res.status}, rc={res.returncode}): "
                         f"{run.error or res.stderr[-800:] or res.stdout[-800:]}")
    return run.report.kernels


def verify_live(before_cmd: list[str], after_cmd: list[str], kernel: str, run_dir: str | Path,
                after_kernel: str | None = None, finding_id: str | None = None,
                inputs: list[str | Path] = (), cwd: str | Path | None = None) -> VerifyResult:
    """Profile before and after now (needs ncu and a GPU), then compare."""
    b = find_kernel(profile_live(before_cmd, kernel, Path(run_dir) / "before", inputs=inputs, cwd=cwd),
                    kernel)
    a_name = after_kernel or kernel
    a = find_kernel(profile_live(after_cmd, a_name, Path(run_dir) / "after", inputs=inputs, cwd=cwd),
                    a_name)
    return verify_pair(b, a, finding_id)
