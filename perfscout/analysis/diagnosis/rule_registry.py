"""Diagnosis rules: perfscout's own, plus plug-ins from ``perfscout.rules`` entry points.

The built-in rules are the modules of :mod:`perfscout.analysis.diagnosis.rules`. An
installed distribution adds one with ``[project.entry-points."perfscout.rules"]
ID = "package.module"`` (or ``"package.module:object"``); the entry point's name is the
rule id, and the object it names declares, like a built-in rule module:

- ``ID``: the same id (snake_case; a built-in id is never replaced);
- ``ROLE``: ``cause`` | ``roof`` | ``lever`` | ``advice`` (how the engine ranks it);
- ``PROFILE``: ``ncu`` (it reads a :class:`~perfscout.analysis.diagnosis.kernel_context.KernelContext`)
  or ``perf`` (a :class:`~perfscout.analysis.diagnosis.cpu_context.CpuContext`);
- ``READS``: ``{label: (metric, alternative, ...)}``, every metric it reads, each group
  required (the rule runs only on profiles holding one name of every group, and
  ``perfscout diagnose``'s parse keeps those columns);
- ``ARCH``: its architecture gate: ``"any"``, or for ``ncu`` rules ``"sm_XY"`` (runs only
  on chips known to be compute capability X.Y or newer), for ``perf`` rules a tuple of
  machine names (``("x86_64",)``, matched against the caller's ``platform["machine"]``);
- ``check(ctx) -> Finding | None``.

Entry points are scanned once, the way the codec registry scans its group
(:func:`perfscout.state.entry_points.scan`), and cached; :func:`rule_listing` says which
plug-ins loaded and why the others did not (import error, a declaration missing or
malformed, an id taken by a built-in or claimed twice); :func:`refresh_rules` forgets the
scan (after installing a distribution, in tests). How a loaded plug-in runs, under the
engine's guarantees, is :mod:`perfscout.analysis.diagnosis.plugin_guard`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel

from perfscout.analysis.diagnosis.rules import CPU_RULE_IDS, CPU_RULES, GPU_RULE_IDS, GPU_RULES
from perfscout.state.entry_points import CachedScan, PluginListing, scan

#: The entry-point group installed distributions declare their rules in.
ENTRY_POINT_GROUP = "perfscout.rules"
ROLES = ("cause", "roof", "lever", "advice")
PROFILES = ("ncu", "perf")
#: Rule ids are taxonomy ids: they name findings in reports and JSON, so snake_case only.
RULE_ID = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_SM = re.compile(r"^sm_(\d{1,2})(\d)$")  # sm_80 -> 8.0, sm_100 -> 10.0
_MACHINE = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")

Profile = Literal["ncu", "perf"]


@dataclass(frozen=True)
class PluginRule:
    """A plug-in rule that passed its declaration checks."""

    id: str
    role: str
    profile: Profile
    reads: dict[str, tuple[str, ...]]
    arch: str | tuple[str, ...]  # "any" | "sm_XY" (ncu) | machine names (perf)
    check: Callable[[Any], Any]
    value: str  # the entry point's "module[:object]"
    distribution: str  # "name version"

    @property
    def min_cc(self) -> tuple[int, int] | None:
        m = _SM.match(self.arch) if isinstance(self.arch, str) else None
        return (int(m.group(1)), int(m.group(2))) if m else None

    @property
    def arch_text(self) -> str:
        if isinstance(self.arch, tuple):
            return "/".join(self.arch)
        return f"{self.arch}+" if self.min_cc else self.arch

    def metric_names(self) -> frozenset[str]:
        return frozenset(n for group in self.reads.values() for n in group)


class RuleInfo(BaseModel):
    """One rule as ``perfscout rules`` lists it."""

    id: str
    role: str
    profile: Profile
    source: Literal["builtin", "plugin"] = "builtin"
    distribution: str = ""
    arch: str = ""  # plug-ins: their declared gate; built-ins gate inside check()
    reads: list[str] = []


def _declaration_problem(rule_id: str, obj: Any) -> str | None:
    """Why ``obj`` is not a usable rule declaration, or None."""
    if not RULE_ID.match(rule_id):
        return f"rule id {rule_id!r} is not snake_case (a lower-case letter, then letters, digits, _)"
    if getattr(obj, "ID", None) != rule_id:
        return f"its ID is {getattr(obj, 'ID', None)!r}; the entry point's name must be the rule's ID"
    if not callable(getattr(obj, "check", None)):
        return "it has no check(ctx) function"
    role = getattr(obj, "ROLE", None)
    if role not in ROLES:
        return f"ROLE is {role!r}; one of {', '.join(ROLES)}"
    profile = getattr(obj, "PROFILE", None)
    if profile not in PROFILES:
        return f"PROFILE is {profile!r}; 'ncu' (kernel profiles) or 'perf' (perf stat profiles)"
    reads = getattr(obj, "READS", None)
    if not isinstance(reads, dict) or not reads:
        return ("it declares no READS: a plug-in rule must name every metric it reads, "
                "{label: (metric, alternative, ...)}")
    for label, group in reads.items():
        if not (isinstance(group, tuple) and group and all(isinstance(n, str) and n.strip() for n in group)):
            return f"READS[{label!r}] is {group!r}; a non-empty tuple of metric names"
    arch = getattr(obj, "ARCH", None)
    if arch is None:
        return "it declares no ARCH gate: 'any', or 'sm_XY' (ncu) / machine names (perf)"
    if arch == "any":
        return None
    if profile == "ncu" and not (isinstance(arch, str) and _SM.match(arch)):
        return f"ARCH is {arch!r}; an ncu rule's gate is 'any' or 'sm_XY' (e.g. 'sm_80')"
    if profile == "perf" and not (isinstance(arch, tuple) and arch and all(
            isinstance(a, str) and _MACHINE.match(a) for a in arch)):
        return f"ARCH is {arch!r}; a perf rule's gate is 'any' or a tuple of machine names, e.g. ('x86_64',)"
    return None


def _check_rule(rule_id: str, obj: Any) -> tuple[str, str] | None:
    problem = _declaration_problem(rule_id, obj)
    return None if problem is None else ("invalid_rule", problem)


# -- the cached scan, behind one lock ------------------------------------------------------
_generation = 0  # bumped by every refresh: caches built from the rules (reads.py) key on it


def _scan() -> tuple[tuple[PluginRule, ...], PluginListing]:
    objects, listing = scan(ENTRY_POINT_GROUP, builtins=set(GPU_RULE_IDS) | set(CPU_RULE_IDS),
                            check=_check_rule, what="rule")
    by_id = {p.id: p for p in listing.loaded}
    rules = tuple(
        PluginRule(id=rid, role=obj.ROLE, profile=obj.PROFILE, reads=dict(obj.READS), arch=obj.ARCH,
                   check=obj.check, value=by_id[rid].value, distribution=by_id[rid].distribution)
        for rid, obj in sorted(objects.items()))
    return rules, listing


_CACHE: CachedScan[tuple[PluginRule, ...]] = CachedScan(ENTRY_POINT_GROUP, _scan, tuple)


def plugin_rules(profile: Profile | None = None) -> tuple[PluginRule, ...]:
    """The installed plug-in rules that loaded (of one profile kind when given), by id."""
    return tuple(r for r in _CACHE.get() if profile is None or r.profile == profile)


def gpu_rules() -> tuple[ModuleType | PluginRule, ...]:
    """Every rule the engine runs on a kernel profile: built-ins in taxonomy order, then plug-ins."""
    return GPU_RULES + plugin_rules("ncu")


def cpu_rules() -> tuple[ModuleType | PluginRule, ...]:
    """Every rule run on a perf stat profile: built-ins, then plug-ins."""
    return CPU_RULES + plugin_rules("perf")


def rule_listing() -> PluginListing:
    """The installed plug-in rules that loaded and those that failed, with the reason."""
    return _CACHE.listing()


def refresh_rules(*, entry_points: bool = True) -> None:
    """Forget the scan; the next lookup scans again. ``entry_points=False``: built-ins only
    until the next refresh."""
    global _generation
    with _CACHE.lock:
        _CACHE.clear(entry_points=entry_points)
        _generation += 1


def generation() -> int:
    """Changes whenever the set of rules may have changed (a refresh)."""
    return _generation


def list_rules() -> list[RuleInfo]:
    """Every rule that runs: built-ins (GPU, then CPU), then plug-ins."""
    out = []
    for profile, mods in (("ncu", GPU_RULES), ("perf", CPU_RULES)):
        for m in mods:
            names = sorted({n for group in m.READS.values() for n in group})
            out.append(RuleInfo(id=m.ID, role=m.ROLE, profile=profile, reads=names))
    for r in plugin_rules():
        out.append(RuleInfo(id=r.id, role=r.role, profile=r.profile, source="plugin", distribution=r.distribution,
                            arch=r.arch_text, reads=sorted(r.metric_names())))
    return out
