"""Nsight Compute's own rules, read next to the engine's findings ("ncu says").

Guided Analysis ranks its rules by estimated speedup. Several of them describe a symptom
(pipes idle, occupancy below theoretical) or fire on almost every kernel (L2
compression); the engine records what ncu ranked first, whether it agrees, and if not,
why its message is not the thing to fix.

A pure function of the profile: a rule that fires where following it gains nothing (e.g.
L2 compression on ordinary buffers) arrives already marked by the ncu parser
(``low_value_reason`` on the rule record), so nothing here reads the parser's tables.
"""

from __future__ import annotations

from typing import Any

#: Why a disagreeing ncu rule is a symptom here rather than the cause.
WHY_NOT = {
    "HighPipeUtilization": ("'compute pipelines under-utilized' is what any memory-, latency- or "
                            "launch-limited kernel looks like from the SM: a symptom of the primary "
                            "finding, not a separate problem"),
    "IssueSlotUtilization": "idle issue slots are the symptom of warps waiting; the primary says on what",
    "CPIStall": "the stall reason names where warps wait; the primary names why and what to change",
    "AchievedOccupancy": "achieved below theoretical occupancy follows from the primary limiter",
    "WorkloadImbalance": "a few percent of imbalance between units does not limit this kernel",
    "FPInstructions": "fusing FADD/FMUL pairs into FMA matters only when the FP32 pipe limits the kernel",
    "SOLBottleneck": "a restatement of the speed-of-light classification",
}


def ncu_rule_to_id(rule: str, message: str) -> str | None:
    """The taxonomy id an ncu rule message points at (None: it names no bottleneck)."""
    m = message.lower()
    if rule in ("UncoalescedGlobalAccess", "MemoryCacheAccessPattern"):
        return "local_memory" if "local" in m else "uncoalesced_global_access"
    if rule in ("UncoalescedSharedAccess", "SharedMemoryConflicts"):
        return "shared_bank_conflicts"
    if rule == "ThreadDivergence":
        return "warp_divergence"
    if rule == "TheoreticalOccupancy":
        if "register" in m:
            return "low_occupancy_registers"
        if "shared memory" in m:
            return "low_occupancy_shared_memory"
        return "low_occupancy_block_size"
    if rule in ("AchievedOccupancy", "WorkloadImbalance"):
        return "tail_effect"  # imbalance between SMs / the last wave: the nearest id
    if rule == "LaunchConfiguration":
        return "small_grid" if "less than the gpu" in m or "too small" in m else "tail_effect"
    if rule == "SOLBottleneck":
        if "too small" in m:
            return "small_grid"
        if "low compute throughput" in m:
            return "latency_bound"
        if "compute is more heavily" in m:
            return "compute_bound"
        if "memory is more heavily" in m:
            for key, rid in (("dram", "dram_bandwidth_bound"), ("l2", "l2_bandwidth_bound"),
                             ("l1", "l1_bandwidth_bound")):
                if f"the {key} bottleneck" in m:
                    return rid
            return "memory_bound"
        return None
    if rule == "HighPipeUtilization":
        return "latency_bound" if "under-utilized" in m else "compute_bound"
    if rule == "IssueSlotUtilization":
        return "latency_bound"
    if rule == "CPIStall":
        if "barrier" in m:
            return "barrier_stalls"
        if "mio" in m:
            return "shared_bank_conflicts"
        if "execution pipe" in m or "math pipe" in m:
            return "compute_bound"
        if "l1tex" in m or "lg)" in m or "scoreboard" in m or "after exit" in m:
            return "latency_bound"
        return None
    if rule == "FPInstructions":
        return "compute_bound"
    if rule == "SOLFPRoofline":
        return "fp64_bound" if "fp64" in m and "achieved 0% of this device's fp64" not in m else None
    return None  # MemoryL2Compression, PMSamplingData, ...


def ncu_top_rule(rules: list[dict[str, Any]]) -> dict[str, Any] | None:
    """ncu's highest-ranked OPT rule (largest estimated speedup) of one launch."""
    opt = [r for r in rules if r.get("type") == "OPT" and r.get("estimated_speedup_pct") is not None]
    return max(opt, key=lambda r: r["estimated_speedup_pct"]) if opt else None


def ncu_says(rules: list[dict[str, Any]], primary_id: str | None) -> dict[str, Any] | None:
    top = ncu_top_rule(rules)
    if top is None:
        return None
    maps_to = ncu_rule_to_id(top["rule"], top.get("message", ""))
    agrees = maps_to is not None and maps_to == primary_id
    out = {"rule": top["rule"], "estimated_speedup_pct": top["estimated_speedup_pct"],
           "message": top.get("message", "")[:300], "maps_to": maps_to, "agrees": agrees}
    if not agrees:
        out["why_not_primary"] = (top.get("low_value_reason") or WHY_NOT.get(top["rule"])
                                  or "it points at a different unit than the measured limiter")
    return out
