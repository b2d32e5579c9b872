""":func:`apply_answer`: an answer to a pending question, folded into the intent."""

from __future__ import annotations

import math
import re
from typing import Any

from perfscout.graph.understand.assess import assess
from perfscout.graph.understand.commands import command_refusal, split_argv, normalise
from perfscout.graph.understand.messages import say
from perfscout.graph.understand.readers import shape_of, parse
from perfscout.graph.understand.text import CANCEL, IGNORE, NO, SHAPE, YES, number_list, RequestText
from perfscout.graph.understand.vocab import phrase_table, codec_catalogue, dataset_catalogue
from perfscout.state.intent import CODEC_QUESTIONS, DataRef, Intent, Pending
from perfscout.state.modes import REQUEST_MODES

# ---------------------------------------------------------------------------- answers


def _normal_answer(answer: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(answer, dict):
        return "", dict(answer)
    if isinstance(answer, (list, tuple)):
        return " ".join(map(str, answer)), {}
    text = str(answer if answer is not None else "").strip()
    if text.startswith("{"):
        import json

        try:
            doc = json.loads(text)
            if isinstance(doc, dict):
                return "", doc
        except ValueError:
            pass
    return text, {}


def apply_answer(intent: Intent, pending: Pending, answer: Any) -> tuple[Intent, str]:
    """Fold the answer to ``pending`` into a copy of ``intent``; (new intent, problem or '').

    The answer is read by the same parser as a request ("rel 1e-3", "vorticity.512_512",
    "91x91x91 float32", "sz3 and zfp"); "yes" accepts the proposal in the question; a
    candidate can be named or numbered; a JSON object may name slots directly; "cancel"
    stops the run and "ignore" drops an unknown clause.
    """
    new = intent.model_copy(deep=True)
    text, doc = _normal_answer(answer)
    low = text.lower().strip(" .!。！")
    if doc.get("skip") is True or doc.get("cancel") is True or low in CANCEL:
        new.ignored.append(say(new, "cancelled_at", question=pending.question))
        return _cancelled(new), ""
    new.missing = [p for p in new.missing if p != pending]
    if pending.slot == "clause":
        if low in IGNORE or low in YES or doc.get("ignore") is True:
            new.ignored.append(say(new, "user_ignored", detail=pending.detail))
            return assess(new), ""
        sub = parse(text) if text else Intent()
        if sub.refusal:
            new.refusal = sub.refusal
            return new, ""
        _merge(new, sub)
        return assess(new), ""
    if low in YES and pending.proposal:
        doc = dict(pending.proposal)
        text = ""
    if low in NO and pending.proposal:  # not the guessed shape: ask for it plainly
        plain = pending.model_copy(update={"proposal": {}, "candidates": [],
                                           "question": pending.question.split(":")[0] + ": " + say(
                                               new, "dtype", detail="it").replace("Is it", "what is its shape, and is it")})
        new.missing.insert(0, plain)
        return new, ""
    if text and pending.candidates:
        pick = _pick_candidate(text, pending.candidates)
        if pick:
            text = pick
    if doc:
        problem = _apply_doc(new, pending, doc)
        if problem:
            new.missing.insert(0, pending)
            return new, problem
        return assess(new), ""
    if not text:
        new.missing.insert(0, pending)
        return new, say(new, "answer_empty")
    before = new.model_dump()
    sub = parse(text)
    if sub.refusal:
        new.refusal = sub.refusal
        return new, ""
    _fill_slot(new, pending, text, sub)
    after = assess(new)
    if after.model_dump() == {**before, "missing": after.model_dump()["missing"]} and any(
            p.slot == pending.slot and p.question == pending.question for p in after.missing):
        return after, say(after, "answer_unused", text=text)
    return after, ""


def _cancelled(intent: Intent) -> Intent:
    """A run the user stopped at a question ends like a refusal: a report, nothing run."""
    intent.question, intent.missing = None, []
    intent.refusal = "cancelled at the user's request"
    return intent


def _pick_candidate(text: str, candidates: list[str]) -> str:
    low = re.sub(r"\s+(?:one|option|choice)$|^(?:use\s+|take\s+)", "", text.lower().strip(" .!。"))
    if low.isdigit() and 1 <= int(low) <= len(candidates):
        return candidates[int(low) - 1]
    ordinal = {"first": 0, "second": 1, "third": 2, "the first": 0, "the second": 1, "第一个": 0, "第二个": 1, "第三个": 2}
    if low in ordinal and ordinal[low] < len(candidates):
        return candidates[ordinal[low]]
    exact = [c for c in candidates if c.lower() == low]
    if exact:
        return exact[0]
    prefix = [c for c in candidates if c.lower().startswith(low) or low in c.lower()]
    return prefix[0] if len(prefix) == 1 else ""


def _merge(into: Intent, sub: Intent) -> None:
    """Slots the answer states fill (or, for lists, extend) the intent's."""
    if sub.question and (into.question is None or into.question in ("evaluate",) and sub.question in CODEC_QUESTIONS):
        into.question = sub.question
    for mine, theirs in ((into.codecs, sub.codecs), (into.codec_groups, sub.codec_groups), (into.targets, sub.targets),
                         (into.data, sub.data), (into.devices, sub.devices)):
        mine += [v for v in theirs if v not in mine]
    if sub.mode and not into.mode:
        into.mode = sub.mode
    if sub.bounds:
        into.bounds = into.bounds or sub.bounds
    if into.masked is None:
        into.masked = sub.masked  # "only the valid values" said in an answer counts too
    into.repeats = into.repeats or sub.repeats
    into.command = into.command or sub.command
    into.profile_file = into.profile_file or sub.profile_file
    into.sweep_spec = into.sweep_spec or sub.sweep_spec
    into.runs += [r for r in sub.runs if r not in into.runs]
    into.notes += sub.notes
    into.missing += [p for p in sub.missing if p.slot in ("codecs", "data") and p.detail]


def _fill_slot(new: Intent, pending: Pending, text: str, sub: Intent) -> None:
    slot = pending.slot
    if slot == "codecs":
        if pending.detail:  # an unknown name was asked about: the answer replaces it
            new.codecs = [c for c in new.codecs if c != pending.detail]
        _merge(new, sub)
        if not sub.codecs and not sub.codec_groups and text.lower() in ("all", "全部", "所有", "every", "everything"):
            new.codec_groups.append("all")
    elif slot == "mode":
        word = text.lower().strip(" .!。")
        mode = sub.mode or (word if word in REQUEST_MODES else None)
        new.mode = mode  # type: ignore[assignment]
        if sub.bounds:  # the answer's own numbers are the newer word
            new.bounds = sub.bounds
        elif mode in ("psnr", "ratio", "fixed_rate") and pending.detail:
            new.bounds = []  # a point-wise value is no PSNR, ratio or rate: asked next
    elif slot == "bounds":
        values = sub.bounds or number_list(text)
        if sub.mode and not new.mode:
            new.mode = sub.mode
        if sub.mode and new.mode and sub.mode != new.mode:
            new.mode = sub.mode
        new.bounds = [v for v in values if v > 0 and math.isfinite(v)]
        new.targets += [t for t in sub.targets if t not in new.targets]
    elif slot == "data":
        replaced = [d for d in new.data if pending.detail and (d.path == pending.detail or d.kind == "named" and d.name == pending.detail)]
        if pending.detail:
            new.data = [d for d in new.data if d not in replaced]
        if sub.data:
            new.data += [d for d in _carry_over(replaced, sub.data) if d not in new.data]
        elif pending.candidates and text in pending.candidates:
            new.data.append(DataRef(kind="named", name=text, text=text))
        elif pending.candidates and re.search(r"\b(?:both|all|each|every)\b|两个|都|全部|所有", text.lower()):
            new.data += [DataRef(kind="named", name=c, text=text) for c in pending.candidates]  # "both"
        elif pending.candidates and (dims := re.search(r"\b([123])\s*-?\s*d\b|([一二三])维", text.lower())):
            n = int(dims.group(1)) if dims.group(1) else "一二三".index(dims.group(2)) + 1
            shapes = {d["name"]: len(d["shape"]) for d in dataset_catalogue()}
            picked = [c for c in pending.candidates if shapes.get(c) == n]  # "the 2D one"
            if len(picked) == 1:
                new.data.append(DataRef(kind="named", name=picked[0], text=text))
            else:
                new.missing.insert(0, pending)
        else:
            new.missing += [p for p in sub.missing if p.slot == "data"]
            new.missing.insert(0, pending) if not sub.missing else None
        new.missing += [p for p in sub.missing if p.slot == "codecs" and p.detail]
    elif slot in ("shape", "dtype"):
        ref = next((d for d in new.data if d.path == pending.detail), None)
        if ref is not None:
            t = RequestText(normalise(text))
            shapes = [s for s in (shape_of(m) for m in t.finditer(SHAPE)) if s]
            if not shapes and re.fullmatch(r"\d+(?:\s*[, ]\s*\d+)+", text.strip()):
                shapes = [[int(x) for x in re.split(r"\s*[, ]\s*", text.strip())]]
            dtypes = [dt for dt, rx in phrase_table("dtypes") if rx.search(t.low)]
            endians = [e for e, rx in phrase_table("endian") if rx.search(t.low)]
            if shapes:
                ref.shape = shapes[0]
            if dtypes:
                ref.dtype = dtypes[0]  # type: ignore[assignment]
            if endians:
                ref.endian = endians[0]  # type: ignore[assignment]
    elif slot == "var":
        ref = next((d for d in new.data if d.path == pending.detail), None)
        if ref is not None:
            word = text.strip().strip("`'\"")
            ref.var = _pick_candidate(word, pending.candidates) or word
    elif slot == "command":
        new.command = split_argv(text.strip().strip("`"))
        if why := command_refusal(new.command, new.language):
            new.refusal = why
    elif slot == "profile_file":
        new.profile_file = sub.profile_file or text.strip()
    elif slot == "runs":
        new.runs = list(dict.fromkeys(new.runs + (sub.runs or re.findall(r"[\w./~-]+", text))))[:2]
    else:  # question
        _merge(new, sub)


def _carry_over(replaced: list[DataRef], given: list[DataRef]) -> list[DataRef]:
    """The data an answer names in place of data asked about, keeping what the request said of
    it: "u and v in absent.nc" answered with "uv.nc" is u and v of uv.nc (never asked again); a
    raw file's shape, dtype and byte order stay where the answer gives none."""
    if len(given) != 1 or not replaced:
        return given
    new = given[0]
    if new.kind == "file" and not new.var:
        named = [d.var for d in replaced if d.kind == "file" and d.var]
        if named:
            return [new.model_copy(update={"var": v}) for v in dict.fromkeys(named)]
    if new.kind == "raw" and replaced[0].kind == "raw":
        old = replaced[0]
        return [new.model_copy(update={k: getattr(new, k) or getattr(old, k) for k in ("shape", "dtype", "endian")})]
    return given


def _apply_doc(new: Intent, pending: Pending, doc: dict[str, Any]) -> str:
    """A JSON answer: keys name slots (dataset, shape, dtype, var, codecs, mode, bound(s), command)."""
    ref = next((d for d in new.data if pending.detail and d.path == pending.detail), None)
    for key, value in doc.items():
        if key in ("shape", "dtype", "endian", "var") and ref is None:
            ref = next((d for d in new.data if d.kind in ("raw", "file")), None)
        if key == "shape":
            shape = value if isinstance(value, list) else re.split(r"\s*[x×,*]\s*", str(value).strip())
            try:
                dims = [int(s) for s in shape]
            except (TypeError, ValueError):
                return f"shape {value!r} is not a list of positive integers."
            if not dims or min(dims) < 1 or ref is None:
                return f"shape {value!r} is not a list of positive integers."
            ref.shape = dims
        elif key == "dtype":
            tag = {"float32": "f32", "f32": "f32", "float64": "f64", "f64": "f64", "float": "f32", "double": "f64"}.get(str(value).lower())
            if tag is None or ref is None:
                return f"dtype must be 'f32' or 'f64', got {value!r}."
            ref.dtype = tag  # type: ignore[assignment]
        elif key == "endian":
            if value not in ("<", ">"):
                return "endian must be '<' (little) or '>' (big)."
            if ref is not None:
                ref.endian = value
        elif key == "var":
            if ref is not None:
                ref.var = str(value)
        elif key in ("dataset", "path", "data"):
            sub = parse(str(value))
            replaced = [d for d in new.data if pending.detail and d.path == pending.detail]
            new.data = [d for d in new.data if d not in replaced]
            if sub.data:
                new.data += _carry_over(replaced, sub.data)
            else:
                new.data.append(DataRef(kind="named", name=str(value), text=str(value)))
        elif key in ("codec", "codecs"):
            names = value if isinstance(value, list) else [value]
            known = codec_catalogue()
            unknown = [n for n in names if known and n not in known and n not in ("all", "cpu", "gpu")]
            if unknown:
                return f"unknown codec(s) {', '.join(map(str, unknown))}; known: {', '.join(sorted(known))}."
            if pending.detail:
                new.codecs = [c for c in new.codecs if c != pending.detail]
            for n in names:
                if n in ("all", "cpu", "gpu"):
                    new.codec_groups.append(n)
                elif n not in new.codecs:
                    new.codecs.append(str(n))
        elif key == "mode":
            if value not in REQUEST_MODES:
                return f"mode must be {', '.join(REQUEST_MODES[:-1])} or {REQUEST_MODES[-1]}, got {value!r}."
            new.mode = value
        elif key in ("bound", "bounds"):
            values = value if isinstance(value, list) else [value]
            try:
                nums = [float(v) for v in values]
            except (TypeError, ValueError):
                return f"a bound must be a number, got {value!r}."
            if not all(v > 0 and math.isfinite(v) for v in nums):
                return "bounds must be positive, finite numbers."
            new.bounds = nums
        elif key == "command":
            new.command = value if isinstance(value, list) else split_argv(str(value))
            if why := command_refusal(new.command, new.language):
                new.refusal = why
        elif key == "runs":
            new.runs = [str(v) for v in (value if isinstance(value, list) else [value])]
        elif key in ("ignore", "proceed") and pending.slot == "clause":
            new.ignored.append(say(new, "user_ignored", detail=pending.detail))
        else:
            return f"the answer names {key!r}, which is not something I asked for."
    return ""
