"""low_occupancy_registers: latency-bound kernel whose resident warps are capped by registers per thread."""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._occupancy import occupancy_finding
from perfscout.state.records import Finding

ID = "low_occupancy_registers"
ROLE = "cause"
READS = {"theoretical": N.OCC_THEORETICAL, "achieved": N.OCC_ACHIEVED, **N.OCC_LIMIT}
# Thresholds: _occupancy.THEORETICAL_MAX_PCT and ACHIEVED_OF_THEORETICAL.


def check(ctx: KernelContext) -> Finding | None:
    return occupancy_finding(ctx, ID)
