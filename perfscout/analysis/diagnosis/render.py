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


# ---------------------------------------------------------------- per-kernel summary
#: Evidence lines shown per primary finding by default: the rules list the deciding
#: evidence first (the measured value against its threshold); the rest is in --verbose.
DEFAULT_EVIDENCE = 3
_NAME_WIDTH = 70


def aggregate(kernels: list[dict]) -> list[dict]:
    """One entry per kernel name: launches, total time and share, ordered by total time.

    ``kernels`` are diagnosed launches carrying ``duration_s`` (None when unknown). The
    entry's diagnosis is its longest launch's; ``primaries`` counts each launch's primary
    id, so launches that disagree stay visible.
    """
    groups: dict[str, list[dict]] = {}
    for k in kernels:
        groups.setdefault(k["name"], []).append(k)
    total = sum(k.get("duration_s") or 0.0 for k in kernels)
    out = []
    for name, launches in groups.items():
        t = sum(k.get("duration_s") or 0.0 for k in launches)
        rep = max(launches, key=lambda k: k.get("duration_s") or 0.0)
        primaries: dict[str, int] = {}
        for k in launches:
            pid = k["primary"]["id"] if k.get("primary") else "none"
            primaries[pid] = primaries.get(pid, 0) + 1
        out.append({"name": name, "launches": len(launches), "ids": [k.get("id") for k in launches],
                    "total_s": t, "share_pct": 100.0 * t / total if total > 0 else None,
                    "primaries": primaries, "diagnosis": rep})
    out.sort(key=lambda e: -e["total_s"])
    return out


def _short(name: str) -> str:
    return name if len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 1] + "…"


def _time(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s >= 1e-4 else f"{s * 1e6:.1f} us"


#: A derived value's inputs listed in full up to this many; beyond, the first and a count
#: (a stall share is computed from every stall reason: 19 metric names).
_INPUTS_SHOWN = 3


def _evidence_line(e: dict) -> str:
    names = e.get("inputs") or []
    if len(names) > _INPUTS_SHOWN:
        names = [names[0], f"and {len(names) - 1} more (--verbose)"]
    inputs = f" from {', '.join(names)}" if names else ""
    thr = f" [{e['threshold']}]" if e.get("threshold") else ""
    unit = f" {e['unit']}" if e.get("unit") else ""
    return f"`{e['metric']}` = {_num(e['value'])}{unit}{thr}{inputs}"


def summary_markdown(entries: list[dict], platform: dict | None = None, verbose: bool = False,
                     top: int = 0) -> str:
    """The readable report: the time digest first, then one section per kernel (launches
    aggregated), ordered by total time; by default the primary's deciding evidence and one
    line per other finding, ``verbose`` for everything; ``top`` > 0 keeps that many
    kernel sections (the digest table always lists every kernel)."""
    out = ["# Diagnosis", ""]
    facts = [f"{k} {v}" for k, v in (platform or {}).items() if isinstance(v, (str, int, float)) and v != ""]
    if facts:
        out += ["Platform: " + ", ".join(facts), ""]
    if not entries:
        return "\n".join(out + ["No kernels in the input."])
    launches = sum(e["launches"] for e in entries)
    out += [f"{len(entries)} kernels, {launches} launches, by total GPU time (in the Measure commands, "
            "./app stands for your program and before.csv for this profile):", "",
            "| share | time | launches | kernel | primary |", "|---:|---:|---:|---|---|"]
    for e in entries:
        share = f"{e['share_pct']:.1f}%" if e["share_pct"] is not None else "?"
        prim = ", ".join(f"{p} x{n}" if len(e["primaries"]) > 1 else p for p, n in e["primaries"].items())
        out.append(f"| {share} | {_time(e['total_s'])} | {e['launches']} | `{_short(e['name'])}` | {prim} |")
    out.append("")
    shown = entries[:top] if top > 0 else entries
    for i, e in enumerate(shown, 1):
        share = f"{e['share_pct']:.1f}% of GPU time" if e["share_pct"] is not None else "time unknown"
        times = "es" if e["launches"] > 1 else ""
        out += [f"## {i}. {e['name']}", "",
                (f"{e['launches']} launch{times}, {_time(e['total_s'])} in all ({share}); diagnosis of "
                 f"the longest launch (ID {e['diagnosis'].get('id')})."), ""]
        if len(e["primaries"]) > 1:
            out += ["Launches disagree on the primary: " + ", ".join(f"{p} in {n}" for p, n in e["primaries"].items()), ""]
        d = e["diagnosis"]
        if not d.get("primary"):
            out += ["No finding: the profile lacks the metrics the rules need.", ""]
            continue
        if verbose:
            out.extend(finding_md(d["primary"], primary=True))
            for f in d["findings"][1:]:
                out.extend(finding_md(f))
            out.append("")
            continue
        p = d["primary"]
        out.append(f"**Primary:** `{p['id']}` — {p['title']} (confidence {p['confidence']:.2f}; {_gain(p)})")
        ev = p.get("evidence", [])
        for e_ in ev[:DEFAULT_EVIDENCE]:
            out.append(f"- {_evidence_line(e_)}")
        if len(ev) > DEFAULT_EVIDENCE:
            out.append(f"- … {len(ev) - DEFAULT_EVIDENCE} more (--verbose)")
        out.append(f"- Do: {p['recommendation']}")
        dont = p.get("extra", {}).get("what_not_to_do") or []
        if dont:
            out.append("- Don't: " + "; ".join(dont))
        said = p.get("extra", {}).get("ncu_says")
        if said:
            verdict = "agrees" if said["agrees"] else f"differs: {said.get('why_not_primary', '')}"
            out.append(f"- ncu's top rule: {said['rule']} (est. {said['estimated_speedup_pct']:.0f}%) — {verdict}")
        out.append(f"- Verify: {p['verify']}")
        rest = d["findings"][1:]
        if rest:
            out.append("- Also:")
            for f in rest:
                role = f.get("extra", {}).get("role", "")
                tag = f" [{role}]" if role in ("lever", "advice") else ""
                out.append(f"  - `{f['id']}`{tag} — {f['title']} ({_gain(f)})")
        out.append("")
    if len(shown) < len(entries):
        out.append(f"({len(entries) - len(shown)} more kernels not detailed: --top {len(entries)})")
    return "\n".join(out)
