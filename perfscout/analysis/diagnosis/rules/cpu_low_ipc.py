"""cpu_low_ipc: instructions per cycle far below what the core can retire."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make, perf_cmd
from perfscout.state.records import Finding

ID = "cpu_low_ipc"
ROLE = "roof"
READS = {"instructions": ("instructions",), "cycles": ("cycles",)}

#: Current x86 and Arm server cores retire 4-8 instructions per cycle; below 1.0 the
#: core waits most cycles (memory, branches, dependencies): worth finding out which.
IPC_LOW = 1.0
#: A practical sustained IPC for well-tuned scalar code (~half the retire width of 4-wide).
IPC_GOOD = 2.0


def check(ctx: CpuContext) -> Finding | None:
    ins, cyc = ctx.val("instructions"), ctx.val("cycles")
    if not ins or not cyc:
        return None
    ipc = ins / cyc
    if ipc >= IPC_LOW:
        return None
    gain = 1.0 - ipc / IPC_GOOD
    return make(
        ctx, ID, "roof", f"Low IPC: {ipc:.2f} instructions per cycle",
        confidence=0.7,
        evidence=[ctx.derived("ipc", ipc, [ctx.name_of("instructions"), ctx.name_of("cycles")],
                              "inst/cycle", f"< {IPC_LOW}"),
                  ctx.ev("instructions"), ctx.ev("cycles")],
        recommendation=("The core mostly waits: check the cache and branch findings below; make "
                        "the hot loop's data access sequential (prefetch-friendly), break long "
                        "dependency chains (several accumulators), and keep working sets in cache."),
        verify=f"IPC should rise towards {IPC_GOOD}; {perf_cmd('instructions,cycles')}",
        not_when="the program is I/O- or lock-bound (then cycles are not the bottleneck)",
        expected_gain=gain,
    )
