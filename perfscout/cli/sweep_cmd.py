"""`perfscout sweep SPEC --out DIR [--resume] [--jobs N] [--wait] [--allow-plugins]`: run a campaign.

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
    report: bool = typer.Option(False, "--report", help="Write report.md / report.html when the sweep ends."),
    as_json: bool = typer.Option(False, "--json", help="Print a summary as one JSON document on stdout."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar on stderr."),
    allow_plugins: bool = typer.Option(False, "--allow-plugins", help="Let the spec's `plugins:` import and run "
                                       "Python code (refused without this flag; only for specs you trust)."),
    wait: bool = typer.Option(False, "--wait", help="If another sweep is writing the same --out, wait for it "
                              "instead of refusing (one writer per results store)."),
) -> None:
    """Run every task of a sweep spec in child processes and store each result as it lands."""
    from perfscout.api_sweep import default_run_dir
    from perfscout.errors import PerfscoutError
    from perfscout.tools.sweep import SweepInterrupted, load_spec, run_sweep

    try:
        model = load_spec(spec, allow_plugins=allow_plugins)
        run_dir = out if out is not None else default_run_dir(model)
        outcome = run_sweep(spec, run_dir, resume=resume, jobs=jobs, progress=not no_progress,
                            allow_plugins=allow_plugins, wait=wait)
        report_path = None
        if report:
            from perfscout.analysis.report.render import write_report

            report_path = write_report(run_dir)
    except SweepInterrupted as exc:
        stderr.print(f"[bold yellow]{exc}[/]")
        raise typer.Exit(130) from None
    except PerfscoutError as exc:
        fail(str(exc))
    summary = {
        "run_dir": str(outcome.run_dir), "run_id": outcome.run_id, "session": outcome.session,
        "tasks": outcome.total, "already_done": outcome.already_done, "ran": outcome.ran,
        "statuses": outcome.statuses, "report": str(report_path) if report_path else None,
    }
    if as_json:
        emit_json(summary)
        return
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(outcome.statuses.items())) or "nothing to run"
    stderr.print(f"{outcome.ran} task(s) run ({counts}); {outcome.already_done} already done; "
                 f"results in {outcome.run_dir}")
    if report_path:
        stderr.print(f"report: {report_path}")


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_command)
