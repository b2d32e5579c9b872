"""What the Answer may rest on: the run's final records and what their observations carried.

One :class:`RunFacts` is built from the graph state and the final observations (the last
attempt of each task). The claim builder reads it to make claims; the checker reads it again,
independently, to re-derive every claim before it is rendered. Nothing here is computed
from a model's words: records, per-repeat timings, search trials, the field's value range
and stored type, the plan's skipped codecs and reflect's notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfscout.graph.toolbox import EVALUATE


def subject_name(r: dict[str, Any], gpu_reference: bool = False) -> str:
    """A record's codec as claims name it: `` (GPU)`` where it ran on a GPU, `` (CPU reference)``
    where a GPU codec ran its CPU reference because no GPU could be used."""
    if (r.get("device") or "cpu") == "cuda":
        return f"{r.get('codec')} (GPU)"
    return f"{r.get('codec')} (CPU reference)" if gpu_reference else str(r.get("codec"))


def base_codec(subject: str) -> str:
    """``"szp-gpu (CPU reference)"`` -> ``"szp-gpu"``."""
    return subject.split(" (", 1)[0]


def usable(r: dict[str, Any]) -> bool:
    """A record whose figures an answer may rank: it ran, was decompressed and checked, and
    did not break its bound (a GPU codec's CPU-reference run counts, labelled as such)."""
    return (r.get("status") in ("ok", "gpu_unavailable") and r.get("ratio") is not None
            and r.get("bound_ok") is not False)


def psnr_short(r: dict[str, Any]) -> bool:
    """A psnr-mode record that fell short of its target PSNR (the evaluation marks it
    ``bound_violated``): the Answer reads it as a missed target, not as a broken error bound."""
    return (r.get("mode") == "psnr" and r.get("bound_ok") is False and r.get("psnr") is not None
            and r.get("ratio") is not None and float(r["psnr"]) < float(r.get("bound") or 0))


def target_candidate(r: dict[str, Any]) -> bool:
    """A record a target may be judged on: usable, or short of its own PSNR target."""
    return usable(r) or psnr_short(r)


@dataclass
class RunFacts:
    """The run, as the Answer sees it."""

    language: str = "en"
    question: str | None = None
    intent: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)  # final compression records, in task order
    timing: dict[str, dict[str, Any]] = field(default_factory=dict)  # task_key -> {"compress": {...}, ...}
    search: dict[str, dict[str, Any]] = field(default_factory=dict)  # task_key -> search metadata
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)  # task_key -> field facts
    notes: list[dict[str, Any]] = field(default_factory=list)
    finals: list[dict[str, Any]] = field(default_factory=list)  # every final observation
    refusal: str = ""
    plan_error: str = ""

    def record(self, key: str) -> dict[str, Any] | None:
        return next((r for r in self.records if r.get("task_key") == key), None)

    def gpu_reference(self, r: dict[str, Any]) -> bool:
        """The record is a GPU codec's CPU-reference run (no GPU here): the record's status or
        reflect's note says so."""
        if (r.get("device") or "cpu") == "cuda":
            return False
        if r.get("status") == "gpu_unavailable":
            return True
        return any(n.get("kind") == "gpu_unavailable" and n.get("task_key") == r.get("task_key")
                   and "measured on" in str(n.get("message", "")) for n in self.notes)

    def name(self, r: dict[str, Any]) -> str:
        return subject_name(r, self.gpu_reference(r))

    def samples(self, key: str, what: str) -> list[float]:
        """Per-repeat seconds of ``what`` (compress / decompress) for a task ([] when the codec
        timed itself or the observation predates per-repeat timings)."""
        t = (self.timing.get(key) or {}).get(what) or {}
        return [float(s) for s in t.get("samples_s") or [] if isinstance(s, (int, float))]

    def requested_codecs(self) -> list[str]:
        """Every codec the intent or the plan named (planned, skipped or excluded-by-mode)."""
        out: list[str] = []
        for c in self.intent.get("codecs") or []:
            out.append(str(c))
        for t in self.plan.get("tasks") or []:
            if EVALUATE.owns(t) and t.get("args", {}).get("codec"):
                out.append(str(t["args"]["codec"]))
        for s in self.plan.get("skipped") or []:
            out.append(str(s.get("codec")))
        excluded = set(self.intent.get("excluded_codecs") or [])
        return [c for i, c in enumerate(out) if c not in out[:i] and c not in excluded]


def _search_of(obs: dict[str, Any]) -> dict[str, Any] | None:
    """The psnr/ratio search's metadata, where the evaluation kept it (the observation's data or
    the record; the shape is {target, metric, tolerance, reached, trials, closest_below,
    closest_above, too_coarse})."""
    data = obs.get("data") or {}
    for where in (data, data.get("record") or {}):
        s = where.get("search") if isinstance(where, dict) else None
        if isinstance(s, dict) and s.get("target") is not None:
            return s
    return None


def facts_from(state: dict[str, Any], records: list[dict[str, Any]],
               finals: list[dict[str, Any]]) -> RunFacts:
    """The facts of a run from its state, final records and final observations."""
    intent = state.get("intent") or {}
    lang = intent.get("language") if intent.get("language") in ("en", "zh") else "en"
    f = RunFacts(language=lang, intent=intent, plan=state.get("plan") or {}, records=list(records),
                 notes=list(state.get("notes") or []), finals=list(finals),
                 refusal=str(state.get("refusal") or ""), plan_error=str(state.get("plan_error") or ""))
    f.question = intent.get("question") or ("evaluate" if records else None)
    for o in finals:
        data = o.get("data")
        if o.get("kind") != "result" or not isinstance(data, dict) or "record" not in data:
            continue
        key = str(o.get("task_key") or data["record"].get("task_key") or "")
        if isinstance(data.get("timing"), dict):
            f.timing[key] = data["timing"]
        if (s := _search_of(o)) is not None:
            f.search[key] = s
        if isinstance(data.get("field"), dict):
            f.fields[key] = data["field"]
    return f
