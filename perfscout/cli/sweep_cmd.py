"""`perfscout sweep SPEC --out DIR [--resume] [--jobs N] [--cores N] [--wait] [--allow-plugins]`: run a campaign.

Progress goes to stderr; ``--json`` prints a summary document on stdout. Exit status: 0
when every task ran (whatever its verdict), 2 for a bad spec or run directory (also: the
directory is being written by another sweep, a full disk, a spec whose plug-ins were not
allowed), 130 when interrupted (finished results are kept; ``--resume`` continues).
"""

from __future__ import annotations

from pathlib import Path

import typer

from perfscout.cli.common import emit_json, fail, stderr


def sweep_command(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML), see examples/sweep_quick.yaml."),
    out: Path = typer.Option(None, "--out", help="Run directory (default: the spec's `output`, else under PERFSCOUT_HOME/runs)."),
    resume: bool = typer.Option(False, "--resume", help="Continue a stopped run: skip finished tasks, re-run unfinished ones."),
    jobs: int = typer.Option(None, "--jobs", min=1, help="Tasks run at once (default: the spec's `jobs`, else one per core)."),
    cores: int = typer.Option(None, "--cores", min=1, help="Cores the running tasks' codec threads may use together "
                              "(default: the spec's `cores`, else all); jobs x threads never exceeds them."),
    task_start: str = typer.Option(None, "--task-start", help="fork (the default: CPU tasks forked from a task "
                                   "server with the imports done, CUDA tasks in one long-lived worker per "
                                   "device) or spawn (a fresh interpreter per task)."),
    report: bool = typer.Option(False, "--report", help="Write report.md / report.html when the sweep ends."),
    as_json: bool = typer.Option(False, "--json", help="Print a summary as one JSON document on stdout."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar on stderr."),
    allow_plugins: bool = typer.Option(False, "--allow-plugins", help="Let the spec's `plugins:` import and run "
                                       "Python code (refused without this flag; only for specs you trust)."),
    wait: bool = typer.Option(False, "--wait", help="If another sweep is writing the same --out, wait for it "
                              "instead of refusing (one writer per results store)."),
    executor: str = typer.Option(None, "--executor", help="local (child processes here, the default) or dask "
                                 "(a LocalCluster unless --scheduler or --cluster says otherwise)."),
    scheduler: str = typer.Option(None, "--scheduler", help="A running Dask scheduler: tcp://HOST:PORT or a "
                                  "scheduler file (implies --executor dask)."),
    cluster: str = typer.Option(None, "--cluster", help="slurm or pbs: start workers as batch jobs through "
                                "dask-jobqueue (implies --executor dask; needs --cluster-config)."),
    cluster_config: Path = typer.Option(None, "--cluster-config", help="YAML: cores, memory, walltime, account, "
                                        "queue, jobs, processes, gpus_per_job, ..."),
    workers: int = typer.Option(None, "--workers", min=1, help="Workers of the LocalCluster (default: --jobs)."),
    retries: int = typer.Option(2, "--retries", min=0, help="Dask: lost workers a task may cause before it is "
                                "recorded as codec_crashed."),
) -> None:
    """Run every task of a sweep spec in child processes and store each result as it lands."""
    from perfscout.sweep.api import default_run_dir
    from perfscout.errors import InputError, PerfscoutError
    from perfscout.sweep import SweepInterrupted, load_spec, run_sweep

    try:
        dask = _dask_options(executor, scheduler, cluster, cluster_config, workers, retries)
        model = load_spec(spec, allow_plugins=allow_plugins)
        run_dir = out if out is not None else default_run_dir(model)
        if task_start not in (None, "fork", "spawn"):
            raise InputError(f"--task-start must be fork or spawn (got {task_start!r})")
        outcome = run_sweep(spec, run_dir, resume=resume, jobs=jobs, progress=not no_progress,
                            allow_plugins=allow_plugins, wait=wait, dask=dask, cores=cores, task_start=task_start)
        report_path = None
        if report:
            from perfscout.sweep.api import report as write_sweep_report

            report_path = write_sweep_report(run_dir)
    except SweepInterrupted as exc:
        stderr.print(f"[bold yellow]{exc}[/]")
        raise typer.Exit(130) from None
    except PerfscoutError as exc:
        fail(str(exc))
    summary = {
        "run_dir": str(outcome.run_dir), "run_id": outcome.run_id, "session": outcome.session,
        "tasks": outcome.total, "already_done": outcome.already_done, "ran": outcome.ran,
        "statuses": outcome.statuses, "report": str(report_path) if report_path else None,
        "executor": outcome.executor, "dashboard": outcome.dashboard or None,
        "scheduling": outcome.scheduling or None,
    }
    if as_json:
        emit_json(summary)
        return
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(outcome.statuses.items())) or "nothing to run"
    stderr.print(f"{outcome.ran} task(s) run ({counts}); {outcome.already_done} already done; "
                 f"results in {outcome.run_dir}")
    if report_path:
        stderr.print(f"report: {report_path}")


def _dask_options(executor: str | None, scheduler: str | None, cluster: str | None, cluster_config: Path | None,
                  workers: int | None, retries: int):  # -> DaskOptions | None
    from perfscout.errors import InputError

    if executor not in (None, "local", "dask"):
        raise InputError(f"--executor must be local or dask (got {executor!r})")
    if cluster not in (None, "slurm", "pbs"):
        raise InputError(f"--cluster must be slurm or pbs (got {cluster!r})")
    if scheduler and cluster:
        raise InputError("--scheduler and --cluster are two ways to reach workers: give one")
    if cluster and cluster_config is None:
        raise InputError("--cluster needs --cluster-config FILE (cores, memory, walltime, account, queue, ...)")
    wants_dask = executor == "dask" or bool(scheduler or cluster)
    if executor == "local" and wants_dask:
        raise InputError("--scheduler/--cluster run tasks on Dask: drop --executor local or use --executor dask")
    if not wants_dask:
        if workers is not None or cluster_config is not None:
            raise InputError("--workers/--cluster-config apply to --executor dask")
        return None
    from perfscout.sweep.dask_executor import DaskOptions

    return DaskOptions(scheduler=scheduler, cluster=cluster, cluster_config=cluster_config, workers=workers,
                       retries=retries)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_command)
