"""The engine on damaged real profiles: metrics missing (other ncu sets, other versions) or
holding values no kernel produces (0, negative, NaN, inf, huge). Every committed H200 launch
is a starting point; whatever is removed or replaced, the diagnosis must not raise, must cite
only metrics the profile holds with finite values, and must keep gains and confidences in
range."""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from perfscout.analysis.diagnosis import diagnose_kernel
from perfscout.analysis.diagnosis.reads import reads_metric
from perfscout.state.profiles import Metric
from perfscout.tools.ncu_parse import load_raw_csv, parse_raw_csv

ROOT = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=1)
def _launches():
    paths = sorted([*ROOT.glob("tests/fixtures/ncu/*_raw.csv"), *ROOT.glob("benchmarks/planted*/profiles/*raw.csv")])
    return [k for p in paths for k in load_raw_csv(p, keep=reads_metric).kernels]


def _check(k) -> None:  # noqa: ANN001 - a KernelProfile
    d = diagnose_kernel(k)
    json.dumps(d, allow_nan=False)  # nothing non-finite reaches the report
    for f in d["findings"]:
        assert f["expected_gain"] is None or 0.0 <= f["expected_gain"] < 1.0, f
        assert 0.0 <= f["confidence"] <= 1.0
        for e in f["evidence"]:
            names = e["inputs"] if e["metric"].startswith("derived:") else \
                [] if e["metric"].startswith("host:") else [e["metric"]]
            for n in names:
                m = k.metrics.get(n)
                assert m is not None, (f["id"], n)
                assert not isinstance(m.value, float) or math.isfinite(m.value), (f["id"], n, m.value)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_missing_metrics_never_break_the_diagnosis(data) -> None:
    k = data.draw(st.sampled_from(_launches()))
    names = sorted(k.metrics)
    dropped = data.draw(st.sets(st.sampled_from(names), max_size=len(names)))
    _check(k.model_copy(update={"metrics": {n: m for n, m in k.metrics.items() if n not in dropped}}))


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_impossible_values_never_break_the_diagnosis(data) -> None:
    k = data.draw(st.sampled_from(_launches()))
    numeric = sorted(n for n, m in k.metrics.items() if isinstance(m.value, float))
    hit = data.draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=40, unique=True))
    metrics = dict(k.metrics)
    for n in hit:
        v = data.draw(st.sampled_from([0.0, -1.0, float("nan"), float("inf"), -float("inf"), 1e30, 1e-30]))
        old = metrics[n]
        metrics[n] = Metric(name=n, value=v, unit=old.unit, raw=str(v), raw_unit=old.raw_unit)
    _check(k.model_copy(update={"metrics": metrics}))


def test_nan_and_inf_cells_are_not_measurements() -> None:
    text = ('"ID","Kernel Name","Device","CC","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed"\n'
            '"","","","","ns","%"\n'
            '"0","k","0","9.0","nan","inf"\n')
    (k,) = parse_raw_csv(text).kernels
    assert k.metrics["gpu__time_duration.sum"].value == "nan" and k.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"].value == "inf"
    assert diagnose_kernel(k)["primary"] is None
