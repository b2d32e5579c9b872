"""cpu_context_switches: the program is switched out often (blocking, oversubscription)."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make, perf_cmd
from perfscout.state.records import Finding

ID = "cpu_context_switches"
ROLE = "cause"
READS = {"context-switches": ("context-switches", "cs"), "task-clock": ("task-clock",)}

#: The scheduler tick is 100-1000 Hz: a compute-bound thread sees at most ~1000 involuntary
#: switches per CPU-second. More means it blocks (I/O, locks, sleeps) or shares its CPUs.
SWITCHES_PER_CPU_S_MAX = 1000.0
#: A switch and the cache refill after it cost ~5-20 us; 10 us is used for the estimate.
SWITCH_COST_S = 10e-6


def check(ctx: CpuContext) -> Finding | None:
    cs, cpu_s = ctx.val("context-switches", "cs"), ctx.seconds()
    if cs is None or not cpu_s:
        return None
    rate = cs / cpu_s
    if rate <= SWITCHES_PER_CPU_S_MAX:
        return None
    gain = min(0.99, cs * SWITCH_COST_S / cpu_s)
    return make(
        ctx, ID, "cause", f"Frequent context switches: {rate:,.0f} per CPU-second",
        confidence=0.6,
        evidence=[ctx.derived("switches_per_cpu_second", rate, [ctx.name_of("context-switches", "cs"),
                                                                ctx.name_of("task-clock")], "1/s",
                              f"> {SWITCHES_PER_CPU_S_MAX:.0f}"),
                  ctx.ev("context-switches", "cs"), ctx.ev("task-clock")],
        recommendation=("Find what blocks: batch small I/O, replace sleeping locks in hot paths by "
                        "lock-free or per-thread data, use no more threads than cores (check OMP / "
                        "thread-pool sizes), and pin threads (taskset, OMP_PROC_BIND) on shared hosts."),
        verify=f"context-switches per CPU-second should fall under {SWITCHES_PER_CPU_S_MAX:.0f}; {perf_cmd('task-clock,context-switches')}",
        not_when="the program is interactive or I/O-driven by design",
        expected_gain=gain,
    )
