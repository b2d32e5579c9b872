"""`perfscout run`, `perfscout resume`, `perfscout runs`: the agent from the shell.

Exit codes: 0 done, 2 bad input (a request that is refused or cannot be planned), 3 the run
is waiting for an answer (the question and the resume command are printed).
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from perfscout.cli.common import emit_json, fail, stderr, stdout, usable_home

EXIT_WAITING = 3


def _progress(node: str, update: Any) -> None:
    if node == "act" and isinstance(update, dict):
        for msg in update.get("messages") or []:
            stderr.print(f"[dim]act[/] " + escape(f"{getattr(msg, 'tool_call_id', '')}: {str(msg.content)[:160]}"))
    elif node == "plan" and isinstance(update, dict) and update.get("plan"):
        p = update["plan"]
        stderr.print(f"[dim]plan[/] {p.get('planner')}: {len(p.get('tasks', []))} task(s)")
        for n in p.get("notes", []):
            stderr.print("[dim]  note[/] " + escape(str(n)))
    elif node == "reflect" and isinstance(update, dict):
        for n in update.get("notes") or []:
            stderr.print("[dim]reflect[/] " + escape(f"[{n['kind']}] {n.get('task_key', '')} {n['message']}"))


def _finish(events: Any, as_json: bool, interactive: bool) -> None:
    from perfscout import agent

    outcome = None
    for node, update in events:
        if node == "__outcome__":
            outcome = update
        elif not as_json:
            _progress(node, update)
    assert outcome is not None
    while outcome.status == "interrupted" and interactive and not as_json and sys.stdin.isatty():
        stderr.print(f"[bold yellow]question:[/] {escape(outcome.question['question'])}")
        answer = typer.prompt("answer")
        outcome = agent.resume(outcome.thread_id, agent.parse_answer(answer, "--answer"))
    doc = {"thread_id": outcome.thread_id, "status": outcome.status, "planner": outcome.planner,
           "report_path": outcome.report_path, "html_path": outcome.html_path, "run_dir": outcome.run_dir,
           "plan_error": outcome.plan_error, "refusal": outcome.refusal, "question": outcome.question}
    if outcome.status == "done" and outcome.run_dir and not Path(outcome.run_dir).is_dir():
        # the checkpoint says done, but the run directory it names is gone or is no folder:
        # its report and results are not there, and "done; report: …" would name a lost file
        doc["status"] = "run_dir_missing"
        if as_json:
            emit_json(doc)
        what = "is not a folder" if Path(outcome.run_dir).exists() else "is gone"
        fail(escape(f"thread {outcome.thread_id} finished, but its run directory {outcome.run_dir} {what}: its "
                    "report and results are not on disk (nothing was written there); run the request again "
                    "with another --thread-id to measure it again"), code=1)
    if as_json:
        emit_json(doc)
    if outcome.refusal:
        fail(escape(f"refused: {outcome.refusal}; nothing was run (report: {outcome.report_path})"))
    if outcome.plan_error:
        fail(escape(f"{outcome.plan_error} (report: {outcome.report_path})"))
    if outcome.status == "interrupted":
        if not as_json:
            stderr.print(f"[bold yellow]question:[/] {escape(outcome.question['question'])}")
            stderr.print(escape(f"answer with: perfscout resume {outcome.thread_id} --answer '...'"))
        raise typer.Exit(EXIT_WAITING)
    if not as_json:
        if outcome.status == "done":
            print_answer(Path(outcome.run_dir), outcome.report_path)
        stderr.print(f"thread {outcome.thread_id}: {outcome.status}; planner: {outcome.planner}; "
                     f"report: {outcome.report_path or '-'}; html: {outcome.html_path or '-'}")
    if outcome.status != "done":
        raise typer.Exit(1)
    # A run whose every tool call was refused (a path outside what the request may touch, a
    # missing executable, a shape too large) measured nothing: as exit 0 it reads as success.
    from perfscout.graph.tool_common import INTERNAL_ERROR

    observations = [o for o in (outcome.values.get("observations") or []) if isinstance(o, dict)]
    internal = [o for o in observations if str(o.get("error") or "").startswith(INTERNAL_ERROR)]
    if internal:  # a defect, not a result: never exit 0 with "no results"
        fail(escape(f"{len(internal)} task(s) of thread {outcome.thread_id} failed with an internal error "
                    f"(first: {internal[0].get('tool')}: {internal[0].get('error')}); report: {outcome.report_path}"),
             code=1)
    if observations and all(o.get("kind") == "refused" for o in observations):
        first = next((str(o.get("error") or o.get("summary") or "") for o in observations), "")
        fail(escape(f"every task of thread {outcome.thread_id} was refused, nothing was measured "
                    f"(first: {first}); report: {outcome.report_path}"))


def print_started(thread_id: str) -> None:
    """Said before any tool runs: the run's id and how to pick it up if it stops."""
    stderr.print(escape(f"run {thread_id} started; if it stops, resume it with: perfscout resume {thread_id}"))


def _compact_table(records: list[dict[str, Any]]) -> Any:
    """The records in a table that fits a terminal: numbers fold, never end in an ellipsis."""
    from rich import box
    from rich.table import Table

    def num(v: Any, spec: str = ".4g") -> str:
        return "–" if v is None else format(float(v), spec)

    several = len({r.get("dataset") for r in records}) > 1
    columns = ["codec"] + (["data"] if several else []) + ["setting", "ratio", "PSNR", "max err", "ok", "comp MB/s",
                                                          "dec MB/s"]
    table = Table(*columns, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    for col in table.columns:
        col.overflow = "fold"
    for r in records:
        codec = f"{r.get('codec')}" + (" (GPU)" if r.get("device") == "cuda" else "")
        ok = {True: "yes", False: "NO"}.get(r.get("bound_ok"), "–")
        cells = [codec] + ([Path(str(r.get("dataset"))).name] if several else []) + [
            f"{r.get('mode')} {num(r.get('bound'))}", num(r.get("ratio")), num(r.get("psnr")),
            num(r.get("max_abs_err"), ".3g"), ok, num(r.get("compress_MBps"), ".1f"),
            num(r.get("decompress_MBps"), ".1f")]
        table.add_row(*(escape(str(x)) for x in cells))
    return table


def print_answer(run_dir: Path, report_path: str) -> None:
    """The run's Answer (its claims' sentences), a compact table of the records and where the
    report is: rendered for a terminal, not the report's Markdown."""
    from rich.rule import Rule
    from rich.text import Text

    from perfscout.state.claims import CLAIMS_FILE, read_claims

    stdout.print(Rule("Answer", align="left"))
    if (run_dir / CLAIMS_FILE).is_file():
        for claim in read_claims(run_dir).claims:
            # Text: a claim's brackets are not rich markup; soft_wrap: the terminal wraps, so a
            # path or a figure is never split by an inserted newline
            stdout.print(Text(claim.text), soft_wrap=True)
    try:
        records = json.loads((run_dir / "results.json").read_text(encoding="utf-8")).get("records") or []
    except (OSError, ValueError):
        records = []
    if records:
        stdout.print(_compact_table(records))
    html = Path(report_path).with_suffix(".html") if report_path else None
    stdout.print(Text(f"Report: {report_path}" + (f" (HTML: {html})" if html and html.is_file() else "")),
                 soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_cmd(
        intent: Optional[str] = typer.Argument(None, help="What to find out, in words."),
        spec: Optional[Path] = typer.Option(None, "--spec", help="A YAML spec instead of words."),
        demo: bool = typer.Option(False, "--demo", help="The embedded default request."),
        thread_id: Optional[str] = typer.Option(None, "--thread-id", help="Checkpoint under this id."),
        planner: Optional[str] = typer.Option(None, "--planner", help="auto | llm | deterministic"),
        allow_plugins: bool = typer.Option(False, "--allow-plugins", help="Let a sweep spec's `plugins:` "
                                           "import code (only for specs you trust)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Run the agent on an intent, a spec or the demo; print its answer and where the report is."""
        from perfscout import agent
        from perfscout.graph.context import Context
        from perfscout.graph.planner import DEMO_SPEC

        given = [x for x in (intent, spec, demo or None) if x]
        if len(given) != 1:
            fail("give exactly one of: an INTENT, --spec SPEC.yaml, --demo")
        if planner not in (None, "auto", "llm", "deterministic"):
            fail(f"--planner must be auto, llm or deterministic, got {planner!r}")
        if spec is not None:  # a regular file of spec size: /dev/zero or a FIFO would hang the reader
            from perfscout.io import check_input_file

            check_input_file(spec, "spec", max_bytes=16 * 2**20)
        usable_home()  # checkpoints and the run directory go there: a bad home is said first, by name
        request: Any = dict(DEMO_SPEC) if demo else (spec if spec else intent)
        ctx = Context(allow_plugins=allow_plugins, **({"planner": planner} if planner else {}))
        thread_id = thread_id or uuid.uuid4().hex[:12]  # chosen here so that it is said before anything runs
        print_started(thread_id)  # stderr: with --json too, stdout stays one JSON document
        _finish(agent.stream(request, thread_id=thread_id, context=ctx), as_json, interactive=True)

    @app.command("resume")
    def resume_cmd(
        thread_id: str = typer.Argument(..., help="The run's thread id (see `perfscout runs`)."),
        answer: Optional[str] = typer.Option(None, "--answer", help="The answer to the pending question, in "
                                             "words (e.g. 'vorticity.512_512', 'rel 1e-3', 'yes') or as JSON."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Continue a run: answer its question, or pick up after a crash."""
        from perfscout import agent
        from perfscout.graph.checkpoint import CheckpointStoreDamaged

        usable_home()
        events = (agent.resume_stream(thread_id, agent.parse_answer(answer, "--answer")) if answer is not None
                  else agent.resume_stream(thread_id))
        try:
            _finish(events, as_json, interactive=True)
        except CheckpointStoreDamaged as exc:
            mine = [d for d in exc.run_dirs if d.name == thread_id]
            where = (f"; the run directory of {thread_id} is still there: {mine[0]} (its report and results "
                     "are intact; a fresh run with another --thread-id measures it again)") if mine else \
                f"; no run directory of {thread_id} is on disk"
            fail(escape(f"{exc}{where}"), code=1)

    @app.command("runs")
    def runs_cmd(as_json: bool = typer.Option(False, "--json", help="Print one JSON document.")) -> None:
        """List every agent run in the perfscout home ($PERFSCOUT_HOME, else the per-user
        data directory), newest first, wherever it was started from."""
        from perfscout import agent
        from perfscout.graph.context import Context
        from perfscout.home import home_source

        from perfscout.graph.checkpoint import CheckpointStoreDamaged

        ctx = Context()
        try:
            runs = agent.list_runs(context=ctx)
        except CheckpointStoreDamaged as exc:
            _damaged_runs(exc, as_json)
        from perfscout.graph.checkpoint import describe, run_dirs_on_disk

        known = {r.thread_id for r in runs}
        # run directories the store does not know (it was moved aside or replaced): shown, never hidden
        orphans = [d for d in run_dirs_on_disk(ctx) if d.name not in known]
        if as_json:
            emit_json([{**r.__dict__, "summary": describe_request(r.request)} for r in runs]
                      + [{"thread_id": d.name, "status": "no checkpoint", "run_dir": str(d),
                          "report_path": str(d / "report.md") if (d / "report.md").is_file() else ""}
                         for d in orphans])
            return
        if orphans:
            stderr.print(escape(f"{len(orphans)} run director{'y' if len(orphans) == 1 else 'ies'} under "
                                f"{ctx.runs_dir} {'is' if len(orphans) == 1 else 'are'} not in the checkpoint store "
                                f"{describe(ctx)} (cannot be resumed; reports intact): "
                                f"{', '.join(d.name for d in orphans[:8])}{' ...' if len(orphans) > 8 else ''}"),
                         highlight=False)
        if not runs and orphans:
            return
        if not runs:
            stdout.print(escape(f"no runs yet in {ctx.home_path} ({home_source()}); start one with: "
                                'perfscout run "compare sz3 and zfp at rel 1e-3 on vorticity.512_512"'),
                         highlight=False)
            return
        from rich.table import Table

        base = ctx.runs_dir
        table = Table("thread", "status", "updated (UTC)", "request / report", title="perfscout runs")
        table.columns[0].no_wrap = True
        table.columns[2].no_wrap = True
        table.columns[3].overflow = "fold"
        for r in runs:
            report = r.report_path or "-"
            if r.report_path and Path(r.report_path).is_relative_to(base):
                report = str(Path(r.report_path).relative_to(base))  # legend below: relative to runs/
            table.add_row(r.thread_id, r.status, r.updated_at[:16].replace("T", " "),
                          escape(describe_request(r.request)) + f"\n[dim]{escape(report)}[/]")
        stdout.print(table)
        stdout.print(escape(f"{len(runs)} run(s) in {ctx.home_path} ({home_source()}); report paths are "
                            f"relative to {base}; continue one with: perfscout resume THREAD"), highlight=False)


def _damaged_runs(exc: Any, as_json: bool) -> None:
    """`perfscout runs` on a damaged checkpoint store: say so (exit 1) and list the run
    directories still on disk (thread id, request, report) instead of "no runs yet"."""
    rows = []
    for d in exc.run_dirs:
        try:
            request = json.loads((d / "request.json").read_text(encoding="utf-8")).get("request")
        except (OSError, ValueError, AttributeError):
            request = None
        report = d / "report.md"
        rows.append({"thread_id": d.name, "status": "unknown (checkpoint store damaged)", "run_dir": str(d),
                     "report_path": str(report) if report.is_file() else "", "request": request})
    if as_json:
        emit_json({"error": str(exc), "damaged_store": exc.store, "run_dirs": rows})
    else:
        for r in rows:
            stdout.print(escape(f"{r['thread_id']}: {describe_request(r['request'])} "
                                f"(report: {r['report_path'] or '-'})"), highlight=False)
    fail(escape(str(exc)), code=1)


def describe_request(request: Any) -> str:
    """A request in words: an intent as given, a spec as its goal or its key settings."""
    if isinstance(request, str):
        return request
    if not isinstance(request, dict):
        return json.dumps(request, default=str)
    if request.get("goal"):
        return str(request["goal"])
    parts = []
    for key in ("datasets", "dataset", "data", "codecs", "mode", "modes", "bounds", "bound", "devices", "sweep",
                "profile", "diagnose"):
        value = request.get(key)
        if value not in (None, "", [], {}):
            shown = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
            parts.append(f"{key} {shown}")
    return "; ".join(parts) or json.dumps(request, default=str)
