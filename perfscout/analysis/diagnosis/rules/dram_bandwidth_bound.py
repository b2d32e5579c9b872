"""dram_bandwidth_bound: DRAM (HBM) throughput is the limiter."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._roof import memory_roof_finding
from perfscout.state.records import Finding

ID = "dram_bandwidth_bound"
ROLE = "roof"
READS = {"dram": N.DRAM_SOL, "memory": N.MEM_SOL, "sm": N.SM_SOL}
# Thresholds: classify.DRAM_ROOF_PCT (90 %) x HIGH_FRACTION / AT_ROOF_MARGIN.


def check(ctx: KernelContext) -> Finding | None:
    return memory_roof_finding(
        ctx, ID, "DRAM", reduce_what="bytes",
        recommendation=("Move fewer bytes through DRAM: store narrower types (float32/bf16 instead "
                        "of float64 where precision allows), fuse kernels so intermediates stay in "
                        "registers/shared memory instead of round-tripping through DRAM, and read "
                        "each input once (tile for reuse)."),
        verify_metric="dram__bytes_read.sum",
        not_when=("the extra bytes are already the minimum the algorithm needs (each input read and "
                  "each output written once): then the kernel is done; only an algorithmic change helps"),
    )
