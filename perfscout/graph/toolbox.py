"""The agent's tools, one object each; :data:`AGENT_TOOLS` is the whitelist.

An :class:`AgentTool` holds a LangChain tool function (written in :mod:`perfscout.graph.tools`
or :mod:`perfscout.graph.regress_tools`) and everything the nodes need to know about it:

* ``on_result`` — how reflect reads a result (:class:`OnResult`; the rules are in
  :mod:`perfscout.graph.reflect`);
* ``failure_note`` — the kind of the note reflect leaves when a call fails;
* ``report_section`` — the report section its final observations feed (:class:`Section`;
  :mod:`perfscout.graph.report` draws each), none: "Other tool results";
* ``claims`` — the Answer's claims one final observation of it yields (used by
  :func:`perfscout.graph.claims_build.tool_claims`; the claims of evaluations come from
  their records instead, :mod:`perfscout.graph.claims_build`);
* ``plan_check`` — what the LLM planner checks, and repairs, in a model's call of it beyond
  the tool's argument schema (:class:`PlanCheck`; the checks are in :mod:`perfscout.graph.llm`).

A tool that declares none of them still works: reflect takes the next task after its result,
the report lists it under "Other tool results", and a failure is a ``NAME_failed`` note and a
``tool_error`` claim. The nodes find a tool with :func:`find` and ask the object (or refer
to one of the objects below, e.g. ``EVALUATE.owns(task)``, ``SWEEP.task(...)``); none of them
compares a tool's name with a string written out (``tests/unit/test_tool_objects.py``).

Question names (:data:`perfscout.state.intent.Question`, what a request asks) are another
thing: ``"list_codecs"`` and ``"compare_runs"`` are spelled like the tools that answer them,
but the planner maps a question to tool objects (:func:`perfscout.graph.planner.plan_from_intent`).

The whitelist is fixed when this module is imported: nothing the agent reads at run time
(tool output, a model's reply, a spec) can add a tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

from langchain_core.tools import BaseTool

from perfscout.graph import regress_tools, tools
from perfscout.state.agent import Task
from perfscout.state.claims import Claim


class OnResult(Enum):
    """How reflect reads a tool's result observation (its data a mapping)."""

    NEXT = "next"  # nothing to decide: take the next task
    EVALUATION = "evaluation"  # a codec's record: GPU fallback, transient retry, violated bound, noisy timing
    SWEEP = "sweep"  # a sweep's failed tasks and violated bounds, one note per kind


class Section(Enum):
    """A report section that shows a tool's final observations (the value: the report's key)."""

    PROFILES = "profiles"
    DIAGNOSES = "diagnoses"
    REGRESSIONS = "regressions"
    SWEEPS = "sweeps"


class PlanCheck(Enum):
    """What the LLM planner checks in a model's call of a tool, beyond the tool's schema."""

    SCHEMA = "schema"  # the schema is all
    EVALUATION = "evaluation"  # a known codec, data that exists and may be read, the request's constraints
    COMMAND = "command"  # only the very program the request names
    SWEEP = "sweep"  # only the sweep spec the request names, never as a follow-up, and one where it names one
    AFTER_PROFILE = "after_profile"  # tied to the plan's latest profile task (a model cannot know task keys)


def failure_claims(obs: dict[str, Any]) -> list[Claim]:
    """The default: a call that failed or was refused is a ``tool_error`` claim; a result says
    nothing of its own in the Answer (the report shows it)."""
    if obs.get("kind") not in ("error", "refused"):
        return []
    return [Claim(kind="tool_error", subjects=[str(obs.get("tool"))], verdict="failed",
                  records=[str(obs.get("task_key"))],
                  detail={"kind": obs.get("kind"), "error": str(obs.get("error") or "")[:300]})]


def no_claims(obs: dict[str, Any]) -> list[Claim]:
    """Claims come from elsewhere (an evaluation's from its record and from could_not_run)."""
    return []


@dataclass(frozen=True)
class AgentTool:
    """One tool of the agent: the function and what the nodes need to know about it."""

    tool: BaseTool
    on_result: OnResult = OnResult.NEXT
    #: Note kind when a call fails (not refused, not transient); "" for ``NAME_failed``.
    failure_note: str = ""
    report_section: Section | None = None
    #: Whether the section shows failed calls too (those that still returned data).
    report_failures: bool = False
    claims: Callable[[dict[str, Any]], list[Claim]] = field(default=failure_claims)
    plan_check: PlanCheck = PlanCheck.SCHEMA

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def failure_kind(self) -> str:
        return self.failure_note or f"{self.name}_failed"

    def owns(self, item: Any) -> bool:
        """Whether a task, a planned call or an observation (a record or its stored dict) is a
        call of this tool."""
        name = item.get("tool") if isinstance(item, dict) else getattr(item, "tool", None)
        return name == self.name

    def task(self, key: str, args: dict[str, Any], purpose: str = "") -> Task:
        """A task that calls this tool."""
        return Task(key=key, tool=self.name, args=args, purpose=purpose)


# ---- the claims of each tool's final observation -------------------------------------

def _diagnosis_claims(obs: dict[str, Any]) -> list[Claim]:
    data = obs.get("data")
    if obs.get("kind") != "result":
        return failure_claims(obs)
    if not isinstance(data, dict):
        return []
    out = []
    for item in (data.get("kernels") or data.get("programs") or [])[:3]:
        primary = item.get("primary") or {}
        evidence = [e for e in primary.get("evidence") or [] if isinstance(e, dict)][:2]
        out.append(Claim(kind="profile", subjects=[str(item.get("name") or item.get("command")
                                                       or "the program")[:80]],
                         verdict=None, records=[str(obs.get("task_key"))],
                         detail={"id": primary.get("id"), "title": primary.get("title"),
                                 "evidence": [[e.get("metric"), e.get("value")] for e in evidence]}))
    return out


def _profile_claims(obs: dict[str, Any]) -> list[Claim]:
    """A profile that did not measure is said in the Answer; what it measured, the diagnosis says."""
    if obs.get("kind") == "result":
        return []
    return [Claim(kind="profile", verdict="failed", records=[str(obs.get("task_key"))],
                  detail={"failed": (obs.get("error") or obs.get("summary") or "")[:300]})]


def _machine_claims(obs: dict[str, Any]) -> list[Claim]:
    data = obs.get("data")
    if obs.get("kind") != "result":
        return failure_claims(obs)
    if not isinstance(data, dict):
        return []
    cpu, mem = data.get("cpu") or {}, data.get("memory") or {}
    return [Claim(kind="machine", subjects=[str(cpu.get("model") or "?")], records=[str(obs.get("task_key"))],
                  detail={"cpu": cpu.get("model") or "?", "ncpu": cpu.get("logical_cpus", "?"),
                          "mem_bytes": mem.get("total_bytes") or mem.get("total") or 0,
                          "gpus": [g.get("name", "") for g in data.get("gpus") or []]})]


def _codecs_claims(obs: dict[str, Any]) -> list[Claim]:
    if obs.get("kind") != "result":
        return failure_claims(obs)
    data = obs.get("data")
    infos = data if isinstance(data, list) else []
    return [Claim(kind="codecs", subjects=[str(i.get("id")) for i in infos], records=[str(obs.get("task_key"))],
                  detail={"ok": [[i["id"], i.get("device")] for i in infos if i.get("available")],
                          "bad": [[i["id"], i.get("reason") or "?"] for i in infos if not i.get("available")]})]


def _sweep_claims(obs: dict[str, Any]) -> list[Claim]:
    data = obs.get("data")
    if obs.get("kind") != "result":
        return failure_claims(obs)
    if not isinstance(data, dict):
        return []
    return [Claim(kind="sweep", subjects=[str(data.get("name", ""))], records=[str(obs.get("task_key"))],
                  detail={"n": data.get("tasks", 0), "counts": data.get("status_counts") or {},
                          "violations": len(data.get("violations") or []),
                          "best": [[r["series"], r["ratio"], r["mode"], r["bound"], r["dataset"]]
                                   for r in (data.get("best_ratio") or [])[:3]]})]


def _regression_claims(obs: dict[str, Any]) -> list[Claim]:
    if obs.get("kind") != "result":
        return failure_claims(obs)
    return [Claim(kind="regression", records=[str(obs.get("task_key"))],
                  detail={"summary": str(obs.get("summary") or "")})]


# ---- the whitelist -------------------------------------------------------------------

#: A codec on data: the records the results table, plots and most claims are made of.
EVALUATE = AgentTool(tools.evaluate_codec, on_result=OnResult.EVALUATION, failure_note="codec_crashed",
                     claims=no_claims, plan_check=PlanCheck.EVALUATION)
LIST_CODECS = AgentTool(tools.list_codecs, claims=_codecs_claims)
PLATFORM = AgentTool(tools.platform_snapshot, claims=_machine_claims)
PROFILE = AgentTool(tools.profile_program, report_section=Section.PROFILES, report_failures=True,
                    claims=_profile_claims, plan_check=PlanCheck.COMMAND)
DIAGNOSE_PROFILE = AgentTool(tools.diagnose_profile, report_section=Section.DIAGNOSES, claims=_diagnosis_claims,
                             plan_check=PlanCheck.AFTER_PROFILE)
DIAGNOSE_FILE = AgentTool(tools.diagnose_file, claims=_diagnosis_claims)
SWEEP = AgentTool(tools.run_sweep, on_result=OnResult.SWEEP, report_section=Section.SWEEPS,
                  claims=_sweep_claims, plan_check=PlanCheck.SWEEP)
COMPARE_RUNS = AgentTool(regress_tools.compare_runs, report_section=Section.REGRESSIONS, claims=_regression_claims)
TUNE = AgentTool(regress_tools.tune_command)

#: The whitelist, in the order a model sees it. A new tool is one more object here.
AGENT_TOOLS: tuple[AgentTool, ...] = (EVALUATE, LIST_CODECS, PLATFORM, PROFILE, DIAGNOSE_PROFILE, DIAGNOSE_FILE,
                                      SWEEP, COMPARE_RUNS, TUNE)


def whitelist() -> tuple[AgentTool, ...]:
    """The tool objects (read at each use, so that a test can put a tool in)."""
    return AGENT_TOOLS


def tool_functions() -> tuple[BaseTool, ...]:
    """The LangChain tools of the whitelist, what the ToolNode runs and a model is shown."""
    return tuple(t.tool for t in whitelist())


def tool_names() -> list[str]:
    return [t.name for t in whitelist()]


def find(name: Any) -> AgentTool | None:
    """The tool object of that name, or None (a spec's or a model's unknown tool)."""
    return next((t for t in whitelist() if t.name == name), None)


def failure_kind(name: str) -> str:
    """The note kind for a failed call of the tool called ``name`` (known or not)."""
    found = find(name)
    return found.failure_kind if found is not None else f"{name}_failed"


#: The LangChain tools of the whitelist, fixed at import (``tool_functions()`` reads it live).
TOOLS: tuple[BaseTool, ...] = tool_functions()
