"""cpu_memory_bound: TopDown share 'memory' is high (one row of _topdown.TOPDOWN_RULES)."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.rules._topdown import reads, topdown_finding
from perfscout.state.records import Finding

ID = "cpu_memory_bound"
ROLE = "cause"
READS = reads(ID)
# Threshold: TOPDOWN_RULES[ID].share_min, perf's own flag level (see _topdown's docstring).


def check(ctx: CpuContext) -> Finding | None:
    return topdown_finding(ctx, ID)
