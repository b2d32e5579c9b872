"""A written summary of a sweep from its stored rows only, by deterministic templates.

Each :class:`Statement` carries the :class:`Fact` s it quotes: (task_key, column, value)
triples read from the store, so every figure in the text can be traced to a row (the
report prints the task keys, and a test re-reads them). Derived numbers (a factor
"2.1×") are computed from the quoted facts only. The same rows always give the same text.
"""

from __future__ import annotations

import math
from itertools import combinations

import pandas as pd
from pydantic import BaseModel, Field

from perfscout.analysis.report.gpu import strip_detail
from perfscout.analysis.report.rows import MEASURED_STATUSES, measured

#: A throughput this far below both neighbouring bounds' is an anomaly (a dip).
THROUGHPUT_DROP = 0.5


class Fact(BaseModel):
    task_key: str
    column: str
    value: float | str | None


class Statement(BaseModel):
    kind: str  # overview | best | goal | violation | lead | crossover | architecture | trend | anomaly
    dataset: str = ""
    text: str
    facts: list[Fact] = Field(default_factory=list)

    @property
    def task_keys(self) -> list[str]:
        return list(dict.fromkeys(f.task_key for f in self.facts))


def fmt(x: float) -> str:
    """Three significant digits, the way every number in the summary is printed."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    return f"{x:.3g}"


def fmt_bound(x: float) -> str:
    return f"{x:g}"


def _series(row: pd.Series) -> str:
    return f"{row['codec']}@{row['device']}"


def _facts(row: pd.Series, *columns: str) -> list[Fact]:
    out = []
    for c in columns:
        v = row[c]
        if isinstance(v, float) or hasattr(v, "item"):
            v = float(v)
        out.append(Fact(task_key=str(row["task_key"]), column=c, value=v))
    return out


def held(df: pd.DataFrame) -> pd.DataFrame:
    """Measured rows whose bound held (bound_ok True)."""
    d = measured(df)
    return d[d["bound_ok"].fillna(False).astype(bool)]


# ----------------------------------------------------------------------------- tables


def best_cr_table(df: pd.DataFrame) -> pd.DataFrame:
    """Goal "highest CR with bound held": the best row per dataset and codec@device."""
    d = held(df)
    if d.empty:
        return pd.DataFrame()
    idx = d.groupby(["dataset", "series"])["ratio"].idxmax()
    best = d.loc[idx].sort_values(["dataset", "ratio"], ascending=[True, False])
    return best[["dataset", "series", "mode", "bound", "ratio", "bitrate", "psnr", "max_abs_err", "compress_MBps",
                 "task_key"]].reset_index(drop=True)


def fastest_table(df: pd.DataFrame, psnr_min: float) -> pd.DataFrame:
    """Goal "fastest with PSNR >= X" (bound held): best compress MB/s per dataset and codec@device."""
    d = held(df)
    d = d[d["psnr"].notna() & (d["psnr"] >= psnr_min) & d["compress_MBps"].notna()]
    if d.empty:
        return pd.DataFrame()
    idx = d.groupby(["dataset", "series"])["compress_MBps"].idxmax()
    best = d.loc[idx].sort_values(["dataset", "compress_MBps"], ascending=[True, False])
    return best[["dataset", "series", "mode", "bound", "compress_MBps", "decompress_MBps", "psnr", "ratio",
                 "task_key"]].reset_index(drop=True)


def violations_table(df: pd.DataFrame) -> pd.DataFrame:
    """Every measured row whose bound did not hold."""
    d = df[df["bound_ok"].eq(False).fillna(False)]
    return _readable_errors(d[["dataset", "codec", "device", "mode", "bound", "abs_bound", "max_abs_err",
                               "max_rel_err", "status", "error", "task_key"]])


def failures_table(df: pd.DataFrame) -> pd.DataFrame:
    """Every task that did not produce a measured result, with its error."""
    d = df[~df["status"].isin(MEASURED_STATUSES)]
    return _readable_errors(d[["dataset", "codec", "device", "mode", "bound", "status", "error", "task_key"]])


def _readable_errors(d: pd.DataFrame) -> pd.DataFrame:
    """The error column as a person reads it: a GPU row's machine-readable detail note
    (``gpu_detail={...}``, which the GPU section reads) is left out of the tables."""
    d = d.reset_index(drop=True)
    d["error"] = d["error"].map(lambda e: strip_detail(e) if isinstance(e, str) else e)
    return d


# ----------------------------------------------------------------------------- statements


def overview(df: pd.DataFrame) -> Statement:
    counts = df["status"].value_counts().sort_index()
    parts = ", ".join(f"{n} {s}" for s, n in counts.items())
    violated = int(df["bound_ok"].eq(False).fillna(False).sum())
    text = f"{len(df)} stored task result(s): {parts}; {violated} with a violated bound."
    return Statement(kind="overview", text=text)


def best_statement(df: pd.DataFrame, dataset: str) -> Statement | None:
    d = held(df[df["dataset"] == dataset])
    if d.empty:
        return None
    r = d.loc[d["ratio"].idxmax()]
    psnr = f", PSNR {fmt(r['psnr'])} dB" if pd.notna(r["psnr"]) else ""
    text = (f"Highest compression ratio with the bound held: {fmt(r['ratio'])} by {_series(r)} at "
            f"{r['mode']} {fmt_bound(r['bound'])}{psnr}.")
    return Statement(kind="best", dataset=dataset, text=text, facts=_facts(r, "ratio", "bound", "psnr"))


def lead_statements(df: pd.DataFrame, dataset: str) -> list[Statement]:
    """Who leads on CR at the tightest and the loosest bound of each mode, and by how much.

    Only results whose bound held compete: a codec does not win by breaking the bound.
    """
    d = held(df[df["dataset"] == dataset])
    out = []
    for mode, g in sorted(d.groupby("mode"), key=lambda kv: kv[0]):
        bounds = sorted(g["bound"].unique())
        for b in dict.fromkeys([bounds[0], bounds[-1]]):
            at = g[g["bound"] == b].sort_values(["ratio", "series"], ascending=[False, True])
            if at["series"].nunique() < 2:
                continue
            first = at.iloc[0]
            second = at[at["series"] != first["series"]].iloc[0]
            factor = first["ratio"] / second["ratio"] if second["ratio"] else math.inf
            text = (f"At {mode} {fmt_bound(b)}, {_series(first)} leads with CR {fmt(first['ratio'])}, "
                    f"{fmt(factor)}× {_series(second)}'s {fmt(second['ratio'])}.")
            out.append(Statement(kind="lead", dataset=dataset, text=text,
                                 facts=_facts(first, "ratio", "bound") + _facts(second, "ratio")))
    return out


def crossover_statements(df: pd.DataFrame, dataset: str) -> list[Statement]:
    """Pairs of codecs whose CR order flips between two neighbouring bounds (bound held)."""
    d = held(df[df["dataset"] == dataset])
    out = []
    for mode, g in sorted(d.groupby("mode"), key=lambda kv: kv[0]):
        piv = g.pivot_table(index="bound", columns="series", values="ratio", aggfunc="first").sort_index()
        by_point = g.set_index(["bound", "series"], drop=False)
        for a, b in combinations(sorted(piv.columns), 2):
            pair = piv[[a, b]].dropna()
            if len(pair) < 2:
                continue
            sign = (pair[a] > pair[b]).astype(int) - (pair[a] < pair[b]).astype(int)
            bounds = list(pair.index)
            for lo, hi in zip(bounds, bounds[1:]):
                if sign[lo] == 0 or sign[hi] == 0 or sign[lo] == sign[hi]:
                    continue
                win_lo, lose_lo = (a, b) if sign[lo] > 0 else (b, a)
                rows = [by_point.loc[(lo, win_lo)], by_point.loc[(lo, lose_lo)], by_point.loc[(hi, lose_lo)],
                        by_point.loc[(hi, win_lo)]]
                rows = [r.iloc[0] if isinstance(r, pd.DataFrame) else r for r in rows]
                text = (f"Crossover ({mode}): at {fmt_bound(lo)} {win_lo} has the higher CR "
                        f"({fmt(rows[0]['ratio'])} vs {fmt(rows[1]['ratio'])}); at {fmt_bound(hi)} {lose_lo} leads "
                        f"({fmt(rows[2]['ratio'])} vs {fmt(rows[3]['ratio'])}).")
                facts = [f for r in rows for f in _facts(r, "ratio")]
                out.append(Statement(kind="crossover", dataset=dataset, text=text, facts=facts))
    return out


def trend_statements(df: pd.DataFrame, dataset: str) -> list[Statement]:
    """CR against the bound per codec@device and mode: its span, or where it is not monotone."""
    d = measured(df[df["dataset"] == dataset])
    out = []
    for (series, mode), g in sorted(d.groupby(["series", "mode"]), key=lambda kv: kv[0]):
        g = g.sort_values("bound")
        if len(g) < 3:
            continue
        lo, hi = g.iloc[0], g.iloc[-1]
        ratios = list(g["ratio"])
        drops = [(g.iloc[i], g.iloc[i + 1]) for i in range(len(g) - 1) if ratios[i + 1] < ratios[i] * 0.99]
        if not drops:
            text = (f"{series} ({mode}): CR rises from {fmt(lo['ratio'])} at {fmt_bound(lo['bound'])} to "
                    f"{fmt(hi['ratio'])} at {fmt_bound(hi['bound'])} ({fmt(hi['ratio'] / lo['ratio'])}×) "
                    "as the bound loosens.")
            out.append(Statement(kind="trend", dataset=dataset, text=text,
                                 facts=_facts(lo, "ratio", "bound") + _facts(hi, "ratio", "bound")))
        for a, b in drops:
            text = (f"Anomaly, {series} ({mode}): CR falls from {fmt(a['ratio'])} at {fmt_bound(a['bound'])} to "
                    f"{fmt(b['ratio'])} at the looser {fmt_bound(b['bound'])}.")
            out.append(Statement(kind="anomaly", dataset=dataset, text=text,
                                 facts=_facts(a, "ratio", "bound") + _facts(b, "ratio", "bound")))
    return out


def throughput_anomalies(df: pd.DataFrame, dataset: str) -> list[Statement]:
    """A dip: at one bound a codec's throughput falls far below *both* neighbouring bounds.

    A steady slowdown as the bound tightens is the expected trend (more bits to code),
    not an anomaly, so only interior points of a bound series are judged.
    """
    d = measured(df[df["dataset"] == dataset])
    out = []
    for (series, mode), g in sorted(d.groupby(["series", "mode"]), key=lambda kv: kv[0]):
        g = g.sort_values("bound")
        for col, word in (("compress_MBps", "compress"), ("decompress_MBps", "decompress")):
            for i in range(1, len(g) - 1):
                left, r, right = g.iloc[i - 1], g.iloc[i], g.iloc[i + 1]
                if pd.isna(r[col]) or pd.isna(left[col]) or pd.isna(right[col]):
                    continue
                if r[col] >= THROUGHPUT_DROP * min(left[col], right[col]):
                    continue
                text = (f"Anomaly, {series} ({mode}): {word} throughput drops to {fmt(r[col])} MB/s at "
                        f"{fmt_bound(r['bound'])}, against {fmt(left[col])} MB/s at {fmt_bound(left['bound'])} "
                        f"and {fmt(right[col])} MB/s at {fmt_bound(right['bound'])}.")
                out.append(Statement(kind="anomaly", dataset=dataset, text=text,
                                     facts=_facts(r, col, "bound") + _facts(left, col, "bound")
                                     + _facts(right, col, "bound")))
    return out


def architecture_statements(df: pd.DataFrame, dataset: str) -> list[Statement]:
    """Fastest GPU against fastest CPU codec on compress throughput, per mode and bound."""
    d = measured(df[df["dataset"] == dataset])
    d = d[d["compress_MBps"].notna()]
    d["kind"] = d["device"].str.split(":").str[0]
    out = []
    for (mode, b), g in sorted(d.groupby(["mode", "bound"]), key=lambda kv: kv[0]):
        cpu, gpu = g[g["kind"] == "cpu"], g[g["kind"] == "cuda"]
        if cpu.empty or gpu.empty:
            continue
        c, u = cpu.loc[cpu["compress_MBps"].idxmax()], gpu.loc[gpu["compress_MBps"].idxmax()]
        text = (f"CPU vs GPU at {mode} {fmt_bound(b)}: {_series(u)} compresses at {fmt(u['compress_MBps'])} MB/s "
                f"(CR {fmt(u['ratio'])}), {_series(c)} at {fmt(c['compress_MBps'])} MB/s (CR {fmt(c['ratio'])}): "
                f"{fmt(u['compress_MBps'] / c['compress_MBps'])}× on the GPU.")
        out.append(Statement(kind="architecture", dataset=dataset, text=text,
                             facts=_facts(u, "compress_MBps", "ratio", "bound") + _facts(c, "compress_MBps", "ratio")))
    return out


def violation_statements(df: pd.DataFrame, dataset: str) -> list[Statement]:
    """Each violated bound, with the error that broke it."""
    d = df[(df["dataset"] == dataset) & df["bound_ok"].eq(False).fillna(False)].copy()
    out = []
    for _, r in d.sort_values(["codec", "device", "mode", "bound"]).iterrows():
        if pd.notna(r["abs_bound"]) and pd.notna(r["max_abs_err"]):
            text = (f"Bound violated: {_series(r)} at {r['mode']} {fmt_bound(r['bound'])} reached a max error of "
                    f"{fmt(r['max_abs_err'])} against the absolute bound {fmt(r['abs_bound'])}.")
            facts = _facts(r, "bound", "max_abs_err", "abs_bound")
        elif pd.notna(r["max_pw_rel_err"]):  # point-wise relative: no single absolute bound
            text = (f"Bound violated: {_series(r)} at {r['mode']} {fmt_bound(r['bound'])} reached a point-wise "
                    f"relative error of {fmt(r['max_pw_rel_err'])}.")
            facts = _facts(r, "bound", "max_pw_rel_err")
        else:
            text = f"Bound violated: {_series(r)} at {r['mode']} {fmt_bound(r['bound'])}."
            facts = _facts(r, "bound")
        out.append(Statement(kind="violation", dataset=dataset, text=text, facts=facts))
    return out


def goal_statement(df: pd.DataFrame, dataset: str, psnr_min: float) -> Statement | None:
    t = fastest_table(df[df["dataset"] == dataset], psnr_min)
    if t.empty:
        return Statement(kind="goal", dataset=dataset,
                         text=f"No setting reached PSNR ≥ {fmt_bound(psnr_min)} dB with its bound held.")
    key = t.iloc[0]["task_key"]
    r = df[df["task_key"] == key].iloc[0]
    text = (f"Fastest with PSNR ≥ {fmt_bound(psnr_min)} dB: {_series(r)} at {r['mode']} {fmt_bound(r['bound'])}, "
            f"{fmt(r['compress_MBps'])} MB/s compress, PSNR {fmt(r['psnr'])} dB, CR {fmt(r['ratio'])}.")
    return Statement(kind="goal", dataset=dataset, text=text,
                     facts=_facts(r, "bound", "compress_MBps", "psnr", "ratio"))


def summarize(df: pd.DataFrame, psnr_min: float = 60.0) -> list[Statement]:
    """All statements, run-level first, then per dataset in name order."""
    if df.empty:
        return [Statement(kind="overview", text="The store holds no results yet.")]
    out = [overview(df)]
    for dataset in sorted(df["dataset"].unique()):
        for item in [best_statement(df, dataset), goal_statement(df, dataset, psnr_min)]:
            if item is not None:
                out.append(item)
        out += violation_statements(df, dataset)
        out += lead_statements(df, dataset)
        out += crossover_statements(df, dataset)
        out += architecture_statements(df, dataset)
        out += trend_statements(df, dataset)
        out += throughput_anomalies(df, dataset)
    return out
