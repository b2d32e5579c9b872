"""Helpers shared by CLI commands: JSON output and user-facing failure."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console

#: Human-readable output goes to stderr when --json owns stdout.
stderr = Console(stderr=True)
stdout = Console()


def emit_json(doc: Any) -> None:
    """Print exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(doc, indent=2, default=_json_default, allow_nan=True))
    sys.stdout.write("\n")
    sys.stdout.flush()


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a clear error on stderr and exit non-zero (no traceback)."""
    stderr.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)
