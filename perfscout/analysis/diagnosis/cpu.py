"""CPU side of the diagnosis: ``perf stat`` profiles to findings.

Without hardware counters (VMs, containers, locked-down kernels) the software events and
the child's getrusage still answer: busy on N cores (task-clock against wall time), waiting
(off the CPU), context switches, page faults and memory growth; the primary is the largest
of those, and ``cpu_counters_unavailable`` (advice, never primary while any of them fires)
says what could not be measured and how to get it. With counters, TopDown level 1 (when perf
provides it) decides the category and the cache, branch, scheduling and paging rules size
the causes. The JSON mirrors the GPU shape:
``{"programs": [{"name", "primary", "findings", "metrics"}], "platform": {...}}``.
"""

from __future__ import annotations

import logging
from typing import Any

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.engine import rank
from perfscout.analysis.diagnosis.plugin_guard import run_rules
from perfscout.analysis.diagnosis.rule_registry import cpu_rules
from perfscout.state.profiles import PerfProfile

log = logging.getLogger(__name__)


def diagnose_perf(profile: PerfProfile, platform: dict | None = None) -> dict[str, Any]:
    ctx = CpuContext(profile)
    findings, problems = run_rules(cpu_rules(), ctx, platform)  # built-ins, then installed plug-ins
    kind = "no_counters" if not profile.hardware_counters else "cpu"
    primary, ordered = rank(findings, kind)
    log.debug("perf profile of %r: %s; primary %s; fired %s", " ".join(profile.command)[:80] or "program",
              "hardware counters" if profile.hardware_counters else (profile.fallback or "no hardware counters"),
              primary.id if primary else "none", ", ".join(f.id for f in ordered) or "nothing")
    cited: dict[str, dict[str, Any]] = {}
    for f in ordered:
        for e in f.evidence:
            for n in (e.inputs if e.metric.startswith("derived:") else [e.metric]):
                m = profile.events.get(n)
                if m is not None:
                    cited[n] = {"value": m.value, "unit": m.unit}
                elif n in profile.unavailable:
                    cited[n] = {"value": profile.unavailable[n], "unit": ""}
    program = {
        "name": " ".join(profile.command) or "program",
        "primary": primary.model_dump() if primary else None,
        "findings": [f.model_dump() for f in ordered],
        "metrics": cited,
    }
    if problems:  # plug-in rules whose findings were dropped (plugin_guard.py), and why
        program["rule_problems"] = problems
    return {
        "programs": [program],
        "platform": dict(platform or {}),
    }
