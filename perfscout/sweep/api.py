"""Sweeps and their reports as Python calls: run a spec to a results table, write its report.

What ``perfscout.sweep(spec)`` / ``perfscout.report(run_dir)`` (through ``perfscout.api_sweep``),
the CLI's ``sweep``/``report`` and the agent's ``run_sweep`` tool call. The report renderer
(``perfscout.analysis.report.render``) is a function of the data it is given; opening the
sweep's SQLite store for it is this layer's job, so analysis never imports the sweep engine.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from perfscout.sweep.runner import SweepInterrupted, run_sweep
from perfscout.sweep.spec import SweepSpec, load_spec
from perfscout.tools.results_store import STORE_NAME, ResultStore, StoreError, open_results

#: What callers above the sweep use besides the functions below.
__all__ = ["SweepInterrupted", "SweepSpec", "default_run_dir", "load_spec", "open_results", "read_sweep_data",
           "report", "sweep"]

if TYPE_CHECKING:
    from perfscout.analysis.report.render import SweepData
    from perfscout.sweep.dask_executor import DaskOptions

log = logging.getLogger(__name__)


def default_run_dir(spec: SweepSpec) -> Path:
    """``spec.output`` when set, else ``$PERFSCOUT_HOME/runs/<name>-<UTC time>``."""
    if spec.output:
        out = Path(spec.output).expanduser()
        return out if out.is_absolute() else Path(spec.base_dir or ".") / out
    from perfscout.home import runs_dir

    return runs_dir() / f"{spec.name}-{datetime.utcnow():%Y%m%dT%H%M%S}"


def sweep(spec: str | Path | dict | SweepSpec, out: str | Path | None = None, resume: bool = False,
          jobs: int | None = None, progress: bool = True, *, allow_plugins: bool = False, wait: bool = False,
          dask: DaskOptions | None = None, cores: int | None = None, task_start: str | None = None) -> pd.DataFrame:
    """Run a sweep spec (YAML path, YAML text, dict or model) and return its results table.

    The run directory (``out``, else the spec's ``output``, else under ``PERFSCOUT_HOME``)
    keeps the spec, platform snapshot, SQLite store, raw per-task artifacts and exports;
    ``df.attrs["run_dir"]`` says where it is. ``resume=True`` continues a stopped run.
    A spec's ``plugins:`` (code) run only with ``allow_plugins=True``; ``wait=True`` queues
    behind another sweep writing the same directory; ``dask=DaskOptions(...)`` runs the
    tasks on a Dask cluster (``perfscout.sweep.dask_executor``); ``cores`` caps the cores the
    running tasks' codec threads use together; ``task_start="spawn"`` starts a fresh
    interpreter per task instead of forking CPU tasks from the task server and sending CUDA
    tasks to the device's long-lived GPU worker.
    """
    model = load_spec(spec, allow_plugins=allow_plugins)
    run_dir = Path(out) if out is not None else default_run_dir(model)
    source = spec if isinstance(spec, (str, Path)) else model
    log.info("sweep %s into %s%s", model.name, run_dir, " (resuming)" if resume else "")
    outcome = run_sweep(source, run_dir, resume=resume, jobs=jobs, progress=progress, allow_plugins=allow_plugins,
                        wait=wait, dask=dask, cores=cores, task_start=task_start)
    df = open_results(outcome.run_dir)
    df.attrs["run_dir"] = str(outcome.run_dir)
    df.attrs["run_id"] = outcome.run_id
    return df


def read_sweep_data(run_dir: str | Path) -> SweepData:
    """Everything the report reads from ``run_dir/results.sqlite`` (StoreError when absent)."""
    # Imported here: running a sweep should not load the report's plotting stack.
    from perfscout.analysis.report import render

    run_dir = Path(run_dir)
    store_path = run_dir / STORE_NAME
    if not store_path.is_file():
        raise StoreError(f"{run_dir} is not a sweep run directory (no {STORE_NAME})")
    with ResultStore(store_path) as store:
        sessions = int(store.get_meta("sessions", "0") or 0)
        return render.SweepData(
            results=store.results(),
            n_tasks=store.task_count(),
            run_id=store.get_meta("run_id", "") or "",
            name=store.get_meta("spec_name", "sweep") or "sweep",
            sessions=[json.loads(store.get_meta(f"session_{i}", "{}") or "{}") for i in range(1, sessions + 1)],
            skipped=json.loads(store.get_meta("skipped", "[]") or "[]"),
            report_options=json.loads(store.get_meta("report_options", "{}") or "{}"),
            experiments=store.task_experiments(),
            searches=_searches(run_dir),
        )


def _searches(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each stored task's psnr/ratio search outcome (``raw/<task_key>/search.json``, written
    beside its record by the worker); an unreadable file is skipped, never fatal."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((run_dir / "raw").glob("*/search.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            out[path.parent.name] = doc
    return out


def report(run_dir: str | Path) -> Path:
    """Write ``report.md`` and a self-contained ``report.html`` into the run directory; return the HTML path."""
    from perfscout.analysis.report import render

    data = read_sweep_data(run_dir)
    log.info("report of %s: %d of %d task(s) stored", run_dir, len(data.results), data.n_tasks)
    html = render.write_sweep_report(run_dir, data)
    log.info("wrote %s and %s", html, html.with_name("report.md"))
    return html
