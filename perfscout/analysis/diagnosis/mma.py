"""What a profile says about a kernel's tensor-core (MMA) work, read once per kernel.

Recognised from the profile alone, never from the kernel name by itself:
- *MMA kernel*: the tensor pipe is busy (``sm__pipe_tensor_cycles_active``) or tensor
  instructions were issued (``sm__inst_executed_pipe_tensor_op_{hmma,gmma,imma,dmma}``);
- *wgmma* (Hopper warpgroup MMA): GMMA instructions issued, and whether they read operands
  from shared memory (``smsp__sass_inst_executed_op_shared_gmma``): then the kernel's
  L1/shared traffic is the tensor pipe's operand feed, not an L1 problem;
- *TMA* (bulk tensor copies): TMA load instructions/bytes. A TMA pipeline keeps its bytes in
  flight with shared-memory stages, not with resident warps, so occupancy is not its lever;
- *precision*: which ``sm__ops_path_tensor_src_<in>[_dst_<acc>]`` counters are non-zero;
- *tile shape*: parsed from CUTLASS/cuBLAS-style names (``..._256x128_64x4_...``) only to
  word the advice; every finding still cites profile metrics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from math import isfinite

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext

#: With per-precision tensor op counters in the profile (sm_80+ ``--set full``), an MMA
#: kernel is one whose counters are non-zero: the pipe-activity metric alone is not proof,
#: since FP32-heavy kernels show 3-5 % "tensor" pipe activity on Hopper with no tensor op
#: at all (the planted FMA control: 5.2 %). Without those counters, a tensor pipe busier
#: than this marks an MMA kernel: no CUDA-core kernel measured here comes near it.
MMA_PIPE_MIN_PCT = 20.0

#: ``<M>x<N>_<K>x<stages>`` as CUTLASS, cuBLAS (sm90_xmma, nvjet) and cuDNN name their tiles.
_TILE = re.compile(r"(?<![0-9])(\d{2,3})x(\d{1,3})_(\d{2,3})x(\d{1,2})(?![0-9])")
_TILE_ONLY = re.compile(r"tilesize(\d{2,3})x(\d{1,3})x(\d{2,3})")
#: Ampere cuBLAS style: ``ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn``.
_TILE_STAGES = re.compile(r"(?<![0-9])(\d{2,3})x(\d{2,3})_.*?stages_(\d{2,3})x(\d{1,2})(?![0-9])")
_STAGES = re.compile(r"stage(\d{1,2})")


@dataclass
class MmaInfo:
    is_mma: bool = False
    tensor_pct: float | None = None  # tensor pipe, % of peak over active cycles
    tensor_metric: str | None = None
    ops: dict[str, float] = field(default_factory=dict)  # hmma/gmma/imma/dmma -> % of issue peak
    wgmma: bool = False
    wgmma_smem_operands: bool = False
    tma: bool = False
    precisions: list[str] = field(default_factory=list)  # e.g. ["bf16->fp32"], from metric names
    precision_metrics: list[str] = field(default_factory=list)
    tile: tuple[int, int, int] | None = None  # (M, N, K) of one CTA's tile, from the name
    stages: int | None = None

    @property
    def kind(self) -> str:
        """'wgmma', 'mma.sync' (HMMA/IMMA/DMMA) or '' when not an MMA kernel."""
        if not self.is_mma:
            return ""
        return "wgmma" if self.wgmma else "mma.sync"


@lru_cache(maxsize=64)
def _op_counter_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """The per-precision tensor op counters (``sm__ops_path_tensor_src_*.sum``) among a
    profile's metric names. Cached on the whole name tuple: the launches of one profile
    share their columns, so ~2,200 names are scanned once per profile, not per launch."""
    return tuple(n for n in names if n.startswith(N.TENSOR_OPS_PREFIX))


def _precisions(ctx: KernelContext, counters: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Input->accumulator precisions whose tensor op counters are non-zero."""
    out, used = [], []
    metrics = ctx.kernel.metrics
    for name in counters:
        if not name.endswith(".sum"):
            continue
        m = metrics[name]
        if not isinstance(m.value, (int, float)) or not isfinite(m.value) or m.value <= 0:
            continue
        spec = name[len(N.TENSOR_OPS_PREFIX):-len(".sum")]
        src, _, dst = spec.partition("_dst_")
        src = src.replace("_sparsity_off", "").replace("_sparsity_on", " (2:4 sparse)")
        dst = dst.replace("_sparsity_off", "").replace("_sparsity_on", " (2:4 sparse)")
        out.append(f"{src}->{dst}" if dst else src)
        used.append(name)
    return out, used


def _tile(name: str) -> tuple[tuple[int, int, int] | None, int | None]:
    m = _TILE.search(name)
    if m:
        return (int(m.group(1)), int(m.group(2)), int(m.group(3))), int(m.group(4))
    m = _TILE_STAGES.search(name)
    if m:
        return (int(m.group(1)), int(m.group(2)), int(m.group(3))), int(m.group(4))
    m = _TILE_ONLY.search(name)
    if m:
        st = _STAGES.search(name)
        return (int(m.group(1)), int(m.group(2)), int(m.group(3))), int(st.group(1)) if st else None
    return None, None


def mma_info(ctx: KernelContext) -> MmaInfo:
    """Read (once; cached on the context) what the profile says about tensor-core work."""
    cached = getattr(ctx, "_mma_info", None)
    if cached is not None:
        return cached
    info = MmaInfo()
    info.tensor_metric = ctx.name_of(N.TENSOR_PIPE)
    info.tensor_pct = ctx.val(N.TENSOR_PIPE)
    for op, names in N.TENSOR_OP_INST.items():
        v = ctx.val(names)
        if v is not None:
            info.ops[op] = v
    info.wgmma = info.ops.get("gmma", 0.0) > 0
    info.wgmma_smem_operands = (ctx.val(N.GMMA_SHARED_INST) or 0.0) > 0
    info.tma = (ctx.val(N.TMA_LD_INST) or 0.0) > 0 or (ctx.val(N.TMA_LD_BYTES) or 0.0) > 0
    counters = _op_counter_names(tuple(ctx.kernel.metrics))
    info.precisions, info.precision_metrics = _precisions(ctx, counters)
    if counters:
        info.is_mma = bool(info.precisions) or info.wgmma
    else:
        info.is_mma = info.tensor_pct is not None and info.tensor_pct >= MMA_PIPE_MIN_PCT
    if info.is_mma:
        info.tile, info.stages = _tile(ctx.kernel.name)
    ctx._mma_info = info  # type: ignore[attr-defined]
    return info


def mma_arch(info: MmaInfo, ctx: KernelContext) -> str:
    """The ``arch`` a tensor-core finding applies to: what the profile shows in use."""
    if info.wgmma or info.tma:
        return f"{ctx.arch.sm} (wgmma/TMA: sm_90+)"
    return f"{ctx.arch.sm} (tensor cores: sm_70+)"


def describe(info: MmaInfo) -> str:
    """'bf16->fp32 wgmma, TMA-fed' and the like, for titles."""
    text = " ".join(p for p in ("/".join(info.precisions), info.kind) if p)
    return text + (", TMA-fed" if info.tma else "")
