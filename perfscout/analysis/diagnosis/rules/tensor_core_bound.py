"""tensor_core_bound: the tensor pipe (HMMA/GMMA/IMMA/DMMA) is the limiter.

Classification puts an MMA kernel here when its tensor pipe is the busiest unit relative
to its roof (classify.TENSOR_ROOF_PCT); wgmma's shared-memory operand traffic does not
compete with it (see classify). The title names the precision and instruction kind the
profile shows (``sm__ops_path_tensor_src_*``, ``sm__inst_executed_pipe_tensor_op_*``).
"""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import describe, mma_arch, mma_info
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

ID = "tensor_core_bound"
ROLE = "roof"
READS = {"tensor": N.TENSOR_PIPE, **{f"op_{k}": v for k, v in N.TENSOR_OP_INST.items()},
         "gmma_shared": N.GMMA_SHARED_INST, "tma_ld": N.TMA_LD_INST}
# Thresholds: classify.TENSOR_ROOF_PCT (95 %) x HIGH_FRACTION / AT_ROOF_MARGIN.

NOT_TO_DO = [
    ("no L1/shared-memory tuning: wgmma's shared-memory operand traffic is the tensor pipe's feed, "
     "not a separate bottleneck (float4 loads and register blocking do not apply to it)"),
    ("no occupancy tuning: MMA kernels keep one or two large CTAs per SM by design; their "
     "latency is hidden by pipeline stages, not by resident warps"),
    "no CUDA-core arithmetic tuning: the FMA/ALU pipes are not the limiter",
]


def check(ctx: KernelContext) -> Finding | None:
    cls = ctx.cls
    if cls is None or cls.kind != "compute" or cls.unit != "tensor":
        return None
    info = mma_info(ctx)
    ev = list(cls.evidence)
    for op in ("gmma", "hmma", "imma", "dmma"):
        if info.ops.get(op, 0.0) > 0:
            ev.append(ctx.ev(N.TENSOR_OP_INST[op], f"{op.upper()} instructions issued"))
    for name in info.precision_metrics[:2]:
        ev.append(ctx.ev((name,), "precision of the tensor operations"))
    what = describe(info)
    if cls.at_roof:
        title = f"Tensor cores at their roof ({cls.top_pct:.0f}% tensor-pipe active, {what}): reduce work"
        rec = ("At roof: the tensor pipe is busy nearly every cycle, so only less MMA work or a faster "
               "rate per operation helps: a lower input precision where accuracy allows (bf16 -> fp8 "
               "doubles the rate, tf32 -> bf16 doubles it), 2:4 structured sparsity, skipping blocks "
               "known to be zero (masks, padding), or fusing neighbours so the GEMM is not repeated.")
    else:
        title = f"Tensor cores limit the kernel ({cls.top_pct:.0f}% tensor-pipe active, {what})"
        rec = ("The tensor pipe is the busiest unit but idles "
               f"{max(0.0, 1 - cls.top_pct / 100):.0%} of the cycles: keep it fed (deeper "
               "TMA/cp.async pipelines, overlapping the epilogue or softmax with the next tile's MMA, "
               "tiles that divide the problem) before reducing MMA work; see the levers below.")
    return make(
        ctx, ID, "roof", title, confidence=0.85 if cls.at_roof else 0.7, evidence=ev,
        recommendation=rec,
        verify=verify_text(ctx, "the tensor op count (sm__ops_path_tensor_*) should fall with the "
                                "work removed while sm__pipe_tensor_cycles_active stays high", None),
        not_when=("the MMA count is already the minimum the problem needs at the precision the "
                  "results require: then the kernel is done"),
        expected_gain=cls.headroom, at_roof=cls.at_roof, what_not_to_do=NOT_TO_DO, arch=mma_arch(info, ctx),
        verify_plan={**time_plan(ctx, None, {info.tensor_metric or N.TENSOR_PIPE[0]: "steady"}),
                     "next_roof_gain": cls.next_roof_gain()},
    )
