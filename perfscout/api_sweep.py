"""Python API for campaigns: ``perfscout.sweep(spec)`` and ``perfscout.report(run_dir)``."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from perfscout.tools.sweep.runner import run_sweep
from perfscout.tools.sweep.spec import SweepSpec, load_spec
from perfscout.tools.sweep.store import open_results

if TYPE_CHECKING:
    from perfscout.tools.sweep.dask_executor import DaskOptions


def default_run_dir(spec: SweepSpec) -> Path:
    """``spec.output`` when set, else ``$PERFSCOUT_HOME/runs/<name>-<UTC time>``."""
    if spec.output:
        out = Path(spec.output).expanduser()
        return out if out.is_absolute() else Path(spec.base_dir or ".") / out
    from perfscout.home import runs_dir

    return runs_dir() / f"{spec.name}-{datetime.utcnow():%Y%m%dT%H%M%S}"


def sweep(spec: str | Path | dict | SweepSpec, out: str | Path | None = None, resume: bool = False,
          jobs: int | None = None, progress: bool = True, *, allow_plugins: bool = False, wait: bool = False,
          dask: DaskOptions | None = None) -> pd.DataFrame:
    """Run a sweep spec (YAML path, YAML text, dict or model) and return its results table.

    The run directory (``out``, else the spec's ``output``, else under ``PERFSCOUT_HOME``)
    keeps the spec, platform snapshot, SQLite store, raw per-task artifacts and exports;
    ``df.attrs["run_dir"]`` says where it is. ``resume=True`` continues a stopped run.
    A spec's ``plugins:`` (code) run only with ``allow_plugins=True``; ``wait=True`` queues
    behind another sweep writing the same directory; ``dask=DaskOptions(...)`` runs the
    tasks on a Dask cluster (``perfscout.tools.sweep.dask_executor``).
    """
    model = load_spec(spec, allow_plugins=allow_plugins)
    run_dir = Path(out) if out is not None else default_run_dir(model)
    source = spec if isinstance(spec, (str, Path)) else model
    outcome = run_sweep(source, run_dir, resume=resume, jobs=jobs, progress=progress, allow_plugins=allow_plugins,
                        wait=wait, dask=dask)
    df = open_results(outcome.run_dir)
    df.attrs["run_dir"] = str(outcome.run_dir)
    df.attrs["run_id"] = outcome.run_id
    return df


def report(run_dir: str | Path) -> Path:
    """Write ``report.md`` and a self-contained ``report.html`` into the run directory."""
    from perfscout.analysis.report.render import write_report

    return write_report(Path(run_dir))
