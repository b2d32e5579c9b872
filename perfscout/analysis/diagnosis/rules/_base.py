"""Shared helpers for rule modules.

A rule module defines ``ID`` (a DESIGN.md taxonomy id), ``ROLE``, ``READS`` (the metric
alternatives it reads, for documentation and the coverage test), named threshold
constants with a comment saying why, and ``check(ctx) -> Finding | None``.

Roles decide ranking in the engine:
- ``roof``: which unit limits the kernel (dram/l2/l1/memory/compute_bound, latency_bound);
  its expected gain is the headroom to that unit's roof.
- ``cause``: a specific, fixable reason (uncoalesced access, bank conflicts, ...); the
  primary finding is the cause with the largest expected gain, else the roof finding.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.state.records import Evidence, Finding

#: Stall reasons that mean "waiting on the memory system" (global/local/texture loads,
#: the LSU queue, shared-memory/MIO queue, stores draining at exit).
MEMORY_STALLS = ("long_scoreboard", "lg_throttle", "mio_throttle", "short_scoreboard",
                 "drain", "tex_throttle")


def make(ctx: KernelContext, rule_id: str, role: str, title: str, *, confidence: float,
         evidence: list[Evidence], recommendation: str, verify: str, not_when: str,
         expected_gain: float | None, arch: str = "any",
         what_not_to_do: list[str] | None = None, verify_plan: dict | None = None,
         at_roof: bool = False) -> Finding:
    gain = None if expected_gain is None else round(max(0.0, min(0.99, expected_gain)), 3)
    cls = ctx.cls
    extra = {
        "role": role,
        "class": cls.kind if cls else "",
        "unit": cls.unit if cls else "",
        "at_roof": at_roof,
        "what_not_to_do": what_not_to_do or [],
        "verify_plan": verify_plan or {},
    }
    return Finding(id=rule_id, title=title, confidence=round(confidence, 2), evidence=evidence,
                   recommendation=recommendation, verify=verify, not_when=not_when,
                   expected_gain=gain, arch=arch, extra=extra)


def time_plan(ctx: KernelContext, gain: float | None, metrics: dict[str, str]) -> dict:
    """What a verify run should see: time change and named metrics moving."""
    plan: dict = {"metrics": metrics}
    if gain is not None:
        plan["time_change"] = -round(gain, 3)
    dur = ctx.name_of(N.DURATION)
    if dur:
        plan["time_metric"] = dur
    return plan


def verify_text(ctx: KernelContext, what: str, gain: float | None) -> str:
    t = (f"gpu__time_duration should fall by about {gain:.0%}" if gain is not None
         else "gpu__time_duration should fall")
    return f"{what}; {t}. Measure: {ctx.ncu_command()}"


def memory_stall_share(ctx: KernelContext) -> tuple[float, list[str]]:
    """Share of warp cycles stalled on the memory system (0 when stalls are absent)."""
    cycles = ctx.stall_cycles()
    total = sum(cycles.values())
    if total <= 0:
        return 0.0, []
    share = sum(cycles.get(r, 0.0) for r in MEMORY_STALLS) / total
    used = [ctx.name_of(N.stall(r)) for r in cycles]
    return share, [u for u in used if u]


def memory_time_share(ctx: KernelContext) -> tuple[float, list[str]]:
    """Fraction of the kernel's time that memory traffic accounts for.

    Memory-bound: all of it (time scales with traffic). Otherwise: the share of warp
    cycles stalled on the memory system.
    """
    if ctx.cls is not None and ctx.cls.kind == "memory":
        return 1.0, []
    return memory_stall_share(ctx)
