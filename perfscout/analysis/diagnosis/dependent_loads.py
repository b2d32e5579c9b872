"""Dependent-load latency, told apart from uncoalesced (bandwidth-wasting) access.

A pointer chase and a strided gather both show many sectors per request. What separates
them is not the access pattern but what the warps wait for and how many are waiting:
- latency-bound kernel (no unit near its roof),
- most warp cycles stalled on ``long_scoreboard`` (waiting for a global/local load result),
- too little parallelism to hide that latency: few resident warps (achieved occupancy) or
  less than one wave of blocks, and almost no eligible warps per scheduler cycle.
Then each warp has one load in flight and the next address depends on it: wasted sectors
cost bandwidth the kernel does not use, and coalescing cannot shorten the chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.state.records import Evidence

#: Half of all warp cycles waiting on load results: loads, not issue or barriers, set the pace.
LONG_SCOREBOARD_SHARE_MIN = 0.5
#: At most a quarter of the warp slots resident (16 of 64 warps per SM, 4 per scheduler):
#: with ~600-800 cycles of DRAM latency and one dependent load per warp, Little's law
#: leaves each scheduler idle most of the time.
FEW_WARPS_PCT = 25.0
#: Fewer eligible warps than this per scheduler cycle: the scheduler has nothing to issue
#: almost every cycle (a streaming kernel keeps ~0.3-1; the planted suite's chases ~0.1).
ELIGIBLE_MAX = 0.2


@dataclass
class DependentLoads:
    share: float  # long_scoreboard share of warp cycles
    evidence: list[Evidence] = field(default_factory=list)
    waves: float | None = None
    achieved_pct: float | None = None


def dependent_loads(ctx: KernelContext) -> DependentLoads | None:
    """The dependent-load signature, or None when the profile does not show it."""
    cls = ctx.cls
    if cls is None or cls.kind != "latency":
        return None
    share, used = ctx.stall_share("long_scoreboard")
    if share is None or share < LONG_SCOREBOARD_SHARE_MIN:
        return None
    ach, waves, elig = ctx.val(N.OCC_ACHIEVED), ctx.val(N.WAVES), ctx.val(N.WARPS_ELIGIBLE)
    few_warps = (ach is not None and ach <= FEW_WARPS_PCT) or (waves is not None and waves < 1.0)
    if not few_warps or (elig is not None and elig > ELIGIBLE_MAX):
        return None
    ev = [ctx.derived("stall_share_long_scoreboard", share, used, "fraction",
                      f">= {LONG_SCOREBOARD_SHARE_MIN:.0%}: warps wait for load results")]
    if waves is not None:
        ev.append(ctx.ev(N.WAVES, "< 1: not even one full wave of blocks" if waves < 1 else ""))
    if ach is not None:
        ev.append(ctx.ev(N.OCC_ACHIEVED, f"<= {FEW_WARPS_PCT:.0f}%: few warps to overlap loads"
                         if ach <= FEW_WARPS_PCT else ""))
    if elig is not None:
        ev.append(ctx.ev(N.WARPS_ELIGIBLE, f"<= {ELIGIBLE_MAX}: schedulers idle"))
    return DependentLoads(share=share, evidence=ev, waves=waves, achieved_pct=ach)
