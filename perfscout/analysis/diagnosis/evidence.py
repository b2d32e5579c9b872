"""Evidence of a measured metric and of one computed from several, shared by the GPU and CPU rule contexts.

DESIGN.md: a value computed from several metrics is cited as ``derived:NAME`` and lists
its inputs, which must themselves be present in the profile. Both contexts enforce that
here, so a rule can never cite an input the profile does not hold.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any

from perfscout.state.records import Evidence


def measured_evidence(name: str | None, metrics: Mapping[str, Any], looked_for: str, threshold: str = "") -> Evidence:
    """Evidence of one measured value (an ncu metric, a perf event: anything with ``value``
    and ``unit``) as the profile names it; KeyError when none of the names ``looked_for``
    was present (``name`` None: the caller's check that it exists was skipped)."""
    if name is None:
        raise KeyError(f"none of {looked_for}")
    m = metrics[name]
    return Evidence(metric=name, value=m.value, unit=m.unit, threshold=threshold)


def derived_evidence(name: str, value: float, inputs: list[str | None], present: Container[str], *,
                     unit: str = "", threshold: str = "") -> Evidence:
    missing = [i for i in inputs if i is None or i not in present]
    if missing:
        raise KeyError(f"derived:{name} cites absent metrics {missing}")
    return Evidence(metric=f"derived:{name}", value=round(value, 6), unit=unit,
                    threshold=threshold, inputs=[str(i) for i in inputs])
