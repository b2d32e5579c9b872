"""What a GPU rule sees (``KernelContext``): one kernel's metrics, its classification, its chip, host timing.

Rules read metrics only through :class:`KernelContext`, which resolves alternatives
(the first present name wins) and builds :class:`Evidence` citing the name exactly as
it appears in the profile, so a finding can never cite a metric the profile lacks.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from math import isfinite
from typing import Any

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.arch import Arch, arch_for
from perfscout.analysis.diagnosis.evidence import derived_evidence, measured_evidence
from perfscout.state.profiles import KernelProfile
from perfscout.state.records import Evidence


@dataclass
class Classification:
    """Speed-of-light verdict for one kernel, decided before any detail rule runs."""

    kind: str  # "compute" | "memory" | "latency" | "underfilled" | "launch" | "unknown"
    unit: str = ""  # memory: "dram" | "l2" | "l1" | "memory"; compute: the top pipe
    sm_pct: float | None = None
    mem_pct: float | None = None
    top_pct: float | None = None  # the limiting unit's throughput, % of its peak
    roof_pct: float | None = None  # the sustainable ceiling for that unit
    at_roof: bool = False
    evidence: list[Evidence] = field(default_factory=list)
    #: each unit's throughput as a fraction of its roof ("sm", "dram", "l2", "l1")
    fractions: dict[str, float] = field(default_factory=dict)

    def next_roof_gain(self) -> float | None:
        """Most time a fix of the limiting unit can save before the next-busiest unit
        reaches its roof (then that unit limits instead)."""
        others = [v for k, v in self.fractions.items() if k != self.unit and not
                  (self.kind == "compute" and k == "sm")]
        if not others:
            return None
        return max(0.0, 1.0 - max(others))

    @property
    def headroom(self) -> float:
        """Fraction of the time that reaching the roof could save (0 when at or past it)."""
        if self.top_pct is None or not self.roof_pct:
            return 0.0
        return max(0.0, 1.0 - self.top_pct / self.roof_pct)


#: Time units as ncu prints them (or as a parser normalised them) -> seconds.
_TIME_SCALE = {"s": 1.0, "second": 1.0, "ms": 1e-3, "msecond": 1e-3, "us": 1e-6, "usecond": 1e-6,
               "ns": 1e-9, "nsecond": 1e-9}


class KernelContext:
    """Metric access + evidence building for one kernel launch."""

    def __init__(self, kernel: KernelProfile, platform: dict | None = None,
                 host_timing: dict[str, Any] | None = None) -> None:
        self.kernel = kernel
        self.platform = platform or {}
        self.arch: Arch = arch_for(kernel.device, kernel.compute_capability, platform)
        self.host_timing = host_timing  # e.g. {"host_per_launch_us": 5.8, ...} or None
        self.cls: Classification | None = None  # set by the engine before rules run

    # ---------------------------------------------------------------- reading
    def name_of(self, names: tuple[str, ...]) -> str | None:
        """The first alternative present with a finite numeric value (a NaN or inf cell
        measures nothing: it is read as absent, like an empty one)."""
        for n in names:
            m = self.kernel.metrics.get(n)
            if m is not None and isinstance(m.value, (int, float)) and isfinite(m.value):
                return n
        return None

    def val(self, names: tuple[str, ...]) -> float | None:
        n = self.name_of(names)
        return float(self.kernel.metrics[n].value) if n else None  # type: ignore[arg-type]

    def seconds(self, names: tuple[str, ...]) -> float | None:
        """A duration in seconds, whatever time unit the profile carries it in."""
        n = self.name_of(names)
        if n is None:
            return None
        m = self.kernel.metrics[n]
        return float(m.value) * _TIME_SCALE.get(m.unit, 1.0)  # type: ignore[arg-type]

    def has(self, *groups: tuple[str, ...]) -> bool:
        return all(self.name_of(g) is not None for g in groups)

    def stall_cycles(self) -> dict[str, float]:
        """Per-issue stall cycles by reason (only the reasons the profile has)."""
        out = {}
        for reason in N.STALL_REASONS:
            v = self.val(N.stall(reason))
            if v is not None:
                out[reason] = v
        return out

    def stall_share(self, reason: str) -> tuple[float | None, list[str]]:
        """Share of a warp's cycles spent stalled on ``reason``, and the metrics used.

        The total is the sum over reasons (``selected`` included: a warp issuing is not
        stalled, but its cycles count), which equals ncu's warp-latency-per-issue figure.
        """
        cycles = self.stall_cycles()
        if reason not in cycles:
            return None, []
        total = sum(cycles.values())
        if total <= 0:
            return None, []
        used = [self.name_of(N.stall(r)) for r in cycles]
        return cycles[reason] / total, [u for u in used if u]

    # ---------------------------------------------------------------- evidence
    def ev(self, names: tuple[str, ...], threshold: str = "") -> Evidence:
        """Evidence for the first present alternative (caller checked it exists)."""
        return measured_evidence(self.name_of(names), self.kernel.metrics, f"{names} in profile of {self.kernel.name}",
                                 threshold)

    def derived(self, name: str, value: float, inputs: list[str], unit: str = "",
                threshold: str = "") -> Evidence:
        return derived_evidence(name, value, inputs, self.kernel.metrics, unit=unit, threshold=threshold)

    def host(self, name: str, value: float, unit: str, threshold: str = "") -> Evidence:
        """Evidence measured on the host (not in the ncu profile): cited as ``host:NAME``."""
        return Evidence(metric=f"host:{name}", value=round(value, 6), unit=unit, threshold=threshold)

    # ---------------------------------------------------------------- commands
    def ncu_command(self) -> str:
        """The command that re-measures this kernel (what a verify step runs), quoted so it
        pastes into a POSIX shell as is; ``./app`` stands for the user's program."""
        kernel_filter = shlex.quote(f"regex:{re.escape(kernel_stem(self.kernel.name))}")
        return (f"ncu --set full --csv --page raw --clock-control none -k {kernel_filter} -c 1 ./app "
                f"> after.csv && perfscout verify --before-csv before.csv --after-csv after.csv "
                f"--kernel {shlex.quote(self.kernel.name)}")


#: The innermost template argument list: removed repeatedly, so nested ones go too.
_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
_PARAMS = re.compile(r"\(.*$", re.DOTALL)


@lru_cache(maxsize=4096)
def kernel_stem(name: str) -> str:
    """The bare function name of a (demangled) kernel name: ``void at::foo<4, F>(int)`` ->
    ``foo``. ncu's ``-k regex:`` searches the function name, so the stem matches every
    instantiation of that kernel without shell- or regex-hostile characters.

    Template arguments go first (they may hold ``::`` and ``(``), innermost list first
    (a few regex passes instead of a per-character loop; a stray ``>`` is dropped), then
    the parameter list."""
    text = name.strip().replace("(anonymous namespace)::", "")
    if text.startswith("void "):
        text = text[5:]
    while "<" in text:
        stripped = _TEMPLATE_ARGS.sub("", text)
        if stripped == text:  # an unbalanced '<': drop from it to the end of its name
            stripped = text[:text.index("<")]
        text = stripped
    text = _PARAMS.sub("", text.replace(">", ""))
    stem = text.strip().split("::")[-1].strip()
    return stem or name
