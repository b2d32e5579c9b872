"""What a CPU rule sees: one ``perf stat`` profile, with event lookup across spellings.

perf names one event several ways (``cycles``, ``cycles:u``, ``cpu_core/cycles/`` on
hybrid CPUs); TopDown level-1 shares come as ``tma_*`` metrics or ``topdown-*`` events.
Evidence cites the event name exactly as the profile holds it.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis.evidence import derived_evidence, measured_evidence
from perfscout.state.perf_events import event_base
from perfscout.state.profiles import PerfProfile
from perfscout.state.records import Evidence

TOPDOWN = {
    "frontend": ("tma_frontend_bound", "topdown-fe-bound", "frontend_bound"),
    "backend": ("tma_backend_bound", "topdown-be-bound", "backend_bound"),
    "bad_speculation": ("tma_bad_speculation", "topdown-bad-spec", "bad_speculation"),
    "retiring": ("tma_retiring", "topdown-retiring", "retiring"),
    "memory": ("tma_memory_bound", "topdown-mem-bound", "memory_bound"),
}


#: The event underneath perf's spelling: ``cycles:u`` and ``cpu_core/cycles/`` -> ``cycles``.
base = event_base


class CpuContext:
    def __init__(self, profile: PerfProfile) -> None:
        self.profile = profile

    def name_of(self, *bases: str) -> str | None:
        for b in bases:
            if b in self.profile.events:
                return b
            for e in self.profile.events:
                if base(e) == b:
                    return e
        return None

    def val(self, *bases: str) -> float | None:
        n = self.name_of(*bases)
        if n is None:
            return None
        v = self.profile.events[n].value
        return float(v) if isinstance(v, (int, float)) else None

    def share(self, key: str) -> float | None:
        """A TopDown level-1/2 share as a fraction (perf prints percent)."""
        n = self.name_of(*TOPDOWN[key])
        v = self.val(*TOPDOWN[key])
        if n is None or v is None:
            return None
        unit = self.profile.events[n].unit
        if base(n).startswith("topdown-") and unit != "%" and v > 100.0:
            # perf's topdown-* events count pipeline slots (Ice Lake and later, "--topdown
            # --no-metric-only"): the share is the count over all slots
            slots = self.val("slots", "TOPDOWN.SLOTS", "topdown-total-slots") or sum(
                self.val(b) or 0.0 for b in ("topdown-retiring", "topdown-fe-bound", "topdown-be-bound", "topdown-bad-spec"))
            return v / slots if slots and slots >= v else None
        # A value perf marked "%" is a percentage however small (0.8 % is 0.008, not
        # 80 %); an unmarked one above 1 can only be a percentage too.
        return v / 100.0 if unit == "%" or v > 1.0 else v

    def ev(self, *bases: str, threshold: str = "") -> Evidence:
        return measured_evidence(self.name_of(*bases), self.profile.events, f"{bases} in the perf profile", threshold)

    def derived(self, name: str, value: float, inputs: list[str], unit: str = "",
                threshold: str = "") -> Evidence:
        present = set(self.profile.events) | set(self.profile.unavailable)
        return derived_evidence(name, value, inputs, present, unit=unit, threshold=threshold)

    def seconds(self) -> float | None:
        """CPU time the program used (task-clock), in seconds."""
        v = self.val("task-clock", "cpu-clock")
        if v is None:
            return None
        unit = self.profile.events[self.name_of("task-clock", "cpu-clock")].unit
        scale = {"s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e-3, "msec": 1e-3,
                 "us": 1e-6, "usec": 1e-6, "ns": 1e-9, "nsec": 1e-9}
        return v * scale.get(unit, 1e-3)  # unitless: perf's default for task-clock is msec
