"""What chunking cost: a chunked result's ratio and speed beside the single stream's.

A CPU codec's ``threads`` option (:mod:`perfscout.codecs.chunked`) splits the array into
independent streams, which changes the compression ratio (each stream has its header and
its predictor restarts at each slab edge). A sweep that runs the same setting with one and
with several threads gets both rows; this table sets them side by side, per dataset, codec,
device, mode and bound, so a report never shows a chunked ratio as if it were the codec's.
Only stored results are compared (no row without its single-stream twin).
"""

from __future__ import annotations

import pandas as pd

_KEY = ["dataset", "codec", "device", "mode", "bound"]
COLUMNS = ["dataset", "codec", "mode", "bound", "chunks", "CR 1 stream", "CR chunked", "CR change %",
           "compress MB/s 1 stream", "compress MB/s chunked", "compress speed-up", "bound held", "task"]


def chunking_table(results: pd.DataFrame) -> pd.DataFrame:
    """One row per chunked result that has a single-stream result of the same setting."""
    if results.empty or "chunks" not in results:
        return pd.DataFrame(columns=COLUMNS)
    measured = results[results["ratio"].notna()]
    chunks = pd.to_numeric(measured["chunks"], errors="coerce")
    single = measured[chunks == 1].drop_duplicates(_KEY).set_index(_KEY)
    rows = []
    for _, r in measured[chunks > 1].iterrows():
        key = tuple(r[k] for k in _KEY)
        if key not in single.index:
            continue
        one = single.loc[key]
        speed_1, speed_n = one["compress_MBps"], r["compress_MBps"]
        rows.append({
            "dataset": r["dataset"], "codec": r["codec"], "mode": r["mode"], "bound": r["bound"],
            "chunks": int(r["chunks"]), "CR 1 stream": one["ratio"], "CR chunked": r["ratio"],
            "CR change %": 100.0 * (r["ratio"] / one["ratio"] - 1.0),
            "compress MB/s 1 stream": speed_1, "compress MB/s chunked": speed_n,
            "compress speed-up": speed_n / speed_1 if speed_1 and speed_n else float("nan"),
            "bound held": r["bound_ok"], "task": r["task_key"],
        })
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["dataset", "codec", "mode", "bound", "chunks"]).reset_index(drop=True)
