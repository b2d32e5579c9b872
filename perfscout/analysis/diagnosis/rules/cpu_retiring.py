"""cpu_retiring: most pipeline slots retire useful work: the core is at its roof."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import TOPDOWN, CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make
from perfscout.state.records import Finding

ID = "cpu_retiring"
ROLE = "roof"
READS = {"retiring": TOPDOWN["retiring"]}

#: Intel TMA: a retiring share above ~50-70 % means the pipeline is used well; the only
#: lever left is fewer instructions (vectorization, better algorithms).
SHARE_MIN = 0.50

NOT_TO_DO = ["no cache or branch tuning for its own sake: slots already retire useful work",
             "no more threads per core (SMT) expecting gains: the pipeline is full"]


def check(ctx: CpuContext) -> Finding | None:
    share = ctx.share("retiring")
    if share is None or share < SHARE_MIN:
        return None
    return make(
        ctx, ID, "roof", f"Retiring {share:.0%} of slots: at the core's roof, reduce work",
        confidence=0.75, evidence=[ctx.ev(*TOPDOWN["retiring"], threshold=f">= {SHARE_MIN:.0%}")],
        recommendation=("At roof: do fewer instructions. Vectorize the hot loop (check the compiler's "
                        "-fopt-info-vec / -Rpass=loop-vectorize), use wider SIMD (-march=native), "
                        "and look for algorithmic savings."),
        verify="instructions should fall while IPC stays; perf stat -e instructions,cycles -- <your program>",
        not_when="the instructions are already vectorized at full width",
        expected_gain=1.0 - share, what_not_to_do=NOT_TO_DO,
    )
