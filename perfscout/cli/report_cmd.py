"""`perfscout report DIR`: report.md and a self-contained report.html from a run's store."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from perfscout.cli.common import emit_json, fail, stdout


def report_command(
    run_dir: Path = typer.Argument(..., help="A sweep run directory (holds results.sqlite)."),
    as_json: bool = typer.Option(False, "--json", help="Print the written paths as one JSON document."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Rebuild a damaged results store from the run's task "
                                 "results on disk first (the damaged one is kept beside it)."),
) -> None:
    """Write the report of a sweep run: environment, spec, plots, best settings, failures.

    Exit 1 when the results store is damaged (it does not hold the task results stored on
    disk): nothing is reported from it; ``--rebuild`` rebuilds it from them."""
    from perfscout.errors import PerfscoutError
    from perfscout.sweep.api import StoreDamaged
    from perfscout.sweep.api import report as write_sweep_report

    try:
        html = write_sweep_report(run_dir, rebuild=rebuild)
    except StoreDamaged as exc:
        fail(escape(str(exc)), code=1)
    except PerfscoutError as exc:
        fail(escape(str(exc)))
    paths = {"html": str(html), "markdown": str(html.with_name("report.md"))}
    if as_json:
        emit_json(paths)
    else:
        stdout.print(f"report: {paths['html']}\n        {paths['markdown']}")


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
