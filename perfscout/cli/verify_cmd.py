"""`perfscout verify`: closed loop — did the fix move what the finding predicted?

From saved profiles (no GPU needed):
    perfscout verify --before-csv before.csv --after-csv after.csv --kernel NAME
                     [--after-kernel NAME] [--finding ID] [--timings T.json] [--json]
Live (profiles both commands with ncu now; needs ncu and a GPU):
    perfscout verify --before-cmd "python3 app.py" --after-cmd "python3 app_fixed.py" --kernel NAME
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import typer

from perfscout.cli.common import emit_json, fail, stdout


def _print(result) -> None:  # noqa: ANN001
    # markup=False: demangled kernel names hold "[lambda ...]", which rich would eat as markup.
    r = result
    pg = "unsized" if r.predicted_gain is None else f"{r.predicted_gain:.0%}"
    mg = "?" if r.measured_gain is None else f"{r.measured_gain:.0%}"
    stdout.print(f"{r.kernel} -> {r.after_kernel}: finding {r.finding}", markup=False)
    stdout.print(f"  predicted time saved {pg}, measured {mg} ({r.time_source}); verdict: {r.verdict}", markup=False)
    if r.ncu_gain is not None and "ncu" not in r.time_source:
        stdout.print(f"  ncu gpu__time_duration change: {r.ncu_gain:.0%}", markup=False)
    for m in r.metrics:
        state = "n/a" if m.ok is None else ("ok" if m.ok else "did NOT move as predicted")
        stdout.print(f"  {m.metric}: expected {m.expected}, {m.before} -> {m.after}: {state}", markup=False)
    if r.note:
        stdout.print(f"  note: {r.note}", markup=False)


def verify_command(
    kernel: str = typer.Option(..., "--kernel", help="Kernel name in the 'before' profile."),
    before_csv: Path = typer.Option(None, "--before-csv", help="ncu --csv --page raw of the original."),
    after_csv: Path = typer.Option(None, "--after-csv", help="ncu --csv --page raw of the fixed variant."),
    after_kernel: str = typer.Option(None, "--after-kernel", help="Kernel name after the fix (default: same)."),
    finding: str = typer.Option(None, "--finding", help="Finding id to verify (default: the primary)."),
    timings: Path = typer.Option(None, "--timings", help="JSON with kernels_ms / launch_overhead (run_suite.py)."),
    before_cmd: str = typer.Option(None, "--before-cmd", help="Live: command running the original."),
    after_cmd: str = typer.Option(None, "--after-cmd", help="Live: command running the fixed variant."),
    run_dir: Path = typer.Option(None, "--run-dir", help="Live: where ncu output goes (default $PERFSCOUT_HOME/verify)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Compare the predicted change of a finding with the measured one (before vs after)."""
    from perfscout.errors import PerfscoutError
    from perfscout.tools.verify import verify_csv, verify_live

    try:
        if before_cmd or after_cmd:
            if not (before_cmd and after_cmd):
                fail("live mode needs both --before-cmd and --after-cmd")
            if run_dir is None:
                from perfscout.home import perfscout_home

                run_dir = perfscout_home() / "verify"
            # As for `perfscout profile`: the commands run in the current directory, which
            # is declared as an input (unless it is /, which would allow every path).
            cwd = Path.cwd()
            here = [cwd] if cwd != Path(cwd.anchor) else []
            result = verify_live(shlex.split(before_cmd), shlex.split(after_cmd), kernel, run_dir,
                                 after_kernel=after_kernel, finding_id=finding,
                                 inputs=here, cwd=cwd if here else None)
        else:
            if before_csv is None or after_csv is None:
                fail("give --before-csv and --after-csv (or --before-cmd and --after-cmd)")
            t = None
            if timings is not None:
                from perfscout.io import read_input_text

                text = read_input_text(timings, "timings JSON")  # a regular file, else InputError
                try:
                    t = json.loads(text)
                except ValueError as exc:
                    fail(f"cannot read timings {timings}: {exc}")
            result = verify_csv(before_csv, after_csv, kernel, after_kernel, finding, t)
    except PerfscoutError as exc:
        fail(str(exc))
    if as_json:
        emit_json(result.model_dump())
    else:
        _print(result)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)
