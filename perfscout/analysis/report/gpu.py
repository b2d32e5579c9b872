"""The GPU section of a sweep report: throughput against the copy roof measured in the same
task, compression ratio, end-to-end against kernel time where known, and the bound verdicts,
where every violation is a finding with its worst element and by how much.

The GPU evaluation (:mod:`perfscout.tools.gpu_eval`) stores what the record has no column for
as one ``gpu_detail={...}`` note at the end of the ``error`` column; :func:`format_detail`
writes it and :func:`parse_detail` reads it back (rows without it show the stable columns only).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

DETAIL_TAG = "gpu_detail="


def format_detail(detail: dict[str, Any]) -> str:
    """The note appended to a record's ``error`` (compact JSON; non-finite values as null)."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in detail.items()}
    return DETAIL_TAG + json.dumps(clean, separators=(",", ":"), sort_keys=True)


def parse_detail(error: Any) -> dict[str, Any] | None:
    """The detail dict of a record's ``error`` text, or None when it has none (or a broken one)."""
    if not isinstance(error, str):
        return None
    at = error.rfind(DETAIL_TAG)
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(error[at + len(DETAIL_TAG):])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def strip_detail(error: Any) -> str:
    """The human part of ``error`` (the detail note removed)."""
    if not isinstance(error, str):
        return ""
    at = error.rfind(DETAIL_TAG)
    return error if at < 0 else error[:at].rstrip("; ").strip()


@dataclass
class GpuSection:
    """What the renderer turns into blocks (empty when the run has no GPU row)."""

    intro: list[str] = field(default_factory=list)
    throughput: pd.DataFrame = field(default_factory=pd.DataFrame)
    verdicts: pd.DataFrame = field(default_factory=pd.DataFrame)
    findings: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.intro


def _gpu_rows(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return df
    return df[df["device"].astype(str).str.startswith("cuda")]


def _bound_label(row: pd.Series) -> str:
    return "lossless" if row["mode"] == "lossless" else f"{row['mode']} {row['bound']:g}"


def _num(d: dict[str, Any], key: str) -> float:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _phases_total(d: dict[str, Any]) -> float:
    """Wall seconds the evaluation spent in all its steps (gpu_eval's ``phases_s``), or NaN."""
    phases = d.get("phases_s")
    if not isinstance(phases, dict):
        return math.nan
    return float(sum(v for v in phases.values() if isinstance(v, (int, float)) and not isinstance(v, bool)))


def _verdict(row: pd.Series, detail: dict[str, Any]) -> str:
    status = str(row["status"])
    if row["mode"] == "lossless":
        return "bit-exact" if status == "ok" else ("differs" if status == "bound_violated" else status)
    if status == "ok":
        return "held"
    if status in ("bound_overshoot", "bound_violated"):
        return "VIOLATED" if status == "bound_violated" else "OVERSHOOT (float rounding)"
    return status


def gpu_section(df: pd.DataFrame) -> GpuSection:
    """Tables and findings of the GPU rows of a sweep (see the module docstring)."""
    rows = _gpu_rows(df)
    if rows.empty:
        return GpuSection()
    details = [parse_detail(e) or {} for e in rows["error"]]
    tput, verdicts, findings = [], [], []
    roofs = []
    for (_, row), d in zip(rows.iterrows(), details):
        roof = _num(d, "copy_GBps")
        if not math.isnan(roof):
            roofs.append(roof)
        c_gbps = row["nbytes"] / row["compress_s"] / 1e9 if row["compress_s"] and row["compress_s"] > 0 else math.nan
        d_gbps = (row["nbytes"] / row["decompress_s"] / 1e9
                  if row["decompress_s"] and row["decompress_s"] > 0 else math.nan)
        kernel_c, kernel_d = _num(d, "compress_kernel_GBps"), _num(d, "decompress_kernel_GBps")
        tput.append({
            "dataset": row["dataset"], "bound": _bound_label(row), "codec": row["codec"], "CR": row["ratio"],
            "compress GB/s": c_gbps, "× copy": c_gbps / roof if roof else math.nan,
            "decompress GB/s": d_gbps, "× copy ": d_gbps / roof if roof else math.nan,
            "kernel c/d GB/s": ("" if math.isnan(kernel_c) else f"{kernel_c:.4g} / {kernel_d:.4g}"),
            "copy GB/s": roof, "H2D ms": (row["h2d_s"] or math.nan) * 1e3, "D2H ms": (row["d2h_s"] or math.nan) * 1e3,
            "eval s": _phases_total(d), "task": row["task_key"],
        })
        worst = d.get("worst") or {}
        verdict = _verdict(row, d)
        verdicts.append({
            "dataset": row["dataset"], "bound": _bound_label(row), "codec": row["codec"], "verdict": verdict,
            "abs bound": row["abs_bound"], "max error": row["max_abs_err"],
            "elements beyond": d.get("n_beyond", math.nan), "beyond rounding": d.get("n_violations", math.nan),
            "worst index": ",".join(str(i) for i in worst.get("index", [])),
            "worst excess": _num(worst, "excess"), "excess / bound": _num(worst, "excess_over_bound"),
            "task": row["task_key"],
        })
        if row["status"] in ("bound_violated", "bound_overshoot"):
            findings.append(
                f"**{row['status']}**: `{row['codec']}` on {row['dataset']} at {_bound_label(row)} — "
                + (strip_detail(row["error"]) or "no detail stored") + f" (task `{row['task_key']}`)")
        elif row["status"] not in ("ok",):
            findings.append(f"`{row['codec']}` on {row['dataset']} at {_bound_label(row)}: {row['status']} — "
                            f"{strip_detail(row['error'])[:300]} (task `{row['task_key']}`)")
    n_bad = sum(1 for v in verdicts if v["verdict"] not in ("held", "bit-exact"))
    names = sorted(set(map(str, rows["device_name"].fillna(""))) - {""})
    roof_text = f": {min(roofs):.4g}–{max(roofs):.4g} GB/s." if roofs else "; no task recorded it."
    intro = [
        (f"{len(rows)} GPU task(s) on {', '.join(names) or 'an unnamed GPU'}. Each task measured its own "
         f"device-to-device copy of the same bytes (the roof; bytes read plus written){roof_text}"),
        ("GB/s count uncompressed bytes (1e9 per GB); \"× copy\" is that over the copy. Compress and decompress "
         "are end to end: one device-resident API call between two CUDA events (median), allocations and the "
         "library's own host steps included; `rel` was resolved to an absolute bound before the timed calls for "
         "every backend. Kernel-only figures appear where a benchmark measured them. \"eval s\" is the wall time "
         "of the whole evaluation (upload, warm-up, repeats, copy roof, host round trip, checks, metrics; "
         "`phases_s` in each record's detail splits it)."),
        (f"Bound verdicts: {len(verdicts) - n_bad} of {len(verdicts)} held (lossless: bit-exact); "
         f"{n_bad} finding(s) below — a violation is never averaged away."),
    ]
    return GpuSection(intro, pd.DataFrame(tput), pd.DataFrame(verdicts), findings)
