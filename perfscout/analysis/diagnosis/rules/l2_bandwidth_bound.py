"""l2_bandwidth_bound: traffic served from L2 (hits) limits the kernel, not DRAM."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.classify import L2_RETURN
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._roof import memory_roof_finding
from perfscout.state.records import Finding

ID = "l2_bandwidth_bound"
ROLE = "roof"
READS = {"l2_return": L2_RETURN, "l2": N.L2_SOL, "dram": N.DRAM_SOL}
# Thresholds: classify.L2_RETURN_ROOF_PCT_SM80 (50 % of the slice peak on two-partition L2s).


def check(ctx: KernelContext) -> Finding | None:
    return memory_roof_finding(
        ctx, ID, "L2 (hits returned to the SMs)", reduce_what="L2 requests",
        recommendation=("Data is re-read from L2 many times: stage each tile (with its halo) in "
                        "shared memory or registers once per block and reuse it there; let reads "
                        "that are reused within a block go through L1 (drop __ldcg / volatile) "
                        "instead of bypassing it."),
        verify_metric="lts__t_sectors_srcunit_tex_op_read.sum",
        not_when=("each L2 sector is already read about once per block (no reuse left to capture "
                  "on chip); then the traffic is compulsory and only less data helps"),
    )
