"""Reflect: read the last observation and decide what happens next.

Rules, in order (each leaves a :class:`~perfscout.state.agent.Note` saying why):

* input missing or ambiguous (raw file without shape, unknown or ambiguous dataset)
  -> ``interrupt()`` with a question naming exactly the fields needed; the answer is
  applied to this task and to queued tasks with the same data;
* transient tool failure -> retry the task, up to ``max_retries``;
* GPU missing or out of memory -> the same task on the CPU (if the codec has a CPU
  implementation), with the reason;
* bound violated -> recorded, the run goes on;
* timing noisy -> repeat with twice the repeats, up to ``max_repeats``;
* then the next queued task, while the step and time budgets last.

Which rule reads a tool's result, and the kind of note its failure leaves, are the tool
object's (``on_result``, ``failure_note`` in :mod:`perfscout.graph.toolbox`).
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable

from langgraph.types import interrupt

from perfscout.errors import InputError
from perfscout.graph.context import Context
from perfscout.graph.toolbox import EVALUATE, OnResult, failure_kind, find
from perfscout.state.agent import Note, Observation, Task
from perfscout.state.shapes import parse_shape, shape_str

#: GPU codec -> a CPU codec that implements the same format, where one is registered
#: separately (szp-gpu needs none: it runs its own NumPy reference without a GPU).
CPU_FALLBACK: dict[str, str] = {}

MAX_QUESTIONS = 3  # a task whose answers keep failing validation is skipped


class Decision:
    """What reflect decided: the next task (or none), the queue after it, the notes."""

    def __init__(self, next_task: Task | None, queue: list[Task], notes: list[Note]) -> None:
        self.next_task, self.queue, self.notes = next_task, queue, notes


def question_for(task: Task, obs: Observation, problem: str = "", language: str = "en") -> dict[str, Any]:
    """The interrupt payload: what is missing, for which task, in which form; in Chinese
    for a request written in Chinese when the tool said it in Chinese too (``needs_zh``)."""
    zh = (obs.data or {}).get("needs_zh") if isinstance(obs.data, dict) else None
    where = task.args.get("dataset", task.tool)
    if language == "zh" and isinstance(zh, dict) and set(zh) >= set(obs.needs):
        fields = "；".join(f"{k}：{zh[k]}" for k in obs.needs)
        text = (f"任务 {task.key}（{where}）还需要 {fields}。请用文字回答，或用含这些键的 JSON 对象回答"
                "（不做这项：回答“跳过”或 {\"skip\": true}）。")
        return {"question": f"{problem} {text}" if problem else text, "task": task.key,
                "needs": dict(obs.needs), "args": dict(task.args)}
    fields = "; ".join(f"{k}: {v}" for k, v in obs.needs.items())
    text = f"Task {task.key} ({where}) needs {fields}."
    if problem:
        text = f"{problem} {text}"
    return {
        "question": text + " Answer with a JSON object with those keys, or {\"skip\": true}.",
        "task": task.key,
        "needs": dict(obs.needs),
        "args": dict(task.args),
    }


def validate_answer(needs: dict[str, str], answer: Any) -> tuple[dict[str, Any] | None, str]:
    """(argument updates, "") for a good answer, (None, "") for skip, (None, problem) otherwise."""
    if isinstance(answer, str):
        import json

        try:
            answer = json.loads(answer)
        except ValueError:
            answer = _words_answer(needs, answer)
    if not isinstance(answer, dict):
        return None, f"the answer must be a JSON object, got {type(answer).__name__}."
    if answer.get("skip") is True:
        return None, ""
    updates: dict[str, Any] = {}
    for key in needs:
        value = answer.get(key)
        if value is None:
            return None, f"the answer has no {key!r}."
        if key == "shape":
            try:  # the one shape parser: "512,512", "512x512", [512, 512]
                updates["shape"] = shape_str(parse_shape(value if isinstance(value, list) else str(value)))
            except InputError as exc:
                return None, f"{exc}."
        elif key == "dtype":
            if value not in ("f32", "f64"):
                return None, f"dtype must be 'f32' or 'f64', got {value!r}."
            updates["dtype"] = value
        elif key in ("dataset", "path"):
            updates["dataset"] = str(value)
        elif key == "masked":
            masked = _masked_answer(value)
            if masked is None:
                return None, f"masked must be 'nan' or a finite number, got {value!r}."
            updates["masked"] = masked
        elif key == "nonfinite":
            if str(value).strip().lower() != "passthrough":
                return None, f"nonfinite must be 'passthrough' (or skip the task), got {value!r}."
            updates["nonfinite"] = "passthrough"
        else:
            updates[key] = value
    return updates, ""


def _masked_answer(value: Any) -> str | float | None:
    """'nan' or a finite fill value from an answer (a number or its text), else None."""
    if isinstance(value, str) and value.strip().lower() == "nan":
        return "nan"
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


#: Words that answer the masked-points question with "evaluate the unmasked values only".
_UNMASKED_ONLY = re.compile(r"\bnan\b|unmasked|only the valid|valid (?:points|values) only|ignore (?:the )?mask|"
                            r"skip (?:the )?masked|keep (?:the )?mask|只评估|只算|有效值|忽略|掩码|缺测")
#: Words that answer the NaN/Inf question with "keep them beside the stream".
_PASSTHROUGH = re.compile(r"\bpassthrough\b|pass[- ]through|\bkeep\b|\byes\b|\bok\b|保留|是|好|可以")


def _words_answer(needs: dict[str, str], text: str) -> dict[str, Any] | str:
    """An answer in words for a tool's question: "skip", "512x512 float32", a dataset name,
    "only the unmasked values" / "fill with -999", "keep them"."""
    low = text.strip().lower()
    if low in ("skip", "cancel", "no", "跳过", "取消"):
        return {"skip": True}
    out: dict[str, Any] = {}
    if "shape" in needs and (m := re.search(r"\d+(?:\s*[x×,*]\s*\d+)*", text)):
        out["shape"] = re.sub(r"\s*[x×*]\s*", ",", m.group(0))
    if "dtype" in needs:
        if re.search(r"\b(?:f64|float64|double|fp64)\b|双精度", low):
            out["dtype"] = "f64"
        elif re.search(r"\b(?:f32|float32|float|single|fp32)\b|单精度", low):
            out["dtype"] = "f32"
    for key in ("dataset", "path"):
        if key in needs:
            out[key] = text.strip()
    if "masked" in needs:
        if m := re.search(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?", low):
            out["masked"] = m.group(0)
        elif _UNMASKED_ONLY.search(low):
            out["masked"] = "nan"
    if "nonfinite" in needs and _PASSTHROUGH.search(low):
        out["nonfinite"] = "passthrough"
    return out or text


def _same_data(a: Task, b: Task) -> bool:
    return a.tool == b.tool and a.args.get("dataset") == b.args.get("dataset")


def _covered(args: dict[str, Any], tasks: list[Task]) -> Task | None:
    return next((t for t in tasks if EVALUATE.owns(t) and t.args == args), None)


#: A codec failure whose message names one of these was transient (busy, not wrong).
_TRANSIENT_TEXT = re.compile(r"\b(TimeoutError|ConnectionError|BlockingIOError|InterruptedError|"
                             r"Resource temporarily unavailable)\b")

#: GPU codecs that can stream an array through the GPU in slabs (``chunk_mb``).
CHUNKABLE = {"szp-gpu"}
CHUNK_MB = 256


def _gpu_fallback(task: Task, rec: dict[str, Any], status: str, planned: list[Task],
                  notes: list[Note], again: Any) -> Task | None:
    """GPU missing or out of memory: chunk, or use a CPU implementation, and say which."""
    codec, why = task.args["codec"], rec.get("error", "")
    if rec.get("ratio") is not None:
        # the codec itself fell back (e.g. szp-gpu runs its NumPy reference): the figures
        # are real but are CPU figures, and the record's device says so
        notes.append(Note(task_key=task.key, kind=status,
                          message=f"{why}; the figures were measured on {rec.get('device', 'cpu')}"))
        return None
    if status == "gpu_out_of_memory" and codec in CHUNKABLE and not task.args.get("chunk_mb"):
        notes.append(Note(task_key=task.key, kind=status,
                          message=f"{why}; retrying in {CHUNK_MB} MiB slabs"))
        return again(f"{status}: chunked to {CHUNK_MB} MiB", chunk_mb=CHUNK_MB)
    cpu_codec = CPU_FALLBACK.get(codec, codec)
    args = {**task.args, "codec": cpu_codec, "device": "cpu"}
    args.pop("chunk_mb", None)
    twin = _covered(args, planned)
    from perfscout.graph.planner import codec_infos

    cpu_ok = any(i["id"] == cpu_codec and i["available"] and i["device"] == "cpu" for i in codec_infos())
    if twin is not None:
        notes.append(Note(task_key=task.key, kind=status, message=f"{why}; the CPU run is already task {twin.key}"))
        return None
    if not cpu_ok:
        notes.append(Note(task_key=task.key, kind=status, message=f"{why}; no usable CPU implementation of {codec}"))
        return None
    notes.append(Note(task_key=task.key, kind=status, message=f"{why}; falling back to {cpu_codec} on the CPU"))
    return again(f"{status}: fell back to the CPU", codec=cpu_codec, device="cpu")


def _max_cv(data: dict[str, Any]) -> float | None:
    cvs = [t["cv"] for t in (data.get("timing") or {}).values() if t and t.get("cv") is not None]
    return max(cvs) if cvs else None


def sweep_notes(task: Task, data: dict[str, Any]) -> list[Note]:
    """A sweep's failed tasks and violated bounds, one note per kind (the report lists each).

    They are stored results of the sweep, not retried here: a sweep re-runs only tasks
    that have no stored result, so a crash or timeout stays on record.
    """
    notes = []
    by_status: dict[str, list[dict[str, Any]]] = {}
    for row in data.get("failures") or []:
        by_status.setdefault(str(row.get("status")), []).append(row)
    for status, rows in by_status.items():
        what = "; ".join(f"{r.get('codec')}@{r.get('device')} {r.get('mode')} {r.get('bound')} on "
                         f"{r.get('dataset')}" for r in rows[:5]) + (" ..." if len(rows) > 5 else "")
        notes.append(Note(task_key=task.key, kind=status,
                          message=f"sweep {data.get('name', '')}: {len(rows)} task(s) {status}: {what}"))
    violations = data.get("violations") or []
    if violations:
        notes.append(Note(task_key=task.key, kind="bound_violated",
                          message=f"sweep {data.get('name', '')}: {len(violations)} task(s) broke their bound"))
    return notes


class _Turn:
    """One reflect step: the observation, its task, and what the rules decide about it."""

    def __init__(self, state: dict[str, Any], ctx: Context) -> None:
        self.state, self.ctx = state, ctx
        self.obs = Observation(**state["observations"][-1])
        self.task = Task(**state["current"])
        self.queue = [Task(**t) for t in state.get("queue") or []]
        self.planned = [Task(**t) for t in (state.get("plan") or {}).get("tasks", [])]
        self.notes: list[Note] = []
        self.retry: Task | None = None

    def note(self, kind: str, message: str, key: str | None = None) -> None:
        self.notes.append(Note(task_key=self.task.key if key is None else key, kind=kind, message=message))

    def again(self, reason: str, **arg_updates: Any) -> Task:
        return self.task.model_copy(update={"args": {**self.task.args, **arg_updates},
                                            "attempt": self.task.attempt + 1, "reason": reason})


def _on_needs_input(t: _Turn) -> None:
    """Ask (``interrupt()``) for what the tool said is missing; apply the answer here and
    to queued tasks with the same data."""
    problem, updates = "", None
    language = (t.state.get("intent") or {}).get("language", "en")
    for _ in range(MAX_QUESTIONS):
        answer = interrupt(question_for(t.task, t.obs, problem, language))
        updates, problem = validate_answer(t.obs.needs, answer)
        if updates is not None or not problem:
            break
    if updates is None:
        why = f"skipped: {problem}" if problem else "skipped at the user's request"
        t.note("data_missing", f"{t.obs.error}; {why}")
        return
    given = ", ".join(f"{k}={v}" for k, v in updates.items())
    t.retry = t.again(f"user supplied {given}", **updates)
    t.note("data_supplied", f"{t.obs.error}; the user supplied {given}")
    t.queue = [q.model_copy(update={"args": {**q.args, **updates}}) if _same_data(q, t.task) else q
               for q in t.queue]


def _retry_transient(t: _Turn, error: str) -> None:
    if t.task.attempt <= t.ctx.max_retries:
        t.retry = t.again(f"retry after a transient failure: {error[:200]}")
        t.note("retry", f"attempt {t.task.attempt} failed transiently ({error[:200]}); retrying")
    else:
        t.note("gave_up", f"failed transiently {t.task.attempt} times; last: {error}")


def _on_evaluation(t: _Turn, data: dict[str, Any]) -> None:
    """A codec's record: GPU fallback, transient retry, violated bound, noisy timing."""
    rec = data.get("record") or {}
    status = rec.get("status")
    if status in ("gpu_unavailable", "gpu_out_of_memory") and t.task.args.get("device") == "cuda":
        t.retry = _gpu_fallback(t.task, rec, status, t.planned + t.queue, t.notes, t.again)
        return
    if status in ("error", "codec_timeout", "codec_crashed"):
        error = rec.get("error", "")
        if status == "codec_timeout" or _TRANSIENT_TEXT.search(error):
            if t.task.attempt <= t.ctx.max_retries:
                _retry_transient(t, error)
                return
        t.note("codec_timeout" if status == "codec_timeout" else "codec_crashed", error)
        return
    if rec.get("bound_ok") is False:
        t.note("bound_violated", f"{rec.get('codec')} broke the {rec.get('mode')} bound "
                                 f"{rec.get('bound')}: {rec.get('error', '')}".rstrip(": "))
    _on_timing(t, data)


def _on_timing(t: _Turn, data: dict[str, Any]) -> None:
    cv = _max_cv(data)
    if cv is None or cv <= t.ctx.noise_threshold:
        return
    repeats = int(t.task.args.get("repeats", 3))
    if repeats < t.ctx.max_repeats:
        more = min(2 * repeats, t.ctx.max_repeats)
        t.retry = t.again(f"timing noisy (cv {cv:.0%}): {more} repeats", repeats=more)
        t.note("timing_noisy", f"timing spread {cv:.0%} > {t.ctx.noise_threshold:.0%}; repeating with {more} repeats")
    else:
        t.note("timing_noisy", f"timing spread {cv:.0%} even at the cap of {repeats} repeats")


def _on_sweep(t: _Turn, data: dict[str, Any]) -> None:
    t.notes += sweep_notes(t.task, data)


#: How a result is read, by what its tool declares (:class:`~perfscout.graph.toolbox.OnResult`).
_ON_RESULT: dict[OnResult, Callable[[_Turn, dict[str, Any]], None]] = {
    OnResult.NEXT: lambda t, data: None, OnResult.EVALUATION: _on_evaluation, OnResult.SWEEP: _on_sweep}


def _next_within_budget(t: _Turn) -> tuple[Task | None, list[Task]]:
    next_task = t.retry or (t.queue.pop(0) if t.queue else None)
    if next_task is None:
        return None, t.queue
    steps = int(t.state.get("steps", 0))
    elapsed = time.time() - float(t.state.get("started_at") or time.time())
    over = ("step budget" if steps >= t.ctx.max_steps else
            "time budget" if elapsed > t.ctx.time_budget_s else "")
    if not over:
        return next_task, t.queue
    left = [next_task.key] + [q.key for q in t.queue]
    t.note("budget_exhausted", f"{over} exhausted after {steps} calls, {elapsed:.0f} s; not run: {', '.join(left)}",
           key="")
    return None, []


def decide(state: dict[str, Any], ctx: Context) -> Decision:
    """Apply the rules above to the state after an observation."""
    t = _Turn(state, ctx)
    obs = t.obs
    if obs.kind == "needs_input":
        _on_needs_input(t)
    elif obs.kind == "error" and obs.transient:
        _retry_transient(t, obs.error)
    elif obs.kind == "refused":
        t.note("refused", f"not run: {obs.error or obs.summary}")
    elif obs.kind == "error":
        t.note(failure_kind(t.task.tool), obs.error or obs.summary)
    elif obs.kind == "result" and isinstance(obs.data, dict):
        tool = find(t.task.tool)
        _ON_RESULT[tool.on_result if tool is not None else OnResult.NEXT](t, obs.data)
    next_task, queue = _next_within_budget(t)
    return Decision(next_task, queue, t.notes)
