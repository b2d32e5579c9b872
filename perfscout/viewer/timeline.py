"""One run as a person follows it: node visits, tool calls, rules, questions, then the answer.

Built from the checkpoint store's rows (:mod:`.store`) and the run directory (the call
ledger for durations, ``claims.json`` for the answer). Every visit keeps the checkpoint it
started from and the one it produced, so the page can step to the state before or after.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfscout.viewer.store import ERROR, INTERRUPT, RESUME, Checkpoint

def plain(value: Any, depth: int = 0) -> Any:
    """JSON-like data from checkpoint values (messages, interrupts, pydantic models)."""
    if depth > 40:
        return "…"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return plain(dump(), depth + 1)
        except Exception:  # noqa: BLE001 - shown as text instead
            return str(value)
    if hasattr(value, "value") and hasattr(value, "id"):  # langgraph Interrupt
        return {"value": plain(value.value, depth + 1), "id": str(value.id)}
    return str(value)


def to_json(value: Any, limit: int | None = None) -> str:
    text = json.dumps(plain(value), indent=1, ensure_ascii=False, default=str, allow_nan=True)
    if limit is not None and len(text) > limit:
        return text[:limit] + f"\n… ({len(text) - limit:,} more characters: open the checkpoint for all of it)"
    return text


@dataclass
class ToolCall:
    call_id: str
    tool: str
    args: dict[str, Any]
    task_key: str = ""
    status: str = "pending"  # the tool reply's status: success | error | pending (no reply yet)
    reply: str = ""
    duration_s: float | None = None
    kind: str = ""  # the observation's kind: result | error | needs_input | refused
    error: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)
    result_file: str = ""  # results/<seq>-<call_id>.json, relative to the run directory
    raw_file: str = ""


@dataclass
class Visit:
    index: int
    node: str
    before: str  # checkpoint the node started from
    after: str | None  # checkpoint it produced (None: not finished, or waiting)
    step: int
    ts: float | None
    duration_s: float | None
    writes: dict[str, Any]  # state keys -> what the node wrote
    calls: list[ToolCall] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    question: dict[str, Any] | None = None
    answer: Any = None
    answered: bool = False
    error: str = ""


@dataclass
class Claim:
    id: str
    text: str
    kind: str = ""
    verdict: str | None = None
    figure: str | None = None
    subjects: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    records: list[str] = field(default_factory=list)


def ledger_times(run_dir: Path) -> dict[str, tuple[float, float | None]]:
    """call id -> (started, finished or None) from calls.log (the last attempt under that id)."""
    path = run_dir / "calls.log"
    out: dict[str, tuple[float, float | None]] = {}
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        if len(parts) != 4:
            continue
        try:
            when = float(parts[0])
        except ValueError:
            continue
        event, call_id = parts[1], parts[2]
        if event == "start":
            out[call_id] = (when, None)
        elif event == "done" and call_id in out:
            out[call_id] = (out[call_id][0], when)
    return out


def _records_of(obs: dict[str, Any]) -> list[dict[str, Any]]:
    data = obs.get("data")
    if not isinstance(data, dict):
        return []
    if isinstance(data.get("record"), dict):
        return [data["record"]]
    for key in ("records", "rows"):
        if isinstance(data.get(key), list):
            return [r for r in data[key] if isinstance(r, dict)]
    return []


def _question(value: Any) -> dict[str, Any] | None:
    items = value if isinstance(value, (list, tuple)) else [value]
    for irq in items:
        payload = getattr(irq, "value", irq)
        if isinstance(payload, dict):
            return payload
        if payload is not None:
            return {"question": str(payload)}
    return None


def visits(path: list[Checkpoint], run_dir: Path | None) -> list[Visit]:
    """The node visits along one branch, with tool calls paired to their replies and results."""
    times = ledger_times(run_dir) if run_dir is not None else {}
    out: list[Visit] = []
    asked: dict[str, dict[str, Any]] = {}  # call id -> {"name", "args"} from an AIMessage
    calls: dict[str, ToolCall] = {}
    for i, cp in enumerate(path):
        node = cp.node
        if not node or node == "__start__":
            continue
        nxt = path[i + 1] if i + 1 < len(path) else None
        visit = Visit(index=len(out) + 1, node=node, before=cp.id, after=nxt.id if nxt else None, step=cp.step,
                      ts=cp.ts, duration_s=(nxt.ts - cp.ts) if nxt and nxt.ts and cp.ts else None, writes={})
        for w in cp.writes:
            if w.channel == INTERRUPT:
                visit.question = _question(w.value)
            elif w.channel == RESUME and w.node:  # the answers given to this task's interrupts, in order
                answers = w.value if isinstance(w.value, list) else [w.value]
                visit.answer, visit.answered = plain(answers[-1] if len(answers) == 1 else answers), True
            elif w.channel == ERROR:
                visit.error = str(w.value)
            elif not w.channel.startswith(("__", "branch:")):
                visit.writes[w.channel] = w.value
        for msg in visit.writes.get("messages") or []:
            for tc in getattr(msg, "tool_calls", None) or []:
                asked[str(tc.get("id"))] = {"name": tc.get("name", ""), "args": dict(tc.get("args") or {})}
            call_id = getattr(msg, "tool_call_id", None)
            if call_id:
                first = asked.get(call_id, {})
                call = ToolCall(call_id=call_id, tool=str(getattr(msg, "name", "") or first.get("name", "")),
                                args=first.get("args", {}), status=str(getattr(msg, "status", "success")),
                                reply=str(msg.content)[:4000], raw_file=f"raw/{call_id}.json")
                started, finished = times.get(call_id, (None, None))
                call.duration_s = (finished - started) if started and finished else visit.duration_s
                calls[call_id] = call
                visit.calls.append(call)
        if node == "act" and not visit.calls:
            # in flight, or killed mid-call: the calls that were asked for and have no reply yet
            visit.calls = [ToolCall(call_id=cid, tool=a["name"], args=a["args"])
                           for cid, a in asked.items() if cid not in calls]
        for obs in visit.writes.get("observations") or []:
            if not isinstance(obs, dict):
                continue
            call = calls.get(str(obs.get("call_id")))
            if call is None:
                continue
            call.task_key = str(obs.get("task_key", ""))
            call.kind, call.error = str(obs.get("kind", "")), str(obs.get("error", ""))
            call.records = _records_of(obs)
            call.result_file = f"results/{int(obs.get('seq') or 0):03d}-{call.call_id}.json"
        visit.notes = [n for n in (visit.writes.get("notes") or []) if isinstance(n, dict)]
        out.append(visit)
    return out


def tool_calls(vs: list[Visit]) -> list[ToolCall]:
    return [c for v in vs for c in v.calls]


# ---- the answer -----------------------------------------------------------------------


def read_claims(run_dir: Path) -> tuple[list[Claim] | None, str]:
    """claims.json's claims (None when the file is not there) and a problem, if unreadable."""
    path = run_dir / "claims.json"
    if not path.is_file():
        return None, ""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        items = doc["claims"] if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise ValueError("no 'claims' list")
        out = []
        for n, item in enumerate(items, 1):
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise ValueError(f"claim {n} has no text")
            records = item.get("records") or []
            out.append(Claim(id=str(item.get("id") or f"c{n}"), text=item["text"], kind=str(item.get("kind") or ""),
                             verdict=None if item.get("verdict") is None else str(item["verdict"]),
                             figure=None if item.get("figure") is None else str(item["figure"]),
                             subjects=[str(s) for s in item.get("subjects") or [] if s is not None],
                             values=item.get("values") if isinstance(item.get("values"), dict) else {},
                             records=[str(r) for r in records] if isinstance(records, list) else []))
        return out, ""
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"claims.json could not be read ({exc}); the Answer lines of report.md are shown instead"


def answer_lines(report_md: str) -> list[str]:
    """The paragraphs under the report's ``## Answer`` heading."""
    lines, inside, para = [], False, []
    for line in report_md.splitlines():
        if line.startswith("## "):
            if inside:
                break
            inside = line[3:].strip().lower() == "answer"
            continue
        if not inside:
            continue
        if line.strip():
            para.append(line.strip())
        elif para:
            lines.append(" ".join(para))
            para = []
    if para:
        lines.append(" ".join(para))
    return lines


def progress(values: dict[str, Any]) -> dict[str, Any]:
    """Tasks done and to do at a state: what the live view counts."""
    observed = {str(o.get("task_key")) for o in values.get("observations") or [] if isinstance(o, dict)}
    queue = [t for t in values.get("queue") or [] if isinstance(t, dict)]
    current = values.get("current") if isinstance(values.get("current"), dict) else None
    todo = [t.get("key") for t in queue]
    if current and current.get("key") not in observed:
        todo.insert(0, current.get("key"))
    planned = [t.get("key") for t in ((values.get("plan") or {}).get("tasks") or []) if isinstance(t, dict)]
    return {"done": len(observed), "todo": len([t for t in todo if t not in observed]), "planned": len(planned),
            "calls": int(values.get("steps") or 0),
            "current": (current or {}).get("key") if current else None}


# ---- where a run stands, from the rows --------------------------------------------------

#: Channels whose latest value the run page shows: one write each is decoded, not the state.
LATEST = ("request", "plan", "queue", "current", "steps", "status", "planner_kind", "report_path", "plan_error",
          "refusal")


@dataclass
class Standing:
    """What ``perfscout.agent``'s outcome says of a run (status, question, planner, the
    values the page shows), read from the store's rows instead of its latest state."""

    status: str  # done | interrupted | incomplete
    question: dict[str, Any] | None
    planner: str
    next: list[str]
    values: dict[str, Any]


def standing(path: list[Checkpoint], load: Any, seed: Any = None) -> Standing | None:
    """The run's standing along ``path``; None when the rows cannot say (a thread of one
    checkpoint: a fork's seed, or a run that has not started), for the caller to ask
    the graph. ``load(checkpoint_id, write)`` decodes a write left on disk; ``seed()`` is
    the state of the thread's first checkpoint when it was written whole (a fork's thread
    starts from ``update_state``, whose values are in no write)."""
    if len(path) < 2:
        return None
    base: dict[str, Any] = {}
    if path[0].step != -1 and seed is not None:  # not an input checkpoint: a seeded thread
        base = dict(seed() or {})
    values: dict[str, Any] = {}
    for cp in reversed(path):
        for w in reversed(cp.writes):  # the last write of a channel is its value
            if w.channel in LATEST and w.channel not in values:
                values[w.channel] = load(cp.id, w)
        if len(values) == len(LATEST):
            break
    for channel in LATEST:
        if channel not in values and channel in base:
            values[channel] = base[channel]
    for channel in ("observations", "answers"):  # lists that grow: every write, in order
        values[channel] = list(base.get(channel) or []) + [
            x for cp in path for w in cp.writes if w.channel == channel and isinstance(w.value, list) for x in w.value]
    last = path[-1]
    nxt = path[-2].routed_to
    question = None
    if any(w.channel == INTERRUPT for w in last.writes) and not any(
            w.node and not w.channel.startswith("__") and not w.channel.startswith("branch:") for w in last.writes):
        question = next((_question(w.value) for w in reversed(last.writes) if w.channel == INTERRUPT), None)
    if question is not None:
        status = "interrupted"
    elif not nxt and values.get("status") == "done":
        status = "done"
    else:
        status = "incomplete"
    plan = values.get("plan") if isinstance(values.get("plan"), dict) else {}
    return Standing(status=status, question=question, planner=str(plan.get("planner") or ""), next=nxt,
                    values=values)
