"""The graph's nodes: snapshot, understand, clarify, plan, act (a ToolNode), observe, reflect, report.

Each node takes the state and ``runtime: Runtime[Context]`` and returns an update.
Side effects live where a crash cannot repeat them: tool calls run in ``act`` and are
checkpointed as soon as it finishes (``durability="sync"``); observe writes results
under names fixed by the call id, so re-running it rewrites the same file.
"""

from __future__ import annotations

import functools
import time
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from perfscout.graph import reflect as R
from perfscout.graph.context import Context, context_from
from perfscout.graph.planner import PlanningError, plan_from_intent, plan_request, understand_request
from perfscout.graph.understand import apply_answer
from perfscout.graph.rundir import ledger, stored_observations, write_json
from perfscout.graph.state import AgentState
from perfscout.state.agent import Note, Observation, Plan, Task
from perfscout.state.intent import Intent
from perfscout.graph.toolbox import tool_functions, tool_names

# ---- helpers ---------------------------------------------------------------------


def _ctx(runtime: Runtime[Context] | None) -> Context:
    return context_from(runtime.context if runtime is not None else None)


def dispatch(task: Task | None) -> dict[str, Any]:
    """State update that puts ``task``'s tool call in flight (or ends the work)."""
    if task is None:
        return {"current": None}
    call = {"name": task.tool, "args": dict(task.args), "id": task.call_id, "type": "tool_call"}
    return {"current": task.model_dump(),
            "messages": [AIMessage(content="", tool_calls=[call], id=f"ai-{task.call_id}")]}


@functools.lru_cache(maxsize=1)
def _platform_once() -> dict[str, Any]:
    """The machine does not change during a process: probe it once."""
    from perfscout.tools.snapshot import take_snapshot

    return take_snapshot().model_dump(mode="json")


# ---- nodes -----------------------------------------------------------------------


def snapshot(state: AgentState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """Name the run, create its directory, record the request and the platform."""
    ctx = _ctx(runtime)
    run_id = state.get("run_id") or (config.get("configurable") or {}).get("thread_id") or uuid.uuid4().hex
    run_dir = (ctx.runs_dir / str(run_id)).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / "request.json", {"request": state["request"]})
    try:
        platform = _platform_once()
    except Exception as exc:  # a run without a snapshot still measures; it says why
        platform = {"platform_id": "", "error": f"snapshot failed: {type(exc).__name__}: {exc}"}
    write_json(run_dir / "platform.json", platform)
    return {"run_id": str(run_id), "run_dir": str(run_dir), "started_at": time.time(),
            "platform": platform, "steps": 0, "status": "running"}


def _request_text(request: Any) -> str | None:
    """The words of a request, or None for a spec (a mapping that is not just an intent)."""
    if isinstance(request, str):
        return request
    if isinstance(request, dict) and "intent" in request and set(request) <= {"intent", "goal"}:
        return str(request["intent"])
    return None


#: Most questions one run asks before it gives up and says what is still missing.
MAX_QUESTIONS = 8


def understand(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Read a request in words into an Intent: the offline parser, then the LLM where
    configured (it may only fill what the parser left open, validated the same way)."""
    ctx = _ctx(runtime)
    text = _request_text(state["request"])
    if text is None:
        return {"intent": None, "planner_kind": "deterministic"}
    intent = understand_request(text)
    kind, llm_notes = "deterministic", []
    if ctx.wants_llm() and not intent.refusal:
        from perfscout.graph.llm import intent_with_llm

        filled, llm_notes = intent_with_llm(text, intent, state.get("platform") or {}, ctx)
        if filled is not None:
            intent, kind = filled, "llm"
        else:
            kind = "llm-fallback"
    intent = _refuse_paths_outside(intent)
    write_json(Path(state["run_dir"]) / "intent.json", intent.model_dump())
    return {"intent": intent.model_dump(), "planner_kind": kind, "llm_notes": llm_notes, "questions": 0}


def paths_refusal(intent: Intent) -> str:
    """Why the request is refused for a path it names ('' when none leads outside): data
    files, a profile, a sweep spec and its output folder, each resolved before the check
    (:func:`perfscout.graph.tool_common.check_named_path`). A path the reading left among
    the data of a sweep ("sweep s.yaml into ../outside/new") is checked the same way."""
    from perfscout.errors import InputError
    from perfscout.graph.tool_common import allowed_roots, check_named_path

    named = [(d.path, "data file", True) for d in intent.data if d.path]
    named += [(intent.profile_file, "profile file", True), (intent.sweep_spec, "sweep spec", True),
              (intent.sweep_out, "sweep output directory", True)]  # written absolute: theirs, like data
    roots = allowed_roots()
    for path, what, absolute_is_theirs in named:
        if not path:
            continue
        try:
            check_named_path(path, what, roots, absolute_is_theirs=absolute_is_theirs)
        except InputError as exc:
            return str(exc)
    return ""


def _refuse_paths_outside(intent: Intent) -> Intent:
    if intent.refusal:
        return intent
    why = paths_refusal(intent)
    return intent.model_copy(update={"refusal": why, "missing": []}) if why else intent


def clarify(state: AgentState) -> dict[str, Any]:
    """Ask the first open question of the intent with ``interrupt()`` and fold the answer in.

    One question per visit, so a resumed run replays exactly the answers it was given;
    the router comes back here while questions remain.
    """
    intent = Intent.model_validate(state["intent"])
    if intent.refusal or not intent.missing:
        return {}
    asked = int(state.get("questions") or 0)
    pending = intent.missing[0]
    if asked >= MAX_QUESTIONS:
        return {"plan_error": f"still open after {asked} questions: {pending.question}"}
    problem = state.get("clarify_problem") or ""
    needs = {pending.slot: pending.question}
    if pending.slot == "shape" and any(d.path == pending.detail and d.dtype is None for d in intent.data):
        needs["dtype"] = "float32 or float64"
    answer = interrupt({"question": f"{problem} {pending.question}".strip(), "slot": pending.slot,
                        "candidates": list(pending.candidates), "proposal": dict(pending.proposal),
                        "stage": "clarify", "needs": needs})
    new, problem = apply_answer(intent, pending, answer)
    new = _refuse_paths_outside(new)  # an answer naming a file is held to the same rule
    write_json(Path(state["run_dir"]) / "intent.json", new.model_dump())
    return {"intent": new.model_dump(), "questions": asked + 1, "clarify_problem": problem,
            "answers": [{"slot": pending.slot, "question": pending.question, "answer": answer}]}


def plan(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Make the plan: a spec expanded, or the (complete) intent turned into tasks."""
    run_dir = Path(state["run_dir"])
    kind = state.get("planner_kind") or "deterministic"
    notes = list(state.get("llm_notes") or [])
    intent_doc = state.get("intent")
    refusal = ""
    try:
        if intent_doc is None:
            result = plan_request(state["request"])
        else:
            intent = Intent.model_validate(intent_doc)
            refusal = intent.refusal
            if refusal or state.get("plan_error"):
                result = Plan(goal=intent.text, planner=kind, notes=notes + intent.notes,  # type: ignore[arg-type]
                              intent=intent.model_dump())
                write_json(run_dir / "plan.json", result.model_dump())
                return {"plan": result.model_dump(), "refusal": refusal, "queue": [], "current": None}
            result = plan_from_intent(intent, state.get("platform") or {}, run_dir.parent)
    except PlanningError as exc:
        write_json(run_dir / "plan.json", {"error": str(exc), "notes": notes})
        return {"plan": Plan(planner=kind, notes=notes,  # type: ignore[arg-type]
                             intent=intent_doc).model_dump(),
                "plan_error": str(exc), "queue": [], "current": None}
    result = result.model_copy(update={"planner": kind, "notes": notes + result.notes})
    write_json(run_dir / "plan.json", result.model_dump())
    first, *rest = result.tasks
    return {"plan": result.model_dump(), "queue": [t.model_dump() for t in rest], **dispatch(first)}


def _tool_error_text(exc: Exception) -> str:
    """Any exception a tool lets escape becomes an error reply, never a crash."""
    return f"Error: {type(exc).__name__}: {exc}"


def _ledgered_call(request: Any, execute: Any) -> Any:
    """Wrap every tool call: ledger line before and after, raw reply saved."""
    state = request.state or {}
    run_dir = state.get("run_dir") if isinstance(state, dict) else None
    call = request.tool_call
    if run_dir:
        ledger(run_dir, "start", call["id"], call["name"])
    reply = execute(request)
    if run_dir and isinstance(reply, ToolMessage):
        write_json(Path(run_dir) / "raw" / f"{call['id']}.json",
                   {"tool": call["name"], "args": call["args"], "status": reply.status,
                    "content": reply.content, "artifact": reply.artifact})
        ledger(run_dir, "done", call["id"], call["name"])
    return reply


def make_act_node() -> ToolNode:
    """The ToolNode that executes calls: only the whitelist's tools exist for it."""
    return ToolNode(list(tool_functions()), name="act", handle_tool_errors=_tool_error_text,
                    wrap_tool_call=_ledgered_call)


def _observation(msg: ToolMessage, call: dict[str, Any], task: dict[str, Any]) -> Observation:
    art = msg.artifact if isinstance(msg.artifact, dict) else None
    base = {"task_key": task.get("key", call["id"]), "call_id": call["id"], "tool": call["name"],
            "args": dict(call.get("args") or {}), "summary": str(msg.content)[:2000],
            "artifact": f"raw/{call['id']}.json"}
    if msg.status == "error" or art is None:
        text = str(msg.content)
        # unknown tool or arguments that fail the tool's schema: the call never ran
        refused = (call["name"] not in tool_names() or "ToolInvocationError" in text
                   or "Error invoking tool" in text or "validation error" in text.lower())
        kind = "refused" if refused else "error"
        return Observation(kind=kind, error=text, **base)
    return Observation(kind=art.get("kind", "result"), data=art.get("data"), error=art.get("error", ""),
                       transient=bool(art.get("transient")), needs=art.get("needs") or {}, **base)


def observe(state: AgentState) -> dict[str, Any]:
    """Parse the tool reply into an Observation and store it in the run directory."""
    messages = state.get("messages") or []
    ai = next((m for m in reversed(messages) if isinstance(m, AIMessage) and m.tool_calls), None)
    if ai is None:
        return {}
    replies = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    seq = len(state.get("observations") or [])
    new = []
    for call in ai.tool_calls:
        reply = replies.get(call["id"])
        if reply is None:
            continue
        seq += 1
        obs = _observation(reply, call, state.get("current") or {})
        obs.seq = seq
        write_json(Path(state["run_dir"]) / "results" / f"{seq:03d}-{obs.call_id}.json", obs.model_dump())
        new.append(obs.model_dump())
    return {"observations": new, "steps": int(state.get("steps", 0)) + len(new)}


def reflect(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Decide the next call from the last observation (see :mod:`perfscout.graph.reflect`)."""
    ctx = _ctx(runtime)
    decision = R.decide(dict(state), ctx)
    update: dict[str, Any] = {}
    plan_doc = state.get("plan") or {}
    budget_hit = any(n.kind == "budget_exhausted" for n in decision.notes)
    if (decision.next_task is None and not budget_hit and not state.get("reviewed")
            and plan_doc.get("planner") == "llm" and ctx.wants_llm() and ctx.llm_review):
        # One look back by the model at what was measured; its follow-up is validated
        # exactly like a plan, so tool output it read cannot widen what it may call.
        from perfscout.graph.llm import review_with_llm

        follow_up, review_notes = review_with_llm(state["request"], list(state.get("observations") or []), ctx)
        decision.notes += [Note(kind="llm_review", message=m) for m in review_notes]
        update["reviewed"] = True
        if follow_up:
            decision.next_task, decision.queue = follow_up[0], follow_up[1:]
            update["plan"] = {**plan_doc, "tasks": [*plan_doc.get("tasks", []),
                                                    *(t.model_dump() for t in follow_up)]}
    update.update({"queue": [t.model_dump() for t in decision.queue],
                   "notes": [n.model_dump() for n in decision.notes], **dispatch(decision.next_task)})
    return update


def report(state: AgentState) -> dict[str, Any]:
    """Write report.md and results.json from the stored results."""
    from perfscout.graph.report import write_agent_report

    run_dir = Path(state["run_dir"])
    path = write_agent_report(run_dir, stored_observations(run_dir), state)
    return {"report_path": str(path), "status": "done", "current": None}


# ---- routing ---------------------------------------------------------------------


def route_after_understand(state: AgentState) -> str:
    intent = state.get("intent")
    return "clarify" if intent and intent.get("missing") and not intent.get("refusal") else "plan"


def route_after_clarify(state: AgentState) -> str:
    if state.get("plan_error"):
        return "plan"
    return route_after_understand(state)


def route_after_plan(state: AgentState) -> str:
    return "act" if state.get("current") else "report"


def route_after_reflect(state: AgentState) -> str:
    return "act" if state.get("current") else "report"
