"""`perfscout regress BASELINE CANDIDATE`: faster, slower or unchanged, with statistics.

    perfscout regress RUN_A RUN_B [--threshold 0.05] [--json] [--md F] [--html F]
    perfscout regress --save-baseline NAME RUN        store RUN's measurements as NAME
    perfscout regress NAME RUN_B                      compare against a stored baseline
    perfscout regress --list-baselines

Exit codes: 0 no regression; 1 a task regressed (or, with --fail-on-noisy, could not be
decided), so it gates a CI pipeline, or a store a run is read from is damaged (named as
``perfscout report`` names it; nothing is written to it); 2 bad input.
"""

from __future__ import annotations

from pathlib import Path

import typer

from perfscout.cli.common import emit_json, fail, refuse_overwriting_inputs, stderr, stdout

_STYLE = {"improved": "green", "regressed": "bold red", "unchanged": "", "too_noisy": "yellow"}


def _print(result) -> None:  # noqa: ANN001
    """A table that fits 80 columns; the reasons (p-values, spreads) follow as wrapped lines."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from perfscout.analysis.regression import VERDICT_TEXT

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for col, width in (("task", 14), ("metric", 12), ("base", 8), ("cand", 8), ("change (95% CI)", 19),
                       ("n", 5), ("verdict", 9)):
        table.add_column(col, overflow="fold", max_width=width)
    for t in result.tasks:
        for m in t.metrics:
            if m.kind == "categorical" and m.verdict == "unchanged":
                continue  # ran / bound held on both sides: said once below
            style = _STYLE.get(m.verdict, "")
            change = "" if m.change is None else f"{m.change:+.1%}"
            if m.ci_low is not None:
                change += f" ({m.ci_low * 100:+.0f}..{m.ci_high * 100:+.0f})"
            verdict = "noisy" if m.verdict == "too_noisy" else VERDICT_TEXT[m.verdict]
            table.add_row(escape(t.key), m.metric, escape(_cell(m.baseline)), escape(_cell(m.candidate)), change,
                          f"{m.n_baseline}/{m.n_candidate}" if m.kind != "categorical" else "",
                          f"[{style}]{verdict}[/]" if style else verdict)
    stdout.print(f"{escape(result.candidate.source)} vs {escape(result.baseline.name or result.baseline.source)}",
                 highlight=False)
    stdout.print(table)
    for t in result.tasks:
        held = [m.metric for m in t.metrics if m.kind == "categorical" and m.verdict == "unchanged"]
        if held:
            stdout.print(f"  {escape(t.key)}: {', '.join(held)} unchanged", highlight=False)
        for m in t.metrics:
            if m.verdict != "unchanged" and m.reason:
                stdout.print(f"  {escape(t.key)} {m.metric}: {escape(m.reason)}", highlight=False)
    for n in result.notes:
        stdout.print(f"  note: {escape(n)}", highlight=False)
    style = _STYLE.get(result.verdict, "")
    verdict = VERDICT_TEXT[result.verdict].upper()
    line = f"{verdict}: {escape(result.sentence)}"
    stdout.print(f"[{style}]{line}[/]" if style else line, highlight=False)


def _cell(v: object) -> str:
    if v is None:
        return ""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def regress_command(
    sources: list[str] = typer.Argument(None, metavar="BASELINE CANDIDATE",
                                        help="Run directories (agent run, sweep, bench/tune output), "
                                             "results.sqlite / samples .json files, or a stored baseline name."),
    threshold: float = typer.Option(0.05, "--threshold", help="Smallest relative timing change that counts (0.05 = 5 %)."),
    quality_threshold: float = typer.Option(0.01, "--quality-threshold",
                                            help="Smallest relative change of CR / max error that counts."),
    alpha: float = typer.Option(0.01, "--alpha", help="Significance level of the Mann–Whitney U test."),
    min_repeats: int = typer.Option(5, "--min-repeats", help="Fewest repeats per side before a timing is decided."),
    match: str = typer.Option(None, "--match", help="Pair tasks on these identity fields, comma-separated "
                                                    "(e.g. dataset,codec to compare two bounds)."),
    metric: list[str] = typer.Option([], "--metric", help="Compare only this metric (repeatable), "
                                                           "e.g. compress_s, ratio, figure."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    md: str = typer.Option(None, "--md", help="Also write the comparison as a Markdown section to this file."),
    html: str = typer.Option(None, "--html", help="Also write it as a self-contained HTML page to this file."),
    fail_on_noisy: bool = typer.Option(False, "--fail-on-noisy", help="Exit 1 also when a task is too noisy to tell."),
    save_baseline: str = typer.Option(None, "--save-baseline", metavar="NAME",
                                      help="Store the one RUN given as the named baseline NAME."),
    list_baselines: bool = typer.Option(False, "--list-baselines", help="List the stored baselines."),
) -> None:
    """Compare a candidate run with a baseline: per task the median change with a bootstrap CI,
    a Mann–Whitney U test, an effect size and a verdict; quality (CR, max error, bound) too."""
    from perfscout.errors import PerfscoutError
    from perfscout.tools import regress as G

    sources = list(sources or [])
    try:
        if list_baselines:
            names = G.list_baselines()
            if as_json:
                emit_json({"baselines": names, "dir": str(G.baselines_dir())})
            else:
                stdout.print("\n".join(names) if names else f"no stored baseline in {G.baselines_dir()}")
            return
        from perfscout.cli.export_cmd import refuse_damaged_stores

        for source in sources:  # before anything reads one (or stores it as a baseline)
            refuse_damaged_stores(source, "results", "stored" if save_baseline is not None else "compared")
        if save_baseline is not None:
            if len(sources) != 1:
                fail("--save-baseline NAME takes exactly one RUN to store")
            path = G.save_baseline(save_baseline, sources[0])
            if as_json:
                emit_json({"baseline": save_baseline, "path": str(path), "source": sources[0]})
            else:
                stdout.print(f"stored baseline {save_baseline!r} from {sources[0]} in {path}")
            return
        if len(sources) != 2:
            fail(f"give a BASELINE and a CANDIDATE (got {len(sources)} argument(s)); "
                 "see `perfscout regress --help`")
        for out in (md, html):  # a report written over the samples or store it compares
            refuse_overwriting_inputs(out, *sources, *(Path(s) / n for s in sources
                                                       for n in ("samples.json", "results.sqlite")))
        fields = [f.strip() for f in match.split(",") if f.strip()] if match else None
        result = G.compare_runs(sources[0], sources[1], threshold=threshold, quality_threshold=quality_threshold,
                                alpha=alpha, min_repeats=min_repeats, match=fields, metrics=metric or None)
        if not result.tasks:
            # Nothing compared is no verdict at all: as exit 0 it would pass a CI gate that
            # compared the wrong runs (different tasks, a renamed dataset, a typo in a path).
            def some(keys: list[str]) -> str:
                return (", ".join(keys[:3]) + (f", ... ({len(keys)})" if len(keys) > 3 else "")) or "none"

            fail(f"no task of {sources[1]} pairs with one of {sources[0]}: nothing was compared (baseline only: "
                 f"{some(result.baseline_only)}; candidate only: {some(result.candidate_only)}); pair on fewer "
                 "fields with --match, e.g. --match dataset,codec")
        written = G.write_regression_report(result, md=md, html=html) if (md or html) else []
    except PerfscoutError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the report: {exc}")
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        _print(result)
    for p in written:
        stderr.print(f"wrote {p}")
    # too_noisy overall: some task undecided, or nothing could be paired at all
    if result.verdict == "regressed" or (fail_on_noisy and result.verdict == "too_noisy"):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("regress")(regress_command)
