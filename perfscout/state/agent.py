"""Typed records of the agent: what it plans (Task, Plan) and what it saw (Observation).

These are pydantic models at the edges (planner output, tool output, report input).
Inside the LangGraph state they travel as plain dicts (``model_dump()``) so that every
checkpointer can store them without knowing perfscout's classes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: Who made the plan that the run executed. The report states it verbatim.
PlannerKind = Literal["deterministic", "llm", "llm-fallback"]

#: What one tool call amounted to.
ObservationKind = Literal["result", "error", "needs_input", "refused"]


class Task(BaseModel):
    """One whitelisted tool call the agent means to make.

    ``key`` is stable across retries and resumes (it names the task, not the attempt);
    ``args`` are validated against the tool's own argument schema before any call.
    """

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="Stable task id, e.g. 't03-evaluate_codec'.")
    tool: str = Field(description="Name of a whitelisted tool.")
    args: dict[str, Any] = Field(default_factory=dict, description="Arguments for the tool.")
    purpose: str = Field(default="", description="One line: why this call is in the plan.")
    attempt: int = Field(default=1, ge=1, description="1 for the first try; retries count up.")
    reason: str = Field(default="", description="Why this attempt differs from the planned one.")

    @property
    def call_id(self) -> str:
        """The tool-call id: the task key plus the attempt (stable across resumes)."""
        return f"{self.key}.a{self.attempt}"


class Plan(BaseModel):
    """An ordered list of tasks with the goal they serve."""

    model_config = ConfigDict(extra="forbid")

    goal: str = ""
    tasks: list[Task] = Field(default_factory=list)
    planner: PlannerKind = "deterministic"
    notes: list[str] = Field(default_factory=list, description="What the planner assumed or fell back on.")
    intent: dict[str, Any] | None = Field(default=None, description="The Intent the plan was made from "
                                          "(requests in words), as JSON.")
    skipped: list[dict[str, str]] = Field(default_factory=list, description="Parts of the request not run "
                                          "here: codec and why (not installed, no such mode, ...).")


class Observation(BaseModel):
    """The parsed outcome of one tool call, as stored in the run directory."""

    model_config = ConfigDict(extra="forbid")

    seq: int = 0  # position in the run, 1-based; set by the observe node
    task_key: str
    call_id: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    kind: ObservationKind
    summary: str = ""  # short text: what a model or a human reads first
    data: dict[str, Any] | list[Any] | None = None  # the tool's structured output
    error: str = ""
    transient: bool = False  # a retry could succeed (timeouts, busy resources)
    needs: dict[str, str] = Field(default_factory=dict)  # input the user must supply: name -> what
    artifact: str = ""  # raw output file, relative to the run directory


class Note(BaseModel):
    """Something reflect decided and why (fallbacks, retries, budget, violated bounds)."""

    task_key: str = ""
    kind: str  # a taxonomy id where one fits (gpu_unavailable, timing_noisy, bound_violated, ...)
    message: str
