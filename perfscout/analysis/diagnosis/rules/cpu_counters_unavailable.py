"""cpu_counters_unavailable: no hardware counter counted; say what software events still tell.

The one source of this finding: ``perfscout diagnose --perf-csv`` reaches it through the
CPU rules, ``perfscout profile`` and the agent's tools through
:func:`perfscout.tools.perf_stat.counters_unavailable_finding`, so a saved profile and
its re-diagnosis say the same thing.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext, base
from perfscout.analysis.diagnosis.rules._cpu import make
from perfscout.state.perf_events import HARDWARE_EVENTS
from perfscout.state.profiles import PerfProfile
from perfscout.state.records import Evidence, Finding

ID = "cpu_counters_unavailable"
#: advice: it says what could not be measured, never what limits the program (cpu_busy_cores,
#: cpu_waiting and the other software readings do that)
ROLE = "advice"
READS = {"software": ("task-clock", "context-switches", "cpu-migrations", "page-faults")}
#: The hardware events perf stat counts by default.
HARDWARE = HARDWARE_EVENTS


def check(ctx: CpuContext) -> Finding | None:
    prof = ctx.profile
    if prof.hardware_counters:
        return None
    # Evidence names events exactly as the profile holds them (counted or marked unavailable).
    ev = [Evidence(metric=e, value=why, threshold="a count") for e, why in prof.unavailable.items()
          if base(e) in HARDWARE]
    said = []
    cpu_s = ctx.seconds()
    if cpu_s is not None:
        ev.append(ctx.ev("task-clock", "cpu-clock"))
        if prof.elapsed_s:
            said.append(f"{cpu_s / prof.elapsed_s:.2f} CPUs busy on average over {prof.elapsed_s:.3g} s")
        else:
            said.append(f"{cpu_s:.3g} s of CPU time")
    for event, label in (("context-switches", "context switches"), ("cpu-migrations", "migrations"),
                         ("page-faults", "page faults")):
        v = ctx.val(event)
        if v is not None:
            ev.append(ctx.ev(event))
            rate = f" ({v / cpu_s:,.0f}/CPU-s)" if cpu_s else ""
            said.append(f"{v:,.0f} {label}{rate}")
    if said:
        what = "Software events still say: " + "; ".join(said) + "."
    elif prof.events or prof.unavailable:
        what = "Software events still say: nothing beyond wall time."
    else:
        # perf missing, refused or killed before writing counts: only getrusage remains.
        what = f"perf counted nothing ({prof.fallback or 'perf stat unavailable'})" + _rusage(prof) + "."
    f = make(
        ctx, ID, "advice", "CPU hardware counters unavailable: IPC, cache and branch behaviour cannot be measured here",
        confidence=1.0, evidence=ev,
        recommendation=(what + " For IPC, cache and branch figures "
                        "profile on bare metal or a VM with a virtual PMU (e.g. KVM with "
                        "'-cpu host,pmu=on'), with "
                        "/proc/sys/kernel/perf_event_paranoid <= 2 (or CAP_PERFMON); meanwhile time "
                        "variants of the code (wall clock) to locate hot spots."),
        verify="perf stat -e instructions,cycles -- true prints counts instead of <not supported>",
        not_when="the program is GPU-bound: profile its kernels with ncu instead",
        expected_gain=None,
    )
    f.extra["fallback"] = prof.fallback  # what was measured instead of the counters
    return f


def _rusage(prof: PerfProfile) -> str:
    user, sys_ = prof.rusage.get("user_s"), prof.rusage.get("system_s")
    if user is None and sys_ is None:
        return ""
    parts = [f"{v:.3g} s {k}" for k, v in (("user", user), ("system", sys_)) if v is not None]
    return "; the child's getrusage: " + ", ".join(parts)
