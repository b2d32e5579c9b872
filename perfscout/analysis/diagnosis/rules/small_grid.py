"""small_grid: fewer blocks than SMs, so part of the chip never gets work."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import mma_info
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

ID = "small_grid"
ROLE = "cause"
READS = {"grid": N.GRID_SIZE, "sms": N.SM_COUNT, "waves": N.WAVES}

#: A block runs on one SM: with fewer blocks than SMs, (1 - blocks/SMs) of the chip idles
#: for the whole kernel. Reported from one idle SM in ten upwards.
IDLE_SM_FRACTION_MIN = 0.10


def check(ctx: KernelContext) -> Finding | None:
    if mma_info(ctx).is_mma:
        return None  # MMA kernels: tile shape vs problem shape (mma_tile_quantization)
    grid, sms = ctx.val(N.GRID_SIZE), ctx.val(N.SM_COUNT)
    if grid is None or not sms or grid >= sms:
        return None
    idle = 1.0 - grid / sms
    if idle < IDLE_SM_FRACTION_MIN:
        return None
    headroom = ctx.cls.headroom if ctx.cls and ctx.cls.kind != "launch" else 1.0
    gain = min(idle, headroom or idle)
    ev = [ctx.ev(N.GRID_SIZE, f"< {sms:.0f} SMs"), ctx.ev(N.SM_COUNT)]
    if ctx.name_of(N.WAVES):
        ev.append(ctx.ev(N.WAVES))
    ev.append(ctx.derived("idle_sm_fraction", idle, [ctx.name_of(N.GRID_SIZE), ctx.name_of(N.SM_COUNT)],
                          "fraction", f">= {IDLE_SM_FRACTION_MIN:.0%}"))
    return make(
        ctx, ID, "cause", f"Grid too small: {grid:.0f} blocks for {sms:.0f} SMs ({idle:.0%} of SMs idle)",
        confidence=0.85, evidence=ev,
        recommendation=("Launch at least one block per SM, better 2-4 per SM: split the work finer "
                        "(grid-stride loop with gridDim = k x SM count), or parallelise the outer loop "
                        "across blocks; for an inherently small problem, batch several problems into "
                        "one launch or run them concurrently on streams."),
        verify=verify_text(ctx, "launch__waves_per_multiprocessor should reach >= 1 and "
                                "sm__throughput rise", gain),
        not_when="the problem is inherently this small and nothing else can run concurrently",
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {"launch__grid_size": "increase"}),
    )
