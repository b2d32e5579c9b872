"""cpu_backend_bound: TopDown level-1/2 share 'backend' is high (Backend-bound)."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import TOPDOWN, CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make
from perfscout.state.records import Finding

ID = "cpu_backend_bound"
ROLE = "cause"
READS = {"backend": TOPDOWN["backend"]}

#: Intel TMA flags a backend share above ~20-30 % (execution units or memory cannot accept more micro-ops).
SHARE_MIN = 0.30


def check(ctx: CpuContext) -> Finding | None:
    share = ctx.share("backend")
    if share is None or share < SHARE_MIN:
        return None
    return make(
        ctx, ID, "cause", f"Backend-bound: {share:.0%} of pipeline slots (TopDown)",
        confidence=0.75, evidence=[ctx.ev(*TOPDOWN["backend"], threshold=f">= {SHARE_MIN:.0%}")],
        recommendation="Find whether memory (see cpu_memory_bound / cache misses) or execution ports are the limiter; for ports, vectorize (SIMD) and break dependency chains; for memory, tile loops and access data sequentially.",
        verify="the backend share should fall; perf stat -M TopdownL1 -- <your program>",
        not_when="another TopDown category is larger: fix that one first",
        expected_gain=share,
    )
