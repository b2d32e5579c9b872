"""The five TopDown findings: one rule, five rows of constants.

TopDown (Yasin, "A Top-Down Method for Performance Analysis and Counters Architecture",
ISPASS 2014; Intel's TMA metrics, perf's ``-M TopdownL1`` / ``tma_*``) splits the
pipeline's issue slots into frontend-bound, bad speculation, backend-bound (with
memory-bound as its level-2 part) and retiring. Each finding reads one share
(``cpu_context.TOPDOWN`` names its spellings across perf versions) and fires at the level
where perf itself flags that category: the ``MetricThreshold`` of Intel's TMA metrics as
perf ships them (tools/perf/pmu-events/arch/x86/<cpu>/*metrics.json, performance cores:
``tma_frontend_bound > 0.15``, ``tma_bad_speculation > 0.15``, ``tma_backend_bound > 0.2``,
``tma_memory_bound > 0.2``, ``tma_retiring > 0.7``). perf prints the same shares on AMD
(``frontend_bound`` ... from its pipeline metrics), read with the same levels.

The first four are causes (the share of slots they waste is the most a fix can win);
retiring is the roof (the unused ``1 - share`` is the headroom, and the advice is to do
fewer instructions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfscout.analysis.diagnosis.cpu_context import TOPDOWN, CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make
from perfscout.state.records import Finding


@dataclass(frozen=True)
class TopDownRule:
    key: str  # the TopDown share read (cpu_context.TOPDOWN)
    role: str  # "cause" or "roof"
    share_min: float  # flag level, a fraction of slots: perf's MetricThreshold (module docstring)
    label: str
    recommendation: str
    not_when: str = "another TopDown category is larger: fix that one first"
    what_not_to_do: list[str] = field(default_factory=list)


TOPDOWN_RULES = {
    "cpu_frontend_bound": TopDownRule(
        "frontend", "cause", 0.15, "Frontend-bound",
        "Shrink and straighten the hot code: profile-guided optimisation (-fprofile-use), fewer "
        "indirect calls/virtual dispatch in the hot loop, avoid excessive inlining/unrolling that "
        "bloats the instruction footprint, and link-time layout (BOLT)."),
    "cpu_bad_speculation": TopDownRule(
        "bad_speculation", "cause", 0.15, "Bad speculation",
        "Make branches predictable or branchless (see cpu_branch_misses), and look for machine "
        "clears (memory ordering conflicts, self-modifying code, 4K aliasing)."),
    "cpu_backend_bound": TopDownRule(
        "backend", "cause", 0.20, "Backend-bound",
        "Find whether memory (see cpu_memory_bound / cache misses) or execution ports are the "
        "limiter; for ports, vectorize (SIMD) and break dependency chains; for memory, tile loops "
        "and access data sequentially."),
    "cpu_memory_bound": TopDownRule(
        "memory", "cause", 0.20, "Memory-bound",
        "Reduce cache misses and bytes: tile for cache reuse, use narrower types, access "
        "sequentially, and prefetch; if DRAM bandwidth is saturated, only fewer bytes help."),
    "cpu_retiring": TopDownRule(
        "retiring", "roof", 0.70, "Retiring",
        "At roof: do fewer instructions. Vectorize the hot loop (check the compiler's "
        "-fopt-info-vec / -Rpass=loop-vectorize), use wider SIMD (-march=native), and look for "
        "algorithmic savings.",
        not_when="the instructions are already vectorized at full width",
        what_not_to_do=["no cache or branch tuning for its own sake: slots already retire useful work",
                        "no more threads per core (SMT) expecting gains: the pipeline is full"]),
}


def reads(rule_id: str) -> dict[str, tuple[str, ...]]:
    """The ``READS`` of one TopDown rule module."""
    key = TOPDOWN_RULES[rule_id].key
    return {key: TOPDOWN[key]}


def topdown_finding(ctx: CpuContext, rule_id: str) -> Finding | None:
    r = TOPDOWN_RULES[rule_id]
    share = ctx.share(r.key)
    if share is None or share < r.share_min:
        return None
    if r.role == "roof":
        title = f"{r.label} {share:.0%} of slots: at the core's roof, reduce work"
        verify = "instructions should fall while IPC stays; perf stat -e instructions,cycles -- <your program>"
        gain = 1.0 - share
    else:
        title = f"{r.label}: {share:.0%} of pipeline slots (TopDown)"
        verify = f"the {r.key} share should fall; perf stat -M TopdownL1 -- <your program>"
        gain = share
    return make(
        ctx, rule_id, r.role, title, confidence=0.75,
        evidence=[ctx.ev(*TOPDOWN[r.key], threshold=f">= {r.share_min:.0%}")],
        recommendation=r.recommendation, verify=verify, not_when=r.not_when,
        expected_gain=gain, what_not_to_do=list(r.what_not_to_do),
    )
