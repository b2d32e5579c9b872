"""Nsight Compute (``ncu``) through the sandbox: profile a command or import a report.

Defaults follow what works on shared and virtualised GPUs: ``--set full``,
``--clock-control none`` (locking clocks needs privileges and distorts what users see),
``--print-units base``. The program is profiled once into a ``.ncu-rep`` in the run
directory, which is then imported (``--page raw`` for metrics and, with ``details=True``,
``--page details`` for ncu's own rule messages), so the kernels are replayed only once and
nothing is ever parsed from the standard output the program shares with ncu.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from perfscout.errors import InputError, ToolRefused
from perfscout.tools.ncu_parse import NcuReport, NcuRule, attach_rules, parse_details_csv, parse_raw_csv
from perfscout.tools.sandbox import Sandbox, SandboxLimits, SandboxResult, take_run_file, write_run_file

#: ncu prints the whole table at once; a 1,000-kernel raw page is ~16 MB.
_NCU_OUTPUT_CAP = 512 * 2**20
#: The largest report perfscout takes back from a run directory (--set full, many launches).
_NCU_REPORT_CAP = 8 * 2**30
#: Said with every ncu profile: what no sandbox can change.
NCU_IN_PROCESS_NOTE = ("ncu measures through a library it injects into the program's own process: "
                       "a hostile program can alter what ncu records (the sandbox keeps it from "
                       "swapping the report file after the run, not from lying inside itself)")


class NcuOptions(BaseModel):
    section_set: str = "full"
    clock_control: str = "none"
    kernel_regex: str | None = None  # -k regex:...
    launch_skip: int | None = None  # -s
    launch_count: int | None = None  # -c
    details: bool = True  # also collect ncu's rule messages (--page details)
    timeout_s: float = 600.0


class NcuRun(BaseModel):
    """The outcome of one profiling (or import) run."""

    report: NcuReport | None = None
    rules: list[NcuRule] = Field(default_factory=list)
    raw_csv: str = ""  # paths in the run directory
    details_csv: str = ""
    ncu_rep: str = ""
    results: list[SandboxResult] = Field(default_factory=list)
    error: str = ""
    notes: list[str] = Field(default_factory=list)  # what the figures can and cannot be trusted for


def filter_args(opts: NcuOptions) -> list[str]:
    args: list[str] = []
    if opts.kernel_regex:
        args += ["-k", f"regex:{opts.kernel_regex}"]
    if opts.launch_skip is not None:
        args += ["-s", str(int(opts.launch_skip))]
    if opts.launch_count is not None:
        args += ["-c", str(int(opts.launch_count))]
    return args


def profile_args(opts: NcuOptions) -> list[str]:
    """ncu's own arguments (before the profiled command)."""
    return ["ncu", "--set", opts.section_set, "--clock-control", opts.clock_control,
            "--print-units", "base", *filter_args(opts)]


def _limits(opts: NcuOptions, base: SandboxLimits) -> SandboxLimits:
    # A --set full report grows with the number of launches profiled: allow big ones (the
    # run directory's disk budget still holds). Memory and disk as the sandbox says.
    return base.model_copy(update={"timeout_s": opts.timeout_s, "output_cap_bytes": _NCU_OUTPUT_CAP,
                                   "file_size_bytes": 16 * 2**30})


def run_ncu(sandbox: Sandbox, command: Sequence[str], opts: NcuOptions | None = None) -> NcuRun:
    """Profile ``command`` with ncu; raw outputs are written into the run directory.

    ncu always writes a report (``-o``), which is taken back out of the run directory and
    read with ``ncu --import`` in a run of its own: the metrics (and, with ``details``, the
    rule messages) come from that import's output, which no profiled program shares. The
    profiling run's stdout/stderr, where the program prints as it likes, is kept as
    ``ncu_profile.log`` and never parsed for metrics (a program that prints a table shaped
    like ncu's raw page gets nothing from it)."""
    opts = opts or NcuOptions()
    run = NcuRun()
    rd = sandbox.run_dir
    rep = rd / "ncu_profile.ncu-rep"
    res = sandbox.run(list(command), wrap=[*profile_args(opts), "-f", "-o", str(rd / "ncu_profile")],
                      limits=_limits(opts, sandbox.limits))
    run.results.append(res)
    write_run_file(rd / "ncu_profile.log", res.stdout + res.stderr)
    if not os.path.lexists(rep):
        # ncu's own words, from the output it shares with the program: for the message only
        said = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.startswith("==ERROR==")]
        run.error = (f"ncu produced no report ({res.status}: {res.reason})"
                     + (f"; the run's output said: {' | '.join(said[-3:])}" if said else "")
                     + "; see ncu_profile.log")
        return run
    # The report lies in the run directory, which the program can write: it is taken
    # (no link, no hard link, a regular file, at most _NCU_REPORT_CAP) into a folder of
    # perfscout's own before ncu --import reads it, and the copy is what is kept.
    private = Path(tempfile.mkdtemp(prefix="perfscout-ncu-"))
    try:
        try:
            taken = take_run_file(rep, private / rep.name, _NCU_REPORT_CAP)
        except OSError as exc:
            run.error = f"ncu's report was not read back: {exc}"
            return run
        imported = import_report(sandbox, taken, details=opts.details, timeout_s=opts.timeout_s)
        os.unlink(rep)  # the record: perfscout's checked copy, a fresh file
        shutil.copyfile(taken, rep)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    imported.ncu_rep = str(rep)
    imported.results[:0] = run.results
    imported.notes.append(NCU_IN_PROCESS_NOTE)
    return imported


def import_report(sandbox: Sandbox, rep: str | Path, *, details: bool = True,
                  timeout_s: float = 600.0) -> NcuRun:
    """Convert an existing ``.ncu-rep`` with ``ncu --import`` and parse it."""
    rep = Path(rep).resolve()
    if not rep.is_file():
        raise InputError(f"ncu report {rep} does not exist")
    try:
        sandbox.resolve_executable("ncu")
    except ToolRefused as exc:
        raise InputError(f"reading {rep.name} needs Nsight Compute's ncu, which is not available "
                         f"here ({exc}); export a CSV where ncu exists: "
                         f"ncu --import {rep.name} --csv --page raw > {rep.stem}_raw.csv") from exc
    sandbox.declare_input(rep)
    run = NcuRun(ncu_rep=str(rep))
    lim = SandboxLimits(timeout_s=timeout_s, output_cap_bytes=_NCU_OUTPUT_CAP)
    res = sandbox.run(["ncu", "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"],
                      limits=lim)
    run.results.append(res)
    raw = sandbox.run_dir / f"{rep.stem}_raw.csv"
    write_run_file(raw, res.stdout)
    run.raw_csv = str(raw)
    run.report, run.error = _parse_raw(res, str(raw))
    if details and run.report is not None:
        res = sandbox.run(["ncu", "--import", str(rep), "--csv", "--page", "details",
                           "--print-units", "base"], limits=lim)
        run.results.append(res)
        det = sandbox.run_dir / f"{rep.stem}_details.csv"
        write_run_file(det, res.stdout)
        run.details_csv = str(det)
        try:
            run.rules = parse_details_csv(res.stdout, source=str(det))
            attach_rules(run.report.kernels, run.rules)
        except InputError as exc:  # metrics are still good without the rule messages
            run.error = f"details page unusable: {exc}"
    return run


def _parse_raw(res: SandboxResult, source: str) -> tuple[NcuReport | None, str]:
    if res.stdout_truncated:
        return None, f"ncu output exceeded {_NCU_OUTPUT_CAP} bytes and was truncated"
    try:
        return parse_raw_csv(res.stdout, source=source), ""
    except InputError as exc:
        tail = (res.stderr or res.stdout)[-800:].strip()
        return None, f"{exc} (ncu {res.status}: {res.reason}; last output: {tail})"
