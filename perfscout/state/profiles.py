"""Typed profiles parsed from tools' raw output (ncu, perf stat) and the platform.

Metric names are kept exactly as the tool printed them: rules read what is present
and never assume a name exists (they differ between chips and ncu versions).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Metric(BaseModel):
    """One metric value with its unit normalised (e.g. "byte", "second", "%")."""

    name: str
    value: float | str | None
    unit: str = ""
    raw: str = ""  # the text as it appeared in the input, for audit
    raw_unit: str = ""  # the unit as the tool printed it (before normalisation)


class KernelProfile(BaseModel):
    """One profiled kernel launch (one row of ``ncu --csv --page raw``).

    ``metrics`` holds every non-empty cell under its exact ncu name, in normalised units
    (time in ``second``, sizes in ``byte``, rates per ``second``, frequencies in ``hz``;
    ``raw``/``raw_unit`` keep what ncu printed). A cell that was empty is absent. The
    parser shares one Metric between launches with identical cells: treat them as
    read-only.
    """

    name: str
    id: int | None = None  # ncu launch id
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    device: str = ""  # the device's name when the profile says it, else its index
    device_index: int | None = None
    compute_capability: str = ""  # e.g. "9.0"
    process: str = ""
    stream: str = ""
    metrics: dict[str, Metric] = Field(default_factory=dict)
    ncu_rules: list[dict[str, Any]] = Field(default_factory=list)  # "ncu says" evidence

    def value(self, *names: str) -> float | None:
        """The first present numeric metric among ``names`` (alternatives across versions)."""
        for n in names:
            m = self.metrics.get(n)
            if m is not None and isinstance(m.value, (int, float)):
                return float(m.value)
        return None


class PerfProfile(BaseModel):
    """What ``perf stat`` (or its software fallback) measured for one command."""

    command: list[str] = Field(default_factory=list)
    events: dict[str, Metric] = Field(default_factory=dict)
    unavailable: dict[str, str] = Field(default_factory=dict)  # event -> "<not supported>" etc.
    multiplexing: dict[str, float] = Field(default_factory=dict)  # event -> % of time counted
    event_runtime_s: dict[str, float] = Field(default_factory=dict)  # event -> seconds it counted
    elapsed_s: float | None = None
    hardware_counters: bool = False
    fallback: str = ""  # e.g. "software events + getrusage": says what was used instead
    rusage: dict[str, float] = Field(default_factory=dict)  # the child's getrusage (user_s, ...)
    notes: list[str] = Field(default_factory=list)  # e.g. which events were multiplexed
