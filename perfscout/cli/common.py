"""Helpers shared by CLI commands: JSON output and user-facing failure."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console

#: Human-readable output goes to stderr when --json owns stdout.
stderr = Console(stderr=True)
stdout = Console()


#: Beside the fields of an object that held NaN/Inf: which ones, and what they held.
NONFINITE_KEY = "nonfinite_fields"


def strict_json(doc: Any) -> Any:
    """``doc`` as plain JSON values, with NaN/Inf replaced by ``null``.

    JSON has no NaN or Infinity (``json.dumps`` would print the JavaScript words, which
    strict parsers reject), so each object that held one also gets
    ``"nonfinite_fields": {"psnr": "inf", ...}``: why the value is null (a lossless
    reconstruction's PSNR is +inf, not missing)."""
    plain = json.loads(json.dumps(doc, default=_json_default, allow_nan=True))
    return _replace_nonfinite(plain)


def _replace_nonfinite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_replace_nonfinite(v) for v in value]
    if isinstance(value, dict):
        why = {k: _spell(v) for k, v in value.items() if isinstance(v, float) and not math.isfinite(v)}
        out = {k: _replace_nonfinite(v) for k, v in value.items()}
        if why:
            out[NONFINITE_KEY] = {**(out.get(NONFINITE_KEY) or {}), **why}
        return out
    return value


def _spell(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def emit_json(doc: Any) -> None:
    """Print exactly one strict JSON document on stdout (see :func:`strict_json`)."""
    sys.stdout.write(json.dumps(strict_json(doc), indent=2, allow_nan=False))
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


def usable_home() -> Any:
    """The perfscout home (``$PERFSCOUT_HOME`` or the per-user data directory), created if
    need be and written to once, or InputError naming the variable: a home that is a file,
    under a file, on a read-only or pseudo file system (``/sys``, ``/proc``) or spelled with
    an unknown ``~user`` otherwise fails deep inside the checkpointer's SQLite."""
    import os
    import tempfile

    from perfscout.errors import InputError
    from perfscout.home import ENV_HOME, perfscout_home

    raw = os.environ.get(ENV_HOME, "").strip()
    named = f"${ENV_HOME}={raw}" if raw else "the per-user data directory"
    try:
        home = perfscout_home()
    except RuntimeError as exc:  # Path.expanduser: "~nobody/x"
        raise InputError(f"the perfscout home ({named}) cannot be used: {exc}") from None
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=home):
            pass
    except OSError as exc:
        why = "it is a file, not a directory" if home.is_file() else (exc.strerror or str(exc))
        raise InputError(f"the perfscout home {home} ({named}) cannot be used: {why}; set {ENV_HOME} to a "
                         "writable directory") from None
    return home


def refuse_overwriting_inputs(out: Any, *inputs: Any) -> None:
    """InputError when the output path ``out`` is one of the ``inputs`` (the same file, through
    any spelling or link): ``eval --data f --save-compressed f`` would replace the data with
    its own stream, ``decompress f --out f`` the stream with its decoding."""
    import os

    from perfscout.errors import InputError

    if out is None:
        return
    for given in inputs:
        if given is None:
            continue
        try:
            same = os.path.samefile(out, given)
        except OSError:  # one of them does not exist (yet): not the same file
            same = False
        if same:
            raise InputError(f"the output {out} is the input {given}: writing it would replace what is being read; "
                             "choose another output path")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a clear error on stderr and exit non-zero (no traceback)."""
    stderr.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)
