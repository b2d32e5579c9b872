"""compute_bound: an SM pipe (or instruction issue) is the limiter."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

ID = "compute_bound"
ROLE = "roof"
READS = {"sm": N.SM_SOL, "issue": N.ISSUE_ACTIVE, **{f"pipe_{p}": n for p, n in N.PIPE.items()}}

NOT_TO_DO = [
    "no memory-access tuning (vectorizing, coalescing, prefetching, caching hints): memory is not the limiter",
    "no occupancy increase: the pipes are already busy; more warps only add contention",
]

PIPE_ADVICE = {
    "fma": "cut FP32 arithmetic: hoist loop invariants, strength-reduce, use mixed precision "
           "(bf16/fp16 tensor-core paths) where accuracy allows",
    "alu": "cut integer/logic work: precompute index arithmetic, replace / and % by shifts or "
           "multiplications by reciprocals, drop redundant comparisons",
    "xu": "cut special functions: use intrinsics (__expf, __logf, __sinf, rsqrtf) or tables "
          "where their accuracy suffices",
    "fp64": "move arithmetic to FP32 where precision allows",
    "lsu": "issue fewer load/store instructions: vectorize and reuse values in registers",
    "adu": "issue fewer barriers and branches (block-wide __syncthreads, indirect branches)",
    "tensor": "the tensor cores are saturated: the kernel is done unless the algorithm changes",
}


def check(ctx: KernelContext) -> Finding | None:
    cls = ctx.cls
    if cls is None or cls.kind != "compute" or cls.unit == "tensor":
        return None  # the tensor pipe has its own roof finding (tensor_core_bound)
    ev = list(cls.evidence)
    pipe = cls.unit
    if pipe and ctx.name_of(N.PIPE[pipe]):
        ev.append(ctx.ev(N.PIPE[pipe], "busiest SM pipe"))
    if ctx.name_of(N.ISSUE_ACTIVE):
        ev.append(ctx.ev(N.ISSUE_ACTIVE, "issue-limited when >= 90%"))
    advice = PIPE_ADVICE.get(pipe, "reduce the instruction count of the hot loop")
    if cls.at_roof:
        title = f"Compute at its roof ({cls.sm_pct:.0f}% SM throughput, {pipe or 'issue'}): reduce work"
        rec = (f"At roof: the SM already executes near its sustainable rate, so only doing less "
               f"work helps: {advice}.")
    else:
        title = f"Compute limits the kernel ({cls.sm_pct:.0f}% SM throughput, {pipe or 'issue'} pipe)"
        rec = f"Reduce the work on the busiest pipe: {advice}."
    return make(
        ctx, ID, "roof", title, confidence=0.85 if cls.at_roof else 0.7, evidence=ev,
        recommendation=rec,
        verify=verify_text(ctx, "smsp__inst_executed.sum should fall with the work removed, "
                                "sm__throughput staying high", None),
        not_when=("the instruction count is already minimal for the algorithm (check the SASS): "
                  "then only an algorithmic change or tensor cores help"),
        expected_gain=cls.headroom, at_roof=cls.at_roof, what_not_to_do=NOT_TO_DO,
        verify_plan={**time_plan(ctx, None, {"smsp__inst_executed.sum": "decrease"}),
                     "time_scales_with": "smsp__inst_executed.sum", "next_roof_gain": cls.next_roof_gain()},
    )
