"""mma_precision: the precision decides which arithmetic rate applies (advice, never primary).

Two cases the profile shows: a GEMM-like kernel running on CUDA-core FFMA with the tensor
pipe idle (full-precision fp32: TF32/bf16 tensor cores run ~7x/~15x faster on sm_80+), and
a tf32 tensor kernel (bf16 inputs double the rate and halve the operand bytes). Changing
precision changes results, so this is advice the caller must accept, not a fix.
"""

from __future__ import annotations

import re

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import mma_info
from perfscout.analysis.diagnosis.rules._base import make
from perfscout.state.records import Finding

ID = "mma_precision"
ROLE = "advice"
READS = {"tensor": N.TENSOR_PIPE, "fma": N.PIPE["fma"]}

#: CUTLASS / cuBLAS / cuDNN names of (implicit) GEMM kernels.
GEMM_NAME = re.compile(r"gemm|xmma|cutlass|nvjet|implicit_gemm|sgemm|hgemm", re.IGNORECASE)
#: An FMA pipe this busy with an idle tensor pipe: the GEMM runs on CUDA cores.
FMA_BUSY_PCT = 50.0


def check(ctx: KernelContext) -> Finding | None:
    if not ctx.arch.at_least(8, 0):
        return None  # TF32 and bf16 tensor cores start with sm_80
    info = mma_info(ctx)
    fma = ctx.val(N.PIPE["fma"])
    if not info.is_mma and fma is not None and fma >= FMA_BUSY_PCT and GEMM_NAME.search(ctx.kernel.name):
        ev = [ctx.ev(N.PIPE["fma"], f">= {FMA_BUSY_PCT:.0f}%: the GEMM runs on FFMA")]
        if ctx.name_of(N.TENSOR_PIPE):
            ev.append(ctx.ev(N.TENSOR_PIPE, "tensor cores idle"))
        title = "fp32 GEMM on CUDA cores: TF32 or bf16 tensor cores would run it ~7-15x faster"
        rec = ("If the accuracy allows, let the GEMM use tensor cores: TF32 (10-bit mantissa, fp32 range; "
               "torch.backends.cuda.matmul.allow_tf32 = True or cublasSetMathMode(CUBLAS_TF32_TENSOR_OP_MATH)) "
               "or bf16 inputs with fp32 accumulation; check the error against a float64 reference first.")
    elif info.is_mma and any(p.startswith("tf32") for p in info.precisions):
        name = next(n for n, p in zip(info.precision_metrics, info.precisions, strict=True) if p.startswith("tf32"))
        ev = [ctx.ev((name,), "tf32 tensor operations")]
        title = "tf32 tensor-core GEMM: bf16 inputs would double the MMA rate and halve operand bytes"
        rec = ("If the accuracy allows, store the operands in bf16 (fp32 accumulation stays): the tensor "
               "pipe runs bf16 at twice the tf32 rate; fp8 (with per-tensor scales) doubles it again.")
    else:
        return None
    return make(ctx, ID, "advice", title, confidence=0.6, evidence=ev, recommendation=rec,
                verify="Compare results against a higher-precision reference before keeping the change; "
                       "then time both (gpu__time_duration.sum).",
                not_when="the results need full fp32 (or tf32) precision in the products",
                expected_gain=None, arch="sm_80+")
