"""Sweeps and their reports as Python calls: run a spec to a results table, write its report.

What ``perfscout.sweep(spec)`` / ``perfscout.report(run_dir)`` (through ``perfscout.api_sweep``),
the CLI's ``sweep``/``report`` and the agent's ``run_sweep`` tool call. The report renderer
(``perfscout.analysis.report.render``) is a function of the data it is given; opening the
sweep's SQLite store for it is this layer's job, so analysis never imports the sweep engine.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from perfscout.io import move_into_place
from perfscout.sweep.runner import SweepInterrupted, run_sweep
from perfscout.sweep.spec import SweepSpec, load_spec
from perfscout.tools.results_store import STORE_NAME, ResultStore, StoreError, open_results

#: What callers above the sweep use besides the functions below.
__all__ = ["StoreDamaged", "SweepInterrupted", "SweepSpec", "check_store", "default_run_dir", "load_spec",
           "open_results", "read_sweep_data", "rebuild_store", "report", "sweep"]

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


class StoreDamaged(StoreError):
    """The results store does not hold what the run's task results on disk say it should
    (``perfscout report`` exits 1; ``report --rebuild`` rebuilds it from them)."""

    exit_code = 1  # the CLI's: a damaged store is a failure, not bad input


#: The run directory's record of each finished task, written after its row is committed
#: (perfscout.sweep.child.promote): a task with this file has a row in a sound store.
TASK_RESULT = "result.json"


def _stored_task_results(run_dir: Path) -> dict[str, Path]:
    raw = run_dir / "raw"
    if not raw.is_dir():
        return {}
    return {d.name: d / TASK_RESULT for d in sorted(raw.iterdir()) if (d / TASK_RESULT).is_file()}


def _resolved(run_dir: Path) -> dict:
    """spec.resolved.json (the task list the run planned), or {} when absent or unreadable."""
    try:
        doc = json.loads((run_dir / "spec.resolved.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _store_keys(path: Path) -> tuple[set[str], set[str]] | str:
    """(task keys with a result, task keys planned) read without writing a byte, or why
    the store cannot be read."""
    if path.stat().st_size == 0:
        return "it is empty (0 bytes)"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if version is None:
            return "it has no schema version"
        results = {r[0] for r in conn.execute("SELECT task_key FROM results")}
        tasks = {r[0] for r in conn.execute("SELECT task_key FROM tasks")}
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        conn.close()
    return results, tasks


def check_store(run_dir: str | Path) -> None:
    """StoreDamaged unless ``run_dir``'s store holds every task result stored on disk
    (``raw/<task_key>/result.json``) and every task the run planned (spec.resolved.json);
    StoreError when there is no store. Reads only (a damaged store is never written to)."""
    run_dir = Path(run_dir)
    path = run_dir / STORE_NAME
    if not path.is_file():
        if (run_dir / "request.json").is_file():
            raise StoreError(f"{run_dir} is an agent run that evaluated no codec (no {STORE_NAME}): there is no "
                             f"store to report on; the agent's answer is {run_dir / 'report.md'}")
        raise StoreError(f"{run_dir} is not a sweep run directory (no {STORE_NAME})")
    on_disk = _stored_task_results(run_dir)
    planned = {str(t.get("task_key")) for t in _resolved(run_dir).get("tasks") or [] if isinstance(t, dict)}
    got = _store_keys(path)
    if isinstance(got, str):
        raise StoreDamaged(f"results store {path} is damaged: cannot open results store {path}: {got}; it should "
                           f"hold {len(on_disk)} task result(s) stored in {run_dir / 'raw'}; nothing was "
                           f"reported. {_rebuild_hint(run_dir, on_disk)}")
    results, tasks = got
    lost = sorted(set(on_disk) - results)
    unplanned = sorted(planned - tasks)
    if lost or unplanned:
        what = []
        if lost:
            what.append(f"it holds {len(set(on_disk) & results)} of the {len(on_disk)} task result(s) stored in "
                        f"{run_dir / 'raw'} (missing: {', '.join(lost[:3])}{' ...' if len(lost) > 3 else ''})")
        if unplanned:
            what.append(f"it lists {len(planned & tasks)} of the {len(planned)} task(s) in spec.resolved.json")
        raise StoreDamaged(f"results store {path} is damaged: {'; '.join(what)}; nothing was reported. "
                           f"{_rebuild_hint(run_dir, on_disk)}")


def _rebuild_hint(run_dir: Path, on_disk: dict[str, Path]) -> str:
    if not on_disk:
        return "No task result is stored on disk to rebuild it from: run the sweep again."
    return (f"Rebuild it from the {len(on_disk)} task result(s) on disk with: perfscout report --rebuild {run_dir} "
            "(the damaged store is kept beside it)")


def rebuild_store(run_dir: str | Path) -> Path:
    """Rebuild a damaged ``results.sqlite`` from the run's task results on disk (tasks from
    spec.resolved.json, else each ``raw/<key>/task.json``; a result per ``result.json``).

    The damaged store (and its WAL files) is renamed ``results.sqlite.damaged[-<time>]``,
    never deleted; the new one is built beside it and renamed into place, under the run
    directory's lock. InputError when the store is sound (rebuilding would only lose its
    attempt log) or there is nothing on disk to rebuild from."""
    from perfscout.state.records import CompressionResult
    from perfscout.sweep.lock import RunDirLock
    from perfscout.sweep.spec import SweepTask

    run_dir = Path(run_dir)
    with RunDirLock(run_dir, command="perfscout report --rebuild"):
        try:
            check_store(run_dir)
        except StoreDamaged:
            pass
        except StoreError:
            if not _stored_task_results(run_dir):
                raise
        else:
            raise StoreError(f"results store {run_dir / STORE_NAME} agrees with the task results on disk; "
                             "nothing to rebuild")
        on_disk = _stored_task_results(run_dir)
        if not on_disk:
            raise StoreError(f"{run_dir} holds no task result (raw/<task_key>/{TASK_RESULT}) to rebuild its store from")
        resolved = _resolved(run_dir)
        try:
            planned = resolved.get("tasks") or [json.loads((p.parent / "task.json").read_text(encoding="utf-8"))
                                                for p in on_disk.values() if (p.parent / "task.json").is_file()]
            tasks = [SweepTask.model_validate(t) for t in planned]
            records = [CompressionResult.model_validate_json(p.read_text(encoding="utf-8")) for p in on_disk.values()]
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot rebuild {run_dir / STORE_NAME}: a task file on disk is unreadable: {exc}") from None
        # a result is its folder's: one whose task_key names another task was moved or forged,
        # and rebuilding from it would store a measurement under the wrong configuration
        strays = [f"raw/{key}/result.json holds task {r.task_key!r}" for key, r in zip(on_disk, records)
                  if r.task_key != key]
        if strays:
            raise StoreError(f"cannot rebuild {run_dir / STORE_NAME}: " + "; ".join(strays[:5])
                             + (f" (and {len(strays) - 5} more)" if len(strays) > 5 else "")
                             + "; nothing was rebuilt: move each back to its own folder or remove it")
        tmp = run_dir / f".{STORE_NAME}.rebuild"
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)
        spec = resolved.get("spec") if isinstance(resolved.get("spec"), dict) else {}
        with ResultStore(tmp) as store:
            store.add_tasks(tasks)
            known = {t.task_key for t in tasks}
            store.add_tasks([SweepTask.model_validate_json((on_disk[r.task_key].parent / "task.json").read_text())
                             for r in records if r.task_key not in known
                             and (on_disk[r.task_key].parent / "task.json").is_file()])
            for record in records:
                store.put_result(record)
            store.set_meta("run_id", records[0].run_id if records else "")
            store.set_meta("spec_name", str(spec.get("name") or "sweep"))
            store.set_meta("report_options", json.dumps(spec.get("report") or {}))
            store.set_meta("skipped", json.dumps(resolved.get("skipped") or []))
            store.set_meta("sessions", "1")
            store.set_meta("session_1", json.dumps({"jobs": None, "executor": "rebuilt", "rebuilt_at": datetime.now(
                timezone.utc).isoformat(), "rebuilt_from": f"{len(records)} task result(s) in raw/"}))
        target = run_dir / STORE_NAME
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        aside = run_dir / f"{STORE_NAME}.damaged"
        if aside.exists():
            aside = run_dir / f"{STORE_NAME}.damaged-{stamp}"
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{target}{suffix}")
            if src.exists():
                move_into_place(src, Path(f"{aside}{suffix}"))
        move_into_place(tmp, target)
        log.info("rebuilt %s from %d task result(s); the damaged store is %s", target, len(records), aside)
        return aside


def read_sweep_data(run_dir: str | Path) -> SweepData:
    """Everything the report reads from ``run_dir/results.sqlite`` (StoreError when absent,
    StoreDamaged when it disagrees with the task results on disk: :func:`check_store`)."""
    # Imported here: running a sweep should not load the report's plotting stack.
    from perfscout.analysis.report import render

    run_dir = Path(run_dir)
    check_store(run_dir)
    store_path = run_dir / STORE_NAME
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


#: Where the sweep report of an agent run directory goes: its report.md/report.html are the
#: agent's answer, which the store's report must not overwrite.
AGENT_STORE_REPORT = "store-report"


def is_agent_run_dir(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` is an agent run (``runs/<id>/``: its store written by evaluate_codec)."""
    run_dir = Path(run_dir)
    if (run_dir / "request.json").is_file():
        return True
    try:
        with ResultStore(run_dir / STORE_NAME) as store:
            return store.get_meta("kind") == "agent"
    except StoreError:
        return False


def _report_dir(run_dir: Path) -> Path:
    """The folder a store's report is written to: the run directory itself for a sweep, its
    ``store-report/`` for an agent run (with the run's platform snapshot and request beside
    it, which the report shows)."""
    if not is_agent_run_dir(run_dir):
        return run_dir
    out = run_dir / AGENT_STORE_REPORT
    out.mkdir(exist_ok=True)
    from perfscout.io import write_atomic

    if (run_dir / "platform.json").is_file():
        write_atomic(out / "platform.json", (run_dir / "platform.json").read_text(encoding="utf-8"))
    try:
        request = json.loads((run_dir / "request.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        request = None
    request = request.get("request", request) if isinstance(request, dict) and "request" in request else request
    if request is not None:
        import yaml

        text = yaml.safe_dump(request, sort_keys=False, allow_unicode=True) if isinstance(request, dict) \
            else f"# the agent's request, in words\nintent: {json.dumps(request, ensure_ascii=False)}\n"
        write_atomic(out / "spec.yaml", text)
    return out


def report(run_dir: str | Path, *, rebuild: bool = False) -> Path:
    """Write ``report.md`` and a self-contained ``report.html`` into the run directory; return the HTML path.

    ``rebuild=True`` first rebuilds a damaged store from the task results on disk
    (:func:`rebuild_store`). An agent run directory (``runs/<id>/``) keeps its own report
    (the agent's answer): the store's report goes into its ``store-report/`` folder."""
    from perfscout.analysis.report import render

    if rebuild:
        rebuild_store(run_dir)
    data = read_sweep_data(run_dir)
    log.info("report of %s: %d of %d task(s) stored", run_dir, len(data.results), data.n_tasks)
    html = render.write_sweep_report(_report_dir(Path(run_dir)), data)
    log.info("wrote %s and %s", html, html.with_name("report.md"))
    return html
