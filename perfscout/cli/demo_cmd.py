"""`perfscout demo`: what `make demo` runs.

The main job on the embedded default: the agent (snapshot → plan → act → observe →
reflect → report, deterministic planner, checkpointed) evaluates every installed CPU
codec on the real field vorticity.512_512 (synthetic fallback when ../shared/data is
absent, and the report says which) at REL 1e-2, 1e-3, 1e-4. Every result is
decompressed and verified; the table is printed from the run's stored records.
``--direct`` skips the agent and calls the evaluation tool in a plain loop.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from perfscout.cli.common import emit_json, fail, stderr, stdout
from perfscout.errors import PerfscoutError
from perfscout.state.records import CompressionResult


def _agent_demo(repeats: int) -> tuple[list[CompressionResult], list[str], str]:
    """Run the agent on the embedded default; return its verified records, notes, report."""
    from perfscout import agent
    from perfscout.graph.planner import DEMO_SPEC

    out = agent.run({**DEMO_SPEC, "repeats": repeats})
    if out.status != "done":
        fail(f"the demo run stopped ({out.status}); resume it with: perfscout resume {out.thread_id}")
    results = Path(out.run_dir) / "results.json"
    try:
        stored = json.loads(results.read_text(encoding="utf-8"))
        records = [CompressionResult(**r) for r in stored["records"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:  # ValueError: JSON and pydantic
        fail(escape(f"the demo run finished but its results cannot be read from {results}: {exc}"))
    # Planning notes say which field was used (real, or the synthetic fallback and why);
    # run notes say what reflect decided (retries, noisy timings, fallbacks), grouped.
    from perfscout.tools.demo import note_lines

    run_notes = [n for n in stored.get("notes", []) if isinstance(n, dict)]
    notes = note_lines((stored.get("plan") or {}).get("notes", []), run_notes, tasks=len(records))
    return records, notes, out.report_path


def demo_command(
    repeats: int = typer.Option(3, "--repeats", help="Timed repeats per evaluation."),
    direct: bool = typer.Option(False, "--direct", help="Call the evaluation tool directly, without the agent."),
    as_json: bool = typer.Option(False, "--json", help="Print the records as one JSON list."),
) -> None:
    """Every installed CPU codec on a real field at REL 1e-2, 1e-3, 1e-4, verified (via the agent)."""
    from perfscout.tools.demo import demo_codecs, demo_field, demo_table, run_demo

    start = time.perf_counter()
    info = stderr if as_json else stdout
    report = ""
    try:
        if direct:
            field, origin = demo_field()
            codecs = demo_codecs()
            info.print(f"field: {escape(origin)}")
            info.print(f"codecs: {', '.join(codecs)}")
            results = run_demo(codecs=codecs, repeats=repeats, field=field)
        else:
            results, notes, report = _agent_demo(repeats)
            for note in notes:
                info.print(f"note: {escape(note)}")
    except PerfscoutError as exc:
        fail(escape(str(exc)))
    if as_json:
        emit_json([r.row() for r in results])
        return
    # Wide enough for every column even when stdout is a pipe (rich assumes 80 there).
    wide = stdout if stdout.is_terminal and stdout.width >= 100 else Console(width=110)
    wide.print(demo_table(results, title="perfscout demo: REL bounds, every result verified"))
    for r in results:
        if r.status != "ok":
            stdout.print(f"[bold]{r.codec} rel {r.bound:g}[/]: {escape(r.error or r.status)}")
    stdout.print(f"{len(results)} evaluations in {time.perf_counter() - start:.1f} s")
    if report:
        stdout.print(f"agent report: {escape(report)}")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
