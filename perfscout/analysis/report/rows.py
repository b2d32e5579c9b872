"""Which stored result rows count as measured: the one filter the tables, the summary and
the figures of every report read (sweep and agent alike)."""

from __future__ import annotations

import pandas as pd

#: Status values where the codec ran to the end and the result was checked.
MEASURED_STATUSES = ("ok", "bound_violated", "bound_overshoot")


def measured(df: pd.DataFrame) -> pd.DataFrame:
    """Rows where the codec ran to the end and was checked (status measured, ratio known),
    with their ``series`` (``codec@device``, the colour and row label everywhere).

    A frame without a ``status`` column (records from before results carried one) counts
    every row with a ratio."""
    keep = df["ratio"].notna()
    if "status" in df:
        keep &= df["status"].isin(MEASURED_STATUSES)
    out = df[keep].copy()
    out["series"] = out["codec"] + "@" + out["device"]
    return out
