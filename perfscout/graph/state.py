"""The graph's state: a TypedDict whose values are plain JSON-like data.

Plans, tasks and observations are pydantic models at the edges
(:mod:`perfscout.state.agent`) and travel here as dicts so that any checkpointer
(SQLite, PostgreSQL, the LangGraph server's) stores them without custom types.
Lists that grow over a run use ``operator.add`` reducers; ``messages`` carries the
tool calls and tool replies (what Studio shows) with ``add_messages``.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class InputState(TypedDict):
    """What a caller passes: a natural-language intent, or a spec (a dict, as YAML loads)."""

    request: str | dict[str, Any]


class AgentState(InputState, total=False):
    run_id: str  # = the thread id when checkpointed
    run_dir: str
    started_at: float  # epoch seconds, for the time budget
    platform: dict[str, Any]  # PlatformProfile as JSON
    intent: dict[str, Any] | None  # Intent as JSON (None for a spec request)
    planner_kind: str  # "deterministic" | "llm" | "llm-fallback": who filled the intent
    llm_notes: list[str]  # why the LLM was not used, where it was asked
    questions: int  # questions asked so far (clarify)
    clarify_problem: str  # why the last answer could not be used
    answers: Annotated[list[dict[str, Any]], operator.add]  # each question asked and its answer
    refusal: str  # set when the request is refused as a whole; nothing runs
    plan: dict[str, Any]  # Plan as JSON
    plan_error: str  # set when no plan could be made; the report explains it
    queue: list[dict[str, Any]]  # tasks not yet dispatched (Task as JSON)
    current: dict[str, Any] | None  # the task whose tool call is in flight
    messages: Annotated[list[AnyMessage], add_messages]
    observations: Annotated[list[dict[str, Any]], operator.add]
    notes: Annotated[list[dict[str, Any]], operator.add]
    steps: int  # tool calls made
    reviewed: bool  # the model has looked at the results once (LLM plans only)
    report_path: str
    status: str  # "running" | "done"


class OutputState(TypedDict, total=False):
    run_id: str
    run_dir: str
    report_path: str
    status: str
    plan: dict[str, Any]
    plan_error: str
    refusal: str
    intent: dict[str, Any] | None
    notes: list[dict[str, Any]]
