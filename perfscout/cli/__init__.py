"""`perfscout` command line (typer + rich).

Each command lives in its own module under ``perfscout/cli/`` and exposes
``register(app)``. ``--json`` prints exactly one JSON document on stdout; logs and
progress go to stderr. A :class:`~perfscout.errors.PerfscoutError` becomes a clear
message and exit code 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console
from rich.markup import escape

from perfscout.errors import PerfscoutError

app = typer.Typer(
    name="perfscout",
    help="Evidence-first performance scout: measure, verify, then advise.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

#: Command modules, in help order. Each defines ``register(app: typer.Typer)``.
COMMAND_MODULES = (
    "demo",
    "eval",
    "datasets",
    "snapshot",
    "profile",
    "diagnose",
    "verify",
    "sweep",
    "report",
    "agent",
)

err_console = Console(stderr=True)


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        modname = f"perfscout.cli.{name}_cmd"
        try:
            module = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            # Only tolerate a command module that has not been written yet; a missing
            # dependency *inside* a module is a real error and must surface.
            if exc.name == modname:
                continue
            raise
        module.register(app)


_load_commands()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning user-facing errors into exit code 2."""
    try:
        app(args=argv, standalone_mode=True)
    except PerfscoutError as exc:
        # Messages quote user input ("[1, 2]", paths): escape so rich does not eat it as markup.
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
