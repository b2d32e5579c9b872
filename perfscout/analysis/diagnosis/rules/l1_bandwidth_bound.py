"""l1_bandwidth_bound: the L1/TEX data path (global hits and shared memory) is the limiter."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._roof import memory_roof_finding
from perfscout.state.records import Finding

ID = "l1_bandwidth_bound"
ROLE = "roof"
READS = {"l1": N.L1_SOL, "requests": N.GLOBAL_LD_REQUESTS}
# Thresholds: classify.L1_ROOF_PCT (95 %) x HIGH_FRACTION / AT_ROOF_MARGIN.


def check(ctx: KernelContext) -> Finding | None:
    return memory_roof_finding(
        ctx, ID, "L1/TEX data path", reduce_what="L1 wavefronts",
        recommendation=("Issue fewer, wider L1 requests: register-block so each thread computes "
                        "several outputs from values it already holds (sliding windows), load with "
                        "16-byte vectors (float4) where alignment allows, and keep reused values in "
                        "registers instead of re-loading them."),
        verify_metric="l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        not_when="the loads are already 16 bytes wide and each value is loaded once per thread",
    )
