"""``profile``: run a command under the right profiler; ``load_profiles``: read saved ones.

The choice is evidence-based and recorded: ncu when this machine has an NVIDIA GPU *and*
ncu *and* the command looks like a CUDA program (an executable that links the CUDA
runtime or carries a fat binary, or a Python script that imports a CUDA library);
perf stat otherwise. Every run gets a directory ``$PERFSCOUT_HOME/runs/<id>/`` holding the
command, the platform snapshot, the profiler's raw output and the parsed JSON.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from perfscout.errors import InputError, ToolRefused
from perfscout.platform_profiles import find_spec
from perfscout.state.platform import PlatformProfile
from perfscout.state.profiles import KernelProfile, PerfProfile
from perfscout.state.records import Finding
from perfscout.tools.ncu import NcuOptions, import_report, run_ncu
from perfscout.tools.ncu_parse import NcuRule, attach_rules, duration_digest, load_details_csv, load_raw_csv
from perfscout.tools.perf_stat import load_perf_file, run_perf_stat, software_findings
from perfscout.tools.bwrap import Confinement
from perfscout.tools.sandbox import Sandbox, SandboxLimits, SandboxResult, write_run_file
from perfscout.tools.snapshot import take_snapshot

Tool = Literal["ncu", "perf"]

#: Byte strings whose presence in an executable means it runs CUDA code.
_CUDA_BINARY_MARKERS = (b"libcudart", b"libcuda.so", b".nv_fatbin", b"__cudaRegisterFatBinary")
#: Imports that make a Python script a CUDA program (when it actually uses the GPU).
_CUDA_PY_IMPORTS = ("cupy", "torch", "numba.cuda", "from numba import cuda", "jax", "triton",
                    "pycuda", "cuda.core", "cuda.bindings")


def perfscout_home() -> Path:
    from perfscout.home import perfscout_home as home  # the one home rule

    return home()


def new_run_dir(kind: str = "profile") -> tuple[str, Path]:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    run_id = f"{kind}-{stamp}-{secrets.token_hex(3)}"
    path = perfscout_home() / "runs" / run_id
    path.mkdir(parents=True, exist_ok=False)
    return run_id, path


def looks_like_cuda_program(command: Sequence[str], resolve: Any = None) -> tuple[bool, str]:
    """(is it a CUDA program?, why we think so). Reads files; runs nothing."""
    exe = command[0]
    exe_path = Path(resolve(exe)) if resolve else Path(exe)
    scripts = [Path(a) for a in command[1:] if a.endswith(".py") and Path(a).is_file()]
    if exe_path.name.startswith("python") and scripts:
        text = scripts[0].read_text(errors="replace")
        for mod in _CUDA_PY_IMPORTS:
            # whole module names only: "import jaxtyping" is not "import jax"
            if (mod in text if mod.startswith("from ")
                    else re.search(rf"\b(?:import|from)\s+{re.escape(mod)}\b", text)):
                return True, f"{scripts[0].name} imports {mod.replace('from ', '').split()[0]}"
        return False, f"{scripts[0].name} imports no CUDA library"
    try:
        with open(exe_path, "rb") as f:
            blob = f.read(64 * 2**20)  # markers sit in the dynamic section / fatbin header
    except OSError as exc:
        return False, f"cannot read {exe_path}: {exc.strerror}"
    for marker in _CUDA_BINARY_MARKERS:
        if marker in blob:
            return True, f"{exe_path.name} contains {marker.decode()}"
    return False, f"{exe_path.name} links no CUDA runtime"


class ProfileOutcome(BaseModel):
    """What ``perfscout profile`` prints with --json and stores as profile.json."""

    run_id: str
    run_dir: str
    tool: Tool
    reason: str  # why this tool was chosen
    command: list[str]
    status: str  # the profiled command's sandbox status
    exit: dict[str, Any] = Field(default_factory=dict)
    platform_id: str = ""
    perf: PerfProfile | None = None
    kernels: list[dict[str, Any]] = Field(default_factory=list)  # digest rows + identity
    digest: list[dict[str, Any]] = Field(default_factory=list)
    ncu_error: str = ""
    findings: list[Finding] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    #: how the program was isolated (bwrap, or UNCONFINED with ``warning`` saying so)
    confinement: Confinement | None = None
    warnings: list[str] = Field(default_factory=list)
    #: what the measurement can and cannot be trusted for (e.g. ncu's in-process collection)
    notes: list[str] = Field(default_factory=list)

    @property
    def unconfined(self) -> bool:
        return self.confinement is not None and self.confinement.mode == "unconfined"


def choose_tool(command: Sequence[str], platform: PlatformProfile, sandbox: Sandbox) -> tuple[Tool, str]:
    if not platform.gpus:
        return "perf", "no NVIDIA GPU on this machine (" + platform.probes.get("gpus", _NoProbe).detail + ")"
    if not platform.ncu.version:
        return "perf", f"GPU present but ncu unavailable ({platform.ncu.error})"
    cuda, why = looks_like_cuda_program(command, resolve=sandbox.resolve_executable)
    if not cuda:
        return "perf", f"not a CUDA program: {why}"
    return "ncu", f"{platform.gpus[0].name} and ncu present; {why}"


class _NoProbe:
    detail = "no probe ran"


def profile_command(
    command: Sequence[str],
    *,
    tool: Tool | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
    ncu_options: NcuOptions | None = None,
    timeout_s: float = 600.0,
    platform: PlatformProfile | None = None,
    unconfined: bool = False,
    memory_mb: int | None = None,
    disk_mb: int | None = None,
) -> ProfileOutcome:
    """Profile ``command`` (the user's own: its executable is registered explicitly).

    The command runs in the current directory, which it sees read-only (declared as an
    input, as are ``inputs``), confined by bubblewrap with the profiler beside it; only
    the run directory is writable. Without bubblewrap the outcome is ``refused`` (with
    the install hint in ``exit.reason``) unless ``unconfined=True``, which runs it
    anyway and says so in ``confinement.warning`` and ``warnings``. ``memory_mb`` and
    ``disk_mb`` replace the default caps (half the machine's memory; 8 GiB written into the
    run directory); every limit is stated in ``confinement.limit_states`` with whether it
    took effect.
    """
    if not command:
        raise InputError("nothing to profile: give a command after --")
    run_id, run_dir = new_run_dir("profile")
    # The current directory is the user's working area, so it is declared as an input;
    # a server started in / would make that "everything", so there the command runs in
    # its run directory instead and only explicit inputs are allowed.
    cwd = Path.cwd()
    roots = [cwd] if cwd != Path(cwd.anchor) else []
    base = SandboxLimits()
    if memory_mb is not None:
        base = base.model_copy(update={"memory_bytes": int(memory_mb) * 2**20})
    if disk_mb is not None:
        base = base.model_copy(update={"disk_bytes": int(disk_mb) * 2**20})
    sandbox = Sandbox(run_dir, inputs=[*roots, *inputs], cwd=cwd if roots else run_dir,
                      unconfined=unconfined, limits=base)
    try:
        sandbox.register(command[0])
    except ToolRefused as exc:
        raise InputError(str(exc)) from exc
    write_run_file(run_dir / "command.json", json.dumps(list(command)))
    platform = platform or take_snapshot()  # perfscout's own probes, in a sandbox of their own
    write_run_file(run_dir / "platform.json", platform.model_dump_json(indent=2))
    if tool is None:
        tool, reason = choose_tool(command, platform, sandbox)
    else:
        reason = f"requested with --tool {tool}"
    out = ProfileOutcome(run_id=run_id, run_dir=str(run_dir), tool=tool, reason=reason,
                         command=list(command), status="", platform_id=platform.platform_id)
    limits = base.model_copy(update={"timeout_s": timeout_s})
    if tool == "ncu":
        opts = ncu_options or NcuOptions()
        opts = opts.model_copy(update={"timeout_s": timeout_s})
        run = run_ncu(sandbox, [str(a) for a in command], opts)
        res = run.results[0] if run.results else None
        out.ncu_error = run.error
        out.notes += run.notes
        if run.report is not None:
            out.kernels = [kernel_json(k) for k in run.report.kernels]
            out.digest = run.report.digest()
    else:
        prof, res = run_perf_stat(sandbox, [str(a) for a in command], limits=limits)
        out.perf = prof
        if res.status != "refused":  # without counters: what the software events and getrusage say
            out.findings += software_findings(prof)
    if res is not None:
        out.status = res.status
        out.exit = _exit_summary(res)
        out.confinement = res.confinement
        if res.confinement.warning:
            out.warnings.append(res.confinement.warning)
        if res.status == "refused" and "outside the run directory" in res.reason:
            out.exit["hint"] = "declare files outside the current directory with --input PATH"
        # The program could write anything into the run directory, links included: what
        # perfscout writes after it never follows one, and the records are written again.
        write_run_file(run_dir / "program.stdout", res.stdout)
        write_run_file(run_dir / "program.stderr", res.stderr)
        write_run_file(run_dir / "command.json", json.dumps(list(command)))
        write_run_file(run_dir / "platform.json", platform.model_dump_json(indent=2))
    out.files = sorted({p.name for p in run_dir.iterdir()} | {"profile.json"})
    write_run_file(run_dir / "profile.json", out.model_dump_json(indent=2))
    return out


def _exit_summary(res: SandboxResult) -> dict[str, Any]:
    return {"status": res.status, "returncode": res.returncode, "signal": res.signal,
            "reason": res.reason, "wall_s": res.wall_s, "argv": res.argv,
            "stdout_truncated": res.stdout_truncated, "stderr_truncated": res.stderr_truncated}


def kernel_json(k: KernelProfile, *, metrics: bool = False) -> dict[str, Any]:
    """A kernel in the DESIGN.md ``diagnose`` shape (findings filled in by the diagnosis)."""
    doc: dict[str, Any] = {
        "name": k.name, "id": k.id, "grid": k.grid, "block": k.block, "device": k.device,
        "compute_capability": k.compute_capability, "primary": None, "findings": [],
        "ncu_says": k.ncu_rules,
    }
    if metrics:
        doc["metrics"] = {n: {"value": m.value, "unit": m.unit} for n, m in k.metrics.items()}
    return doc


class LoadedProfiles(BaseModel):
    """What ``load_profiles`` read: kernels (ncu) and/or a perf profile, plus provenance."""

    kernels: list[KernelProfile] = Field(default_factory=list)
    perf: PerfProfile | None = None
    rules: list[NcuRule] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # ncu's ==WARNING== lines etc.
    platform: dict[str, Any] = Field(default_factory=dict)

    def digest(self, top: int = 10) -> list[dict[str, Any]]:
        return duration_digest(self.kernels, top=top)


#: What a saved profile file is, as :func:`profile_kind` tells them apart.
ProfileKind = Literal["ncu-rep", "ncu-raw", "ncu-details", "perf"]

#: Bytes read to tell a profile's kind (ncu's own "==PROF==" lines can come first).
_SNIFF_BYTES = 64 * 1024
#: A line of ``perf stat -x,``: a count (or "<not supported>" / "<not counted>"), a unit, an event.
_PERF_X_LINE = re.compile(r"^(?:\d[\d.]*|<not (?:supported|counted)>),[^,]*,[\w:/.-]+")


def profile_kind(path: str | os.PathLike[str]) -> ProfileKind:
    """What the saved profile at ``path`` is, from its name and its first bytes: an Nsight
    Compute report (``.ncu-rep``, or a binary file), ncu's ``--csv --page raw`` export (a
    header with "Kernel Name" and metric columns), its ``--page details`` export ("Section
    Name" / "Metric Name" / "Metric Value" columns), or ``perf stat -x,`` / ``-j`` output.
    InputError for a missing, empty or unrecognised file, naming what was expected."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"profile file {str(path)!r} does not exist (or is not a file)")
    if p.suffix == ".ncu-rep":
        return "ncu-rep"
    try:
        with open(p, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read profile file {path}: {exc}") from exc
    if not head.strip():
        raise InputError(f"profile file {path} is empty")
    if b"\0" in head:
        return "ncu-rep"  # a binary file: only a report is one (ncu --import says if it is not)
    text = head.decode("utf-8", errors="replace")
    # Other lines may come first: ncu's ==PROF== / ==WARNING== lines, perf's comments, and
    # the profiled program's own output when it was saved with the profile's.
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("{") and '"event"' in stripped:
            return "perf"  # perf stat -j: one JSON object per line
        if stripped.startswith('"'):
            header = {c.strip().strip('"') for c in stripped.split('","')}
            if {"Section Name", "Metric Name", "Metric Value"} <= header:
                return "ncu-details"
            if "Kernel Name" in header:
                return "ncu-raw"
        if _PERF_X_LINE.match(stripped):
            return "perf"  # perf stat -x,: a count (or <not supported>), a unit, an event
    raise InputError(
        f"{path} is not a profile perfscout reads: expected an Nsight Compute report (.ncu-rep), "
        "`ncu --csv --page raw` or `--page details` output, or `perf stat -x,` / `-j` output")


def load_profile_files(paths: Sequence[str | os.PathLike[str]], **kw: Any) -> LoadedProfiles:
    """:func:`load_profiles` for files of any kind, each told apart by :func:`profile_kind`
    (at most one of each; a details CSV goes with a raw CSV or a report). ``kw``: the
    other arguments of load_profiles (explicit ``ncu_csv=`` etc. and ``keep_metric``)."""
    for path in paths:
        kind = profile_kind(path)
        key = {"ncu-rep": "ncu_rep", "ncu-raw": "ncu_csv", "ncu-details": "ncu_details", "perf": "perf_csv"}[kind]
        if kw.get(key):
            raise InputError(f"two {kind} files given ({kw[key]} and {path}); diagnose one at a time")
        kw[key] = path
    if kw.get("ncu_details") and not (kw.get("ncu_csv") or kw.get("ncu_rep")):
        raise InputError(f"{kw['ncu_details']} is ncu's details page: it holds Nsight Compute's rule messages, "
                         "not the metrics. Give the `--page raw` CSV (or the .ncu-rep report) with it")
    return load_profiles(**kw)


def load_profiles(
    *,
    ncu_csv: str | os.PathLike[str] | None = None,
    ncu_rep: str | os.PathLike[str] | None = None,
    perf_csv: str | os.PathLike[str] | None = None,
    ncu_details: str | os.PathLike[str] | None = None,
    keep_metric: Callable[[str], bool] | None = None,
) -> LoadedProfiles:
    """Read saved profiler output into typed profiles (used by ``perfscout diagnose``).

    ``ncu_csv``: ``ncu --csv --page raw`` output. ``ncu_rep``: a report, converted with
    ``ncu --import`` (needs ncu here). ``ncu_details``: optional ``--page details`` CSV
    whose rule messages are attached to the matching launches. ``perf_csv``: ``perf stat
    -x,`` or ``-j`` output. ``keep_metric``: parse only the ncu CSV's metric columns it
    accepts (the diagnosis engine's reads when the full metric set is not wanted). Bad
    files raise :class:`InputError` with a clear message.
    """
    if not any((ncu_csv, ncu_rep, perf_csv)):
        raise InputError("give at least one profile: a FILE (its kind is read from it), --ncu-csv, --ncu-rep or --perf-csv")
    if ncu_csv and ncu_rep:
        raise InputError("give --ncu-csv or --ncu-rep, not both")
    out = LoadedProfiles()
    if ncu_csv:
        report = load_raw_csv(ncu_csv, keep=keep_metric)
        out.kernels, out.warnings = report.kernels, report.warnings
        out.sources.append(str(ncu_csv))
    if ncu_rep:
        if not Path(ncu_rep).is_file():
            raise InputError(f"ncu report {ncu_rep} does not exist")
        # the conversion's CSV output is kept for audit in a run directory of its own
        _, run_dir = new_run_dir("import")
        run = import_report(Sandbox(run_dir), ncu_rep, details=True)
        if run.report is None:
            raise InputError(f"could not read {ncu_rep}: {run.error}")
        out.kernels, out.warnings, out.rules = run.report.kernels, run.report.warnings, run.rules
        out.sources.append(str(ncu_rep))
    if ncu_details:
        if not out.kernels:
            raise InputError("--ncu-details needs --ncu-csv or --ncu-rep")
        out.rules = load_details_csv(ncu_details)
        attached = attach_rules(out.kernels, out.rules)
        if attached < len(out.rules):
            out.warnings.append(f"{len(out.rules) - attached} of {len(out.rules)} ncu rule messages "
                                "matched no launch (ID and kernel name must both match)")
        out.sources.append(str(ncu_details))
    if perf_csv:
        out.perf = load_perf_file(perf_csv)
        out.sources.append(str(perf_csv))
    out.platform = profiled_platform(out.kernels)
    return out


def profiled_platform(kernels: Sequence[KernelProfile]) -> dict[str, Any]:
    """The devices the profile was taken on, with their spec-table entries when known."""
    devices: dict[tuple[str, str], dict[str, Any]] = {}
    for k in kernels:
        key = (k.device, k.compute_capability)
        if key in devices:
            continue
        spec = find_spec(k.device) if k.device else None
        devices[key] = {
            "name": k.device, "compute_capability": k.compute_capability,
            "spec": spec.key if spec else None,
            "spec_figures": {n: {"value": f.value, "source": f.source}
                             for n, f in spec.figures.items()} if spec else {},
        }
    return {"source": "profile", "devices": list(devices.values())}
