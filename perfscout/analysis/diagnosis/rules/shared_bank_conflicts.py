"""shared_bank_conflicts: shared-memory accesses serialise on banks (extra wavefronts)."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import make, memory_time_share, time_plan, verify_text
from perfscout.state.records import Finding

ID = "shared_bank_conflicts"
ROLE = "cause"
READS = {"excessive": N.SHARED_WAVEFRONTS_EXCESSIVE, "ideal": N.SHARED_WAVEFRONTS_IDEAL,
         "wavefronts": N.SHARED_WAVEFRONTS, "conflicts": N.SHARED_BANK_CONFLICTS}

#: Shared memory has 32 banks of 4 bytes; each extra wavefront is a replay of the access.
#: When >= 30 % of the wavefronts are replays the layout (not the access count) dominates
#: the shared-memory time; a 2-way conflict on a few accesses stays under it.
EXCESS_MIN = 0.30


def check(ctx: KernelContext) -> Finding | None:
    if ctx.has(N.SHARED_WAVEFRONTS_EXCESSIVE, N.SHARED_WAVEFRONTS_IDEAL):
        exc, ideal = ctx.val(N.SHARED_WAVEFRONTS_EXCESSIVE), ctx.val(N.SHARED_WAVEFRONTS_IDEAL)
        inputs = [ctx.name_of(N.SHARED_WAVEFRONTS_EXCESSIVE), ctx.name_of(N.SHARED_WAVEFRONTS_IDEAL)]
        total = (exc or 0.0) + (ideal or 0.0)
    elif ctx.has(N.SHARED_BANK_CONFLICTS, N.SHARED_WAVEFRONTS):
        exc, total = ctx.val(N.SHARED_BANK_CONFLICTS), ctx.val(N.SHARED_WAVEFRONTS)
        inputs = [ctx.name_of(N.SHARED_BANK_CONFLICTS), ctx.name_of(N.SHARED_WAVEFRONTS)]
    else:
        return None
    if not total or not exc:
        return None
    excess = exc / total
    if excess < EXCESS_MIN:
        return None
    share, stall_inputs = memory_time_share(ctx)
    gain = excess * share
    ev = [ctx.derived("shared_replay_fraction", excess, inputs, "fraction", f">= {EXCESS_MIN:.0%}")]
    if stall_inputs:
        ev.append(ctx.derived("memory_stall_share", share, stall_inputs, "fraction"))
    for g in (N.SHARED_BANK_CONFLICTS, N.SHARED_WAVEFRONTS):
        if ctx.name_of(g):
            ev.append(ctx.ev(g))
    return make(
        ctx, ID, "cause", f"Shared-memory bank conflicts: {excess:.0%} of wavefronts are replays",
        confidence=0.85, evidence=ev,
        recommendation=("Pad each shared row by one element (float tile[32][33]) or swizzle the "
                        "column index (col ^ row) so the 32 lanes of a warp hit 32 different banks; "
                        "for 8/16-byte elements pad by one element of that width."),
        verify=verify_text(ctx, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum should drop to ~0 "
                                "and l1tex__data_pipe_lsu_wavefronts_mem_shared.sum by "
                                f"~{excess:.0%}", gain),
        not_when="the conflicting accesses are a negligible part of the runtime (few shared accesses)",
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": "decrease"}),
    )
