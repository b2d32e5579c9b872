"""`perfscout report DIR`: report.md and a self-contained report.html from a run's store."""

from __future__ import annotations

from pathlib import Path

import typer

from perfscout.cli.common import emit_json, fail, stdout


def report_command(
    run_dir: Path = typer.Argument(..., help="A sweep run directory (holds results.sqlite)."),
    as_json: bool = typer.Option(False, "--json", help="Print the written paths as one JSON document."),
) -> None:
    """Write the report of a sweep run: environment, spec, plots, best settings, failures."""
    from perfscout.sweep.api import report as write_sweep_report
    from perfscout.errors import PerfscoutError

    try:
        html = write_sweep_report(run_dir)
    except PerfscoutError as exc:
        fail(str(exc))
    paths = {"html": str(html), "markdown": str(html.with_name("report.md"))}
    if as_json:
        emit_json(paths)
    else:
        stdout.print(f"report: {paths['html']}\n        {paths['markdown']}")


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
