"""uncoalesced_global_access: a warp's global accesses touch far more sectors than it uses."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.dependent_loads import dependent_loads
from perfscout.analysis.diagnosis.rules._base import (
    make,
    memory_time_share,
    time_plan,
    verify_text,
)
from perfscout.state.records import Finding

ID = "uncoalesced_global_access"
ROLE = "cause"
READS = {"excessive": N.GLOBAL_SECTORS_EXCESSIVE, "ideal": N.GLOBAL_SECTORS_IDEAL,
         "ld_sectors": N.GLOBAL_LD_SECTORS, "ld_requests": N.GLOBAL_LD_REQUESTS,
         "bytes_per_sector": N.GLOBAL_LD_BYTES_PER_SECTOR}

#: 32-byte sectors are the unit L1 and L2 move: a wasted fraction of the sectors is the
#: same fraction of memory bandwidth lost. Below 30 % the waste is typical of halo or
#: misaligned neighbour reads, which rarely pay to fix; above it, the layout is wrong.
WASTE_MIN = 0.30
#: A warp reading 4-byte words contiguously needs 4 sectors per request; more than 4
#: sectors per request with few bytes used per sector means lanes are scattered. (Used only
#: when ncu's ideal/excessive sector counts are absent.)
SCATTER_SECTORS_PER_REQUEST = 8.0


def _waste(ctx: KernelContext):
    if ctx.has(N.GLOBAL_SECTORS_EXCESSIVE, N.GLOBAL_SECTORS_IDEAL):
        exc, ideal = ctx.val(N.GLOBAL_SECTORS_EXCESSIVE), ctx.val(N.GLOBAL_SECTORS_IDEAL)
        if exc is None or ideal is None or exc + ideal <= 0:
            return None
        inputs = [ctx.name_of(N.GLOBAL_SECTORS_EXCESSIVE), ctx.name_of(N.GLOBAL_SECTORS_IDEAL)]
        return exc / (exc + ideal), inputs
    if ctx.has(N.GLOBAL_LD_SECTORS, N.GLOBAL_LD_REQUESTS, N.GLOBAL_LD_BYTES_PER_SECTOR):
        sec, req = ctx.val(N.GLOBAL_LD_SECTORS), ctx.val(N.GLOBAL_LD_REQUESTS)
        used = ctx.val(N.GLOBAL_LD_BYTES_PER_SECTOR)
        if not req or sec is None or used is None or sec / req < SCATTER_SECTORS_PER_REQUEST:
            return None  # few sectors per request: a broadcast or narrow access, not a scatter
        inputs = [ctx.name_of(g) for g in (N.GLOBAL_LD_SECTORS, N.GLOBAL_LD_REQUESTS,
                                           N.GLOBAL_LD_BYTES_PER_SECTOR)]
        return 1.0 - used / 32.0, inputs
    return None


def check(ctx: KernelContext) -> Finding | None:
    got = _waste(ctx)
    if got is None:
        return None
    waste, inputs = got
    if waste < WASTE_MIN:
        return None
    share, stall_inputs = memory_time_share(ctx)
    gain = waste * share
    ev = [ctx.derived("wasted_sector_fraction", waste, inputs, "fraction", f">= {WASTE_MIN:.0%}")]
    dep = dependent_loads(ctx)
    if dep is not None:
        # Each warp has one dependent load in flight: the extra sectors use bandwidth the
        # kernel has to spare and do not lengthen the chain; coalescing cannot win time.
        ev.extend(dep.evidence)
        return make(
            ctx, ID, "cause",
            f"Scattered accesses ({waste:.0%} of sectors unused) that cost no time: the loads are "
            "dependent and latency-bound",
            confidence=0.6, evidence=ev,
            recommendation=("Nothing to coalesce here: the addresses come from the previous load. "
                            "See latency_bound: more independent chains in flight."),
            verify=verify_text(ctx, "no change expected from coalescing", 0.0),
            not_when="always: this finding only records that the scatter is not the limiter",
            expected_gain=0.0, verify_plan=time_plan(ctx, 0.0, {}),
        )
    if stall_inputs:
        ev.append(ctx.derived("memory_stall_share", share, stall_inputs, "fraction",
                              "share of time the waste can cost"))
    for g in (N.GLOBAL_LD_SECTORS, N.GLOBAL_LD_REQUESTS):
        if ctx.name_of(g):
            ev.append(ctx.ev(g))
    return make(
        ctx, ID, "cause",
        f"Uncoalesced global accesses: {waste:.0%} of the sectors fetched are not used",
        confidence=0.85, evidence=ev,
        recommendation=("Make consecutive lanes touch consecutive addresses: index with "
                        "threadIdx.x on the fastest-varying dimension, transpose through a padded "
                        "shared-memory tile (tile[32][33]) when the access must be strided, or "
                        "switch an array-of-structs to a struct-of-arrays."),
        verify=verify_text(ctx, "derived__memory_l2_theoretical_sectors_global_excessive should drop "
                                "to ~0 and l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum by "
                                f"~{waste:.0%}", gain),
        not_when=("the strided access is a one-off (gather of a small table that stays in L1), or "
                  "the data must be read in that order and is read only once with no tile reuse"),
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {"derived__memory_l2_theoretical_sectors_global_excessive": "decrease",
                                          "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "decrease"}),
    )
