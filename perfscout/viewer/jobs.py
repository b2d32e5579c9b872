"""What the viewer starts: answer a question, resume a run, fork one into a new thread.

Each runs in a background thread through :mod:`perfscout.agent` — the same
``resume_stream`` (``Command(resume=answer)``, or ``None`` to continue) that ``perfscout
resume`` drives — so a run continued from the page is the run the CLI would have made.
One job per thread at a time; the page follows it by polling the checkpoint store, so a
run started from a terminal is followed the same way.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfscout.errors import InputError, PerfscoutError
from perfscout.graph.context import Context
from perfscout.graph.rundir import write_json
from perfscout.graph.state import AgentState
from perfscout.viewer.paths import RUN_ID, check_run_id, run_dir

log = logging.getLogger(__name__)

#: Slots a fork may change: the state's plain keys. The lists that grow by reducers
#: (messages, observations, notes, answers) and the run's own name are not edited by hand.
FORKABLE = tuple(k for k in AgentState.__annotations__
                 if k not in ("messages", "observations", "notes", "answers", "run_id", "run_dir"))


class Busy(InputError):
    """A job is already running on that thread in this server."""


@dataclass
class Job:
    thread_id: str
    kind: str  # answer | resume | fork
    started: float = field(default_factory=time.time)
    finished: float | None = None
    state: str = "running"  # running | finished | failed
    error: str = ""
    nodes: int = 0
    last_node: str = ""
    outcome: str = ""  # the run's status when the job ended (done, interrupted, incomplete)


class Jobs:
    """The background runs of one server."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._threads: dict[str, threading.Thread] = {}

    def get(self, thread_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(thread_id)

    def running(self, thread_id: str) -> bool:
        job = self.get(thread_id)
        return job is not None and job.state == "running"

    def start(self, thread_id: str, kind: str, events: Callable[[], Iterator[tuple[str, Any]]]) -> Job:
        with self._lock:
            old = self._jobs.get(thread_id)
            if old is not None and old.state == "running":
                raise Busy(f"run {thread_id} is already being continued from this page ({old.kind}); wait for it")
            job = Job(thread_id=thread_id, kind=kind)
            self._jobs[thread_id] = job
            worker = threading.Thread(target=self._drive, args=(job, events), name=f"perfscout-{kind}-{thread_id}",
                                      daemon=True)
            self._threads[thread_id] = worker
        worker.start()
        return job

    def wait(self, thread_id: str, timeout: float | None = None) -> Job | None:
        """Block until the thread's job ends (tests, a clean shutdown)."""
        worker = self._threads.get(thread_id)
        if worker is not None:
            worker.join(timeout)
        return self.get(thread_id)

    def _drive(self, job: Job, events: Callable[[], Iterator[tuple[str, Any]]]) -> None:
        try:
            for node, value in events():
                if node == "__outcome__":
                    job.outcome = getattr(value, "status", "")
                else:
                    job.nodes += 1
                    job.last_node = node
            job.state = "finished"
        except PerfscoutError as exc:
            job.state, job.error = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - a failed job is shown on the page, never lost in a thread
            log.warning("viewer job %s on %s failed", job.kind, job.thread_id, exc_info=True)
            job.state, job.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            job.finished = time.time()

    # -- the three actions ------------------------------------------------------------
    def answer(self, thread_id: str, answer: str) -> Job:
        from perfscout import agent

        parsed = agent.parse_answer(answer)  # the CLI's rule: words, or a JSON object that parses
        return self.start(thread_id, "answer", lambda: agent.resume_stream(thread_id, parsed, context=self.ctx))

    def resume(self, thread_id: str) -> Job:
        from perfscout import agent

        return self.start(thread_id, "resume", lambda: agent.resume_stream(thread_id, context=self.ctx))

    def fork(self, thread_id: str, checkpoint_id: str, slot: str, value: Any, new_thread: str = "") -> str:
        """A new thread that starts from ``checkpoint_id``'s state with ``slot`` changed, then runs."""
        from perfscout import agent

        new = new_thread.strip() or f"{thread_id[:40]}-fork-{uuid.uuid4().hex[:6]}"
        if not RUN_ID.fullmatch(new):
            raise InputError(f"a new thread id is letters, digits and . _ + - (up to 200), got {new[:80]!r}")
        if slot not in FORKABLE:
            raise InputError(f"a fork changes one of {', '.join(FORKABLE)}; not {slot[:80]!r}")
        value = _checked(slot, value)
        first = seed_thread(self.ctx, thread_id, checkpoint_id, new, {slot: value})
        if first is not None:  # forked before snapshot: a new run of the (changed) request
            return self.start(new, "fork", lambda: agent.stream(first, thread_id=new, context=self.ctx)).thread_id
        return self.start(new, "fork", lambda: agent.resume_stream(new, context=self.ctx)).thread_id


def _checked(slot: str, value: Any) -> Any:
    """The typed slots validated as the nodes will read them: a clear error now, not a crash later."""
    from pydantic import ValidationError

    from perfscout.state.agent import Plan, Task
    from perfscout.state.intent import Intent

    models = {"intent": Intent, "plan": Plan, "current": Task}
    try:
        if slot in models and value is not None:
            return models[slot].model_validate(value).model_dump()
        if slot == "queue":
            if not isinstance(value, list):
                raise InputError("queue is a list of tasks")
            return [Task.model_validate(t).model_dump() for t in value]
    except ValidationError as exc:
        raise InputError(f"the new {slot} is not valid: {exc.errors()[0].get('loc')}: "
                         f"{exc.errors()[0].get('msg')}") from exc
    if slot == "request" and not isinstance(value, (str, dict)):
        raise InputError("request is a text or a mapping (a spec)")
    return value


def seed_thread(ctx: Context, thread_id: str, checkpoint_id: str, new: str, changes: dict[str, Any]) -> Any:
    """Write thread ``new``'s first checkpoint: the state at ``checkpoint_id`` with ``changes``,
    as written by the node that produced it (``graph.update_state``), with its own run
    directory holding the files of the results it carries. Returns the request to run
    from the start instead when the checkpoint is before ``snapshot`` (nothing to carry)."""
    from perfscout.graph.checkpoint import open_checkpointer
    from perfscout.graph.graph import compile_graph
    from perfscout.viewer.store import Store

    check_run_id(thread_id)
    check_run_id(new)
    with open_checkpointer(ctx) as saver:
        graph = compile_graph(saver)
        store = Store(saver, "postgres" if "postgres" in type(saver).__module__ else "sqlite", "")
        if any(t == new for t, _ in store.threads()):
            raise InputError(f"thread {new} exists already: pick another name")
        snap = graph.get_state({"configurable": {"thread_id": thread_id, "checkpoint_id": checkpoint_id,
                                                 "checkpoint_ns": ""}})
        if not snap.values:
            raise InputError(f"no checkpoint {checkpoint_id[:60]!r} in run {thread_id}")
        if not snap.next:
            raise InputError("the run had finished at this checkpoint: fork from an earlier one")
        values = {**snap.values, **changes}
        parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        wrote = store.writes(thread_id, parent).get(parent, []) if parent else []
        as_node = next((w.node for w in wrote if w.node), "")
        if not as_node or as_node == "__start__" or "run_dir" not in values:
            return values["request"]
        target = run_dir(ctx.runs_dir, new)
        if target.exists():
            raise InputError(f"a run directory {new} exists already: pick another name")
        _carry_files(run_dir(ctx.runs_dir, thread_id), target, values, thread_id, checkpoint_id, changes)
        values.update(run_id=new, run_dir=str(target))
        graph.update_state({"configurable": {"thread_id": new}}, values, as_node=as_node)
    return None


def _carry_files(source: Path, target: Path, values: dict[str, Any], thread_id: str, checkpoint_id: str,
                 changes: dict[str, Any]) -> None:
    """The new run directory: the request, the platform, and the result files of the
    observations the forked state already holds (the report reads them from disk)."""
    target.mkdir(parents=True)
    for name in ("request.json", "platform.json"):
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)
    for obs in values.get("observations") or []:
        if not isinstance(obs, dict):
            continue
        call_id = str(obs.get("call_id", ""))
        for rel in (f"results/{int(obs.get('seq') or 0):03d}-{call_id}.json", f"raw/{call_id}.json"):
            src = source / rel
            if src.is_file() and src.resolve().is_relative_to(source.resolve()):
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / rel)
    for key, name in (("intent", "intent.json"), ("plan", "plan.json")):
        if values.get(key):
            write_json(target / name, values[key])
    write_json(target / "fork.json", {"from_thread": thread_id, "from_checkpoint": checkpoint_id,
                                      "changed": changes, "at": time.time()})
