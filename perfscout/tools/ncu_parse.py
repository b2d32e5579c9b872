"""Parse Nsight Compute CSV output into typed :class:`KernelProfile`s.

Handles what ``ncu --csv --page raw`` really prints:

- banner and program-output lines (``==PROF==``, ``==WARNING==``, the profiled program's
  own stdout) before the header, and stray lines after it;
- a units row right after the header (its ``ID`` cell is empty);
- numbers with thousands separators (``"1,980,000"``);
- empty cells (PM-sampling and other metrics not collected for a launch): such a metric
  is simply absent from that kernel, never invented as zero;
- many kernels and many launches of one kernel, one row each.

Metric objects are shared between launches whose cell text is identical (same column,
same text): treat a parsed :class:`Metric` as immutable.

Units are normalised to base units (``byte``, ``second``, ``hz``, ``byte/second``, ...), the
original unit and text kept beside them. ``--page details`` output yields Nsight
Compute's own rule messages (OPT/INF/WRN) as "ncu says" evidence.
"""

from __future__ import annotations

import csv
import gc
import io
import logging
import re
from collections.abc import Callable, Iterable
from operator import itemgetter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from perfscout.errors import InputError
from perfscout.state.profiles import KernelProfile, Metric
from perfscout.tools.profile_text import read_profile_text

log = logging.getLogger(__name__)

#: Columns that describe a launch rather than measure it (raw and details pages).
IDENTITY_COLUMNS = (
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Function Name",
    "Demangled Name", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC",
)

#: Kernel duration, first present wins (names differ between ncu versions).
DURATION_METRICS = ("gpu__time_duration.sum", "gpu__time_duration.avg", "Duration")

#: ncu rules known to fire on workloads where following them gains nothing.
LOW_VALUE_RULES = {
    "MemoryL2Compression": (
        "fires on ordinary buffers: L2 compression only applies to memory allocated as "
        "compressible through the CUDA driver API, which plain cudaMalloc/CuPy/PyTorch "
        "buffers are not"
    ),
}

_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3,
         "msecond": 1e-3, "s": 1.0, "second": 1.0}
#: Units ncu's automatic scaling may prefix (Kinst, Msector, Gcycle, Mbyte, Ghz, ...).
_PREFIXED = re.compile(r"^([KMGTP]?)(byte|hz|Hz|inst|sector|sectors|cycle|warp|thread|request|"
                       r"block|branches|pass|sample)$")


class UnitRule(BaseModel):
    """How to turn one column's values into base units."""

    unit: str  # the normalised unit
    scale: float = 1.0


def normalise_unit(unit: str) -> UnitRule:
    """``"Gbyte/s"`` -> byte/second ×1e9, ``"ns"`` -> second ×1e-9, ``"sector/us"`` ->
    sector/second ×1e6.

    Units perfscout does not know are kept unchanged with scale 1 (never guessed).
    """
    u = unit.strip()
    if not u:
        return UnitRule(unit="")
    if u in _TIME:
        return UnitRule(unit="second", scale=_TIME[u])
    num, _, den = u.partition("/")
    scale = 1.0
    m = _PREFIXED.match(num)
    if m:
        scale *= _SI[m.group(1)]
        num = m.group(2).lower() if m.group(2) == "Hz" else m.group(2)
    if den:
        if den in _TIME:
            scale /= _TIME[den]
            den = "second"
        else:
            md = _PREFIXED.match(den)
            if md:
                scale /= _SI[md.group(1)]
                den = md.group(2).lower() if md.group(2) == "Hz" else md.group(2)
        return UnitRule(unit=f"{num}/{den}", scale=scale)
    return UnitRule(unit=num, scale=scale)


def parse_number(text: str) -> float | None:
    """``"1,980,000"`` -> 1980000.0; None when the text is not a number."""
    t = text.strip().replace(",", "")
    if not t:
        return None
    try:
        return float(t)
    except ValueError:
        return None


def _triple(text: str) -> tuple[int, int, int] | None:
    nums = re.findall(r"\d+", text or "")
    if len(nums) != 3:
        return None
    return (int(nums[0]), int(nums[1]), int(nums[2]))


class NcuRule(BaseModel):
    """One Nsight Compute rule message from ``--page details`` ("ncu says")."""

    kernel_id: int | None = None
    kernel_name: str = ""
    section: str = ""
    rule: str
    type: str = ""  # OPT | INF | WRN | ERROR
    message: str = ""
    speedup_type: str = ""  # "local" | "global"
    estimated_speedup_pct: float | None = None
    low_value: bool = False
    low_value_reason: str = ""


class NcuReport(BaseModel):
    """Everything one ncu CSV held."""

    source: str = ""
    kernels: list[KernelProfile] = Field(default_factory=list)
    banner: list[str] = Field(default_factory=list)  # lines outside the CSV table
    warnings: list[str] = Field(default_factory=list)  # ==WARNING== / ==ERROR== lines
    columns: list[str] = Field(default_factory=list)
    units: dict[str, str] = Field(default_factory=dict)  # column -> unit as ncu printed it

    def digest(self, top: int = 10) -> list[dict[str, Any]]:
        return duration_digest(self.kernels, top=top)


def _split_table(text: str) -> tuple[list[str], list[str], list[str]]:
    """(banner lines, CSV table lines, stray lines after the table)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",')), None)
    if start is None:
        if any("No kernels were profiled" in ln for ln in lines if ln.startswith("==")):
            raise InputError("ncu profiled no kernels (its output says 'No kernels were profiled'): "
                             "check the -k / --kernel-name filter and -c, and that the program "
                             "launches CUDA kernels")
        raise InputError(
            "no ncu CSV header (a line starting with \"ID\",) found: is this the output of "
            "ncu --csv --page raw (or --page details)?"
        )
    banner = lines[:start]
    table, stray = [lines[start]], []
    in_quotes = False  # inside a quoted field that spans lines (a multi-line message)
    for ln in lines[start + 1:]:
        if in_quotes:
            table[-1] += "\n" + ln
        elif ln.startswith('"'):
            table.append(ln)
        else:
            # Table rows start with a quoted ID (or "" for the units row); anything else
            # is text that landed in the same stream (e.g. ==PROF== lines of a child).
            stray.append(ln)
            continue
        if ln.count('"') % 2 == 1:
            in_quotes = not in_quotes
    return banner, table, stray


def _warnings(lines: Iterable[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith(("==WARNING==", "==ERROR==", "==WARN=="))]


def parse_raw_csv(text: str, source: str = "", keep: Callable[[str], bool] | None = None) -> NcuReport:
    """Parse ``ncu --csv --page raw`` output (one row per kernel launch).

    ``keep``: build values only for the metric columns it accepts (e.g. the diagnosis
    engine's reads, ``perfscout.analysis.diagnosis.reads.reads_metric``); the others are
    left out of every kernel's ``metrics``. None keeps every column."""
    banner, table, stray = _split_table(text)
    try:
        rows = list(csv.reader(io.StringIO("\n".join(table))))
    except csv.Error as exc:  # e.g. a NUL byte in a damaged file
        raise InputError(f"{source or 'ncu CSV'}: not readable as CSV ({exc})") from exc
    header = rows[0]
    while header and header[-1] == "":
        header.pop()  # some versions end every line with a comma
    body = rows[1:]
    units_row: list[str] = []
    if body and body[0] and body[0][0] == "":
        units_row = body.pop(0)
    col = {name: i for i, name in enumerate(header)}
    if "Kernel Name" not in col and "Function Name" not in col:
        raise InputError(f"{source or 'ncu CSV'}: header has no 'Kernel Name' column; not a raw page")
    if "Rule Name" in col or {"Metric Name", "Metric Value"} <= col.keys():
        # One row per metric or rule message, not per launch: the details page.
        raise InputError(f"{source or 'ncu CSV'}: this is a --page details CSV (one row per metric "
                         "and rule); pass it with --ncu-details and the --page raw CSV with --ncu-csv")
    units = {h: (units_row[i] if i < len(units_row) else "") for i, h in enumerate(header)}
    ident = set(IDENTITY_COLUMNS)
    # One entry per metric column; the last item maps a cell's text to its Metric, so
    # launches with identical cells share one object (see the module docstring).
    metric_cols = [(i, h, r.scale, r.unit, units[h], {}) for i, h in enumerate(header)
                   if h not in ident and (keep is None or keep(h)) for r in (normalise_unit(units[h]),)]
    name_i = col.get("Kernel Name", col.get("Function Name"))
    rows, truncated = _launch_rows(body, len(header))
    warnings = _warnings(banner + stray)
    if truncated:
        ids = ", ".join(row[0] for _, row in truncated[:5]) + (", ..." if len(truncated) > 5 else "")
        cells = f"{len(truncated[0][1])} of {len(header)} cells" if len(truncated) == 1 else \
            f"fewer than the header's {len(header)} cells"
        warnings.append(f"{len(truncated)} launch row(s) (ID {ids}) are truncated ({cells}); not "
                        "diagnosed (was the file cut off?)")
        log.warning("%s: %s", source or "ncu CSV", warnings[-1])
    if not rows:
        what = (f"its {len(truncated)} launch row(s) are all truncated" if truncated
                else "no kernel rows (did the kernel filter match nothing?)")
        raise InputError(f"{source or 'ncu CSV'}: header found but {what}")
    kernels: list[KernelProfile] = []
    # Millions of small objects: generational GC passes over the growing heap would
    # dominate the parse time, and nothing here makes reference cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _parse_rows(rows, header, col, name_i, metric_cols, kernels)
    finally:
        if gc_was_enabled:
            gc.enable()
    for suspect in _suspect_cells(kernels, rows, metric_cols):
        warnings.append(suspect)
        log.warning("%s: %s", source or "ncu CSV", suspect)
    return NcuReport(source=source, kernels=kernels, banner=banner + stray, warnings=warnings,
                     columns=header, units={h: u for h, u in units.items() if u})


def _suspect_cells(kernels: list[KernelProfile], rows: list[list[str]],
                   metric_cols: list[tuple[int, str, float, str, str, dict[str, Metric]]]) -> list[str]:
    """What a hand-edited or damaged profile holds that ncu never prints, said once each:
    a launch whose duration cell is no finite number (its time is unknown: it is left out
    of the time ranking, not counted as zero), and a metric column that appears twice with
    copies that disagree (the last non-empty cell is the one read)."""
    out: list[str] = []
    untimed = [(k.id, k.metrics[n].raw) for k in kernels for n in DURATION_METRICS[:1]
               if n in k.metrics and not isinstance(k.metrics[n].value, float)]
    if untimed:
        shown = ", ".join(f"ID {i}: {raw!r}" for i, raw in untimed[:3]) + (", ..." if len(untimed) > 3 else "")
        out.append(f"launch duration ({DURATION_METRICS[0]}) is not a finite number in {len(untimed)} launch(es) "
                   f"({shown}); their time is unknown and they are left out of the time ranking")
    positions: dict[str, list[int]] = {}
    for i, name, *_ in metric_cols:
        positions.setdefault(name, []).append(i)
    for name, idx in positions.items():
        if len(idx) < 2:
            continue
        clash = next((r for r in rows if len({r[i] for i in idx if r[i] != ""}) > 1), None)
        if clash is not None:
            out.append(f"column {name!r} appears {len(idx)} times and its copies disagree (launch ID {clash[0]}: "
                       f"{', '.join(repr(clash[i]) for i in idx)}); the last non-empty cell is the one read")
    return out


def _launch_rows(body: list[list[str]], width: int) -> tuple[list[list[str]], list[tuple[int, list[str]]]]:
    """(complete launch rows, (index, row) of truncated ones).

    A units row (empty ID) or the header again (outputs appended to one file) is no
    launch. A row with fewer cells than the header was cut off (a partial copy, a full
    disk): its last cell is suspect and the missing metrics would read as "not
    collected", so it is reported, never diagnosed."""
    rows, truncated = [], []
    for r, row in enumerate(body):
        if not row or not row[0].strip() or row[0] == "ID":
            continue
        if len(row) < width:
            truncated.append((r, row))
        else:
            rows.append(row)
    return rows, truncated


def _parse_rows(rows: list[list[str]], header: list[str], col: dict[str, int], name_i: int,
                metric_cols: list[tuple[int, str, float, str, str, dict[str, Metric]]],
                out: list[KernelProfile]) -> None:
    names = [name for _, name, *_ in metric_cols]
    if len(set(names)) != len(names):  # a repeated column name: its last non-empty cell wins, per row
        out.extend(_kernel_from_row(row, col, name_i, metric_cols) for row in rows)
        return
    out.extend(_kernels_by_column(rows, header, col, name_i, metric_cols, names))


def _kernels_by_column(rows: list[list[str]], header: list[str], col: dict[str, int], name_i: int,
                       metric_cols: list[tuple[int, str, float, str, str, dict[str, Metric]]],
                       names: list[str]) -> list[KernelProfile]:
    """The launches of ``rows``, parsed a column at a time.

    A 1,000-launch profile has ~2 million cells but far fewer distinct texts per column:
    each distinct text becomes one Metric, and the per-cell work (a dictionary lookup, the
    transposes, building each launch's dict) runs inside C loops (map, zip, dict)."""
    padded = rows  # every row has the header's width (_launch_rows)
    # All columns: one transpose; a few (a keep filter): only those, a C loop each.
    columns = (list(zip(*padded)) if len(metric_cols) > len(header) // 2
               else {i: list(map(itemgetter(i), padded)) for i, *_ in metric_cols})
    per_column = []
    holes: list[tuple[int, str]] = []  # empty cells: not collected for that launch, absent
    for i, name, scale, norm_unit, raw_unit, seen in metric_cols:
        cells = columns[i]
        for raw in set(cells).difference(seen):
            if raw:
                seen[raw] = _metric(name, raw, scale, norm_unit, raw_unit)
        per_column.append(list(map(seen.get, cells)))
        if "" in cells:
            holes.extend((r, name) for r, c in enumerate(cells) if c == "")
    metric_dicts = [dict(zip(names, cells)) for cells in zip(*per_column)] if per_column else [{} for _ in padded]
    for r, name in holes:
        del metric_dicts[r][name]
    return [_kernel(row, col, name_i, metrics) for row, metrics in zip(padded, metric_dicts)]


#: One set shared by every parsed Metric: it already holds every field name, so the
#: only mutation pydantic makes (adding an assigned field's name) changes nothing, and
#: model_copy copies it before updating. A set per Metric would cost 200 bytes each.
_METRIC_FIELDS = set(Metric.model_fields)
_new = object.__new__
_set = object.__setattr__


def _metric(name: str, raw: str, scale: float, norm_unit: str, raw_unit: str) -> Metric:
    """A Metric from one cell's text: the body of its constructor inlined (no validation:
    every field is built with its declared type right here)."""
    try:
        value: float | str = float(raw.replace(",", "") if "," in raw else raw) * scale
        unit = norm_unit
        if value - value != 0.0:  # "nan" / "inf": no measurement, kept as the text printed
            value, unit = raw, raw_unit
    except ValueError:
        value, unit = raw, raw_unit  # text metrics (names, enums) stay as printed
    m = _new(Metric)
    _set(m, "__dict__", {"name": name, "value": value, "unit": unit, "raw": raw, "raw_unit": raw_unit})
    _set(m, "__pydantic_fields_set__", _METRIC_FIELDS)
    _set(m, "__pydantic_extra__", None)
    _set(m, "__pydantic_private__", None)
    return m


def _kernel_from_row(row: list[str], col: dict[str, int], name_i: int,
                     metric_cols: list[tuple[int, str, float, str, str, dict[str, Metric]]]
                     ) -> KernelProfile:
    """One launch, a cell at a time (the path for a header that repeats a column name)."""
    metrics: dict[str, Metric] = {}
    n = len(row)
    # A cell whose text was already seen in the same column reuses that Metric: in real
    # profiles most cells repeat between launches (device attributes, launch
    # configuration, the many zero counters).
    for i, name, scale, norm_unit, raw_unit, seen in metric_cols:
        if i >= n:
            continue
        raw = row[i]
        if raw == "":
            continue  # not collected for this launch: absent, not zero
        m = seen.get(raw)
        if m is None:
            m = seen[raw] = _metric(name, raw, scale, norm_unit, raw_unit)
        metrics[name] = m
    return _kernel(row, col, name_i, metrics)


def _kernel(row: list[str], col: dict[str, int], name_i: int, metrics: dict[str, Metric]) -> KernelProfile:
    def cell(name: str) -> str:
        i = col.get(name)
        return row[i] if i is not None and i < len(row) else ""

    kid = parse_number(cell("ID"))
    dev_i = parse_number(cell("Device"))
    display = metrics.get("device__attribute_display_name")
    # model_construct: every field is built with its declared type right here, and
    # re-validating 2,000+ metrics per launch would cost a tenth of the parse.
    return KernelProfile.model_construct(
        name=row[name_i],
        id=int(kid) if kid is not None else None,
        grid=_triple(cell("Grid Size")),
        block=_triple(cell("Block Size")),
        device=str(display.value) if display is not None else cell("Device"),
        device_index=int(dev_i) if dev_i is not None else None,
        compute_capability=cell("CC"),
        process=cell("Process Name"),
        stream=cell("Stream"),
        metrics=metrics,
        ncu_rules=[],  # given, not defaulted: model_construct inspects a default_factory per call
    )


def parse_details_csv(text: str, source: str = "") -> list[NcuRule]:
    """Rule messages from ``ncu --csv --page details`` (rows with a Rule Name)."""
    _, table, _ = _split_table(text)
    reader = csv.DictReader(io.StringIO("\n".join(table)))
    try:
        rows = list(reader)
    except csv.Error as exc:
        raise InputError(f"{source or 'ncu details CSV'}: not readable as CSV ({exc})") from exc
    if reader.fieldnames is None or "Rule Name" not in reader.fieldnames:
        raise InputError(f"{source or 'ncu CSV'}: no 'Rule Name' column: not a details page "
                         "(use ncu --csv --page details)")
    rules = []
    data_rows = 0
    for r in rows:
        if (r.get("ID") or "").strip() in ("", "ID"):
            continue  # a units row, or the header again
        data_rows += 1
        name = (r.get("Rule Name") or "").strip()
        if not name:
            continue
        kid = parse_number(r.get("ID") or "")
        low = LOW_VALUE_RULES.get(name, "")
        rules.append(NcuRule(
            kernel_id=int(kid) if kid is not None else None,
            kernel_name=r.get("Kernel Name") or r.get("Function Name") or "",
            section=r.get("Section Name") or "",
            rule=name,
            type=(r.get("Rule Type") or "").strip(),
            message=(r.get("Rule Description") or "").strip(),
            speedup_type=(r.get("Estimated Speedup Type") or "").strip(),
            estimated_speedup_pct=parse_number(r.get("Estimated Speedup") or ""),
            low_value=bool(low),
            low_value_reason=low,
        ))
    if not data_rows:
        raise InputError(f"{source or 'ncu details CSV'}: header found but no rows (did the kernel "
                         "filter match nothing?)")
    return rules


def attach_rules(kernels: list[KernelProfile], rules: list[NcuRule]) -> int:
    """Attach rule messages to kernels with the same launch ID *and* name; returns count.

    Raw and details pages may come from different runs: a mismatched name means the IDs
    refer to different launches, and the message is not attached rather than misattributed.
    """
    by_id = {k.id: k for k in kernels}
    attached = 0
    for rule in rules:
        k = by_id.get(rule.kernel_id)
        if k is not None and k.name == rule.kernel_name:
            k.ncu_rules.append(rule.model_dump())
            attached += 1
    return attached


def kernel_duration_s(k: KernelProfile) -> float | None:
    """The launch's duration in seconds, from whichever duration metric is present."""
    for name in DURATION_METRICS:
        m = k.metrics.get(name)
        if m is not None and isinstance(m.value, float) and m.unit == "second":
            return m.value
    return None


def duration_digest(kernels: list[KernelProfile], top: int = 10) -> list[dict[str, Any]]:
    """Kernels grouped by name, ranked by total duration: what dominates the GPU time."""
    groups: dict[str, dict[str, Any]] = {}
    total = 0.0
    for k in kernels:
        d = kernel_duration_s(k)
        g = groups.setdefault(k.name, {"name": k.name, "launches": 0, "timed_launches": 0,
                                       "total_s": 0.0, "ids": []})
        g["launches"] += 1
        g["ids"].append(k.id)
        if d is not None:
            g["timed_launches"] += 1
            g["total_s"] += d
            total += d
    ranked = sorted(groups.values(), key=lambda g: g["total_s"], reverse=True)
    for g in ranked:
        g["mean_s"] = g["total_s"] / g["timed_launches"] if g["timed_launches"] else None
        g["share_pct"] = 100.0 * g["total_s"] / total if total > 0 else None
    return ranked[:top]


def _read(path: Path, what: str) -> str:
    return read_profile_text(path, what)


def load_raw_csv(path: str | Path, keep: Callable[[str], bool] | None = None) -> NcuReport:
    p = Path(path)
    return parse_raw_csv(_read(p, "ncu CSV"), source=str(p), keep=keep)


def load_details_csv(path: str | Path) -> list[NcuRule]:
    p = Path(path)
    return parse_details_csv(_read(p, "ncu details CSV"), source=str(p))
