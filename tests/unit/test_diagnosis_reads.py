"""The parse filter of `diagnose` (reads.py) leaves the diagnosis unchanged.

Checked two ways: every metric-like string in the diagnosis package is accepted by
``reads_metric`` (so a rule cannot read a column the filtered parse dropped), and every
committed real profile (H200: the CuPy and transpose fixtures, the planted suite, the
library suite and its fixed variants) diagnoses identically from the full and the
filtered parse.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from perfscout.analysis.diagnosis import diagnose
from perfscout.analysis.diagnosis.reads import engine_metric_names, reads_metric
from perfscout.tools.ncu_parse import load_raw_csv

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "perfscout" / "analysis" / "diagnosis"
PROFILES = sorted([*ROOT.glob("tests/fixtures/ncu/*_raw.csv"), *ROOT.glob("benchmarks/planted*/profiles/*raw.csv")])
#: an ncu metric name in a string literal; not a prefix tested with startswith(), nor the
#: metric a verify step names for the re-measured profile (read there, from a full parse)
_METRIC = re.compile(r"""(?<!startswith\()(?<!verify_metric=)["']([a-z][a-z0-9]*__[a-z0-9_]+(?:\.[a-z0-9_]+)*)["']""")


def test_every_metric_named_in_the_diagnosis_package_is_kept() -> None:
    missing = {}
    for py in PACKAGE.rglob("*.py"):
        for name in _METRIC.findall(py.read_text()):
            if not reads_metric(name):
                missing.setdefault(py.name, []).append(name)
    assert not missing, f"metrics read by the engine but dropped by the parse filter: {missing}"


def test_the_set_is_a_small_part_of_a_full_profile() -> None:
    cols = load_raw_csv(ROOT / "tests/fixtures/ncu/h200_cupy_kernels_raw.csv").columns
    kept = [c for c in cols if reads_metric(c)]
    assert 50 < len(kept) < len(cols) / 5
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in engine_metric_names()


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_filtered_parse_diagnoses_like_the_full_parse(path: Path) -> None:
    full = load_raw_csv(path)
    filtered = load_raw_csv(path, keep=reads_metric)
    assert [k.id for k in filtered.kernels] == [k.id for k in full.kernels]
    a = json.dumps(diagnose(full.kernels), default=str, sort_keys=True)
    b = json.dumps(diagnose(filtered.kernels), default=str, sort_keys=True)
    assert a == b
