"""Records to claims: what the Answer states, in the order it states it.

Order: what could not be done first (a codec or device that did not run, with what ran
instead), then GPU codecs measured on their CPU reference, then per setting (dataset, mode,
bound) the ranking the question asks for (ratio, error) or the figures of a lone codec, the
speed verdict (ranked only where the repeats separate the codecs), the bound verdicts; then
targets, violated bounds, failed tasks, warnings about degenerate settings, and the answers
of the other tools. Claims carry numbers and verdicts only; :mod:`perfscout.graph.answer_text`
writes their sentences.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from perfscout.graph.claims_facts import RunFacts, psnr_short, target_candidate, usable
from perfscout.graph.claims_rules import judge_target, mbps_range, speed_verdict, warnings_for
from perfscout.graph.toolbox import EVALUATE, failure_claims, find
from perfscout.state.claims import Claim

#: Settings (dataset, mode, bound) answered one by one; the rest are in the table.
MAX_GROUPS = 6

_RANK = {  # question -> (figure, "higher" is better?)
    "best_ratio": ("ratio", True), "compare": ("ratio", True), "evaluate": ("ratio", True),
    "lowest_error": ("max_abs_err", False),
}
_SPEED = {"fastest_compress": "compress", "fastest_decompress": "decompress"}


def ratio_tolerance() -> float:
    """The ratio search's own tolerance where the search did not record it."""
    from perfscout.tools.bounds import RATIO_TOLERANCE

    return float(RATIO_TOLERANCE)


def where_of(r: dict[str, Any]) -> dict[str, Any]:
    return {"dataset": str(r.get("dataset")), "mode": str(r.get("mode")), "bound": float(r.get("bound") or 0)}


def groups(records: list[dict[str, Any]]) -> dict[tuple[str, str, float], list[dict[str, Any]]]:
    out: dict[tuple[str, str, float], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        w = where_of(r)
        out[(w["dataset"], w["mode"], w["bound"])].append(r)
    return out


def build_claims(f: RunFacts) -> list[Claim]:
    """Every claim of the Answer, unnumbered and without text."""
    if f.refusal:
        kind = "cancelled" if f.refusal.startswith("cancelled") else "refused"
        return [Claim(kind="refused", verdict="not_run", detail={"why": f.refusal, "cancelled": kind == "cancelled"})]
    if f.plan_error:
        return [Claim(kind="no_plan", verdict="not_run", detail={"why": f.plan_error})]
    out = could_not_run(f) + cpu_instead(f)
    out += codec_claims(f)
    out += tool_claims(f)
    if f.intent.get("ignored"):
        out.append(Claim(kind="ignored", detail={"items": list(f.intent["ignored"])}))
    return out or [Claim(kind="nothing")]


# ---- what could not be done --------------------------------------------------------

def could_not_run(f: RunFacts) -> list[Claim]:
    """One claim, the Answer's first: every codec the plan skipped, every codec whose tasks all
    failed, the GPU where one was asked for and none was used; each with why, and what ran
    instead. ``detail["items"]``: ``[[subject, verdict (not_run | failed), why], ...]``."""
    ran = [f.name(r) for r in f.records if usable(r) or r.get("bound_ok") is False]
    instead = [n for i, n in enumerate(ran) if n not in ran[:i]]
    items: list[list[str]] = []
    keys: list[str] = []
    for s in f.plan.get("skipped") or []:
        items.append([str(s.get("codec")), "not_run", str(s.get("why") or "")])
    by_codec: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in f.records:
        by_codec[str(r.get("codec"))].append(r)
    for codec, rows in by_codec.items():
        if not any(r.get("ratio") is not None for r in rows):
            items.append([codec, "failed", f"{rows[0].get('status')}: {str(rows[0].get('error') or '')[:200]}"])
            keys += [r["task_key"] for r in rows]
    for o in f.finals:  # an evaluation refused or failed before it made a record
        if EVALUATE.owns(o) and o.get("kind") in ("error", "refused"):
            codec = str((o.get("args") or {}).get("codec") or o.get("task_key"))
            if codec not in by_codec and all(i[0] != codec for i in items):
                items.append([codec, "failed", f"{o.get('kind')}: {str(o.get('error') or o.get('summary'))[:200]}"])
                keys.append(str(o["task_key"]))
    if "cuda" in (f.intent.get("devices") or []) or "gpu" in (f.intent.get("codec_groups") or []):
        if f.records and not any((r.get("device") or "cpu") == "cuda" for r in f.records):
            why = next((str(r.get("error") or "") for r in f.records if f.gpu_reference(r)), "") or \
                "no GPU codec ran on a GPU here"
            items.append(["GPU", "not_run", why.removeprefix("gpu_unavailable:").strip()[:200]])
    if not items:
        return []
    return [Claim(kind="could_not_run", subjects=[i[0] for i in items],
                  verdict="not_run" if any(i[1] == "not_run" for i in items) else "failed", records=keys,
                  detail={"items": items, "instead": instead})]


def cpu_instead(f: RunFacts) -> list[Claim]:
    out = []
    for r in f.records:
        if f.gpu_reference(r) and r.get("ratio") is not None:
            out.append(Claim(kind="cpu_instead", subjects=[f.name(r)], figure="ratio", values={f.name(r): r["ratio"]},
                             verdict="held" if r.get("bound_ok") is True else
                             "violated" if r.get("bound_ok") is False else None,
                             records=[r["task_key"]], where=where_of(r),
                             detail={"max_abs_err": r.get("max_abs_err"), "why": str(r.get("error") or "")[:200]}))
    return out


# ---- codec results ---------------------------------------------------------------

def codec_claims(f: RunFacts) -> list[Claim]:
    out: list[Claim] = []
    gs = groups(f.records)
    for (_, _, _), rows in list(gs.items())[:MAX_GROUPS]:
        out += group_claims(f, rows)
    if len(gs) > MAX_GROUPS:
        out.append(Claim(kind="note", detail={"more_groups": len(gs) - MAX_GROUPS}))
    out += target_claims(f)
    for r in f.records:
        if r.get("bound_ok") is False and not psnr_short(r):  # a PSNR short of its target: a target claim
            out.append(Claim(kind="violation", subjects=[f.name(r)], figure="max_abs_err",
                             values={f.name(r): r.get("max_abs_err")}, verdict="violated", records=[r["task_key"]],
                             where=where_of(r), detail={"error": str(r.get("error") or "")[:160]}))
    failed_codecs = {s for c in out if c.kind == "could_not_run" for s in c.subjects}
    for r in f.records:
        if (r.get("status") not in ("ok", "gpu_unavailable") and r.get("bound_ok") is not False
                and r.get("ratio") is None and any(x.get("ratio") is not None for x in f.records
                                                   if x.get("codec") == r.get("codec"))
                and r.get("codec") not in failed_codecs):
            out.append(Claim(kind="failure", subjects=[f.name(r)], verdict="failed", records=[r["task_key"]],
                             where=where_of(r), detail={"status": r.get("status"),
                                                        "error": str(r.get("error") or "")[:200]}))
    out += warning_claims(f)
    return out


def group_claims(f: RunFacts, rows: list[dict[str, Any]]) -> list[Claim]:
    """The claims of one setting: a ranking or a lone codec's figures, speed, bounds."""
    good = [r for r in rows if usable(r)]
    if not good:
        return []
    where = where_of(rows[0])
    q = f.question or "evaluate"
    out: list[Claim] = []
    if len(good) == 1:
        r = good[0]
        out.append(Claim(kind="single", subjects=[f.name(r)], records=[r["task_key"]], where=where,
                         detail={"figures": single_figures(r), "alone": len(rows) > 1}))
    else:
        if q in _SPEED:
            out.append(speed_claim(f, good, _SPEED[q], where))
        else:
            figure, higher = _RANK.get(q, ("ratio", True))
            if figure == "ratio" and where["mode"] == "ratio":  # at a matched ratio, the better one keeps more
                figure = "psnr"
            out.append(rank_claim(f, good, figure, higher, where))
            if q in ("compare", "evaluate"):
                out.append(speed_claim(f, good, "compress", where))
    checked = [r for r in good if r.get("bound_ok") is not None]
    if len(checked) == len(rows) and len(rows) > 1:
        out.append(Claim(kind="bounds", subjects=[f.name(r) for r in rows], verdict="held",
                         records=[r["task_key"] for r in rows], where=where))
    return out


#: What a lone record is answered with: every figure that was asked about a compressor.
SINGLE_FIGURES = ("ratio", "bitrate", "psnr", "max_abs_err", "compress_MBps", "decompress_MBps")


#: What a target's sentence adds beside the target's own figure.
TARGET_FIGURES = ("ratio", "psnr", "max_abs_err")


def single_figures(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r.get(k) for k in SINGLE_FIGURES}


def rank_claim(f: RunFacts, good: list[dict[str, Any]], figure: str, higher: bool,
               where: dict[str, Any]) -> Claim:
    present = [r for r in good if r.get(figure) is not None]
    ranked = sorted(present, key=lambda r: -r[figure] if higher else r[figure])
    names = [f.name(r) for r in ranked]
    values = {f.name(r): r[figure] for r in ranked}
    tie = len(ranked) >= 2 and format(ranked[0][figure], ".4g") == format(ranked[1][figure], ".4g")
    return Claim(kind="ranking", subjects=names, figure=figure, values=values,
                 verdict="tie" if tie else ("higher" if higher else "lower"),
                 records=[r["task_key"] for r in ranked], where=where,
                 detail={"ratios": {f.name(r): r.get("ratio") for r in ranked}, "at": at_quality(f, ranked, where)})


def at_quality(f: RunFacts, ranked: list[dict[str, Any]], where: dict[str, Any]) -> dict[str, Any]:
    """At a PSNR or ratio target, the quality each codec actually landed at: a search may
    overshoot the window (a coarse control), and a ranking must show it."""
    other = {"psnr": "psnr", "ratio": "ratio"}.get(where["mode"])
    return {"figure": other, "values": {f.name(r): r.get(other) for r in ranked}} if other else {}


def speed_claim(f: RunFacts, good: list[dict[str, Any]], what: str, where: dict[str, Any]) -> Claim:
    """The fastest at ``what`` if the repeats separate it from the runner-up, else too close."""
    figure = f"{what}_MBps"
    present = [r for r in good if r.get(figure)]
    ranked = sorted(present, key=lambda r: -r[figure])
    names = [f.name(r) for r in ranked]
    values = {f.name(r): r[figure] for r in ranked}
    spread = {}
    for r in ranked:
        rng = mbps_range(r.get("nbytes"), f.samples(r["task_key"], what))
        if rng:
            spread[f.name(r)] = rng
    if len(ranked) < 2:
        return Claim(kind="too_close", subjects=names, figure=figure, values=values, spread=spread,
                     verdict="too_close_to_call", records=[r["task_key"] for r in ranked], where=where,
                     detail={"what": what, "why": "one_speed", "n": 0})
    a, b = ranked[0], ranked[1]
    v = speed_verdict(f.samples(a["task_key"], what), f.samples(b["task_key"], what),
                      a.get(f"{what}_s"), b.get(f"{what}_s"))
    return Claim(kind="ranking" if v["decided"] else "too_close", subjects=names, figure=figure, values=values,
                 spread=spread, verdict="faster" if v["decided"] else "too_close_to_call",
                 records=[r["task_key"] for r in ranked], where=where,
                 detail={"what": what, **{k: v[k] for k in ("why", "n", "change", "ci", "p_value", "strict",
                                                            "statistics")},
                         "ratios": {f.name(r): r.get("ratio") for r in ranked}})


# ---- targets, warnings -----------------------------------------------------------

def target_claims(f: RunFacts) -> list[Claim]:
    """Per target and codec (on each dataset): met, met within the measurement's tolerance,
    or missed with the closest value and by how much. A psnr/ratio mode is itself a target."""
    targets = [dict(t) for t in f.intent.get("targets") or []]
    for r in f.records:
        if r.get("mode") in ("psnr", "ratio"):
            t = {"metric": r["mode"], "op": ">=", "value": float(r["bound"]), "from_mode": True}
            if not any(x["metric"] == t["metric"] and x["value"] == t["value"] for x in targets):
                targets.append(t)
    out: list[Claim] = []
    for t in targets:
        by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in f.records:
            if target_candidate(r) and r.get(t["metric"]) is not None:  # a broken bound has its own claim
                if t.get("from_mode") and not (r.get("mode") == t["metric"] and float(r["bound"]) == t["value"]):
                    continue
                by[(f.name(r), str(r.get("dataset")))].append(r)
        for (name, ds), rows in by.items():
            judged = [(judge_target(t, r, f.search.get(r["task_key"]), ratio_tolerance()), r) for r in rows]
            judged = [(j, r) for j, r in judged if j is not None]
            if not judged:
                continue
            order = {"met": 0, "met_within_tolerance": 1, "missed": 2}
            j, r = min(judged, key=lambda jr: (order[jr[0]["verdict"]], abs(jr[0]["margin"])))
            s = f.search.get(r["task_key"]) or {}
            out.append(Claim(kind="target", subjects=[name], figure=t["metric"], values={name: j["value"]},
                             verdict=j["verdict"], records=[r["task_key"]], where=where_of(r),
                             detail={"target": {k: t[k] for k in ("metric", "op", "value")},
                                     "margin": j["margin"], "tolerance": j["tolerance"], "why": j["why"],
                                     "too_coarse": bool(s.get("too_coarse")),
                                     "closest_below": s.get("closest_below"), "closest_above": s.get("closest_above"),
                                     "figures": {k: r.get(k) for k in TARGET_FIGURES}}))
    return out


#: Warnings about the setting itself (the same for every codec at that bound on that field):
#: one claim names every codec it concerns.
SHARED_WARNINGS = ("bound_vs_range", "bound_below_resolution")


def warning_claims(f: RunFacts) -> list[Claim]:
    """One claim per warning: a bound's warning per (dataset, bound) naming every codec at it,
    an unpacked field's per codec (each has its own ratio), a small field's per dataset."""
    out: list[Claim] = []
    index: dict[tuple[Any, ...], Claim] = {}
    for r in f.records:
        for w in warnings_for(r, f.fields.get(r["task_key"])):
            kind = w["warning"]
            key = (kind, str(r.get("dataset")),
                   w.get("abs_bound") if kind in SHARED_WARNINGS else f.name(r) if kind == "unpacked" else None)
            if key in index:
                c = index[key]
                if kind in SHARED_WARNINGS and f.name(r) not in c.subjects:
                    c.subjects.append(f.name(r))
                    c.records.append(r["task_key"])
                continue
            subject = str(r.get("dataset")) if kind == "small_field" else f.name(r)
            index[key] = Claim(kind="warning", subjects=[subject], verdict="flagged", records=[r["task_key"]],
                               where=where_of(r), detail=w)
            out.append(index[key])
    return out


# ---- other tools -------------------------------------------------------------------

def tool_claims(f: RunFacts) -> list[Claim]:
    """What each final observation of a tool says in the Answer (its tool object's ``claims``;
    an unknown tool's failure is a ``tool_error``)."""
    out: list[Claim] = []
    for o in f.finals:
        tool = find(o.get("tool"))
        out += (tool.claims if tool is not None else failure_claims)(o)
    return out
