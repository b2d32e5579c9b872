"""atomic_contention: many atomics/reductions serialise on a few addresses.

Not covered by Nsight Compute's rules. An uncontended L2 completes atomics on different
addresses in parallel across its slices (dozens per cycle chip-wide); atomics on one
address are applied one after another in one slice. A chip-wide atomic rate under one
thread-level operation per cycle therefore means the operations share addresses.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import (
    make,
    memory_stall_share,
    time_plan,
    verify_text,
)
from perfscout.state.records import Finding

ID = "atomic_contention"
ROLE = "cause"
READS = {"red_requests": N.GLOBAL_RED_REQUESTS, "red_sectors": N.GLOBAL_RED_SECTORS,
         "atom_requests": N.GLOBAL_ATOM_REQUESTS, "atom_sectors": N.GLOBAL_ATOM_SECTORS,
         "ld_requests": N.GLOBAL_LD_REQUESTS, "tma_ld": N.TMA_LD_INST, "cycles": N.ELAPSED_CYCLES}

#: Atomics are >= 10 % of global memory requests: they are a real part of the traffic.
ATOMIC_REQUEST_SHARE_MIN = 0.10
#: Fewer than one thread-level atomic per cycle chip-wide: serialised (see module doc).
CONTENDED_OPS_PER_CYCLE = 1.0
#: Warp-aggregating (one atomic per warp instead of one per lane) divides same-address
#: operations by up to 32.
AGGREGATION = 32.0


def check(ctx: KernelContext) -> Finding | None:
    req = (ctx.val(N.GLOBAL_RED_REQUESTS) or 0.0) + (ctx.val(N.GLOBAL_ATOM_REQUESTS) or 0.0)
    ops = (ctx.val(N.GLOBAL_RED_SECTORS) or 0.0) + (ctx.val(N.GLOBAL_ATOM_SECTORS) or 0.0)
    cycles = ctx.val(N.ELAPSED_CYCLES)
    if req <= 0 or ops <= 0 or not cycles:
        return None
    # TMA bulk loads are global requests too (MMA kernels issue almost no LSU loads): without
    # them a persistent GEMM's few tile-scheduler atomics would look like most of its traffic.
    ld = (ctx.val(N.GLOBAL_LD_REQUESTS) or 0.0) + (ctx.val(N.TMA_LD_INST) or 0.0)
    share = req / (req + ld)
    rate = ops / cycles
    if share < ATOMIC_REQUEST_SHARE_MIN or rate >= CONTENDED_OPS_PER_CYCLE:
        return None
    if ctx.cls is not None and ctx.cls.kind in ("memory", "compute") and ctx.cls.at_roof:
        return None  # a unit is saturated by other work: atomics are not what limits it
    stall_share, stall_inputs = memory_stall_share(ctx)
    gain = (1.0 - 1.0 / AGGREGATION) * stall_share
    red_atom = [n for n in (ctx.name_of(N.GLOBAL_RED_REQUESTS), ctx.name_of(N.GLOBAL_ATOM_REQUESTS)) if n]
    ops_in = [n for n in (ctx.name_of(N.GLOBAL_RED_SECTORS), ctx.name_of(N.GLOBAL_ATOM_SECTORS)) if n]
    ev = [ctx.derived("atomic_request_share", share,
                      red_atom + [n for n in (ctx.name_of(N.GLOBAL_LD_REQUESTS), ctx.name_of(N.TMA_LD_INST)) if n],
                      "fraction",
                      f">= {ATOMIC_REQUEST_SHARE_MIN:.0%}"),
          ctx.derived("atomic_ops_per_cycle", rate, ops_in + [ctx.name_of(N.ELAPSED_CYCLES)], "op/cycle",
                      f"< {CONTENDED_OPS_PER_CYCLE:g}: serialised on shared addresses")]
    if stall_inputs:
        ev.append(ctx.derived("memory_stall_share", stall_share, stall_inputs, "fraction"))
    return make(
        ctx, ID, "cause",
        f"Atomic contention: {rate:.2f} atomic ops/cycle chip-wide ({share:.0%} of global requests are atomics)",
        confidence=0.75, evidence=ev,
        recommendation=("Aggregate before the atomic: reduce within the warp (__shfl_down_sync or "
                        "cooperative_groups::reduce) and let one lane do the atomicAdd, then within the "
                        "block through shared memory; for histograms keep per-block private bins in "
                        "shared memory and merge once per block."),
        verify=verify_text(ctx, "l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum should fall ~32x", gain),
        not_when="the atomics target many distinct addresses (scattered updates): then contention is low",
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {"l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum": "decrease"}),
    )
