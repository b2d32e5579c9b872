"""The agent's Python API.

    from perfscout import agent
    out = agent.run("compare sz3 and zfp at rel 1e-3 on vorticity.512_512")
    out.report_path             # Markdown report in the run directory
    out.records                 # its verified records: CompressionResult, one per task
    out = agent.run(..., thread_id="t1")   # checkpointed under that id
    agent.resume("t1", answer={"shape": "512,512", "dtype": "f32"})   # after interrupt()
    agent.resume("t1")          # continue a run that crashed or was killed
    for node, update in agent.stream(...): ...
    agent.history("t1")         # checkpoints, newest first (time travel)
    agent.fork("t1", checkpoint_id, {"queue": []})   # edit a past state, then resume()
    agent.list_runs()

Every run is checkpointed (SQLite under PERFSCOUT_HOME, or PostgreSQL) with
``durability="sync"``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from langgraph.types import Command

from perfscout.errors import InputError
from perfscout.graph.checkpoint import DURABILITY, open_checkpointer, refuse_reused_thread
from perfscout.graph.context import Context, context_from
from perfscout.graph.graph import compile_graph
from perfscout.state.records import CompressionResult
from perfscout.sweep.spec import load_spec, rebase_file_refs

_NO_ANSWER = object()


@dataclass
class RunOutcome:
    """Where a run stands after a call: done, waiting for an answer, or incomplete."""

    thread_id: str
    status: str  # "done" | "interrupted" | "incomplete"
    report_path: str = ""
    run_dir: str = ""
    planner: str = ""
    plan_error: str = ""
    refusal: str = ""  # the request was refused as a whole: nothing ran
    question: dict[str, Any] | None = None  # the pending interrupt's payload
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def report(self) -> str:
        return Path(self.report_path).read_text(encoding="utf-8") if self.report_path else ""

    @property
    def records(self) -> list[CompressionResult]:
        """The run's compression records, typed: each task's final attempt, the rows of the
        report's results table and of ``results.json`` (``[]`` before any evaluation ran)."""
        from perfscout.graph.report import final_observations

        return [CompressionResult.model_validate(o["data"]["record"])
                for o in final_observations(self.values.get("observations") or [])
                if o.get("kind") == "result" and isinstance(o.get("data"), dict) and "record" in o["data"]]

    @property
    def html_path(self) -> str:
        """``report.html`` beside the Markdown report (same content, plots inlined), when written."""
        page = Path(self.report_path).with_name("report.html") if self.report_path else None
        return str(page) if page is not None and page.is_file() else ""


@dataclass
class RunInfo:
    thread_id: str
    status: str
    request: Any
    run_dir: str
    report_path: str
    updated_at: str



#: How deep a JSON answer may nest (an answer's slots are flat; a list of shapes is two deep).
ANSWER_MAX_DEPTH = 16


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting of a JSON text, brackets inside strings not counted (one
    linear pass, before any parser recurses)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_answer(text: str, what: str = "the answer") -> Any:
    """An answer to a waiting question as the graph takes it: words ("vorticity.512_512",
    "rel 1e-3", "yes", "cancel") or a JSON object. The CLI's ``--answer`` and the viewer's
    page both send it through here, so a broken JSON object or an empty answer is refused the
    same way everywhere (``what`` names the field in the message)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        # an answer is a small object of slots ({"shape": "512,512", "dtype": "f32"}): a value
        # nested deeper than this is no answer, and json.loads would recurse until it fails
        if _nesting_depth(stripped) > ANSWER_MAX_DEPTH:
            raise InputError(f"{what} is JSON nested more than {ANSWER_MAX_DEPTH} deep; an answer is a "
                             "small object of slots such as {\"shape\": \"512,512\", \"dtype\": \"f32\"}")
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError) as exc:
            raise InputError(f"{what} looks like JSON but is not valid JSON: {exc}") from exc
    if not stripped:
        raise InputError(f"{what} is empty: answer the question in words, or 'cancel'")
    return stripped

def load_request(request_or_spec: str | dict[str, Any] | Path) -> str | dict[str, Any]:
    """An intent string, a spec mapping, or a path to a YAML spec -> the graph's request."""
    if isinstance(request_or_spec, Path):
        from perfscout.io import load_yaml, read_input_text

        try:
            # the one reader of named files (a FIFO, a device or a directory is refused
            # unopened; size-limited), then size, depth and alias limits: a spec is user input
            # (an alias bomb or a spec nested thousands deep gets a clear error, never a
            # traceback or a huge checkpoint)
            doc = load_yaml(read_input_text(request_or_spec, "spec"), str(request_or_spec))
        except OSError as exc:
            raise InputError(f"cannot read spec {request_or_spec}: {exc}") from exc
        except yaml.YAMLError as exc:
            raise InputError(f"spec {request_or_spec} is not valid YAML: {exc}") from exc
        if not isinstance(doc, dict):
            raise InputError(f"spec {request_or_spec} must be a YAML mapping")
        # the one schema of `perfscout sweep FILE` (agent keys allowed), so that an error
        # names its line here as there; nothing is imported or read yet
        load_spec(request_or_spec, for_agent=True)
        # the mapping forgets the file's folder, and a spec's relative dataset paths are
        # relative to it (as for `perfscout sweep FILE`), not to the working directory
        return rebase_file_refs(doc, request_or_spec.resolve().parent)
    if isinstance(request_or_spec, (str, dict)):
        return request_or_spec
    raise InputError(f"a request is an intent string, a spec mapping or a Path, "
                     f"got {type(request_or_spec).__name__}")


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id}
    if checkpoint_id:
        conf.update(checkpoint_id=checkpoint_id, checkpoint_ns="")
    return {"configurable": conf, "recursion_limit": 1000}


def _outcome(graph: Any, thread_id: str) -> RunOutcome:
    snap = graph.get_state(_config(thread_id))
    values = dict(snap.values or {})
    question = None
    if snap.interrupts:
        question = snap.interrupts[0].value
        status = "interrupted"
    elif not snap.next and values.get("status") == "done":
        status = "done"
    else:
        status = "incomplete"
    return RunOutcome(
        thread_id=thread_id, status=status, report_path=values.get("report_path", ""),
        run_dir=values.get("run_dir", ""), planner=(values.get("plan") or {}).get("planner", ""),
        plan_error=values.get("plan_error", ""), refusal=values.get("refusal", ""), question=question,
        values=values)


def stream(request_or_spec: Any, *, thread_id: str | None = None,
           context: Context | dict[str, Any] | None = None,
           stream_mode: str = "updates") -> Iterator[tuple[str, Any]]:
    """Run and yield ``(node, update)`` events as each node finishes (``__interrupt__``
    when the run stops for a question). The last event is ``("__outcome__", RunOutcome)``."""
    ctx = context_from(context)
    request = load_request(request_or_spec)
    if thread_id:  # a given id must be new: a run under it would merge into its results
        with open_checkpointer(ctx) as saver:
            refuse_reused_thread(saver, ctx, thread_id)
    thread_id = thread_id or uuid.uuid4().hex[:12]
    yield from _drive({"request": request}, thread_id, ctx, stream_mode)


def _drive(graph_input: Any, thread_id: str, ctx: Context, stream_mode: str = "updates",
           checkpoint_id: str | None = None) -> Iterator[tuple[str, Any]]:
    with open_checkpointer(ctx) as saver:
        graph = compile_graph(saver)
        for event in graph.stream(graph_input, _config(thread_id, checkpoint_id), context=ctx,
                                  stream_mode=stream_mode, durability=DURABILITY):
            if stream_mode == "updates" and isinstance(event, dict):
                for node, update in event.items():
                    yield node, update
            else:
                yield stream_mode, event
        yield "__outcome__", _outcome(graph, thread_id)


def _last(events: Iterator[tuple[str, Any]]) -> RunOutcome:
    outcome = None
    for name, value in events:
        if name == "__outcome__":
            outcome = value
    assert outcome is not None
    return outcome


def run(request_or_spec: Any, *, thread_id: str | None = None,
        context: Context | dict[str, Any] | None = None) -> RunOutcome:
    """Run the agent to the end (or to its first question) and return where it stands."""
    return _last(stream(request_or_spec, thread_id=thread_id, context=context))


def resume(thread_id: str, answer: Any = _NO_ANSWER, *,
           context: Context | dict[str, Any] | None = None) -> RunOutcome:
    """Continue a thread: answer its pending question, or pick up after a crash."""
    return _last(resume_stream(thread_id, answer, context=context))


def resume_stream(thread_id: str, answer: Any = _NO_ANSWER, *,
                  context: Context | dict[str, Any] | None = None) -> Iterator[tuple[str, Any]]:
    ctx = context_from(context)
    with open_checkpointer(ctx) as saver:
        snap = compile_graph(saver).get_state(_config(thread_id))
    if not snap.values and not snap.next:
        raise InputError(f"no run with thread id {thread_id!r} in the checkpoint store")
    if snap.interrupts:
        if answer is _NO_ANSWER:
            raise InputError(f"run {thread_id} is waiting for an answer: {snap.interrupts[0].value.get('question')}")
        graph_input: Any = Command(resume=answer)
    else:
        graph_input = None  # re-run from the last checkpoint: unfinished steps only
    yield from _drive(graph_input, thread_id, ctx)


def history(thread_id: str, *, limit: int | None = None, before: str | None = None,
            context: Context | dict[str, Any] | None = None) -> list[Any]:
    """A thread's checkpoints, newest first (``StateSnapshot`` objects): every one, or a page
    of at most ``limit`` of them, older than checkpoint id ``before`` when given (pass the
    last id of one page to get the next). A long run holds thousands: page it, each page
    reads only its own checkpoints from the store."""
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise InputError(f"history limit must be a positive whole number, got {limit!r}")
    with open_checkpointer(context_from(context)) as saver:
        graph = compile_graph(saver)
        page = graph.get_state_history(_config(thread_id), limit=limit,
                                       before=_config(thread_id, before) if before else None)
        return list(page)


def fork(thread_id: str, checkpoint_id: str, values: dict[str, Any], *, as_node: str | None = None,
         context: Context | dict[str, Any] | None = None) -> str:
    """Write ``values`` on top of a past checkpoint (time travel); returns the new
    checkpoint id. ``resume(thread_id)`` then continues from the fork."""
    with open_checkpointer(context_from(context)) as saver:
        graph = compile_graph(saver)
        new = graph.update_state(_config(thread_id, checkpoint_id), values, as_node=as_node)
    return new["configurable"]["checkpoint_id"]


def replay(thread_id: str, checkpoint_id: str, *,
           context: Context | dict[str, Any] | None = None) -> RunOutcome:
    """Re-execute a thread from a past checkpoint (steps after it run again)."""
    return _last(_drive(None, thread_id, context_from(context), checkpoint_id=checkpoint_id))


def list_runs(*, context: Context | dict[str, Any] | None = None) -> list[RunInfo]:
    """Every thread in the checkpoint store, most recently updated first."""
    from perfscout.graph.checkpoint import latest_per_thread

    ctx = context_from(context)
    with open_checkpointer(ctx) as saver:
        graph = compile_graph(saver)
        out = []
        # each thread's newest checkpoint only (a full listing loaded every state of every run)
        for tid, _, ts in latest_per_thread(saver):
            o = _outcome(graph, tid)
            out.append(RunInfo(thread_id=tid, status=o.status, request=o.values.get("request"),
                               run_dir=o.run_dir, report_path=o.report_path, updated_at=ts))
    return out
