"""tail_effect: the last, partial wave of blocks leaves most SMs idle at the end."""

from __future__ import annotations

import math

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import mma_info
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

ID = "tail_effect"
ROLE = "cause"
READS = {"waves": N.WAVES, "achieved": N.OCC_ACHIEVED, "theoretical": N.OCC_THEORETICAL}

#: With w waves of equal blocks, ceil(w) rounds run and (ceil(w) - w) / ceil(w) of the
#: SM-time is idle. From 20 % idle the tail costs more than typical block-time jitter.
IDLE_MIN = 0.20


def check(ctx: KernelContext) -> Finding | None:
    if mma_info(ctx).is_mma:
        return None  # MMA kernels: tile shape vs problem shape (mma_tile_quantization)
    w = ctx.val(N.WAVES)
    if w is None or w < 1.0:
        return None
    rounds = math.ceil(w - 1e-9)
    idle = (rounds - w) / rounds
    if idle < IDLE_MIN:
        return None
    gain = idle
    theo, ach = ctx.val(N.OCC_THEORETICAL), ctx.val(N.OCC_ACHIEVED)
    ev = [ctx.ev(N.WAVES, "fractional last wave"),
          ctx.derived("idle_wave_fraction", idle, [ctx.name_of(N.WAVES)], "fraction", f">= {IDLE_MIN:.0%}")]
    if theo and ach is not None:
        # Blocks of the last wave run alone and so faster: the warp-slot loss measured
        # over the kernel (achieved vs theoretical occupancy) bounds the gain tighter.
        gain = min(gain, 1.0 - ach / theo)
        ev.append(ctx.derived("unused_warp_slots", 1.0 - ach / theo,
                              [ctx.name_of(N.OCC_ACHIEVED), ctx.name_of(N.OCC_THEORETICAL)], "fraction"))
    return make(
        ctx, ID, "cause", f"Tail effect: {w:.2f} waves, the last wave leaves {idle:.0%} of SM-time idle",
        confidence=0.75, evidence=ev,
        recommendation=("Make the wave count large or whole: split the work into more, smaller blocks "
                        "(many waves make the tail negligible), size the grid to a multiple of "
                        "(SMs x blocks per SM), or use a persistent-block loop over work items."),
        verify=verify_text(ctx, "sm__warps_active.avg.pct_of_peak_sustained_active should approach "
                                "the theoretical occupancy", gain),
        not_when="the kernel is launched concurrently with others that fill the idle SMs",
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {"sm__warps_active.avg.pct_of_peak_sustained_active": "increase"}),
    )
