"""barrier_stalls: warps spend much of their time waiting at __syncthreads."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import mma_info
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

ID = "barrier_stalls"
ROLE = "cause"
READS = {"barrier": N.stall("barrier"), "adu": N.PIPE["adu"], "block": N.BLOCK_SIZE}

#: A fifth of all warp cycles at a barrier: more than the usual load-then-sync pattern of
#: tiled kernels (which stays around 5-10 %); barriers are then a main cost.
BARRIER_SHARE_MIN = 0.20


def check(ctx: KernelContext) -> Finding | None:
    info = mma_info(ctx)
    if info.is_mma and (info.tma or info.wgmma):
        return None  # warp-specialised MMA pipelines wait at barriers by design: mma_pipeline_stalls
    share, inputs = ctx.stall_share("barrier")
    if share is None or share < BARRIER_SHARE_MIN:
        return None
    gain = share
    ev = [ctx.derived("stall_share_barrier", share, inputs, "fraction", f">= {BARRIER_SHARE_MIN:.0%}"),
          ctx.ev(N.stall("barrier"))]
    for g in (N.PIPE["adu"], N.BLOCK_SIZE):
        if ctx.name_of(g):
            ev.append(ctx.ev(g))
    return make(
        ctx, ID, "cause", f"Barrier stalls: {share:.0%} of warp cycles wait at __syncthreads",
        confidence=0.8, evidence=ev,
        recommendation=("Synchronise less and in smaller groups: exchange data inside a warp with "
                        "__shfl_sync (no barrier), use __syncwarp or cooperative_groups tiles where only "
                        "a warp depends on the data, do more work per barrier (several steps per sync), "
                        "double-buffer shared memory to drop one of two barriers, and balance the work "
                        "between warps so none arrives late."),
        verify=verify_text(ctx, "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio "
                                "should fall", gain),
        not_when="the barrier protects a real block-wide dependency that cannot be restructured",
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {ctx.name_of(N.stall("barrier")) or "": "decrease"}),
    )
