"""cpu_counters_unavailable: no hardware counter counted; say what software events still tell."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext, base
from perfscout.analysis.diagnosis.rules._cpu import make
from perfscout.state.records import Evidence, Finding
from perfscout.tools.perf_stat import HARDWARE_EVENTS

ID = "cpu_counters_unavailable"
ROLE = "roof"
READS = {"software": ("task-clock", "context-switches", "cpu-migrations", "page-faults")}
#: The hardware events perf stat counts by default.
HARDWARE = HARDWARE_EVENTS


def check(ctx: CpuContext) -> Finding | None:
    prof = ctx.profile
    if prof.hardware_counters:
        return None
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
    what = "; ".join(said) if said else "nothing beyond wall time"
    return make(
        ctx, ID, "roof", "CPU hardware counters unavailable: IPC, cache and branch behaviour cannot be measured here",
        confidence=1.0, evidence=ev,
        recommendation=("Software events still say: " + what + ". For IPC, cache and branch figures "
                        "profile on bare metal or a VM with a virtual PMU, with "
                        "/proc/sys/kernel/perf_event_paranoid <= 2 (or CAP_PERFMON); meanwhile time "
                        "variants of the code (wall clock) to locate hot spots."),
        verify="perf stat -e instructions,cycles -- true prints counts instead of <not supported>",
        not_when="the program is GPU-bound: profile its kernels with ncu instead",
        expected_gain=None,
    )
