"""Shared shape of the CPU findings."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.state.records import Evidence, Finding


def make(ctx: CpuContext, rule_id: str, role: str, title: str, *, confidence: float,
         evidence: list[Evidence], recommendation: str, verify: str, not_when: str,
         expected_gain: float | None, what_not_to_do: list[str] | None = None) -> Finding:
    gain = None if expected_gain is None else round(max(0.0, min(0.99, expected_gain)), 3)
    return Finding(id=rule_id, title=title, confidence=confidence, evidence=evidence,
                   recommendation=recommendation, verify=verify, not_when=not_when,
                   expected_gain=gain, arch="any",
                   extra={"role": role, "what_not_to_do": what_not_to_do or []})


def perf_cmd(events: str) -> str:
    return f"perf stat -x, -e {events} -- <your program>, then perfscout diagnose --perf-csv FILE"


def cpu_and_wall(ctx: CpuContext) -> tuple[float | None, float | None, str]:
    """(CPU seconds, wall seconds, where the CPU time came from): task-clock where perf counted
    it, else the child's getrusage (user + system); the wall time of the run (or of perf's own
    'CPUs utilized' in a saved file)."""
    cpu_s, source = ctx.seconds(), ctx.name_of("task-clock", "cpu-clock") or ""
    ru = ctx.profile.rusage
    user_only = source.endswith(":u")  # perf counted user space only: the kernel's share is missing
    if (cpu_s is None or user_only) and (ru.get("user_s") is not None or ru.get("system_s") is not None):
        cpu_s, source = float(ru.get("user_s") or 0.0) + float(ru.get("system_s") or 0.0), "getrusage"
    wall = ctx.profile.elapsed_s
    return cpu_s, (float(wall) if wall else None), source


def is_python(ctx: CpuContext) -> bool:
    """Whether the profiled command is a Python program (py-spy can sample it)."""
    import os
    import re

    argv = ctx.profile.command
    return bool(argv) and (bool(re.match(r"python(?:\d+(?:\.\d+)?)?$|pypy", os.path.basename(argv[0])))
                           or argv[0].endswith(".py"))


def sampling_step(ctx: CpuContext) -> str:
    """The next step that shows where the time goes: a sampling profiler for this command."""
    cmd = " ".join(ctx.profile.command) or "<your program>"
    step = f"perf record -g -- {cmd}, then perf report (hot functions with their call stacks)"
    if is_python(ctx):
        step = f"py-spy record -o profile.svg -- {cmd} (a flame graph of the Python functions); or " + step
    return step


def switch_count(ctx: CpuContext) -> float | None:
    """perf's context-switches, or None where it could not see them (counted in user space only,
    ":u", a switch is the kernel's and always reads 0)."""
    name = ctx.name_of("context-switches", "cs")
    if name is None or name.endswith(":u"):
        return None
    return ctx.val(name)
