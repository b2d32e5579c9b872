"""cpu_frontend_bound: TopDown level-1/2 share 'frontend' is high (Frontend-bound)."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import TOPDOWN, CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make
from perfscout.state.records import Finding

ID = "cpu_frontend_bound"
ROLE = "cause"
READS = {"frontend": TOPDOWN["frontend"]}

#: Intel TMA flags a frontend share above ~15-20 % (instruction fetch/decode starves the pipeline).
SHARE_MIN = 0.20


def check(ctx: CpuContext) -> Finding | None:
    share = ctx.share("frontend")
    if share is None or share < SHARE_MIN:
        return None
    return make(
        ctx, ID, "cause", f"Frontend-bound: {share:.0%} of pipeline slots (TopDown)",
        confidence=0.75, evidence=[ctx.ev(*TOPDOWN["frontend"], threshold=f">= {SHARE_MIN:.0%}")],
        recommendation="Shrink and straighten the hot code: profile-guided optimisation (-fprofile-use), fewer indirect calls/virtual dispatch in the hot loop, avoid excessive inlining/unrolling that bloats the instruction footprint, and link-time layout (BOLT).",
        verify="the frontend share should fall; perf stat -M TopdownL1 -- <your program>",
        not_when="another TopDown category is larger: fix that one first",
        expected_gain=share,
    )
