"""Running the rules, with a plug-in rule held to the guarantees the built-ins keep.

A built-in rule is perfscout's own code: its bugs are perfscout's and surface as such. A
plug-in rule (:mod:`perfscout.analysis.diagnosis.rule_registry`) is someone else's code,
so the engine checks what it says before it counts:

- it runs only where its ``ARCH`` gate admits the chip (an unknown chip admits no gated
  rule) and only on a profile holding one metric of every ``READS`` group;
- an exception from its ``check`` costs only its finding;
- its finding counts only if it is a ``Finding`` with the rule's id, rests on evidence,
  and every metric the evidence cites (a ``derived:`` value's inputs included) is one the
  rule declared and the profile holds with a finite value; gains and confidences in range;
- the declared ``ROLE`` decides its ranking, whatever the finding's ``extra`` says.

A finding that fails is dropped and reported as a *rule problem* (the diagnosis JSON's
``rule_problems``, and a warning in the log), never as a finding.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rule_registry import PluginRule
from perfscout.state.perf_events import event_base
from perfscout.state.records import Finding

log = logging.getLogger(__name__)

Context = KernelContext | CpuContext


def _admitted(rule: PluginRule, ctx: Context, platform: dict | None) -> bool:
    """The rule's architecture gate: does this chip (or machine) qualify?"""
    if rule.arch == "any":
        return True
    if isinstance(ctx, KernelContext):
        cc = rule.min_cc
        return cc is not None and ctx.arch.at_least(*cc)
    machine = (platform or {}).get("machine")
    return isinstance(machine, str) and machine in rule.arch


def _holds(ctx: Context, name: str) -> bool:
    """The profile holds ``name`` (exactly so spelled) with a finite value."""
    if isinstance(ctx, KernelContext):
        return ctx.name_of((name,)) == name
    m = ctx.profile.events.get(name)
    return m is not None and isinstance(m.value, (int, float)) and math.isfinite(m.value)


def _declared(rule: PluginRule, ctx: Context, name: str) -> bool:
    names = rule.metric_names()
    return name in names or (isinstance(ctx, CpuContext) and event_base(name) in names)


def _has_reads(rule: PluginRule, ctx: Context) -> bool:
    if isinstance(ctx, KernelContext):
        return all(ctx.name_of(group) is not None for group in rule.reads.values())
    return all(any(ctx.val(n) is not None for n in group) for group in rule.reads.values())


def _finding_problem(rule: PluginRule, ctx: Context, f: Any) -> str | None:
    """Why the plug-in's result cannot count as a finding, or None."""
    if not isinstance(f, Finding):
        return f"check() returned a {type(f).__name__}, not a Finding or None"
    if f.id != rule.id:
        return f"its finding's id is {f.id!r}, not the rule's id"
    if not f.evidence:
        return "its finding cites no evidence"
    if not (isinstance(f.confidence, (int, float)) and 0.0 <= f.confidence <= 1.0):
        return f"confidence {f.confidence!r} is outside [0, 1]"
    g = f.expected_gain
    if g is not None and not (isinstance(g, (int, float)) and math.isfinite(g) and 0.0 <= g < 1.0):
        return f"expected_gain {g!r} is outside [0, 1)"
    for e in f.evidence:
        if isinstance(e.value, float) and not math.isfinite(e.value):
            return f"evidence {e.metric!r} has the non-finite value {e.value!r}"
        if e.metric.startswith("host:"):
            if not (isinstance(ctx, KernelContext) and ctx.host_timing):
                return f"it cites {e.metric!r}, but no host timing was given"
            continue
        if e.metric.startswith("derived:"):
            if not e.inputs:
                return f"{e.metric!r} lists no inputs"
            cited = list(e.inputs)
        else:
            cited = [e.metric]
        for name in cited:
            if not _declared(rule, ctx, name):
                return f"it cites {name!r}, which its READS does not declare"
            if not _holds(ctx, name):
                return f"it cites {name!r}, which the profile does not hold (with a finite value)"
    return None


def run_plugin(rule: PluginRule, ctx: Context, platform: dict | None = None
               ) -> tuple[Finding | None, dict[str, str] | None]:
    """(the plug-in's finding or None, a rule problem or None)."""
    if not _admitted(rule, ctx, platform) or not _has_reads(rule, ctx):
        return None, None
    problem: str | None
    try:
        f = rule.check(ctx)
    except (Exception, SystemExit) as exc:  # a plug-in's bug costs only its own finding
        f, problem = None, f"check() raised {type(exc).__name__}: {exc}"
    else:
        problem = None if f is None else _finding_problem(rule, ctx, f)
    if problem is not None:
        log.warning("diagnosis rule %s (plug-in from %s) dropped: %s", rule.id, rule.distribution, problem)
        return None, {"rule": rule.id, "distribution": rule.distribution, "reason": problem}
    if f is None:
        return None, None
    f = f.model_copy(deep=True)  # the engine annotates it; the plug-in's object stays its own
    cls = getattr(ctx, "cls", None)
    f.extra = {"class": cls.kind if cls else "", "unit": cls.unit if cls else "", "at_roof": False,
               "what_not_to_do": [], "verify_plan": {}, **f.extra,
               "role": rule.role, "source": f"plugin {rule.distribution}"}
    if f.arch in ("", "any"):
        f.arch = rule.arch_text
    return f, None


def run_rules(rules: Iterable[ModuleType | PluginRule], ctx: Context, platform: dict | None = None
              ) -> tuple[list[Finding], list[dict[str, str]]]:
    """Every rule's finding (in rule order) and the plug-in rules' problems."""
    findings: list[Finding] = []
    problems: list[dict[str, str]] = []
    for rule in rules:
        if isinstance(rule, PluginRule):
            f, problem = run_plugin(rule, ctx, platform)
            if problem is not None:
                problems.append(problem)
        else:
            f = rule.check(ctx)
        if f is not None:
            findings.append(f)
    return findings, problems
