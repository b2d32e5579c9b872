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
