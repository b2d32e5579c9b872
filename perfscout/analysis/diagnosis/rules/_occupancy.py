"""The three low-occupancy findings: one check, three limiters.

Occupancy matters when resident warps are what hides latency: a latency-bound kernel
(warps wait and no unit is busy), or a memory-bound one still below its roof (the unit is
busy but short of the bytes in flight it needs: 79 % of DRAM peak at 25 % occupancy). The
limiter that caps the warps names the finding (registers, shared memory, or blocks too
small for the per-SM block limit). Not for kernels fed by TMA bulk copies: their bytes in
flight are set by shared-memory pipeline stages, not by resident warps.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import mma_info
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

#: <= 32 of 64 warps per SM (8 per scheduler on Hopper/Ampere): with DRAM latency of
#: ~600-800 cycles and one load in flight per warp, fewer than ~8-16 warps per scheduler
#: cannot cover it (Little's law), so a cap at or below 50 % costs throughput.
THEORETICAL_MAX_PCT = 50.0
#: Achieved occupancy within 20 % of theoretical: the cap (not the grid or the tail)
#: decides how many warps are resident.
ACHIEVED_OF_THEORETICAL = 0.8

ADVICE = {
    "registers": ("Cut registers per thread: keep less state live (fold accumulators, recompute "
                  "cheap values), or cap with __launch_bounds__(threads, minBlocksPerSM) / "
                  "-maxrregcount, checking -Xptxas -v for spills."),
    "shared_mem": ("Use less shared memory per block (smaller tiles, reuse one buffer for phases, "
                   "request only the dynamic shared memory the kernel touches)."),
    "blocks": ("Launch bigger blocks (128-256 threads): the per-SM block limit (32 on sm_80/sm_90) "
               "caps residency when blocks are tiny."),
    "warps": "Choose a block size that divides the SM's 64-warp capacity (e.g. 256 or 512).",
}
LIMITER_ID = {"registers": "low_occupancy_registers", "shared_mem": "low_occupancy_shared_memory",
              "blocks": "low_occupancy_block_size", "warps": "low_occupancy_block_size"}


def binding_limiter(ctx: KernelContext) -> tuple[str, float] | None:
    limits = {k: ctx.val(v) for k, v in N.OCC_LIMIT.items()}
    limits = {k: v for k, v in limits.items() if v is not None}
    if not limits:
        return None
    # On a tie the structural limits win: ncu reports a resource's limit as the block cap
    # when the kernel barely uses that resource (e.g. no shared memory -> 32 blocks).
    order = ("blocks", "warps", "registers", "shared_mem", "barriers")
    name = min(limits, key=lambda k: (limits[k], order.index(k)))
    return name, limits[name]


def occupancy_finding(ctx: KernelContext, rule_id: str) -> Finding | None:
    cls = ctx.cls
    if cls is None or not (cls.kind == "latency" or (cls.kind == "memory" and not cls.at_roof)):
        return None
    if mma_info(ctx).tma:
        return None
    theo, ach = ctx.val(N.OCC_THEORETICAL), ctx.val(N.OCC_ACHIEVED)
    lim = binding_limiter(ctx)
    if theo is None or lim is None or theo > THEORETICAL_MAX_PCT:
        return None
    if LIMITER_ID.get(lim[0]) != rule_id:
        return None
    if ach is not None and ach < ACHIEVED_OF_THEORETICAL * theo:
        return None
    gain = min(1.0 - theo / 100.0, cls.headroom)
    ev = [ctx.ev(N.OCC_THEORETICAL, f"<= {THEORETICAL_MAX_PCT:.0f}%"),
          ctx.ev(N.OCC_LIMIT[lim[0]], "the smallest per-SM block limit binds")]
    if ach is not None:
        ev.append(ctx.ev(N.OCC_ACHIEVED))
    extra = {"registers": N.REGISTERS, "shared_mem": N.SMEM_PER_BLOCK, "blocks": N.BLOCK_SIZE,
             "warps": N.BLOCK_SIZE}[lim[0]]
    if ctx.name_of(extra):
        ev.append(ctx.ev(extra))
    ev.extend(cls.evidence[:1])
    return make(
        ctx, rule_id, "cause",
        f"Occupancy capped at {theo:.0f}% by {lim[0].replace('_', ' ')} while "
        + ("latency-bound" if cls.kind == "latency" else
           f"{cls.unit.upper()} runs below its roof ({cls.top_pct:.0f}% of peak, roof {cls.roof_pct:.0f}%)"),
        confidence=0.8, evidence=ev, recommendation=ADVICE[lim[0]],
        verify=verify_text(ctx, "sm__maximum_warps_per_active_cycle_pct and "
                                "sm__warps_active.avg.pct_of_peak_sustained_active should rise", gain),
        not_when=("the kernel relies on the per-thread state or tile size for data reuse and the "
                  "lower-occupancy variant spills or re-reads more; or ILP already hides latency"),
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {"sm__warps_active.avg.pct_of_peak_sustained_active": "increase"}),
    )
