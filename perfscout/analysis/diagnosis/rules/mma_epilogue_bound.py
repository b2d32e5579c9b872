"""mma_epilogue_bound: an MMA kernel whose time goes to writing its output, not to MMAs.

With a short reduction dimension (K) every output tile gets few MMA steps and a full tile
store: the epilogue (convert, store through shared memory/TMA to DRAM) dominates while the
tensor pipe idles and no memory unit reaches its roof either (stores are issued tile by
tile, not streamed). Read from the DRAM write share and the tensor pipe, both in the profile.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.classify import HIGH_FRACTION, TENSOR_ROOF_PCT
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import mma_arch
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.analysis.diagnosis.rules._mma import (
    mma_kernel,
    tensor_headroom,
    tile_text,
)
from perfscout.state.records import Finding

ID = "mma_epilogue_bound"
ROLE = "cause"
READS = {"tensor": N.TENSOR_PIPE, "dram_write": N.DRAM_WRITE_BYTES, "dram_read": N.DRAM_READ_BYTES,
         "tma_st": N.TMA_ST_BYTES}

#: A GEMM reads each operand once and writes C once; when more than half of the DRAM bytes
#: are output writes, the output (M x N) outweighs the operands (M x K + K x N): K is small
#: against M and N and the epilogue is a main cost, not a tail.
WRITE_SHARE_MIN = 0.5


def check(ctx: KernelContext) -> Finding | None:
    info = mma_kernel(ctx)
    if info is None or info.tensor_pct is None:
        return None
    if info.tensor_pct >= HIGH_FRACTION * TENSOR_ROOF_PCT:
        return None  # the tensor pipe limits: the epilogue overlaps well enough
    cls = ctx.cls
    if cls is not None and cls.kind == "memory" and cls.at_roof:
        return None  # DRAM already at its roof: only fewer bytes help (the roof finding says so)
    w, r = ctx.val(N.DRAM_WRITE_BYTES), ctx.val(N.DRAM_READ_BYTES)
    if w is None or r is None or w + r <= 0:
        return None
    share = w / (w + r)
    if share < WRITE_SHARE_MIN:
        return None
    gain = tensor_headroom(info) * share
    ev = [ctx.derived("dram_write_share", share, [ctx.name_of(N.DRAM_WRITE_BYTES), ctx.name_of(N.DRAM_READ_BYTES)],
                      "fraction", f">= {WRITE_SHARE_MIN:.0%}: the output outweighs the operands"),
          ctx.ev(N.TENSOR_PIPE, f"< {HIGH_FRACTION * TENSOR_ROOF_PCT:.0f}%: MMAs are not the limiter")]
    if ctx.name_of(N.TMA_ST_BYTES):
        ev.append(ctx.ev(N.TMA_ST_BYTES, "output tiles stored by TMA"))
    return make(
        ctx, ID, "cause",
        f"Epilogue-bound MMA kernel: {share:.0%} of DRAM bytes are output writes, tensor pipe at "
        f"{info.tensor_pct:.0f}%{tile_text(info)}",
        confidence=0.7, evidence=ev,
        recommendation=("Write less output per MMA: fuse what consumes C into the epilogue (bias, "
                        "activation, the next elementwise op, a reduction) so C is never stored in full, "
                        "store a narrower type (keep fp32 accumulation in registers but write bf16/fp8), "
                        "batch small-K products into one GEMM with a longer K, or use a kernel that "
                        "overlaps each tile's epilogue with the next tile's main loop (persistent "
                        "ping-pong / stream-K schedules)."),
        verify=verify_text(ctx, "dram__bytes_write.sum should fall with the output bytes removed", gain),
        not_when="the full output is needed in DRAM at this precision (it is the result the caller keeps)",
        expected_gain=gain, arch=mma_arch(info, ctx),
        verify_plan=time_plan(ctx, gain, {"dram__bytes_write.sum": "decrease"}),
    )
