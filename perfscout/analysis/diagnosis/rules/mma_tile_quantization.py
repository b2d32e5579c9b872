"""mma_tile_quantization: an MMA kernel's output tiles do not divide evenly over the SMs.

One CTA computes one output tile at a time, so the number of tiles (problem shape / tile
shape) sets the waves. Fewer tiles than SMs leaves SMs idle for the whole kernel; a
fractional last wave leaves them idle for one tile's time. Both are read from the launch
(``launch__grid_size``, ``launch__waves_per_multiprocessor``); persistent kernels (one CTA
per SM looping over tiles: one wave) hide the tile count, and then no finding is made.
The generic small_grid / tail_effect findings stand aside for MMA kernels: here the lever
is the tile shape (or split-K / stream-K), not the launch configuration.
"""

from __future__ import annotations

import math

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import mma_arch
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.analysis.diagnosis.rules._mma import mma_kernel, tile_text
from perfscout.analysis.diagnosis.rules.small_grid import IDLE_SM_FRACTION_MIN
from perfscout.analysis.diagnosis.rules.tail_effect import IDLE_MIN
from perfscout.state.records import Finding

ID = "mma_tile_quantization"
ROLE = "cause"
READS = {"grid": N.GRID_SIZE, "sms": N.SM_COUNT, "waves": N.WAVES, "tensor": N.TENSOR_PIPE,
         "achieved": N.OCC_ACHIEVED, "theoretical": N.OCC_THEORETICAL}
# Thresholds: small_grid.IDLE_SM_FRACTION_MIN (10 % of SMs idle) and tail_effect.IDLE_MIN
# (20 % of SM-time idle in the last wave): the same waste, the same bars.


def _idle(ctx: KernelContext) -> tuple[float, str, list[str]] | None:
    grid, sms, w = ctx.val(N.GRID_SIZE), ctx.val(N.SM_COUNT), ctx.val(N.WAVES)
    if grid is not None and sms and grid < sms:
        idle = 1.0 - grid / sms
        if idle >= IDLE_SM_FRACTION_MIN:
            return idle, f"{grid:.0f} tiles for {sms:.0f} SMs", [ctx.name_of(N.GRID_SIZE), ctx.name_of(N.SM_COUNT)]
        return None
    if w is not None and w > 1.0:
        rounds = math.ceil(w - 1e-9)
        idle = (rounds - w) / rounds
        if idle >= IDLE_MIN:
            return idle, f"{w:.2f} waves of tiles", [ctx.name_of(N.WAVES)]
    return None


def check(ctx: KernelContext) -> Finding | None:
    info = mma_kernel(ctx)
    if info is None:
        return None
    got = _idle(ctx)
    if got is None:
        return None
    idle, what, inputs = got
    gain = idle
    cls = ctx.cls
    if cls is not None and cls.kind not in ("launch", "underfilled"):
        gain = min(gain, max(cls.headroom, idle * 0.5))  # idle SMs cost even when busy ones are at roof
    ev = [ctx.derived("idle_sm_time_fraction", idle, [i for i in inputs if i], "fraction",
                      f">= {IDLE_SM_FRACTION_MIN:.0%} of SMs / {IDLE_MIN:.0%} of the last wave")]
    for g in (N.GRID_SIZE, N.WAVES, N.TENSOR_PIPE):
        if ctx.name_of(g):
            ev.append(ctx.ev(g))
    return make(
        ctx, ID, "cause", f"Tile quantization: {what} leaves {idle:.0%} of SM-time idle{tile_text(info)}",
        confidence=0.75, evidence=ev,
        recommendation=("Match the tile shape to the problem shape: a smaller tile (e.g. 128x128 "
                        "instead of 256x128) or split-K / stream-K so the tile count is a large or "
                        "whole multiple of the SM count; with cuBLASLt, ask the heuristics for more "
                        "algorithms and time them; pad M/N to a tile multiple when the caller allows."),
        verify=verify_text(ctx, "launch__waves_per_multiprocessor should be whole (or >> 1) and the "
                                "tensor pipe busier", gain),
        not_when="other kernels run concurrently on the idle SMs (streams), or the shape is fixed and tiny",
        expected_gain=gain, arch=mma_arch(info, ctx),
        verify_plan=time_plan(ctx, gain, {info.tensor_metric or N.TENSOR_PIPE[0]: "increase"}),
    )
