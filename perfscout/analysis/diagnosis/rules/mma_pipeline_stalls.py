"""mma_pipeline_stalls: an MMA kernel below its tensor roof whose warps wait on data or on
each other (async-copy/TMA arrivals, pipeline barriers between producer and consumer warps).

A lever, not a cause: in warp-specialised MMA kernels producer warps sit at barriers by
design, so stall shares overstate the time lost; what can be won is bounded by the tensor
pipe's headroom to its roof. It is ranked below the roof finding with that headroom.

When another unit limits the kernel (an MMA kernel that is DRAM-bound: a GEMV, decode
attention), its warps wait for data because that unit is busy: a deeper pipeline wins at
most that unit's headroom, and nothing once it is at its roof (no finding then).
"""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.classify import TENSOR_ROOF_PCT, at_roof
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import mma_arch
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.analysis.diagnosis.rules._mma import (
    mma_kernel,
    tensor_headroom,
    tile_text,
)
from perfscout.state.records import Finding

ID = "mma_pipeline_stalls"
ROLE = "lever"
READS = {"tensor": N.TENSOR_PIPE, "barrier": N.stall("barrier"),
         "long_scoreboard": N.stall("long_scoreboard"), "sleeping": N.stall("sleeping"),
         "tma_ld": N.TMA_LD_INST}

#: Reasons that mean "waiting for operands to arrive or for another warp group": async
#: copies (TMA/cp.async completion through mbarriers), named/CTA barriers, sleeping.
WAIT_REASONS = ("barrier", "long_scoreboard", "sleeping", "membar")
#: From a quarter of warp cycles spent waiting the pipeline is not deep enough to cover
#: copy latency (a well-fed GEMM main loop shows ~10-20 %: the planted_library GEMMs).
WAIT_SHARE_MIN = 0.25


def check(ctx: KernelContext) -> Finding | None:
    info = mma_kernel(ctx)
    if info is None or info.tensor_pct is None:
        return None
    if at_roof(info.tensor_pct / TENSOR_ROOF_PCT):
        return None
    cycles = ctx.stall_cycles()
    total = sum(cycles.values())
    if total <= 0:
        return None
    waits = {r: cycles[r] for r in WAIT_REASONS if r in cycles}
    share = sum(waits.values()) / total
    if share < WAIT_SHARE_MIN:
        return None
    cls = ctx.cls
    if cls is not None and cls.kind == "memory" and cls.at_roof:
        return None  # the memory unit is at its roof: feeding the MMAs faster cannot help
    head = tensor_headroom(info)
    gain = head * share
    if cls is not None and not (cls.kind == "compute" and cls.unit == "tensor"):
        gain = min(gain, cls.headroom)  # another unit limits: its headroom bounds the win
    used = [n for n in (ctx.name_of(N.stall(r)) for r in cycles) if n]
    ev = [ctx.ev(N.TENSOR_PIPE, f"below the {TENSOR_ROOF_PCT:.0f}% roof"),
          ctx.derived("stall_share_waiting_for_data", share, used, "fraction", f">= {WAIT_SHARE_MIN:.0%}")]
    top = max(waits, key=waits.get)
    ev.append(ctx.ev(N.stall(top), "largest wait reason"))
    feed = ("TMA" if info.tma else "cp.async" if ctx.arch.at_least(8, 0) else "shared-memory")
    return make(
        ctx, ID, "lever",
        f"MMA pipeline waits: {share:.0%} of warp cycles wait for operands or barriers, tensor pipe at "
        f"{info.tensor_pct:.0f}%{tile_text(info)}",
        confidence=0.6, evidence=ev,
        recommendation=(f"Keep the tensor pipe fed: more {feed} pipeline stages (or a larger K-step) so "
                        "copies run further ahead of the MMAs, warp-specialised producer/consumer roles "
                        "with two consumer groups ping-ponging so one's epilogue or softmax overlaps the "
                        "other's MMAs, and fewer CTA-wide barriers in the main loop (mbarrier "
                        "arrive/wait per stage instead)."),
        verify=verify_text(ctx, "sm__pipe_tensor_cycles_active should rise toward the roof and the "
                                f"{top} stall share shrink", gain),
        not_when=("the kernel is a library kernel you cannot change (then pick another algorithm or "
                  "tile config, e.g. through cuBLASLt heuristics), or the waits are producer warps "
                  "idling by design while the tensor pipe is busy"),
        expected_gain=gain, arch=mma_arch(info, ctx),
        verify_plan=time_plan(ctx, gain, {info.tensor_metric or N.TENSOR_PIPE[0]: "increase"}),
    )
