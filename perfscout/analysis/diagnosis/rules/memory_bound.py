"""memory_bound: the memory SOL is high but the profile has no per-unit breakdown.

With ``--set full`` the DRAM/L2/L1 rules name the unit; this finding appears when a
profile carries only the speed-of-light summary (e.g. ``--section SpeedOfLight``).
"""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.analysis.diagnosis.rules._roof import MEMORY_NOT_TO_DO
from perfscout.state.records import Finding

ID = "memory_bound"
ROLE = "roof"
READS = {"memory": N.MEM_SOL, "sm": N.SM_SOL}


def check(ctx: KernelContext) -> Finding | None:
    cls = ctx.cls
    if cls is None or cls.kind != "memory" or cls.unit != "memory":
        return None
    return make(
        ctx, ID, "roof", f"Memory system limits the kernel ({cls.top_pct:.0f}% of peak); unit unknown",
        confidence=0.6, evidence=list(cls.evidence),
        recommendation=("Reduce bytes moved (narrower types, fusion, reuse in shared memory). "
                        "Re-profile with --set full (MemoryWorkloadAnalysis) to see whether DRAM, L2 "
                        "or L1 is the limiter before restructuring."),
        verify=verify_text(ctx, "gpu__compute_memory_throughput should stay high while time falls", None),
        not_when="the profile lacks the memory breakdown: the right fix depends on which unit it is",
        expected_gain=cls.headroom, at_roof=cls.at_roof, what_not_to_do=MEMORY_NOT_TO_DO,
        verify_plan=time_plan(ctx, None, {}),
    )
