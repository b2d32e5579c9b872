"""A sweep with PSNR targets keeps each task's search outcome beside its record and its
report sets the codecs side by side at equal quality (real sweep, real sz3 and zfp)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfscout.api_sweep import report, sweep
from perfscout.tools.results_store import open_results

SPEC = """\
name: equal-quality
repeats: 1
jobs: 2
datasets:
  - synthetic: "grf:8,32,32"
codecs: [sz3, zfp]
bounds: {psnr: [40, 60], abs: [1.0e-1, 1.0e-2, 1.0e-3]}
report:
  psnr_min: 50
"""
CONTRACT = {"target", "metric", "tolerance", "window", "reached", "trials", "closest_below", "closest_above",
            "too_coarse"}


def test_a_psnr_sweep_stores_its_searches_and_reports_at_equal_quality(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    out = tmp_path / "run"
    sweep(tmp_path / "spec.yaml", out=out, progress=False)
    report(out)
    df = open_results(out)
    assert len(df) == 10 and set(df["status"]) == {"ok"}
    for row in df.itertuples():
        path = out / "raw" / row.task_key / "search.json"
        if row.mode != "psnr":
            assert not path.exists()
            continue
        doc = json.loads(path.read_text())
        assert CONTRACT <= set(doc) and doc["metric"] == "psnr" and doc["target"] == row.bound
        assert doc["chosen"] == [row.abs_bound, doc["chosen"][1]] and row.psnr >= row.bound
        assert row.psnr <= row.bound + 0.5 or doc["too_coarse"]
        assert not list(path.parent.glob("search.s*.json"))  # promoted with the record
    md = (out / "report.md").read_text()
    section = md.split("## At equal quality")[1].split("\n## ")[0]
    rows = [cells for cells in (line.split("|") for line in section.splitlines() if line.startswith("| "))
            if cells[2].strip().startswith("PSNR ")]
    asked = {(r[2].strip(), r[3].strip()) for r in rows}
    assert asked == {(f"PSNR {t} dB", s) for t in (40, 50, 60) for s in ("sz3@cpu", "zfp@cpu")}
    for r in rows:
        how = r[6]
        assert "measured:" in how or "interpolated between" in how or "outside the measured range" in how
        assert (r[4].strip() == "–") == ("outside" in how)  # a figure only where one was measured or bracketed


def test_a_dask_sweep_brings_the_searches_back_to_the_driver(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="pip install 'perfscout[dask]'")
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "spec.yaml").write_text(SPEC.replace("abs: [1.0e-1, 1.0e-2, 1.0e-3]", "abs: [1.0e-2]"))
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-c", "from perfscout.cli import main; main()", "sweep",
                          str(tmp_path / "spec.yaml"), "--out", str(out), "--executor", "dask", "--workers", "1",
                          "--json"], cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    df = open_results(out)
    psnr = df[df["mode"] == "psnr"]
    assert len(psnr) == 4
    for row in psnr.itertuples():  # the worker's search outcome, written by the driver beside the record
        doc = json.loads((out / "raw" / row.task_key / "search.json").read_text())
        assert CONTRACT <= set(doc) and doc["chosen"][0] == row.abs_bound
