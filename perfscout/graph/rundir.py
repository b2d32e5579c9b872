"""The run directory: everything needed to audit and reproduce one run.

Layout under ``$PERFSCOUT_HOME/runs/<run_id>/``::

    request.json   platform.json   plan.json
    calls.log      one line per tool call started / finished (the side-effect ledger)
    raw/<call_id>.json        the tool's raw reply
    results/<seq>-<call_id>.json   the parsed Observation (the conversation's store)
    results.sqlite, raw/<task_key>/, results.parquet/csv   the sweep engine's store of every
                   evaluate_codec task (perfscout.sweep.runner.run_tasks; ``perfscout report
                   runs/<id>`` reports it into store-report/)
    report.md   report.html   results.json   claims.json (the Answer's claims)
    plots/<dataset>__<kind>.png   the figures report.html inlines (two or more records)

Every file is written atomically (temp file + rename), so a crash never leaves a
half-written result; re-running a node rewrites the same file with the same name.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from perfscout.io import write_atomic, write_json_atomic


def write_json(path: Path, doc: Any) -> Path:
    """``doc`` as JSON, fsynced and renamed into place (a run directory survives a power cut)."""
    return write_json_atomic(path, doc, fsync=True, mkdir=True)


def write_text(path: Path, text: str) -> Path:
    """``text`` fsynced and renamed into place beside the run's other files."""
    return write_atomic(path, text, fsync=True, mkdir=True)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def ledger(run_dir: str | Path, event: str, call_id: str, tool: str) -> None:
    """Append one line to calls.log: ``<epoch> <event> <call_id> <tool>`` (fsync'd)."""
    path = Path(run_dir) / "calls.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{time.time():.6f} {event} {call_id} {tool}\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_ledger(run_dir: str | Path) -> list[tuple[str, str, str]]:
    """(event, call_id, tool) for every ledger line."""
    path = Path(run_dir) / "calls.log"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 4:
            out.append((parts[1], parts[2], parts[3]))
    return out


def stored_observations(run_dir: str | Path) -> list[dict[str, Any]]:
    """The results store: observations in call order."""
    folder = Path(run_dir) / "results"
    if not folder.is_dir():
        return []
    return [read_json(p) for p in sorted(folder.glob("*.json"))]
