"""`perfscout profile [--json] [--unconfined] -- CMD ARGS`: ncu for a CUDA program, perf stat
otherwise, both inside the bubblewrap sandbox.

Exit codes: 0 profiled; 1 the program or the profiler did not finish cleanly (the profile
is stored anyway); 2 the sandbox refused the command (a path outside, bubblewrap missing),
with the reason on stderr (and, with --json, the stored outcome on stdout)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from perfscout.cli.common import emit_json, stderr, stdout
from perfscout.tools.ncu import NcuOptions
from perfscout.tools.profile import ProfileOutcome, profile_command


def register(app: typer.Typer) -> None:
    @app.command("profile", context_settings={"allow_interspersed_args": False})
    def profile(
        command: list[str] = typer.Argument(..., metavar="-- CMD [ARGS]...",
                                            help="The program to profile, after --."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
        tool: str = typer.Option("auto", "--tool", help="auto | ncu | perf"),
        kernel_regex: str = typer.Option(None, "--kernel-regex", "-k", help="ncu: only kernels matching this regex."),
        launch_skip: int = typer.Option(None, "--launch-skip", "-s", help="ncu: skip this many launches first."),
        launch_count: int = typer.Option(None, "--launch-count", "-c", help="ncu: profile at most this many launches."),
        no_details: bool = typer.Option(False, "--no-details", help="ncu: skip the rule messages (details page)."),
        timeout: float = typer.Option(600.0, "--timeout", help="Wall-clock limit in seconds."),
        inputs: list[Path] = typer.Option([], "--input", help="Another file or folder the command may name (read-only)."),
        memory_mb: int = typer.Option(None, "--memory", min=16,
                                      help="Memory cap in MiB (default: half this machine's memory)."),
        disk_mb: int = typer.Option(None, "--disk", min=1,
                                    help="What the program may write into its run directory, in MiB (default 8192)."),
        unconfined: bool = typer.Option(False, "--unconfined",
                                        help="Run WITHOUT the bubblewrap sandbox (where it is missing); "
                                             "recorded in the outcome and reports."),
    ) -> None:
        """Profile a command; raw output and parsed JSON go to $PERFSCOUT_HOME/runs/<id>/."""
        if tool not in ("auto", "ncu", "perf"):
            from perfscout.errors import InputError

            raise InputError(f"--tool must be auto, ncu or perf, not {tool!r}")
        opts = NcuOptions(kernel_regex=kernel_regex, launch_skip=launch_skip,
                          launch_count=launch_count, details=not no_details)
        out = profile_command(command, tool=None if tool == "auto" else tool,  # type: ignore[arg-type]
                              inputs=inputs, ncu_options=opts, timeout_s=timeout, unconfined=unconfined,
                              memory_mb=memory_mb, disk_mb=disk_mb)
        for warning in out.warnings:  # loud, on stderr, whatever the output format
            stderr.print(f"[bold red]warning:[/] {escape(warning)}", highlight=False)
        if json_out:
            emit_json(out.model_dump(mode="json"))
        else:
            _print(out)
        if out.status == "refused":
            hint = out.exit.get("hint", "")
            stderr.print(f"[bold red]error:[/] refused: {escape(out.exit.get('reason', ''))}"
                         + (f" ({escape(hint)})" if hint else ""), highlight=False)
            raise typer.Exit(2)
        # The profile is stored either way; a non-zero exit tells scripts it is incomplete.
        if out.status != "ok" or out.ncu_error:
            raise typer.Exit(1)


def _print(out: ProfileOutcome) -> None:
    stdout.print(f"[bold]{out.tool}[/] ({out.reason})  run {out.run_dir}")
    conf = out.confinement
    if conf is not None and conf.mode == "bwrap":
        stdout.print(escape(f"sandbox {conf.tool}: only {conf.writable[0]} writable, "
                            f"{'network' if conf.network else 'no network'}, own PID namespace"),
                     highlight=False)
    elif conf is not None and conf.mode == "unconfined":
        stdout.print("[bold red]UNCONFINED[/]: the program ran without the OS sandbox")
    stdout.print(escape(f"command {' '.join(out.command)} -> {out.status} {out.exit.get('reason', '')}"),
                 highlight=False)
    if conf is not None:
        for name, st in conf.limit_states.items():  # each limit, and whether it took effect
            took = "in effect" if st.took_effect else "NOT in effect"
            stdout.print(escape(f"  limit {name}: {st.value} ({st.mechanism}; {took})"), highlight=False)
    for note in out.notes:
        stdout.print(escape(f"  note: {note}"), highlight=False)
    if out.perf is not None:
        p = out.perf
        for name, m in p.events.items():
            stdout.print(f"  {name:18s} {m.value:>16,.6g} {m.unit}")
        for name, why in p.unavailable.items():
            stdout.print(f"  {name:18s} {why:>16s}")
        for k, v in p.rusage.items():
            stdout.print(f"  rusage:{k:11s} {v:>16,.6g}")
        if p.fallback:
            stdout.print(f"  [yellow]{p.fallback}[/]")
    for d in out.digest:
        share = f"{d['share_pct']:.1f}%" if d.get("share_pct") is not None else "?"
        mean = f"{d['mean_s'] * 1e6:.1f} us" if d.get("mean_s") is not None else "?"
        stdout.print(f"  {share:>6s}  {d['launches']:3d}x  mean {mean:>10s}  {d['name']}")
    if out.ncu_error:
        stdout.print(f"[red]ncu: {out.ncu_error}[/]")
    for f in out.findings:
        stdout.print(f"[yellow]finding {f.id}[/]: {f.title}")
