"""`perfscout demo`: what `make demo` runs (see :mod:`perfscout.tools.demo`)."""

from __future__ import annotations

import time

import typer
from rich.console import Console
from rich.markup import escape

from perfscout.cli.common import emit_json, fail, stderr, stdout
from perfscout.errors import PerfscoutError


def demo_command(
    repeats: int = typer.Option(3, "--repeats", help="Timed repeats per evaluation."),
    as_json: bool = typer.Option(False, "--json", help="Print the records as one JSON list."),
) -> None:
    """Every installed CPU codec on a real field at REL 1e-2, 1e-3, 1e-4, verified."""
    from perfscout.tools.demo import demo_codecs, demo_field, demo_table, run_demo

    start = time.perf_counter()
    try:
        field, origin = demo_field()
        codecs = demo_codecs()
        (stderr if as_json else stdout).print(f"field: {escape(origin)}")
        (stderr if as_json else stdout).print(f"codecs: {', '.join(codecs)}")
        results = run_demo(codecs=codecs, repeats=repeats, field=field)
    except PerfscoutError as exc:
        fail(escape(str(exc)))
    if as_json:
        emit_json([r.row() for r in results])
        return
    # Wide enough for every column even when stdout is a pipe (rich assumes 80 there).
    wide = stdout if stdout.is_terminal and stdout.width >= 100 else Console(width=110)
    wide.print(demo_table(results, title="perfscout demo: REL bounds, every result verified"))
    bad = [r for r in results if r.status != "ok"]
    for r in bad:
        stdout.print(f"[bold]{r.codec} rel {r.bound:g}[/]: {escape(r.error or r.status)}")
    stdout.print(f"{len(results)} evaluations in {time.perf_counter() - start:.1f} s")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
