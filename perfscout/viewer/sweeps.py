"""Sweep directories under the home: their tasks, what became of each, their plots.

A sweep directory is one holding the sweep's store (``results.sqlite``): at the top of
``runs/`` (``perfscout sweep``) or inside an agent run (``runs/<id>/sweeps/<task>/``). The
store is opened read-only (``mode=ro``): viewing never migrates or locks it for writing.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfscout.tools.results_store import STORE_NAME
from perfscout.viewer.paths import child_dir

#: Result columns a task row shows (the rest is one click away, in results.csv).
SHOWN = ("dataset", "codec", "device", "mode", "bound", "ratio", "psnr", "max_abs_err", "bound_ok",
         "compress_MBps", "decompress_MBps")


@dataclass
class SweepTask:
    key: str
    seq: int
    config: dict[str, Any]
    outcome: str = "not run"  # the last attempt's outcome (ok, failed, codec_timeout, ...)
    detail: str = ""
    attempts: int = 0
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        status = str(self.result.get("status") or "")
        return self.outcome not in ("ok", "not run") or (bool(status) and status != "ok")


@dataclass
class Sweep:
    path: str  # relative to runs/
    name: str
    tasks: list[SweepTask]
    plots: list[str]  # plots/<file>.png, relative to the sweep directory
    has_report: bool
    error: str = ""

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tasks:
            key = "failed" if t.failed else t.outcome
            out[key] = out.get(key, 0) + 1
        return out


def find_sweeps(runs: Path) -> list[str]:
    """Sweep directories under ``runs/`` (relative paths), newest first."""
    if not runs.is_dir():
        return []
    found = [p.parent for p in runs.glob(f"*/{STORE_NAME}")] + [p.parent for p in runs.glob(f"*/sweeps/*/{STORE_NAME}")]
    real = runs.resolve()
    out = []
    for d in found:
        try:
            if d.resolve().is_relative_to(real) and not d.is_symlink():
                out.append((d.stat().st_mtime, str(d.relative_to(runs))))
        except OSError:
            continue
    return [rel for _, rel in sorted(out, reverse=True)]


def _rows(conn: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    cur = conn.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def read_sweep(runs: Path, rel: str) -> Sweep:
    root = child_dir(runs, rel)
    plots = sorted(f"plots/{p.name}" for p in (root / "plots").glob("*.png") if p.is_file()) \
        if (root / "plots").is_dir() else []
    sweep = Sweep(path=rel, name=root.name, tasks=[], plots=plots, has_report=(root / "report.html").is_file())
    try:
        conn = sqlite3.connect(f"{(root / STORE_NAME).as_uri()}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as exc:
        sweep.error = f"cannot open {STORE_NAME}: {exc}"
        return sweep
    try:
        meta = {r["key"]: r["value"] for r in _rows(conn, "SELECT key, value FROM meta")}
        sweep.name = str(meta.get("spec_name") or sweep.name)
        tasks = {r["task_key"]: SweepTask(key=r["task_key"], seq=int(r["seq"] or 0), config=_json(r["config"]))
                 for r in _rows(conn, "SELECT task_key, seq, config FROM tasks ORDER BY seq")}
        for a in _rows(conn, "SELECT * FROM attempts ORDER BY id"):
            t = tasks.get(a["task_key"])
            if t is not None:
                t.attempts += 1
                t.outcome = str(a.get("outcome") or "running")
                t.detail = str(a.get("detail") or "")
        for r in _rows(conn, "SELECT * FROM results"):
            t = tasks.get(r["task_key"])
            if t is not None:
                t.result = r
        sweep.tasks = sorted(tasks.values(), key=lambda t: (not t.failed, t.seq))
    except sqlite3.Error as exc:
        sweep.error = f"{STORE_NAME} could not be read: {exc}"
    finally:
        conn.close()
    return sweep


def _json(text: Any) -> dict[str, Any]:
    try:
        doc = json.loads(text) if text else {}
    except (ValueError, TypeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def describe_task(config: dict[str, Any]) -> str:
    """A task's settings in a few words (dataset, codec, device, mode, bound)."""
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    parts = [str(data.get("label") or data.get("name") or data.get("path") or ""),
             str(config.get("codec") or ""), str(config.get("device") or ""),
             f"{config.get('mode') or ''} {config.get('bound') if config.get('bound') is not None else ''}".strip()]
    return " · ".join(p for p in parts if p)
