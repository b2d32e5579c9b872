"""Re-derive every claim from the records before it is rendered.

:func:`problem` reads a claim against the run's facts again, from the records it names: the
subjects are those records' codecs, every stated value is the record's figure, the order of
a ranking follows the values, a speed verdict is what the statistics on the stored repeats
give, a target verdict is what the tolerance rule gives, a warning's numbers are the field's.
A claim that does not re-derive is dropped (and logged): it is never rendered.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from perfscout.graph.claims_build import SINGLE_FIGURES, TARGET_FIGURES, ratio_tolerance, where_of
from perfscout.graph.claims_facts import RunFacts, base_codec, psnr_short, target_candidate, usable
from perfscout.graph.claims_rules import judge_target, mbps_range, speed_verdict, warnings_for
from perfscout.graph.toolbox import EVALUATE
from perfscout.state.claims import Claim

log = logging.getLogger(__name__)

#: Kinds that rest on compression records (the others rest on other tools' observations).
_RECORD_KINDS = {"cpu_instead", "ranking", "too_close", "single", "bounds", "target", "violation", "failure",
                 "warning"}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0) or (a != a and b != b)
    return a == b


def _same_list(a: list[Any] | None, b: list[Any] | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


def problem(c: Claim, f: RunFacts) -> str:
    """Why ``c`` does not follow from the records ("" when it does)."""
    if c.kind in _RECORD_KINDS:
        recs = [f.record(k) for k in c.records]
        if not recs or any(r is None for r in recs):
            return f"rests on records that are not in the run: {c.records}"
        why = _record_claim(c, f, [r for r in recs if r is not None])
        return why
    if c.kind == "could_not_run":
        return _could_not_run(c, f)
    keys = {str(o.get("task_key")) for o in f.finals}
    if c.kind in ("profile", "machine", "codecs", "sweep", "regression", "tool_error") and not set(c.records) <= keys:
        return f"rests on observations that are not in the run: {c.records}"
    return ""


def _record_claim(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    names = [f.name(r) for r in recs]
    if c.kind not in ("warning",) and names != c.subjects:
        return f"subjects {c.subjects} are not the records' codecs {names}"
    if c.where and c.kind != "warning" and any(where_of(r) != c.where for r in recs):
        return f"records {c.records} are not all at {c.where}"
    if c.figure and c.kind not in ("target",):
        for n, r in zip(names, recs):
            if not _same(c.values.get(n), r.get(c.figure)):
                return f"{n}: stated {c.figure} {c.values.get(n)} but the record has {r.get(c.figure)}"
    check = _CHECKS.get(c.kind)
    return check(c, f, recs) if check else ""


def _ranking(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    if not all(usable(r) for r in recs):
        return "ranks a record that failed or broke its bound"
    if c.figure and c.figure.endswith("_MBps"):
        return _speed(c, f, recs)
    vals = [r[c.figure] for r in recs]
    higher = c.verdict in ("higher",) or (c.verdict == "tie" and c.figure != "max_abs_err")
    if vals != sorted(vals, reverse=higher):
        return f"the order of {c.subjects} does not follow their {c.figure}"
    at = c.detail.get("at") or {}
    if at and any(not _same(at["values"].get(n), r.get(at["figure"])) for n, r in zip(c.subjects, recs)):
        return f"the {at['figure']} each landed at is not the records'"
    tie = len(vals) >= 2 and format(vals[0], ".4g") == format(vals[1], ".4g")
    if tie != (c.verdict == "tie"):
        return f"verdict {c.verdict} but the first two {c.figure} values are {vals[:2]}"
    return ""


def _speed(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    what = c.figure.removesuffix("_MBps") if c.figure else "compress"
    vals = [r.get(c.figure) for r in recs]
    if vals != sorted(vals, reverse=True):
        return f"the speeds of {c.subjects} are not in order"
    for n, r in zip(c.subjects, recs):
        rng = mbps_range(r.get("nbytes"), f.samples(r["task_key"], what))
        if not _same_list(c.spread.get(n), rng):
            return f"{n}: stated spread {c.spread.get(n)} but the repeats give {rng}"
    decided = False
    if len(recs) >= 2:
        a, b = recs[0], recs[1]
        v = speed_verdict(f.samples(a["task_key"], what), f.samples(b["task_key"], what),
                          a.get(f"{what}_s"), b.get(f"{what}_s"))
        decided = v["decided"]
        stated = {k: c.detail.get(k) for k in ("why", "n", "change", "p_value", "strict")}
        if any(not _same(stated[k], v[k]) for k in stated) or not _same_list(c.detail.get("ci"), v["ci"]):
            return f"speed statistics {stated} are not what the repeats give"
    if decided != (c.verdict == "faster") or (c.kind == "too_close") == decided:
        return f"speed verdict {c.verdict} but the repeats {'do' if decided else 'do not'} separate them"
    return ""


def _single(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    r = recs[0]
    if len(recs) != 1 or not usable(r):
        return "a lone result that is not one usable record"
    figs = c.detail.get("figures") or {}
    bad = [k for k in SINGLE_FIGURES if not _same(figs.get(k), r.get(k))]
    return f"figures {bad} differ from the record" if bad else ""


def _bounds(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    if c.verdict == "held" and not all(r.get("bound_ok") is True for r in recs):
        return "says every bound held, but a record's bound was not verified as held"
    return ""


def _target(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    r, t = recs[0], c.detail.get("target") or {}
    j = judge_target(t, r, f.search.get(r["task_key"]), ratio_tolerance())
    if j is None:
        return f"the record has no {t.get('metric')}"
    name = c.subjects[0]
    if j["verdict"] != c.verdict or not _same(j["value"], c.values.get(name)) or not _same(j["margin"],
                                                                                          c.detail.get("margin")):
        return f"target {t}: re-derived {j['verdict']} at {j['value']} (claim: {c.verdict} at {c.values.get(name)})"
    figs = c.detail.get("figures") or {}
    bad = [k for k in TARGET_FIGURES if not _same(figs.get(k), r.get(k))]
    return f"figures {bad} differ from the record" if bad or not target_candidate(r) else ""


def _violation(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    r = recs[0]
    return "" if r.get("bound_ok") is False and not psnr_short(r) else "the record did not break its bound"


def _failure(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    r = recs[0]
    return "" if r.get("status") not in ("ok", "gpu_unavailable") and r.get("ratio") is None else "the record ran"


def _cpu_instead(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    return "" if f.gpu_reference(recs[0]) else "the record did not run on a CPU reference"


def _warning(c: Claim, f: RunFacts, recs: list[dict[str, Any]]) -> str:
    if c.detail.get("warning") != "small_field" and [f.name(r) for r in recs] != c.subjects:
        return f"subjects {c.subjects} are not the records' codecs"
    for r in recs:
        found = warnings_for(r, f.fields.get(r["task_key"]))
        if not any(w.keys() == c.detail.keys() and all(_same(w[k], c.detail[k]) for k in w) for w in found):
            return f"warning {c.detail.get('warning')} does not follow from {r['task_key']} and its field"
    return ""


def _could_not_run(c: Claim, f: RunFacts) -> str:
    ran = {f.name(r) for r in f.records if usable(r) or r.get("bound_ok") is False}
    if any(n not in ran for n in c.detail.get("instead") or []):
        return f"names {c.detail.get('instead')} as run instead, but only {sorted(ran)} ran"
    if [i[0] for i in c.detail.get("items") or []] != c.subjects:
        return "its items are not its subjects"
    skipped = {str(s.get("codec")) for s in f.plan.get("skipped") or []}
    failed = {str(r.get("codec")) for r in f.records if r.get("ratio") is None}
    failed |= {str((o.get("args") or {}).get("codec")) for o in f.finals
               if EVALUATE.owns(o) and o.get("kind") in ("error", "refused")}
    for subject in c.subjects:
        if subject == "GPU":
            if any((r.get("device") or "cpu") == "cuda" for r in f.records):
                return "a record ran on a GPU"
        elif any(base_codec(n) == subject for n in ran):
            return f"{subject} did produce a result"
        elif subject not in skipped | failed:
            return f"{subject} was neither skipped nor failed"
    return ""


_CHECKS = {"ranking": _ranking, "too_close": _speed, "single": _single, "bounds": _bounds, "target": _target,
           "violation": _violation, "failure": _failure, "cpu_instead": _cpu_instead, "warning": _warning}


def checked(claims: list[Claim], f: RunFacts, dropped: list[dict[str, Any]] | None = None) -> list[Claim]:
    """The claims that re-derive from the records; each dropped one is logged with why (and
    appended to ``dropped``, for claims.json)."""
    out = []
    for c in claims:
        why = problem(c, f)
        if why:
            log.warning("answer claim dropped (%s %s): %s", c.kind, c.subjects, why)
            if dropped is not None:
                dropped.append({"claim": c.model_dump(mode="json"), "why": why})
            continue
        out.append(c)
    return out
