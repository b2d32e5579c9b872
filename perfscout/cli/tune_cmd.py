"""`perfscout tune SPEC`: Optuna over a declared space, each trial measured in the sandbox.

    perfscout tune examples/tune_omp_threads.yaml [--out DIR] [--finding ID] [--findings DIAG.json]

The best trial is re-measured against the baseline (interleaved) and judged by the
regression runner before it is reported; every tried configuration becomes an experiment
card (``cards.json``, ``report.md``, ``report.html`` in the run directory).
Exit codes: 0 the tuning ran (whatever it found); 2 bad input.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from perfscout.cli.common import emit_json, fail, stderr, stdout


def tune_command(
    spec: Path = typer.Argument(..., help="Tune spec YAML: command, figure, space, baseline (examples/tune_*.yaml)."),
    out: Path = typer.Option(None, "--out", help="Run directory (default $PERFSCOUT_HOME/runs/tune-<name>-<time>)."),
    finding: list[str] = typer.Option([], "--finding", help="A finding id whose narrowing applies (repeatable)."),
    findings: Path = typer.Option(None, "--findings", help="`perfscout diagnose --json` output: its findings "
                                                            "(with evidence and expected gain) narrow the space."),
    trials: int = typer.Option(None, "--trials", help="Override the spec's number of trials."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    unconfined: bool = typer.Option(False, "--unconfined", help="Run WITHOUT the bubblewrap sandbox (where it "
                                                                "is missing); recorded in the report."),
) -> None:
    """Tune a benchmark command's parameters (environment variables, flags, codec options)."""
    from perfscout.errors import InputError, PerfscoutError
    from perfscout.tools import tune as T

    try:
        tspec = T.load_tune_spec(spec)
        if trials is not None:
            if trials < 1:
                fail("--trials must be >= 1")
            tspec = tspec.model_copy(update={"trials": trials})
        refs = [T.FindingRef(id=f) for f in finding]
        if findings is not None:
            try:
                doc = json.loads(findings.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InputError(f"cannot read findings {findings}: {exc}") from None
            refs += T.findings_from_diagnosis(doc)
        target = out or T.default_out(tspec.name)
        if unconfined:
            from perfscout.tools.bench import UNCONFINED_NOTE

            stderr.print(f"[bold red]warning:[/] {UNCONFINED_NOTE}", highlight=False)
        outcome = T.run_tune(tspec, target, findings=refs, unconfined=unconfined,
                             progress=None if as_json else (lambda m: stderr.print(m, highlight=False, markup=False)))
    except PerfscoutError as exc:
        fail(str(exc))
    if as_json:
        emit_json(T.tune_digest(outcome))
        return
    stdout.print(f"{outcome.verdict.replace('_', ' ')}: {outcome.sentence}", highlight=False, markup=False)
    for card in outcome.cards:
        if card.stage == "confirmed" and card.prediction_met is False:
            stdout.print(f"card {card.id}: {card.prediction_note}", highlight=False, markup=False)
    stdout.print(f"cards: {outcome.run_dir}/cards.json; report: {outcome.report_md}, {outcome.report_html}",
                 highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_command)
