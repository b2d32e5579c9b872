"""Architecture facts the rules gate their advice on.

Compute capability comes from the profile (ncu's ``CC`` column). Per-chip figures (FP64
rate relative to FP32) come from the platform spec table when the caller passes one
(``platform["fp64_to_fp32"]``), else from the small vendor-datasheet table below; when
neither knows the chip the rule says so instead of guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: FP64:FP32 peak ratio by chip name, from the vendors' datasheets (non-tensor rates).
FP64_TO_FP32 = (
    (r"\bH(100|200|800)\b|\bGH200\b", 0.5),  # Hopper SXM/PCIe: 34 vs 67 TFLOP/s
    (r"\bB(100|200)\b|\bGB200\b", 0.5),
    (r"\bA100\b|\bA800\b|\bA30\b", 0.5),  # GA100: 9.7 vs 19.5
    (r"\bV100\b", 0.5),
    (r"\bP100\b", 0.5),
    (r"\bA(10|40|2|16)\b|\bL(4|40S?|20)\b|RTX|GeForce|\bT4\b|\bA6000\b", 1 / 64),  # GA10x/AD10x/TU104
)


@dataclass(frozen=True)
class Arch:
    """What the rules need to know about the chip a profile came from."""

    cc: tuple[int, int] | None  # compute capability, None when the profile lacks it
    device: str = ""
    fp64_to_fp32: float | None = None  # None: unknown chip, rules must not guess

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}" if self.cc else "sm_?"

    def at_least(self, major: int, minor: int = 0) -> bool:
        """True when the chip is known to be at least ``major.minor``."""
        return self.cc is not None and self.cc >= (major, minor)


def parse_cc(text: str) -> tuple[int, int] | None:
    m = re.match(r"^\s*(\d+)\.(\d+)\s*$", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def arch_for(device: str, cc: str, platform: dict | None = None) -> Arch:
    ratio = None
    if platform and isinstance(platform.get("fp64_to_fp32"), (int, float)):
        ratio = float(platform["fp64_to_fp32"])
    else:
        for pattern, r in FP64_TO_FP32:
            if re.search(pattern, device or ""):
                ratio = r
                break
    return Arch(cc=parse_cc(cc), device=device, fp64_to_fp32=ratio)


def async_copy_advice(arch: Arch) -> str:
    """The bulk-copy advice the chip supports (TMA sm_90+, cp.async sm_80+, else plain loads)."""
    if arch.at_least(9, 0):
        return ("stage tiles with TMA (cp.async.bulk / cuda::memcpy_async with a barrier) so "
                "copies overlap compute")
    if arch.at_least(8, 0):
        return "stage tiles with cp.async (cuda::memcpy_async / pipeline) so copies overlap compute"
    return "stage tiles with plain coalesced loads into shared memory, double-buffered"
