"""The diagnosis engine: classify, run every rule, pick the primary, rank the rest.

The primary finding is what limits the kernel now and what to fix first:
- a kernel too short to amortise its launch: ``launch_overhead``;
- otherwise the *cause* (a specific, fixable inefficiency) with the largest expected
  gain; causes that remove wasted work/bytes are bounded by the waste they remove,
  causes that hide latency by the headroom to the roof;
- with no cause, the *roof* finding (which unit limits it, or latency-bound). A kernel
  at a roof then gets "at roof: reduce work or bytes" and a what-not-to-do list.
The other findings follow, ranked by expected gain. Two roles are never primary:
``lever`` (ways to approach a roof the kernel is already limited by, e.g. MMA pipeline
depth: bounded by that roof's headroom, listed after it) and ``advice`` (changes of
precision or algorithm the caller must accept; unsized, listed last).

When the tensor pipe limits a kernel, waste elsewhere (local memory, barriers between
non-MMA phases, narrow loads) overlaps with the MMAs: such causes are capped at the tensor
pipe's headroom, since only the tensor pipe's idle time can be won back.
"""

from __future__ import annotations

import logging
from typing import Any

from perfscout.analysis.diagnosis.classify import classify
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.ncu_rules import ncu_says
from perfscout.analysis.diagnosis.plugin_guard import run_rules
from perfscout.analysis.diagnosis.rule_registry import gpu_rules
from perfscout.state.profiles import KernelProfile
from perfscout.state.records import Finding

log = logging.getLogger(__name__)

#: A cause that could save less than 5 % of the time is reported, but never primary.
PRIMARY_MIN_GAIN = 0.05


def _gain(f: Finding) -> float:
    # An unsized finding (e.g. launch overhead without host timing) ranks by confidence/2.
    return f.expected_gain if f.expected_gain is not None else f.confidence / 2


#: Causes specific to MMA kernels: their gains are already sized against the tensor pipe.
MMA_CAUSES = frozenset({"mma_epilogue_bound", "mma_tile_quantization"})


def cap_to_tensor_roof(findings: list[Finding], cls) -> None:  # noqa: ANN001 - Classification
    """Tensor-bound kernels: non-MMA causes can win at most the tensor pipe's headroom."""
    if cls is None or cls.kind != "compute" or cls.unit != "tensor":
        return
    for f in findings:
        if f.extra.get("role") == "cause" and f.id not in MMA_CAUSES and f.expected_gain is not None \
                and f.expected_gain > cls.headroom:
            f.extra["gain_before_tensor_cap"] = f.expected_gain
            f.expected_gain = round(cls.headroom, 3)


def _order_key(f: Finding) -> tuple[int, float]:
    return (1 if f.extra.get("role") == "advice" else 0, -_gain(f))


def rank(findings: list[Finding], kind: str) -> tuple[Finding | None, list[Finding]]:
    """(primary, all findings with the primary first and the rest by expected gain)."""
    if not findings:
        return None, []
    primary = None
    if kind == "launch":
        primary = next((f for f in findings if f.id == "launch_overhead"), None)
    if primary is None:
        causes = [f for f in findings if f.extra.get("role") == "cause" and _gain(f) >= PRIMARY_MIN_GAIN]
        if causes:
            primary = max(causes, key=_gain)
    if primary is None:
        roofs = [f for f in findings if f.extra.get("role") == "roof"]
        eligible = [f for f in findings if f.extra.get("role") not in ("lever", "advice")] or findings
        primary = roofs[0] if roofs else max(eligible, key=_gain)
    rest = sorted((f for f in findings if f is not primary), key=_order_key)
    return primary, [primary] + rest


def cited_metrics(kernel: KernelProfile, findings: list[Finding]) -> dict[str, dict[str, Any]]:
    """Every profile metric a finding cites (directly or as a derived input)."""
    names: list[str] = []
    for f in findings:
        for e in f.evidence:
            if e.metric.startswith("derived:"):
                names.extend(e.inputs)
            elif not e.metric.startswith("host:"):
                names.append(e.metric)
    out = {}
    for n in dict.fromkeys(names):
        m = kernel.metrics.get(n)
        if m is not None:
            out[n] = {"value": m.value, "unit": m.unit}
    return out


def diagnose_kernel(kernel: KernelProfile, platform: dict | None = None,
                    host_timing: dict[str, Any] | None = None) -> dict[str, Any]:
    ctx = KernelContext(kernel, platform, host_timing)
    ctx.cls = classify(ctx)
    findings, problems = run_rules(gpu_rules(), ctx, platform)  # built-ins, then installed plug-ins
    cap_to_tensor_roof(findings, ctx.cls)
    primary, ordered = rank(findings, ctx.cls.kind)
    log.debug("%s: %s-limited; primary %s; fired %s", kernel.name[:80], ctx.cls.kind,
              primary.id if primary else "none", ", ".join(f.id for f in ordered) or "nothing")
    if primary is not None and kernel.ncu_rules:
        said = ncu_says(kernel.ncu_rules, primary.id)
        if said is not None:
            primary.extra["ncu_says"] = said
    out = {
        "name": kernel.name,
        "primary": primary.model_dump() if primary else None,
        "findings": [f.model_dump() for f in ordered],
        "metrics": cited_metrics(kernel, ordered),
    }
    if problems:  # plug-in rules whose findings were dropped (plugin_guard.py), and why
        out["rule_problems"] = problems
    return out


def diagnose(kernels: list[KernelProfile], platform: dict | None = None,
             host_timing: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Diagnose ncu kernel profiles: ``{"kernels": [...], "platform": {...}}`` (DESIGN.md).

    ``host_timing`` maps a kernel name to host measurements across launches (e.g.
    ``{"host_per_launch_us": 5.8}``): the only way to confirm launch overhead.
    """
    host_timing = host_timing or {}
    if kernels:
        log.info("diagnosing %d kernel launch(es)", len(kernels))
    out_platform: dict[str, Any] = dict(platform or {})
    if kernels:
        out_platform.setdefault("device", kernels[0].device)
        out_platform.setdefault("compute_capability", kernels[0].compute_capability)
    return {
        "kernels": [diagnose_kernel(k, platform, host_timing.get(k.name)) for k in kernels],
        "platform": out_platform,
    }
