"""`perfscout rules [--json]`: every diagnosis rule that runs, and the plug-ins that could not.

perfscout's own rules (kernel profiles, then perf stat profiles) and the installed
plug-ins (``perfscout.rules`` entry points) with their distribution, declared
architecture gate and the metrics they read; each plug-in that could not be used with
the reason (:func:`perfscout.analysis.diagnosis.rule_registry.rule_listing`). Exit 0.
"""

from __future__ import annotations

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from perfscout.cli.codecs_cmd import _print_plugins
from perfscout.cli.common import emit_json, stdout


def rules_command(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """List every diagnosis rule (built-in and plug-in) and why a plug-in was refused."""
    from perfscout.analysis.diagnosis.rule_registry import list_rules, rule_listing

    rows = [r.model_dump(mode="json") for r in list_rules()]
    plugins = rule_listing().model_dump(mode="json")
    if as_json:
        emit_json({"rules": rows, "plugins": plugins})
        return
    table = Table(title="perfscout diagnosis rules", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("rule", "role", "profile", "source", "arch"):
        table.add_column(column, no_wrap=True)
    for r in rows:
        source = "perfscout" if r["source"] == "builtin" else r["distribution"]
        table.add_row(escape(r["id"]), r["role"], r["profile"], escape(source), escape(r["arch"] or "in check()"))
    stdout.print(table)
    _print_plugins(plugins)


def register(app: typer.Typer) -> None:
    app.command("rules")(rules_command)
