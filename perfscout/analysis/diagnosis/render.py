"""A diagnosis (GPU ``kernels`` or CPU ``programs``) as report blocks, and their Markdown.

Everything here builds :mod:`perfscout.analysis.report.blocks`: a finding is a
:class:`~perfscout.analysis.report.blocks.Finding` (what was found, the evidence it rests on,
what to do and how to check it), the time digest a table. ``perfscout diagnose`` prints the
Markdown of these blocks and the agent's report embeds the same blocks; the rule texts
(titles, recommendations) are data and stay literal text in both formats.
"""

from __future__ import annotations

from typing import Any

from perfscout.analysis.report.blocks import (
    Block,
    BulletList,
    Code,
    Finding,
    Heading,
    Inline,
    ListItem,
    Note,
    Paragraph,
    Strong,
    Table,
)
from perfscout.analysis.report.markdown import render_blocks


def _num(v: Any) -> str:
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    return str(v)


def _gain(f: dict) -> str:
    g = f.get("expected_gain")
    return "unsized" if g is None else f"up to ~{g:.0%} of the time"


#: How a rule's verify text hands over its command (rules/_base.py): what follows is pasted
#: into a shell, so it is shown as code (verbatim in both formats).
_MEASURE = ". Measure: "


def _verify(text: str) -> Inline:
    at = str(text).rfind(_MEASURE)
    if at < 0:
        return ["Verify: ", str(text)]
    return ["Verify: ", text[:at + len(_MEASURE)], Code(text[at + len(_MEASURE):])]


def _ncu_said(f: dict) -> Inline | None:
    said = f.get("extra", {}).get("ncu_says")
    if not said:
        return None
    verdict = "agrees" if said["agrees"] else f"differs: {said.get('why_not_primary', '')}"
    return f"ncu's top rule: {said['rule']} (est. {said['estimated_speedup_pct']:.0f}%) — {verdict}"


def _evidence(e: dict, inputs_shown: int | None = None) -> Inline:
    names = e.get("inputs") or []
    if inputs_shown is not None and len(names) > inputs_shown:
        names = [names[0], f"and {len(names) - 1} more (--verbose)"]
    inputs = f" from {', '.join(names)}" if names else ""
    thr = f" [{e['threshold']}]" if e.get("threshold") else ""
    unit = f" {e['unit']}" if e.get("unit") else ""
    return [Code(str(e["metric"])), f" = {_num(e['value'])}{unit}{thr}{inputs}"]


def finding_block(f: dict, primary: bool = False) -> Finding:
    """One finding in full: every evidence line, what to do, what not to, how to verify, when not."""
    head: list[Inline] = [Strong("Primary:"), " "] if primary else []
    head += [Code(str(f["id"])), f" — {f['title']} (confidence {f['confidence']:.2f}; {_gain(f)})"]
    actions: list[Inline] = [f"Do: {f['recommendation']}"]
    dont = f.get("extra", {}).get("what_not_to_do") or []
    if primary and dont:
        actions.append("Don't: " + "; ".join(dont))
    said = _ncu_said(f) if primary else None
    if said:
        actions.append(said)
    actions += [_verify(f["verify"]), f"Not when: {f['not_when']}"]
    return Finding(head, [_evidence(e) for e in f.get("evidence", [])], actions, primary=primary)


def _platform_line(platform: dict | None) -> Paragraph | None:
    # Scalars only: the nested device/spec tables belong in the JSON, not in the headline.
    facts = [f"{k} {v}" for k, v in (platform or {}).items() if isinstance(v, (str, int, float)) and v != ""]
    return Paragraph("Platform: " + ", ".join(facts)) if facts else None


def _rule_problems(it: dict) -> list[Block]:
    """Plug-in rules whose findings the engine dropped (plugin_guard.py): said, never shown as findings."""
    problems = it.get("rule_problems") or []
    if not problems:
        return []
    return [Note("Plug-in rules whose findings were dropped, and why:", kind="warning"),
            BulletList([[Code(str(p["rule"])), f" (plug-in from {p['distribution']}): {p['reason']}"]
                        for p in problems])]


def diagnosis_blocks(result: dict, level: int = 1) -> list[Block]:
    """One section per kernel/program: primary first, then the rest by expected gain."""
    items = result.get("kernels") or result.get("programs") or []
    out: list[Block] = [Heading("Diagnosis", level)]
    if (line := _platform_line(result.get("platform"))) is not None:
        out.append(line)
    if not items:
        out.append(Paragraph("No kernels or programs in the input."))
    for it in items:
        out.append(Heading(str(it["name"]), level + 1))
        if not it.get("primary"):
            out.append(Paragraph("No finding: the profile lacks the metrics the rules need."))
        else:
            out.append(finding_block(it["primary"], primary=True))
            out += [finding_block(f) for f in it["findings"][1:]]
        out += _rule_problems(it)
    return out


def markdown(result: dict) -> str:
    """:func:`diagnosis_blocks` as Markdown."""
    return render_blocks(diagnosis_blocks(result)).rstrip("\n")


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


def summary_blocks(entries: list[dict], platform: dict | None = None, verbose: bool = False,
                   top: int = 0, level: int = 1) -> list[Block]:
    """The readable report: the time digest first, then one section per kernel (launches
    aggregated), ordered by total time; by default the primary's deciding evidence and one
    line per other finding, ``verbose`` for everything; ``top`` > 0 keeps that many
    kernel sections (the digest table always lists every kernel)."""
    out: list[Block] = [Heading("Diagnosis", level)]
    if (line := _platform_line(platform)) is not None:
        out.append(line)
    if not entries:
        return out + [Paragraph("No kernels in the input.")]
    launches = sum(e["launches"] for e in entries)
    out.append(Paragraph(f"{len(entries)} kernels, {launches} launches, by total GPU time (in the Measure "
                         "commands, ./app stands for your program and before.csv for this profile):"))
    rows = []
    for e in entries:
        prim = ", ".join(f"{p} x{n}" if len(e["primaries"]) > 1 else p for p, n in e["primaries"].items())
        rows.append([f"{e['share_pct']:.1f}%" if e["share_pct"] is not None else "?", _time(e["total_s"]),
                     e["launches"], Code(_short(e["name"])), prim])
    out.append(Table(rows, columns=["share", "time", "launches", "kernel", "primary"],
                     align=["right", "right", "right", "left", "left"]))
    shown = entries[:top] if top > 0 else entries
    for i, e in enumerate(shown, 1):
        share = f"{e['share_pct']:.1f}% of GPU time" if e["share_pct"] is not None else "time unknown"
        times = "es" if e["launches"] > 1 else ""
        out += [Heading(f"{i}. {e['name']}", level + 1),
                Paragraph(f"{e['launches']} launch{times}, {_time(e['total_s'])} in all ({share}); diagnosis of "
                          f"the longest launch (ID {e['diagnosis'].get('id')}).")]
        if len(e["primaries"]) > 1:
            out.append(Paragraph("Launches disagree on the primary: "
                                 + ", ".join(f"{p} in {n}" for p, n in e["primaries"].items())))
        d = e["diagnosis"]
        if not d.get("primary"):
            out.append(Paragraph("No finding: the profile lacks the metrics the rules need."))
        elif verbose:
            out.append(finding_block(d["primary"], primary=True))
            out += [finding_block(f) for f in d["findings"][1:]]
        else:
            out.append(_primary_digest(d))
        out += _rule_problems(d)
    if len(shown) < len(entries):
        out.append(Paragraph(f"({len(entries) - len(shown)} more kernels not detailed: --top {len(entries)})"))
    return out


def _primary_digest(d: dict) -> Finding:
    """The primary with its deciding evidence only, the other findings one line each."""
    p = d["primary"]
    head = [Strong("Primary:"), " ", Code(str(p["id"])),
            f" — {p['title']} (confidence {p['confidence']:.2f}; {_gain(p)})"]
    ev = p.get("evidence", [])
    evidence: list[Inline] = [_evidence(e, _INPUTS_SHOWN) for e in ev[:DEFAULT_EVIDENCE]]
    if len(ev) > DEFAULT_EVIDENCE:
        evidence.append(f"… {len(ev) - DEFAULT_EVIDENCE} more (--verbose)")
    actions: list[Inline | ListItem] = [f"Do: {p['recommendation']}"]
    dont = p.get("extra", {}).get("what_not_to_do") or []
    if dont:
        actions.append("Don't: " + "; ".join(dont))
    if (said := _ncu_said(p)) is not None:
        actions.append(said)
    actions.append(_verify(p["verify"]))
    rest = d["findings"][1:]
    if rest:
        also = []
        for f in rest:
            role = f.get("extra", {}).get("role", "")
            tag = f" [{role}]" if role in ("lever", "advice") else ""
            also.append([Code(str(f["id"])), f"{tag} — {f['title']} ({_gain(f)})"])
        actions.append(ListItem("Also:", also))
    return Finding(head, evidence, actions, primary=True)


def summary_markdown(entries: list[dict], platform: dict | None = None, verbose: bool = False,
                     top: int = 0) -> str:
    """:func:`summary_blocks` as Markdown."""
    return render_blocks(summary_blocks(entries, platform, verbose, top)).rstrip("\n")


__all__ = ["aggregate", "diagnosis_blocks", "finding_block", "markdown", "summary_blocks",
           "summary_markdown"]
