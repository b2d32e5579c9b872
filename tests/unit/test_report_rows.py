"""One filter of measured rows (perfscout.analysis.report.rows.measured) behind the sweep
summary and the figures of both reports: the same rows count everywhere."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from perfscout.analysis.report import plots, summary
from perfscout.analysis.report.rows import MEASURED_STATUSES, measured


def _frame() -> pd.DataFrame:
    rows = [
        # status, ratio
        ("ok", 4.0), ("bound_violated", 3.0), ("bound_overshoot", 2.5),
        ("codec_crashed", 9.0),  # a ratio left by a crash after compress: not measured
        ("ok", None),  # no ratio: not measured
    ]
    return pd.DataFrame([{"task_key": f"k{i}", "dataset": "d", "codec": "sz3", "device": "cpu", "mode": "abs",
                          "bound": 1e-3, "status": st, "ratio": r, "bound_ok": st == "ok" or st == "codec_crashed"} for i, (st, r) in enumerate(rows)])


def test_measured_keeps_checked_rows_with_a_ratio_and_names_their_series() -> None:
    d = measured(_frame())
    assert list(d["task_key"]) == ["k0", "k1", "k2"]
    assert set(d["status"]) == set(MEASURED_STATUSES)
    assert list(d["series"]) == ["sz3@cpu"] * 3


def test_a_frame_without_status_counts_every_row_with_a_ratio() -> None:
    d = measured(_frame().drop(columns=["status"]))
    assert list(d["task_key"]) == ["k0", "k1", "k2", "k3"]


def test_summary_and_plots_read_the_one_filter(tmp_path: Path) -> None:
    # no second copy in either module: both name the report package's function
    assert summary.measured is measured and plots.measured is measured
    df = plots.records_frame(_frame().to_dict("records"))  # the figures' numeric columns, NaN where absent
    df["bitrate"], df["psnr"] = 32 / df["ratio"], 60.0
    # the crashed row's ratio (9.0) would be the best if it counted
    assert summary.held(df)["ratio"].max() == 4.0
    figures = plots.dataset_figures(df, "d", tmp_path)
    assert figures and all(f.path.is_file() for f in figures)
