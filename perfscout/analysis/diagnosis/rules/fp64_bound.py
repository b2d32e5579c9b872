"""fp64_bound: the FP64 pipe is the busiest pipe of a compute-bound kernel."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

ID = "fp64_bound"
ROLE = "cause"
READS = {"fp64": N.PIPE["fp64"], "sm": N.SM_SOL}

#: The FP64 pipe runs >= 60 % of its peak: the same speed-of-light convention as units.
FP64_PIPE_MIN_PCT = 60.0


def check(ctx: KernelContext) -> Finding | None:
    cls = ctx.cls
    if cls is None or cls.kind != "compute" or cls.unit != "fp64":
        return None
    pipe = ctx.val(N.PIPE["fp64"])
    if pipe is None or pipe < FP64_PIPE_MIN_PCT:
        return None
    ratio = ctx.arch.fp64_to_fp32
    known = ratio is not None
    r = ratio if known else 0.5  # unknown chip: assume the best FP64 ratio (smallest gain)
    gain = (1.0 - r) * pipe / 100.0
    ev = [ctx.ev(N.PIPE["fp64"], f">= {FP64_PIPE_MIN_PCT:.0f}% and busiest pipe")] + cls.evidence[:1]
    chip = ctx.kernel.device or "this chip"
    ratio_txt = (f"FP64 runs at 1/{1 / r:.0f} of FP32 on {chip}" if known
                 else "the FP64:FP32 rate of this chip is unknown (assumed 1:2, the best case)")
    return make(
        ctx, ID, "cause", f"FP64-bound: FP64 pipe at {pipe:.0f}% ({ratio_txt})",
        confidence=0.8 if known else 0.55, evidence=ev,
        recommendation=(f"Compute in FP32 where precision allows ({ratio_txt}): keep FP64 only for "
                        "accumulations that need it (or use compensated/Kahan FP32 sums), and check "
                        "that no literal (1.0 instead of 1.0f) silently promotes FP32 code to FP64."),
        verify=verify_text(ctx, "sm__pipe_fp64_cycles_active should drop to ~0 and the FMA pipe take "
                                "the work", gain),
        not_when="the algorithm needs FP64 accuracy (ill-conditioned sums, long accumulations)",
        expected_gain=gain, arch=f"fp64:fp32 = {r:g}" + ("" if known else " (assumed)"),
        verify_plan=time_plan(ctx, gain, {ctx.name_of(N.PIPE["fp64"]) or "": "decrease"}),
    )
