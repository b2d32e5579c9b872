"""The memory-roof findings share one shape: which unit, how close, what (not) to do."""

from __future__ import annotations

from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

#: What would waste effort on a memory-bound kernel (the SM is not the limiter).
MEMORY_NOT_TO_DO = [
    "no compute tuning (fast-math, FMA contraction, more ILP in arithmetic): the SM pipes are not the limiter",
    "no occupancy tuning for its own sake: enough requests are already in flight to keep this unit busy",
]


def memory_roof_finding(ctx: KernelContext, rule_id: str, unit_label: str, *,
                        reduce_what: str, recommendation: str, verify_metric: str,
                        not_when: str) -> Finding | None:
    cls = ctx.cls
    if cls is None or cls.kind != "memory" or cls.unit != rule_id.split("_")[0]:
        return None
    if cls.at_roof:
        title = f"{unit_label} at its roof ({cls.top_pct:.0f}% of peak): reduce work or bytes"
        rec = (f"At roof: {unit_label} already moves data near its sustainable rate, so only "
               f"moving fewer bytes helps. {recommendation}")
    else:
        title = f"{unit_label} bandwidth limits the kernel ({cls.top_pct:.0f}% of peak)"
        rec = recommendation
    return make(
        ctx, rule_id, "roof", title, confidence=0.85 if cls.at_roof else 0.7,
        evidence=list(cls.evidence), recommendation=rec,
        verify=verify_text(ctx, f"{verify_metric} should fall in proportion to the {reduce_what} removed, "
                                f"with the unit staying near {cls.top_pct:.0f}%", None),
        not_when=not_when, expected_gain=cls.headroom, at_roof=cls.at_roof,
        what_not_to_do=MEMORY_NOT_TO_DO,
        verify_plan={**time_plan(ctx, None, {verify_metric: "decrease"}),
                     "time_scales_with": verify_metric, "next_roof_gain": cls.next_roof_gain()},
    )
