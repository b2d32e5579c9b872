"""Evidence built from several metrics, shared by the GPU and CPU rule contexts.

DESIGN.md: a value computed from several metrics is cited as ``derived:NAME`` and lists
its inputs, which must themselves be present in the profile. Both contexts enforce that
here, so a rule can never cite an input the profile does not hold.
"""

from __future__ import annotations

from collections.abc import Container

from perfscout.state.records import Evidence


def derived_evidence(name: str, value: float, inputs: list[str | None], present: Container[str], *,
                     unit: str = "", threshold: str = "") -> Evidence:
    missing = [i for i in inputs if i is None or i not in present]
    if missing:
        raise KeyError(f"derived:{name} cites absent metrics {missing}")
    return Evidence(metric=f"derived:{name}", value=round(value, 6), unit=unit,
                    threshold=threshold, inputs=[str(i) for i in inputs])
