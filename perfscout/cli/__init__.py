"""`perfscout` command line (typer + rich), with every command imported lazily.

Each command lives in its own module under ``perfscout/cli/`` and exposes
``register(app)``. :data:`COMMANDS` names them, one line each: ``perfscout --help`` lists
them from that table without importing a single command module (so it stays fast), and a
command's module is imported only when that command runs, shows its own help, or is
completed in the shell. To add a command: write ``perfscout/cli/NAME_cmd.py`` with
``register(app)`` and add its line to :data:`COMMANDS`.

``--json`` prints exactly one JSON document on stdout; logs and progress go to stderr. A
:class:`~perfscout.errors.PerfscoutError` becomes a clear message and exit code 2, never a
traceback. Exit codes everywhere: 0 ok; 1 measured but not ok (a bound violated, a run or
profile that did not finish); 2 bad input; 3 an agent run waiting for an answer; 130
interrupted (work done so far is kept).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from perfscout.errors import PerfscoutError

try:  # typer >= 0.2x vendors click; older typer depends on it
    from typer._click.exceptions import ClickException as _ClickException
    from typer._click.exceptions import UsageError as _UsageError
except ImportError:  # pragma: no cover
    from click.exceptions import ClickException as _ClickException
    from click.exceptions import UsageError as _UsageError


@dataclass(frozen=True)
class Command:
    """One CLI command: where it lives, its one-line summary and an example."""

    name: str
    module: str  # perfscout.cli.<module> defines register(app), which registers `name`
    summary: str  # the line `perfscout --help` shows (the module is not imported for it)
    example: str  # shown at the end of `perfscout NAME --help` (one per line; a group's go to its subcommands)


#: Every command, in help order: one line each.
COMMANDS: tuple[Command, ...] = (
    Command("demo", "demo_cmd", "Every installed CPU codec on a real field at REL 1e-2..1e-4, verified.",
            "perfscout demo --json"),
    Command("eval", "eval_cmd", "One codec on one field: compress, verify the bound element by element, time.",
            "perfscout eval --synthetic grf:64,64,64 --codec sz3 --mode rel --bound 1e-3"),
    Command("decompress", "eval_cmd", "Decode a stream saved with `eval --save-compressed` to raw binary.",
            "perfscout decompress field.pscz --out field.f32"),
    Command("codecs", "codecs_cmd", "Installed codecs: versions, modes, devices, and why one is missing.",
            "perfscout codecs --json"),
    Command("datasets", "datasets_cmd", "Named datasets: shared real fields, SDRBench, synthetic.",
            "perfscout datasets list --json\nperfscout datasets inspect data.nc"),
    Command("snapshot", "snapshot_cmd", "This machine: CPU, memory, NUMA, GPUs, compilers, MPI, perf.",
            "perfscout snapshot --json --save mybox"),
    Command("profile", "profile_cmd", "Profile a program: ncu for CUDA code on a GPU, else perf stat.",
            "perfscout profile -- python3 -c 'print(sum(range(10**7)))'"),
    Command("diagnose", "diagnose_cmd", "Primary bottleneck and evidence-backed findings of a saved profile.",
            "perfscout diagnose --ncu-csv tests/fixtures/ncu/h200_cupy_kernels_raw.csv"),
    Command("rules", "rules_cmd", "Diagnosis rules: built-in and installed plug-ins, and why one was refused.",
            "perfscout rules --json"),
    Command("verify", "verify_cmd", "Closed loop: did a fix move what the finding predicted?",
            "perfscout verify --kernel K --before-csv before.csv --after-csv after.csv"),
    Command("bench", "bench_cmd", "A benchmark command N times in the sandbox; every figure kept.",
            "perfscout bench --figure 'time: (\\S+) s' --repeats 7 --out runs/a -- ./app --n 1000"),
    Command("regress", "regress_cmd", "Two runs compared with statistics; exit 1 on a regression.",
            "perfscout regress runs/a runs/b --md regression.md"),
    Command("tune", "tune_cmd", "Optuna over flags/env/codec options; best re-measured; cards.",
            "perfscout tune examples/tune_omp_threads.yaml"),
    Command("sweep", "sweep_cmd", "A campaign from a YAML spec; crash-proof store, --resume continues.",
            "perfscout sweep examples/sweep_quick.yaml --out runs/quick"),
    Command("report", "report_cmd", "report.md and a self-contained report.html of a sweep.",
            "perfscout report runs/quick"),
    Command("export", "export_cmd", "A chosen setting as numcodecs / Zarr / HDF5 / xarray configuration.",
            "perfscout export runs/quick --check ../shared/data/vorticity.512_512 --shape 512,512 --dtype f32"),
    Command("run", "agent_cmd", "Ask the agent: an intent in words, a YAML spec, or --demo.",
            'perfscout run "compare sz3 and zfp at rel 1e-3 on vorticity.512_512"'),
    Command("resume", "agent_cmd", "Continue an agent run: answer its question, or pick up after a crash.",
            "perfscout resume THREAD_ID --answer '{\"shape\": \"512,512\", \"dtype\": \"f32\"}'"),
    Command("runs", "agent_cmd", "Every agent run in the perfscout home, newest first.",
            "perfscout runs --json"),
    Command("serve", "serve_cmd", "A local web viewer: follow, answer, resume and fork runs; sweeps.",
            "perfscout serve --port 8765"),
)
BY_NAME = {c.name: c for c in COMMANDS}

HELP = "Evidence-first performance scout: measure, verify, then advise."
EPILOG = ("Exit codes: 0 ok; 1 measured but not ok (bound violated, run not finished); 2 bad input; "
          "3 agent run waiting for an answer; 130 interrupted. `--json` prints one JSON document on "
          "stdout. Runs live in $PERFSCOUT_HOME (else the per-user data directory).")


def _show_flags_as_flags() -> None:
    """typer 0.2x labels every boolean flag ``<bool>`` (``--json <bool>``), which reads as if
    it took a value; a flag takes none, so show none."""
    display = getattr(typer.core.TyperOption, "display_type_rich", None)
    if display is None or getattr(display, "_perfscout", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and self.metavar is None:
            return None
        return display(self, ctx)

    display_type_rich._perfscout = True  # type: ignore[attr-defined]
    typer.core.TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


class LazyGroup(TyperGroup):
    """A group whose commands are imported on first use (see the module docstring)."""

    _listing = False  # True while help or completion lists the commands

    def list_commands(self, ctx: Any) -> list[str]:
        # A command whose module is not there (not written yet) is left out, not an error.
        lazy = [c.name for c in COMMANDS if _module_exists(c.module)]
        return lazy + [n for n in self.commands if n not in BY_NAME]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = BY_NAME.get(cmd_name)
        if entry is None or not _module_exists(entry.module):
            return None
        if self._listing:  # the summary line is all a listing needs
            return TyperCommand(cmd_name, help=entry.summary, short_help=entry.summary)
        self._load(entry.module)
        return self.commands.get(cmd_name)

    def _load(self, module_name: str) -> None:
        try:
            module = importlib.import_module(f"perfscout.cli.{module_name}")
        except ImportError as exc:  # e.g. an optional dependency of that one command is missing
            names = [c.name for c in COMMANDS if c.module == module_name]
            raise PerfscoutError(f"perfscout {'/'.join(names)} cannot start here: {exc} "
                                 "(install perfscout with the extra that provides it, e.g. "
                                 "pip install 'perfscout[test]')") from exc
        holder = typer.Typer()
        module.register(holder)
        loaded = typer.main.get_group(holder).commands
        for name, cmd in loaded.items():
            entry = BY_NAME.get(name)
            if entry is not None:
                _add_examples(cmd, entry.example.splitlines(), f"perfscout {name}")
            self.commands.setdefault(name, cmd)
        missing = [c.name for c in COMMANDS if c.module == module_name and c.name not in loaded]
        if missing:
            raise RuntimeError(f"perfscout.cli.{module_name}.register() did not register {missing}")

    def invoke(self, ctx: Any) -> Any:
        """Every command's failures, in one place: a :class:`PerfscoutError` (bad input) and
        an ``OSError`` (a path the user gave that cannot be read or written: missing, a
        directory, read-only, a full disk) are one line on stderr and exit code 2 (1 for an error
        whose ``exit_code`` says so: a damaged store); any other
        exception is a perfscout bug, also one line (the traceback under ``--verbose``), exit
        code 2 as well, since only an input can have reached it. Here rather than in
        :func:`main` so that typer's ``CliRunner`` and embedding callers see the same."""
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, _ClickException, KeyboardInterrupt, SystemExit):
            raise
        except PerfscoutError as exc:
            _print_error(str(exc))
            # a store found damaged is a failure, not bad input: its error says exit 1
            raise typer.Exit(getattr(exc, "exit_code", 2)) from None
        except OSError as exc:
            _print_error(_describe_os_error(exc))
        except MemoryError as exc:
            _print_error(f"out of memory{f': {exc}' if str(exc) else ''} (the input, or what was asked of it, is "
                         "larger than this machine's free memory)")
        except Exception as exc:  # noqa: BLE001 - the last line of defence against a traceback
            import logging

            logging.getLogger("perfscout").debug("unexpected error", exc_info=True)
            if type(exc).__module__ == "sqlite3":  # a database file in the way: damaged, locked, unwritable
                _print_error(f"a SQLite database could not be used: {exc} (a damaged or locked file, or a folder "
                             "perfscout cannot write: check $PERFSCOUT_HOME and the run directory)")
                raise typer.Exit(2) from None
            _print_error(f"unexpected {type(exc).__name__}: {exc} (a perfscout bug: please report it with "
                         "the command line; `perfscout --verbose ...` prints the traceback)")
        raise typer.Exit(2)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        self._listing = True
        try:
            return super().shell_complete(ctx, incomplete)
        finally:
            self._listing = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except _UsageError as exc:
            # typer suggests from the commands loaded so far; suggest from all of them.
            from difflib import get_close_matches

            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches and "Did you mean" not in exc.message:
                exc.message = exc.message.rstrip(".") + ". Did you mean " + ", ".join(map(repr, matches)) + "?"
            raise


def _add_examples(cmd: Any, examples: list[str], prefix: str) -> None:
    """Give ``cmd`` (and, for a group, each subcommand) the examples that start with its
    own command line, as its help epilog; an epilog a command already has is kept."""
    mine = [e for e in examples if e == prefix or e.startswith(prefix + " ")]
    if mine and not cmd.epilog:
        cmd.epilog = "\n\n".join(("Example: " if i == 0 else "         ") + e for i, e in enumerate(mine))
    for sub_name, sub in (getattr(cmd, "commands", None) or {}).items():
        _add_examples(sub, mine, f"{prefix} {sub_name}")


def _print_error(message: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    # Messages quote user input ("[1, 2]", paths): escape so rich does not eat it as markup.
    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}")


def _describe_os_error(exc: OSError) -> str:
    """``[Errno 20] Not a directory: '/h/runs/x'`` as what a user can act on: the path they
    gave or configured (``$PERFSCOUT_HOME``), and which part of it is wrong."""
    import errno
    import os

    from perfscout.home import ENV_HOME

    path = exc.filename
    reason = exc.strerror or str(exc)
    if path is None:
        return f"cannot read or write a file: {reason}"
    name = os.fsdecode(path)
    full = os.path.abspath(name)
    home = os.environ.get(ENV_HOME, "").strip()
    where = ""
    if home and (full + os.sep).startswith(os.path.abspath(os.path.expanduser(home)) + os.sep):
        where = f" (under ${ENV_HOME}={home})"
    if exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.ENOENT):
        # the first part of the path that exists: a file where a folder is needed, or the
        # folder that is missing
        probe = full
        while probe != os.path.dirname(probe) and not os.path.lexists(probe):
            probe = os.path.dirname(probe)
        if probe != full and not os.path.isdir(probe):
            return f"cannot use {name}{where}: {probe} is a file, not a directory"
        if probe == full and exc.errno == errno.EEXIST and not os.path.isdir(full):
            return f"cannot use {name}{where}: it exists and is a file, not a directory"
        if exc.errno == errno.ENOENT and not os.path.isdir(os.path.dirname(full)):
            return f"cannot write {name}{where}: the directory {os.path.dirname(full)} does not exist"
    return f"cannot read or write {name}{where}: {reason}"


def _module_exists(module_name: str) -> bool:
    return importlib.util.find_spec(f"perfscout.cli.{module_name}") is not None


_show_flags_as_flags()

app = typer.Typer(
    cls=LazyGroup,
    name="perfscout",
    help=HELP,
    epilog=EPILOG,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
)


def _print_version(value: bool) -> None:
    if value:
        from perfscout import __version__

        typer.echo(f"perfscout {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print perfscout's version and exit."),
    verbose: bool = typer.Option(False, "--verbose",
                                 help="Log progress and diagnostics on stderr (give it before the command)."),
    quiet: bool = typer.Option(False, "--quiet", help="Log only errors on stderr (give it before the command)."),
) -> None:
    """Evidence-first performance scout: measure, verify, then advise."""
    from perfscout.cli.logs import configure_logging  # logging set-up: perfscout/cli/logs.py

    configure_logging(verbose=verbose, quiet=quiet)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning user-facing errors into exit code 2."""
    try:
        app(args=argv, prog_name="perfscout", standalone_mode=True)
    except PerfscoutError as exc:  # raised while loading a command (LazyGroup.invoke has the rest)
        _print_error(str(exc))
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
