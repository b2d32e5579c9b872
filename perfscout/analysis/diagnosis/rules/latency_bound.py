"""latency_bound: no unit is near its roof; warps wait on dependencies (mostly memory)."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.dependent_loads import dependent_loads
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

ID = "latency_bound"
ROLE = "roof"
READS = {"sm": N.SM_SOL, "memory": N.MEM_SOL, "stall_long_scoreboard": N.stall("long_scoreboard"),
         "stall_total": N.STALL_TOTAL}

NOT_TO_DO = [
    "no bandwidth tuning (narrower types, caching hints): no memory unit is busy",
    "no arithmetic micro-optimisation: the pipes idle while warps wait",
]


def check(ctx: KernelContext) -> Finding | None:
    cls = ctx.cls
    if cls is None or cls.kind != "latency":
        return None
    ev = list(cls.evidence)
    cycles = ctx.stall_cycles()
    top = max(cycles.items(), key=lambda kv: kv[1] if kv[0] != "selected" else -1.0)[0] if cycles else ""
    if top:
        share, used = ctx.stall_share(top)
        ev.append(ctx.derived(f"stall_share_{top}", share or 0.0, used, "fraction",
                              "dominant stall reason"))
    gain = cls.headroom
    dep = dependent_loads(ctx)
    if dep is not None:
        ev = list(cls.evidence[:2]) + dep.evidence
        fill = []
        if dep.waves is not None:
            fill.append(f"{dep.waves:.2f} waves")
        if dep.achieved_pct is not None:
            fill.append(f"{dep.achieved_pct:.0f}% occupancy")
        return make(
            ctx, ID, "roof",
            f"Dependent-load latency: {dep.share:.0%} of warp cycles wait for load results with too "
            f"little parallelism ({', '.join(fill)})",
            confidence=0.8, evidence=ev,
            recommendation=("Put more independent loads in flight: give each thread several independent "
                            "chains (interleave them), launch enough threads to fill the chip (the grid "
                            "covers a fraction of one wave), prefetch the next node when its address can "
                            "be computed early, or change the data structure (a flat/CSR layout instead "
                            "of pointer chains). Coalescing does not apply: each address comes from the "
                            "previous load."),
            verify=verify_text(ctx, "time should fall roughly in proportion to the independent chains "
                                    "added until a memory unit nears its roof", gain),
            not_when="the chain is inherently serial and no other independent work exists",
            expected_gain=gain,
            what_not_to_do=["no coalescing or vector-width changes: the addresses are data-dependent",
                            "no bandwidth tuning: the memory units are far from their roofs"],
            verify_plan=time_plan(ctx, gain, {}),
        )
    return make(
        ctx, ID, "roof",
        f"Latency-bound: no unit near its roof (SM {cls.sm_pct or 0:.0f}%, memory {cls.mem_pct or 0:.0f}%)"
        + (f", warps mostly stalled on {top}" if top else ""),
        confidence=0.7, evidence=ev,
        recommendation=("Put more independent work in flight per warp: break dependent chains into "
                        "several interleaved ones (ILP), unroll loops so loads are issued before their "
                        "uses, prefetch the next iteration's data, and make sure enough warps are resident."),
        verify=verify_text(ctx, f"the {top or 'dominant'} stall share should shrink and the busiest unit's "
                                "throughput rise", gain),
        not_when=("the dependency is inherent (a true serial chain, e.g. a linked-list walk) and no "
                  "independent work exists to overlap"),
        expected_gain=gain, what_not_to_do=NOT_TO_DO,
        # Time is the check: per-issue stall cycles need not fall when more loads are in
        # flight (each still waits as long), and unit throughput can move either way.
        verify_plan=time_plan(ctx, gain, {}),
    )
