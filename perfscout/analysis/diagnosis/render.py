"""Markdown rendering of a diagnosis (GPU ``kernels`` or CPU ``programs``)."""

from __future__ import annotations

from typing import Any


def _num(v: Any) -> str:
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    return str(v)


def _gain(f: dict) -> str:
    g = f.get("expected_gain")
    return "unsized" if g is None else f"up to ~{g:.0%} of the time"


def finding_md(f: dict, primary: bool = False) -> list[str]:
    head = "**Primary:** " if primary else ""
    lines = [f"- {head}`{f['id']}` — {f['title']} (confidence {f['confidence']:.2f}; {_gain(f)})"]
    for e in f.get("evidence", []):
        inputs = f" from {', '.join(e['inputs'])}" if e.get("inputs") else ""
        thr = f" [{e['threshold']}]" if e.get("threshold") else ""
        unit = f" {e['unit']}" if e.get("unit") else ""
        lines.append(f"  - `{e['metric']}` = {_num(e['value'])}{unit}{thr}{inputs}")
    lines.append(f"  - Do: {f['recommendation']}")
    dont = f.get("extra", {}).get("what_not_to_do") or []
    if primary and dont:
        lines.append("  - Don't: " + "; ".join(dont))
    said = f.get("extra", {}).get("ncu_says")
    if primary and said:
        verdict = "agrees" if said["agrees"] else f"differs: {said.get('why_not_primary', '')}"
        lines.append(f"  - ncu's top rule: {said['rule']} (est. {said['estimated_speedup_pct']:.0f}%) — {verdict}")
    lines.append(f"  - Verify: {f['verify']}")
    lines.append(f"  - Not when: {f['not_when']}")
    return lines


def markdown(result: dict) -> str:
    """One section per kernel/program: primary first, then the rest by expected gain."""
    items = result.get("kernels") or result.get("programs") or []
    plat = result.get("platform") or {}
    out = ["# Diagnosis", ""]
    if plat:
        # Scalars only: the nested device/spec tables belong in the JSON, not in the headline.
        facts = [f"{k} {v}" for k, v in plat.items() if isinstance(v, (str, int, float)) and v != ""]
        if facts:
            out.append("Platform: " + ", ".join(facts))
        out.append("")
    if not items:
        out.append("No kernels or programs in the input.")
    for it in items:
        out.append(f"## {it['name']}")
        out.append("")
        if not it.get("primary"):
            out.append("No finding: the profile lacks the metrics the rules need.")
            out.append("")
            continue
        out.extend(finding_md(it["primary"], primary=True))
        for f in it["findings"][1:]:
            out.extend(finding_md(f))
        out.append("")
    return "\n".join(out)
