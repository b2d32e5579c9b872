"""Shared pieces of the MMA (tensor-core) lever findings."""

from __future__ import annotations

from perfscout.analysis.diagnosis.classify import TENSOR_ROOF_PCT
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.mma import MmaInfo, mma_info


def mma_kernel(ctx: KernelContext) -> MmaInfo | None:
    """The kernel's MMA facts, or None when it is no tensor-core kernel."""
    info = mma_info(ctx)
    return info if info.is_mma else None


def tensor_headroom(info: MmaInfo) -> float:
    """Fraction of the time the tensor pipe could still gain before its roof."""
    if info.tensor_pct is None:
        return 0.0
    return max(0.0, 1.0 - info.tensor_pct / TENSOR_ROOF_PCT)


def tile_text(info: MmaInfo) -> str:
    if info.tile is None:
        return ""
    m, n, k = info.tile
    stages = f", {info.stages} stages" if info.stages else ""
    return f" (tile {m}x{n}, K-step {k}{stages}, from the kernel name)"
