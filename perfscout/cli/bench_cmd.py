"""`perfscout bench`: run the user's benchmark command N times in the sandbox, read its figure.

    perfscout bench --figure 'time: (\\S+) s' --repeats 7 --out runs/a -- ./build-a/app --n 1000
    perfscout bench --json-field record.compress_MBps --better higher --out runs/b -- perfscout eval ...
    perfscout bench --spec bench.yaml --out runs/c        several benchmarks and/or variants
    perfscout regress runs/a runs/b                       then compare two builds or settings

Exit codes: 0 every repeat ran and gave its figure (and, with variants, none regressed
against the first variant); 1 otherwise; 2 bad input.
"""

from __future__ import annotations

from pathlib import Path

import typer

from perfscout.cli.common import emit_json, fail, stderr, stdout


def _parse_env(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--env takes NAME=VALUE, got {item!r}")
        env[key] = value
    return env


def _default_out() -> Path:
    from datetime import datetime, timezone

    from perfscout.home import runs_dir

    return runs_dir() / f"bench-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S')}"


def bench_command(
    command: list[str] = typer.Argument(None, metavar="-- CMD [ARGS]...", help="The benchmark command (no shell)."),
    spec: Path = typer.Option(None, "--spec", help="A bench spec YAML (benchmarks, repeats, variants) instead of CMD."),
    figure: str = typer.Option(None, "--figure", help="Regex that reads the figure from stdout (group `value`, "
                                                     "else group 1; the last match wins)."),
    json_field: str = typer.Option(None, "--json-field", help="Dotted field of the JSON the command prints "
                                                              "(e.g. record.compress_MBps)."),
    better: str = typer.Option("lower", "--better", help="lower (a time) or higher (a throughput) is better."),
    unit: str = typer.Option("", "--unit", help="The figure's unit, for the report."),
    name: str = typer.Option("bench", "--name", help="The task name (what `regress` pairs on)."),
    env: list[str] = typer.Option([], "--env", help="Environment variable NAME=VALUE for the command (repeatable)."),
    repeats: int = typer.Option(5, "--repeats", help="Timed runs (at least 5 for `regress` to decide)."),
    warmup: int = typer.Option(1, "--warmup", help="Untimed runs first."),
    timeout_s: float = typer.Option(120.0, "--timeout", help="Seconds per run before the sandbox kills it."),
    inputs: list[str] = typer.Option([], "--input", help="A path outside the working directory the command may name."),
    out: Path = typer.Option(None, "--out", help="Output directory (default $PERFSCOUT_HOME/runs/bench-<time>)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    unconfined: bool = typer.Option(False, "--unconfined", help="Run WITHOUT the bubblewrap sandbox (where it "
                                                                "is missing); recorded in samples.json."),
) -> None:
    """Measure a benchmark command N times through the sandbox and store every repeat's figure."""
    from perfscout.errors import PerfscoutError
    from perfscout.tools import bench as B
    from perfscout.tools.regress import compare_runs

    try:
        if spec is not None:
            if command:
                fail("give either --spec or a command after --, not both")
            bspec = B.load_bench_spec(spec)
        else:
            if not command:
                fail("nothing to run: give a command after -- (or --spec FILE)")
            fig: dict = {"better": better, "unit": unit}
            if figure is not None:
                fig["regex"] = figure
            if json_field is not None:
                fig["json"] = json_field
            bspec = B.parse_bench_spec({"benchmarks": [{"name": name, "command": list(command),
                                                        "env": _parse_env(env), "figure": fig}],
                                        "repeats": repeats, "warmup": warmup, "timeout_s": timeout_s,
                                        "inputs": list(inputs)}, "bench options")

        def progress(variant: str, bname: str, rep) -> None:  # noqa: ANN001
            what = f"{variant}/{bname}" if variant else bname
            val = f"{rep.value:.6g}" if rep.value is not None else f"{rep.status}: {rep.reason[:120]}"
            stderr.print(f"{what} repeat {rep.index + 1}/{bspec.repeats}: {val}", highlight=False, markup=False)

        target = out or _default_out()
        if unconfined:
            stderr.print(f"[bold red]warning:[/] {B.UNCONFINED_NOTE}", highlight=False)
        runs = B.run_bench(bspec, target, progress=None if as_json else progress, unconfined=unconfined)
        comparisons = []
        names = list(runs)
        if len(names) > 1:
            for v in names[1:]:
                comparisons.append((v, compare_runs(runs[names[0]], runs[v])))
    except PerfscoutError as exc:
        fail(str(exc))
    failed = [t.key + (f" ({v})" if v else "") + f": {t.error}" for v, r in runs.items() for t in r.tasks if not t.ran]
    regressed = [v for v, c in comparisons if c.verdict == "regressed"]
    if as_json:
        emit_json({"out": str(Path(target).resolve()), "runs": {v: r.model_dump(mode="json") for v, r in runs.items()},
                   "comparisons": {v: c.model_dump(mode="json") for v, c in comparisons},
                   "failed": failed})
    else:
        import statistics

        for v, r in runs.items():
            for t in r.tasks:
                for metric, vals in t.measured.items():
                    med = f"{statistics.median(vals):.6g}" if vals else "-"
                    spread = (f", spread {(max(vals) - min(vals)) / statistics.median(vals):.0%}"
                              if len(vals) > 1 and statistics.median(vals) else "")
                    stdout.print(f"{(v + '/') if v else ''}{t.key}: {metric} median {med} over {len(vals)} "
                                 f"repeat(s){spread}; status {t.status}", highlight=False, markup=False)
        for v, c in comparisons:
            stdout.print(f"{v} vs {names[0]}: {c.sentence}", highlight=False, markup=False)
        stdout.print(f"samples: {Path(target).resolve()}" + ("" if len(names) == 1 else "/<variant>")
                     + "/samples.json (compare runs with `perfscout regress A B`)", highlight=False, markup=False)
        for f in failed:
            stderr.print(f"failed: {f}", highlight=False, markup=False)
    if failed or regressed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("bench", context_settings={"allow_interspersed_args": False})(bench_command)
