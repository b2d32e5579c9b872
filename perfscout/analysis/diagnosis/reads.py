"""Every ncu metric the diagnosis engine can read, as one predicate.

A 1,000-launch ``--set full`` profile has ~2,200 columns and ~2 million cells, of which the
rules read about 150 names. ``perfscout diagnose`` without ``--all-metrics`` reports only
the metrics its findings cite, so the parser needs to build values only for these columns
(``parse_raw_csv(..., keep=reads_metric)``): the diagnosis is the same, at a fraction of
the parse time (benchmarks/ncu_parse_bench.py).

The set is collected, not hand-listed: every name in ``names.py`` (tuples, and dicts of
tuples), every stall reason's names, every rule module's ``READS``, the classifier's own
tuples, the prefixes the MMA reader scans, what the CLI shows beside a kernel (its
duration and the device's display name), and the declared ``READS`` of every installed
plug-in rule (``perfscout.rules`` entry points; the set follows a refresh of the registry). tests/unit/test_diagnosis_reads.py checks that
every metric-like string in the diagnosis package is covered, and that the diagnosis of
every committed profile is identical with and without the filter.
"""

from __future__ import annotations

from functools import lru_cache

from perfscout.analysis.diagnosis import classify
from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis import rule_registry
from perfscout.analysis.diagnosis.rules import GPU_RULES

#: Names the engine scans by prefix rather than by exact name.
PREFIXES = (N.TENSOR_OPS_PREFIX,)
#: Read outside the rules: the duration (digest, time share) and the device's display name.
ALSO_READ = ("gpu__time_duration.sum", "gpu__time_duration.avg", "Duration",
             "device__attribute_display_name")


def _strings(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, (tuple, list, frozenset, set)):
        return set().union(*(_strings(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values())) if value else set()
    return set()


def engine_metric_names() -> frozenset[str]:
    """Every metric name a rule (built-in or installed plug-in) or the engine may read."""
    return _names(rule_registry.generation())


@lru_cache(maxsize=2)
def _names(generation: int) -> frozenset[str]:  # the registry's generation: a refresh rebuilds it
    names: set[str] = set()
    for module in (N, classify):
        for attr, value in vars(module).items():
            if attr.isupper():
                names |= {s for s in _strings(value) if "__" in s}
    for reason in N.STALL_REASONS:
        names.update(N.stall(reason))
    for rule in GPU_RULES:
        names |= _strings(getattr(rule, "READS", {}))
    for plugin in rule_registry.plugin_rules("ncu"):
        names |= plugin.metric_names()
    names.update(ALSO_READ)
    return frozenset(names)


def reads_metric(name: str) -> bool:
    """True for a metric column the engine (or the diagnose report) may read."""
    return name in engine_metric_names() or name.startswith(PREFIXES)
