"""The sweep report's violation and failure tables show errors as people read them: the
GPU rows' machine-readable ``gpu_detail={...}`` note (read by the GPU section) is left out."""

from __future__ import annotations

import pandas as pd

from perfscout.analysis.report.summary import failures_table, violations_table

NOTE = 'gpu_detail={"compress_GBps": 912.5, "copy_GBps": 4200.0}'


def _frame() -> pd.DataFrame:
    base = {"dataset": "f", "codec": "cuszp-outlier", "device": "cuda", "mode": "rel", "bound": 1e-3,
            "abs_bound": 0.01, "max_abs_err": 0.0100001, "max_rel_err": None, "task_key": "k"}
    return pd.DataFrame([
        {**base, "status": "bound_overshoot", "bound_ok": False,
         "error": f"bound_overshoot: 3 element(s) exceed the abs bound; {NOTE}"},
        {**base, "status": "codec_crashed", "bound_ok": None, "error": f"signal 11; {NOTE}"},
        {**base, "status": "timeout", "bound_ok": None, "error": None},
    ])


def test_violation_table_keeps_the_sentence_and_drops_the_detail_note() -> None:
    t = violations_table(_frame())
    assert list(t["error"]) == ["bound_overshoot: 3 element(s) exceed the abs bound"]


def test_failure_table_drops_the_detail_note_and_keeps_missing_errors_missing() -> None:
    t = failures_table(_frame())
    assert t["error"].iloc[0] == "signal 11"
    assert pd.isna(t["error"].iloc[1])
    assert not any("gpu_detail" in str(e) for e in t["error"])
