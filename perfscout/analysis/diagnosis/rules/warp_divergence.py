"""warp_divergence: branches split warps, so instructions run with few active lanes."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

ID = "warp_divergence"
ROLE = "cause"
READS = {"threads_per_inst": N.THREADS_PER_INST, "block": N.BLOCK_SIZE, "sm": N.SM_SOL}

#: A warp has 32 lanes. Fewer than 24 active lanes on average (a quarter idle) is more
#: than loop-tail or boundary predication explains; below it, branches split warps.
ACTIVE_LANES_MAX = 24.0


def check(ctx: KernelContext) -> Finding | None:
    t = ctx.val(N.THREADS_PER_INST)
    if t is None:
        return None
    block = ctx.val(N.BLOCK_SIZE)
    full = 32.0
    if block is not None and 0 < block < 32:
        full = block  # a block smaller than a warp never fills it: not divergence
    if t >= min(ACTIVE_LANES_MAX, full * 0.75):
        return None
    idle = 1.0 - t / full
    sm_frac = min(1.0, (ctx.val(N.SM_SOL) or 0.0) / 95.0)
    gain = idle * sm_frac  # lanes wasted, weighted by how busy the SM is
    ev = [ctx.ev(N.THREADS_PER_INST, f"< {ACTIVE_LANES_MAX:.0f} of 32 lanes")]
    if ctx.name_of(N.SM_SOL):
        ev.append(ctx.ev(N.SM_SOL))
    return make(
        ctx, ID, "cause", f"Warp divergence: {t:.1f} of 32 lanes active per instruction",
        confidence=0.8, evidence=ev,
        recommendation=("Make branch conditions uniform per warp: choose the path from the warp "
                        "index (threadIdx.x / 32) rather than per lane, sort or bin work items by "
                        "path before the kernel, or turn short branches into arithmetic selects."),
        verify=verify_text(ctx, "smsp__thread_inst_executed_per_inst_executed.ratio should rise "
                                "towards 32", gain),
        not_when="the divergent path is rare in the real data (check with representative inputs)",
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {"smsp__thread_inst_executed_per_inst_executed.ratio": "increase"}),
    )
