"""local_memory: per-thread arrays or spills live in (off-chip, cached) local memory."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import make, memory_time_share, time_plan, verify_text
from perfscout.state.records import Finding

ID = "local_memory"
ROLE = "cause"
READS = {"local_ld": N.LOCAL_LD_SECTORS, "local_st": N.LOCAL_ST_SECTORS,
         "global_ld": N.GLOBAL_LD_SECTORS, "global_st": N.GLOBAL_ST_SECTORS}

#: Local traffic goes through L1/L2 like global traffic but is pure overhead (the program
#: asked for registers). From 10 % of the L1 sector traffic it costs measurable bandwidth
#: and latency; a few spilled values at exit stay under it.
LOCAL_SHARE_MIN = 0.10


def check(ctx: KernelContext) -> Finding | None:
    if not ctx.has(N.LOCAL_LD_SECTORS, N.LOCAL_ST_SECTORS):
        return None
    loc = (ctx.val(N.LOCAL_LD_SECTORS) or 0.0) + (ctx.val(N.LOCAL_ST_SECTORS) or 0.0)
    if loc <= 0:
        return None
    glob = (ctx.val(N.GLOBAL_LD_SECTORS) or 0.0) + (ctx.val(N.GLOBAL_ST_SECTORS) or 0.0)
    share = loc / (loc + glob)
    if share < LOCAL_SHARE_MIN:
        return None
    t_share, stall_inputs = memory_time_share(ctx)
    gain = share * t_share
    inputs = [n for n in (ctx.name_of(N.LOCAL_LD_SECTORS), ctx.name_of(N.LOCAL_ST_SECTORS),
                          ctx.name_of(N.GLOBAL_LD_SECTORS), ctx.name_of(N.GLOBAL_ST_SECTORS)) if n]
    ev = [ctx.derived("local_sector_share", share, inputs, "fraction", f">= {LOCAL_SHARE_MIN:.0%}"),
          ctx.ev(N.LOCAL_LD_SECTORS), ctx.ev(N.LOCAL_ST_SECTORS)]
    if stall_inputs:
        ev.append(ctx.derived("memory_stall_share", t_share, stall_inputs, "fraction"))
    return make(
        ctx, ID, "cause", f"Local memory: {share:.0%} of L1 sector traffic is thread-local (arrays/spills)",
        confidence=0.85, evidence=ev,
        recommendation=("Keep per-thread arrays in registers: index them only with compile-time "
                        "constants (fully unrolled loops), or move them to shared memory laid out "
                        "[element][thread] (conflict-free); for spills, cut live registers or relax "
                        "__launch_bounds__/-maxrregcount (check -Xptxas -v for 'spill stores')."),
        verify=verify_text(ctx, "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum and _st.sum should drop "
                                "to ~0", gain),
        not_when="the array is too large for registers and shared memory alike (then keep it, but coalesce it)",
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {"l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": "decrease"}),
    )
