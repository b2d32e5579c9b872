"""The sandboxed command runner: the only way perfscout starts an external program.

Two layers. The **confinement** (:mod:`perfscout.tools.bwrap`) isolates the program itself:
bubblewrap namespaces give it a read-only view of the system, only the run directory
writable (plus a private ``/tmp`` and ``$HOME``), no network and a new PID namespace, so
every descendant dies with the run. Where bubblewrap is missing or cannot create
namespaces, the run is **refused** with an install hint, unless the caller asked for
``unconfined=True`` (``--unconfined`` on the CLI): then it runs as before and the result's
``confinement.warning`` says so, loudly, in every outcome and report.

The **argv rules** keep generated commands honest before anything runs:

1. argv is a list of strings; a shell is never involved (``shell=False``).
2. The executable must be on the allowlist (system tools perfscout knows, the running
   Python, plus commands the caller registers explicitly) and is resolved to an
   absolute path before anything runs; its name carries no shell syntax.
3. No argument may contain NUL (``execve`` cannot pass it). Anything else is data: with
   no shell, ``;``, ``$(...)``, quotes or newlines inside ``python -c '...'`` are inert.
4. An argument that is a path token (no spaces, quotes, brackets or shell punctuation;
   contains ``/`` or starts with ``.`` or ``~``; also ``--opt=PATH``, ``-oPATH``,
   ``@respfile``, ``a:b,c`` lists), or a bare name that is a symlink in the working
   directory, must resolve (symlinks followed) inside the run directory or a declared
   input. The values of extra environment variables are held to the same rule. Code and
   other data are not paths; the confinement is what keeps them from reaching anything.
5. The child gets a new session (its own process group), a scrubbed environment
   (explicit allowlist of variables) and ``resource`` limits set before exec: address
   space, CPU seconds, open files, processes and file size; where a cgroup can be made,
   processes and memory are capped there too (the kernel never applies ``RLIMIT_NPROC``
   to root, so for root the ``pids`` cgroup is the real cap).
6. A wall-clock timeout kills the whole process group (bwrap's, whose PID namespace then
   takes every descendant with it); the group is also killed once the leader exits.
7. stdout and stderr are read by threads into bounded buffers that keep the tail.

Every outcome, refusals and limit hits included, comes back as a :class:`SandboxResult`;
``run`` never raises for them. Files perfscout itself writes into or reads from a run
directory after a program ran there go through :func:`write_run_file` /
:func:`read_run_file`, which never follow a link the program may have planted.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from perfscout.errors import ToolRefused
from perfscout.tools import bwrap, cgroup_limits, seccomp, secret_mask
from perfscout.tools.bwrap import Confinement, LimitState

#: Runs inside the sandbox as the program's parent and reports its wait status and rusage.
_LAUNCHER = Path(__file__).with_name("sandbox_launcher.py")

SandboxStatus = Literal["ok", "exit_nonzero", "refused", "timed_out", "killed_by_limit", "crashed"]

#: Executables perfscout itself may start, by name (resolved on PATH at run time).
DEFAULT_ALLOWLIST: tuple[str, ...] = (
    "lscpu", "numactl", "nvidia-smi", "ncu", "perf", "nvcc", "gcc", "g++", "clang",
    "clang++", "mpirun", "sinfo", "scontrol", "uname", "true",
)

#: Environment variables passed through to children; everything else is dropped.
ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "OMP_NUM_THREADS",
    "PYTHONPATH", "VIRTUAL_ENV", "PERFSCOUT_HOME", "SLURM_JOB_ID", "SLURM_CLUSTER_NAME",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
)

#: Refused in executable names and environment variables (rule 2, rule 4); in ordinary
#: arguments only NUL is refused (rule 3).
_INJECTION = re.compile(r"[\n\r\x00;`]|\$\(|\$\{")
#: Characters that make a piece of an argument data (code, a regex, an expression), not a
#: path token (rule 4). A shell would treat them specially; no shell is ever used.
_NOT_A_PATH = re.compile(r"[|&;<>*?!\[\]{}()'\"\\$`\s]")
#: Refused in an executable name.
_EXE_METACHARS = re.compile(r"[|&;<>*?!\[\]{}()'\"\\$`\s]")

#: stderr phrases that mean a limit was hit although the child exited normally (Python,
#: for one, ignores SIGXFSZ and turns a failed allocation into MemoryError), so the
#: text is the only witness. Checked only when that limit was set.
_LIMIT_MARKERS = {
    "address_space_bytes": ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory"),
    "memory_bytes": ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory"),
    "file_size_bytes": ("File too large",),
    "open_files": ("Too many open files",),
}


def default_memory_bytes() -> int | None:
    """Half of this machine's physical memory: a run that needs more is not a benchmark
    perfscout should let take the machine down (``--memory`` says otherwise)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError):
        return None


#: The run directory's default disk budget (and the private /tmp's, $HOME's size each).
DEFAULT_DISK_BYTES = 8 * 2**30
#: Files and directories a run may create in its run directory.
DEFAULT_DISK_ENTRIES = 100_000


class SandboxLimits(BaseModel):
    """Per-run limits. ``None`` leaves that limit as inherited.

    Address space defaults to unlimited because CUDA programs reserve terabytes of
    virtual addresses at start-up; ``memory_bytes`` (a cgroup cap on memory actually
    used, where a cgroup can be made, else ``RLIMIT_DATA`` per process) is the cap that
    suits them; it defaults to half the machine's memory. ``disk_bytes`` and
    ``disk_entries`` are the run directory's budget, watched while the program runs (the
    run is killed past it) and capped at half the file system's free space; ``disk_bytes``
    also sizes each private tmpfs (``/tmp``, ``/var/tmp``, ``$HOME``).
    """

    timeout_s: float = 120.0
    address_space_bytes: int | None = None
    memory_bytes: int | None = Field(default_factory=default_memory_bytes)
    cpu_seconds: int | None = None
    open_files: int | None = 1024
    processes: int | None = 4096
    file_size_bytes: int | None = 2 * 2**30
    disk_bytes: int | None = DEFAULT_DISK_BYTES
    disk_entries: int | None = DEFAULT_DISK_ENTRIES
    output_cap_bytes: int = 1 * 2**20  # per stream; the tail is kept


class SandboxResult(BaseModel):
    """What happened to one command. Never an exception for refusals or limits."""

    status: SandboxStatus
    argv: list[str] = Field(default_factory=list)  # resolved, as executed (or as refused)
    returncode: int | None = None
    signal: str = ""  # e.g. "SIGSEGV" when crashed or killed
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0  # total produced, not just kept
    stderr_bytes: int = 0
    wall_s: float = 0.0
    reason: str = ""
    cwd: str = ""
    rusage: dict[str, float] = Field(default_factory=dict)  # the child's own, from wait4
    confinement: Confinement = Field(default_factory=lambda: Confinement(mode="none"))
    stdout_path: str = ""  # set by run_sandboxed: the kept tails, saved in the run dir
    stderr_path: str = ""
    #: what the profiler wrote to its own channel (``run(profiler_channel=True)``): a socket
    #: only it holds, never a file in the writable run directory
    profiler_output: str = ""
    profiler_output_truncated: bool = False
    #: the program's own wall time, fork to reap, as its parent inside the sandbox saw it
    #: (None where no launcher reported): without the sandbox's start-up and teardown
    program_wall_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def timed_out(self) -> bool:
        return self.status == "timed_out"


class _TailBuffer:
    """Reads a pipe to EOF keeping at most ``cap`` bytes: the tail."""

    def __init__(self, stream, cap: int) -> None:
        self._stream = stream
        self._cap = cap
        self.data = bytearray()
        self.total = 0
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        try:
            while True:
                chunk = self._stream.read1(65536) if hasattr(self._stream, "read1") else self._stream.read(65536)
                if not chunk:
                    break
                self.total += len(chunk)
                self.data += chunk
                if len(self.data) > 2 * self._cap:  # trim in batches, not per chunk
                    del self.data[: len(self.data) - self._cap]
        except (OSError, ValueError):
            pass  # pipe closed under us (group killed): keep what we have

    def text(self) -> tuple[str, bool]:
        tail = bytes(self.data[-self._cap:]) if self._cap else b""
        return tail.decode("utf-8", errors="replace"), self.total > len(tail)


class Sandbox:
    """Runs allowlisted commands confined to ``run_dir`` (see module docstring).

    ``unconfined=True`` runs without bubblewrap (recorded in every result).
    ``allow_unconfined_fallback=True`` is for perfscout's own fixed probes (lscpu,
    nvidia-smi --version...): confined where bubblewrap works, else run anyway and say
    why in ``confinement``. ``network=True`` keeps the host's network (probes that ask a
    scheduler); programs the user or the agent names never get it.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        inputs: Iterable[str | os.PathLike[str]] = (),
        executables: Iterable[str] = (),
        limits: SandboxLimits | None = None,
        env_allow: Sequence[str] = ENV_ALLOWLIST,
        cwd: str | os.PathLike[str] | None = None,
        unconfined: bool = False,
        allow_unconfined_fallback: bool = False,
        network: bool = False,
    ) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        #: where commands run unless ``run(cwd=...)`` says otherwise; must be allowed
        self.cwd = Path(cwd).resolve() if cwd else self.run_dir
        self.inputs: list[Path] = []
        for p in inputs:
            self.declare_input(p)
        self.limits = limits or SandboxLimits()
        self.env_allow = tuple(env_allow)
        self.unconfined = unconfined
        self.allow_unconfined_fallback = allow_unconfined_fallback
        self.network = network
        self._allowed_names: set[str] = set(DEFAULT_ALLOWLIST)
        self._allowed_paths: set[Path] = set()
        # The project's own Python entry points: this interpreter, and the console
        # script installed beside it.
        self._allowed_paths.add(Path(sys.executable).resolve())
        for script in ("perfscout",):
            cand = Path(sys.executable).parent / script
            if cand.exists():
                self._allowed_paths.add(cand.resolve())
        for exe in executables:
            self.register(exe)
        #: what the secret walk found per folder, kept for this sandbox's runs: the program
        #: sees those folders read-only, so it cannot add a secret between two of its runs
        self._vetted: dict[Path, secret_mask.Vetting] = {}

    def _vet(self, root: Path) -> secret_mask.Vetting:
        if root not in self._vetted:
            self._vetted[root] = secret_mask.vet_tree(root, skip=bwrap.python_roots())
        return self._vetted[root]

    def named_paths(self, argv: Sequence[str], cwd: Path) -> list[tuple[Path, Path]]:
        """(path as spelled, joined to ``cwd``; resolved) for every existing path ``argv``
        names inside the allowed roots: path tokens and bare names of files in ``cwd``. Where
        a folder is too large to vet, these are all the sandbox shows of it."""
        out: list[tuple[Path, Path]] = []
        for i, arg in enumerate(argv):
            pieces = [arg] if i == 0 else [*_path_pieces(arg), *([arg] if _is_bare_name(arg) else [])]
            for piece in pieces:
                try:
                    p = Path(piece).expanduser()
                except RuntimeError:
                    continue
                spelled = Path(os.path.normpath(p if p.is_absolute() else cwd / p))
                if not os.path.lexists(spelled):
                    continue
                real = spelled.resolve()
                if self._inside_allowed(real) or self._inside_allowed(spelled):
                    out.append((spelled, real))
        return out

    # ---- configuration -------------------------------------------------------------
    def register(self, executable: str) -> Path:
        """Allow one more executable (a name on PATH or a path); returns its absolute path."""
        if _INJECTION.search(executable) or _EXE_METACHARS.search(executable):
            raise ToolRefused(f"cannot register {executable!r}: the name contains shell metacharacters")
        path = self._which(executable)
        if path is None:
            raise ToolRefused(f"cannot register {executable!r}: not found or not executable")
        self._allowed_paths.add(path.resolve())
        return path

    def declare_input(self, path: str | os.PathLike[str]) -> None:
        """Allow arguments naming ``path`` (a file or a directory tree) to pass rule 4;
        the confined program sees it read-only."""
        p = Path(path).expanduser().resolve()
        if p == Path(p.anchor):
            raise ToolRefused(f"declaring {p} as an input would allow every path")
        self.inputs.append(p)

    # ---- checks --------------------------------------------------------------------
    def _which(self, name: str) -> Path | None:
        """Absolute path of ``name``, symlinks NOT resolved: a venv's ``bin/python`` and
        multi-call binaries behave by the name they are started under."""
        if os.sep in name:
            p = Path(name).expanduser()
            if not p.is_absolute():
                p = self.cwd / p
            p = Path(os.path.abspath(p))
            return p if p.is_file() and os.access(p, os.X_OK) else None
        found = shutil.which(name)
        return Path(os.path.abspath(found)) if found else None

    def resolve_executable(self, name: str) -> Path:
        """The absolute path of an allowed executable, or :class:`ToolRefused`."""
        if _INJECTION.search(name) or _EXE_METACHARS.search(name):
            raise ToolRefused(f"executable name {name!r} contains shell metacharacters")
        path = self._which(name)
        if path is None:
            raise ToolRefused(f"executable {name!r} not found on PATH")
        # A name registered or allowlisted by name is fine wherever PATH finds it; a
        # path must itself have been registered (or be this Python). Registered paths
        # are compared with symlinks resolved, so a link cannot smuggle in another file.
        if path.resolve() in self._allowed_paths:
            return path
        if os.sep not in name and name in self._allowed_names:
            return path
        raise ToolRefused(f"executable {name!r} ({path}) is not on the allowlist")

    def _inside_allowed(self, p: Path) -> bool:
        roots = [self.run_dir, *self.inputs]
        return any(p == r or p.is_relative_to(r) for r in roots)

    def check_argument(self, arg: str, cwd: Path) -> None:
        """Raise :class:`ToolRefused` if ``arg`` breaks rule 3 or 4."""
        if not isinstance(arg, str):
            raise ToolRefused(f"argument {arg!r} is not a string")
        if "\x00" in arg:
            raise ToolRefused(f"argument {arg!r} contains a NUL byte, which no program can receive")
        for piece in _path_pieces(arg):
            self._check_path(arg, piece, cwd)
        if _is_bare_name(arg) and (cwd / arg).is_symlink():
            self._check_path(arg, arg, cwd)  # a link in the working directory is a path

    def _check_path(self, arg: str, piece: str, cwd: Path) -> None:
        try:
            p = Path(piece).expanduser()
        except RuntimeError:  # "~someone" who has no home here
            raise ToolRefused(f"path argument {arg!r} names the home of a user who does not exist here, outside the run directory") from None
        if not p.is_absolute():
            p = cwd / p
        p = p.resolve()  # follows symlinks: a link out of the run dir is an escape
        if not self._inside_allowed(p):
            raise ToolRefused(
                f"path argument {arg!r} resolves to {p}, outside the run directory "
                f"{self.run_dir} and the declared inputs"
            )

    def prepare(self, argv: Sequence[str], cwd: Path) -> list[str]:
        """Validate one command; return it with the executable made absolute."""
        if isinstance(argv, (str, bytes)) or not argv:
            raise ToolRefused("a command must be a non-empty list of arguments (no shell strings)")
        exe = self.resolve_executable(str(argv[0]))
        rest = [str(a) for a in argv[1:]]
        for a in rest:
            self.check_argument(a, cwd)
        return [str(exe), *rest]

    def child_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: os.environ[k] for k in self.env_allow if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env["LC_ALL"] = "C"  # tools' number formats must not depend on the user's locale
        for k, v in (extra or {}).items():
            if _INJECTION.search(k + v) or "=" in k:
                raise ToolRefused(f"environment variable {k!r} has an unsafe name or value")
            env[k] = v
        return env

    # ---- confinement -----------------------------------------------------------------
    def confine(self, full: list[str], work: Path, env: dict[str, str],
                status_fd: int | None, report_fd: int | None,
                programs: Sequence[str] = (), *, tmpfs_bytes: int | None = None,
                seccomp_fd: int | None = None, control_fd: int | None = None) -> tuple[list[str], Confinement]:
        """The argv that actually runs (``bwrap ... -- full`` or ``full`` itself) and how
        it is confined. Raises :class:`ToolRefused` when it cannot be confined and the
        caller did not allow running without."""
        if self.unconfined:
            return full, _unconfined("the caller asked for it (--unconfined / unconfined=True)")
        probe = bwrap.probe_bwrap()
        if not probe.usable:
            if self.allow_unconfined_fallback:
                return full, _unconfined(f"perfscout's own probe ran without isolation: {probe.reason}")
            raise ToolRefused(f"refusing to run {Path(full[0]).name} without the OS sandbox: {probe.reason}")
        readable = [*self.inputs] + ([work] if work != self.run_dir else [])
        launcher = [sys.executable, "-I", "-S", str(_LAUNCHER), str(report_fd),
                    *(["--control-fd", str(control_fd)] if control_fd is not None else []), "--"] \
            if report_fd is not None else []
        argv, conf = bwrap.build_argv(full, bwrap=probe.path, run_dir=self.run_dir, cwd=work,
                                      readable=readable, network=self.network, env=env,
                                      status_fd=status_fd, launcher=launcher, programs=programs,
                                      named=self.named_paths(full, work), vet=self._vet,
                                      tmpfs_bytes=tmpfs_bytes, seccomp_fd=seccomp_fd,
                                      # the launcher as PID 1: no bwrap init beside the program holding
                                      # the report pipe, which /proc/1/fd/N would reopen
                                      as_pid_1=report_fd is not None, profiler_outside=control_fd is not None)
        conf.tool = probe.description
        # A private /tmp inside: a TMPDIR naming a host directory would not exist there.
        env["TMPDIR"] = "/tmp"
        return argv, conf

    # ---- running -------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        wrap: Sequence[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
        profiler_channel: bool = False,
    ) -> SandboxResult:
        """Run ``argv`` (optionally as ``wrap + argv``, e.g. a profiler around a program).

        Both the wrapper and the wrapped command are validated: each one's executable
        must be allowed and each argument must pass the argument rules; the profiler
        runs inside the confinement with the program.

        ``profiler_channel=True`` (confined runs only; see :meth:`can_confine`): the wrapper
        (``perf stat``) runs **outside** the sandbox, as the parent of bwrap, in perfscout's
        own PID namespace: nothing inside can name it, so neither ``/proc/<perf>/mem`` nor
        ``process_vm_writev`` nor ``ptrace`` can reach it. In the wrapper's arguments
        :data:`PROFILER_OUTPUT` becomes a file in a directory of perfscout's own that is never
        bound into the sandbox (what arrives there, at most :data:`PROFILER_OUTPUT_CAP`
        bytes, is the result's ``profiler_output``) and :data:`PROFILER_CONTROL` the number
        of the profiler's end of a control socket (``perf stat -D -1 --control
        fd:N,N``): the launcher inside switches the counters on as the last step before the
        program's ``exec`` and closes its end first, so the counts are the program's and
        nothing of the sandbox's start-up. The launcher is then the sandbox's PID 1 and
        non-dumpable (see ``sandbox_launcher``).
        """
        lim = _effective_limits(limits or self.limits, self.run_dir)
        work = Path(cwd).resolve() if cwd else self.cwd
        shown = [*(wrap or []), *argv] if not isinstance(argv, str) else [argv]
        pipes: list[tuple[int, int]] = []  # bwrap's status, the launcher's report
        control: tuple[socket.socket, socket.socket] | None = None
        private: Path | None = None
        filter_fd: int | None = None

        def cleanup() -> None:
            if control:
                control[0].close()
                control[1].close()
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)
        try:
            _check_limits(lim)
            if not self._inside_allowed(work):
                raise ToolRefused(f"working directory {work} is outside the run directory")
            wrapper = self.prepare(wrap, work) if wrap else []
            program = self.prepare(argv, work)
            full = wrapper + program
            inside = full
            if profiler_channel:
                if not wrapper or not self.can_confine():
                    raise ToolRefused("a profiler channel needs a profiler and the OS sandbox")
                control = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                private = Path(tempfile.mkdtemp(prefix="perfscout-profiler-"))  # 0700, never bound
                wrapper = [a.replace(PROFILER_OUTPUT, str(private / "profiler.out"))
                           .replace(PROFILER_CONTROL, str(control[0].fileno())) for a in wrapper]
                filter_fd = seccomp.filter_fd()
                inside = program
            child_env = self.child_env(env)
            for value in (env or {}).values():  # LD_PRELOAD=/elsewhere/x.so is an argument too
                self.check_argument(value, work)
            if not self.unconfined:
                pipes = [os.pipe(), os.pipe()]
            real, conf = self.confine(inside, work, child_env, pipes[0][1] if pipes else None,
                                      pipes[1][1] if pipes else None,
                                      programs=[*([] if control else wrapper[:1]), program[0]],
                                      tmpfs_bytes=lim.disk_bytes,
                                      control_fd=control[1].fileno() if control else None,
                                      seccomp_fd=filter_fd)
            if control:
                real = [*wrapper, *real]
                conf.notes.append(
                    f"the profiler ({Path(wrapper[0]).name}) runs outside the sandbox, in perfscout's own PID "
                    "namespace, and writes to a file in a directory the sandbox does not show: the program can "
                    "neither name nor reach its memory (/proc/PID/mem, process_vm_writev, ptrace) nor its output; "
                    "its counters start switched off and the sandbox's launcher (PID 1 inside, non-dumpable) "
                    "switches them on just before the program's exec, over a socket it closes first"
                    + (f"; {', '.join(seccomp.DENIED)} refused to every process of the run (seccomp)"
                       if filter_fd is not None else "; no seccomp filter for this architecture"))
        except ToolRefused as exc:
            cleanup()
            if filter_fd is not None:
                os.close(filter_fd)
            _close_all(pipes)
            return SandboxResult(status="refused", argv=[str(a) for a in shown],
                                 reason=str(exc), cwd=str(work))
        if conf.mode != "bwrap":
            _close_all(pipes)
            pipes = []
        if control is None:
            return _execute(real, work, child_env, lim, conf, shown_argv=full, pipes=pipes,
                            watch_dir=self.run_dir)
        keep = (control[0].fileno(), control[1].fileno(), *([filter_fd] if filter_fd is not None else []))

        def handed_over() -> None:  # the children hold them now
            control[0].close()
            control[1].close()
            if filter_fd is not None:
                os.close(filter_fd)
        try:
            res = _execute(real, work, child_env, lim, conf, shown_argv=full, pipes=pipes,
                           watch_dir=self.run_dir, keep_fds=keep, after_start=handed_over,
                           outer=Path(wrapper[0]).name)
            out = private / "profiler.out"
            try:
                res.profiler_output = read_run_file(out, PROFILER_OUTPUT_CAP)
            except OSError as exc:
                if os.path.lexists(out):
                    res.profiler_output_truncated = exc.errno == errno.EFBIG
        finally:
            cleanup()
        return res

    def can_confine(self) -> bool:
        """Will this sandbox's runs be confined by bubblewrap?"""
        return not self.unconfined and bwrap.probe_bwrap().usable


#: In a profiler's arguments (``run(profiler_channel=True)``): its output file, in a directory
#: of perfscout's own outside the sandbox, and the number of its end of the control socket.
PROFILER_OUTPUT = "{perfscout-profiler-output}"
PROFILER_CONTROL = "{perfscout-profiler-control}"
#: What a profiler may write there: far more than perf stat prints for any event list.
PROFILER_OUTPUT_CAP = 16 * 2**20


def _effective_limits(lim: SandboxLimits, run_dir: Path) -> SandboxLimits:
    """The limits as they will apply: the disk budget at most half the run directory's free
    space, and no single file larger than the disk budget (RLIMIT_FSIZE, so one write cannot
    overshoot the watch between two looks)."""
    upd: dict[str, int | None] = {}
    if lim.disk_bytes is not None:
        try:
            st = os.statvfs(run_dir)
            free = st.f_bavail * st.f_frsize
        except OSError:
            free = None
        if free is not None and free // 2 < lim.disk_bytes:
            upd["disk_bytes"] = max(free // 2, 2**20)
        budget = upd.get("disk_bytes", lim.disk_bytes)
        if lim.file_size_bytes is None or lim.file_size_bytes > budget:
            upd["file_size_bytes"] = budget
    return lim.model_copy(update=upd) if upd else lim


def _check_limits(lim: SandboxLimits) -> None:
    """ToolRefused for a limit that cannot mean what was asked: a wall-clock limit of -1 or 0
    would "time out" every run at once, NaN never, inf means none at all."""
    t = lim.timeout_s
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf:
        raise ToolRefused(f"the wall-clock limit must be a finite number of seconds > 0, got {t!r}")


def _unconfined(why: str) -> Confinement:
    return Confinement(
        mode="unconfined", network=True, pid_namespace=False,
        warning=("UNCONFINED: the program ran WITHOUT the OS sandbox (it could read, write and "
                 f"connect anywhere this user can); {why}"),
        notes=["argv rules, a scrubbed environment, rlimits and the process-group kill still applied"])


def run_sandboxed(
    argv: Sequence[str],
    run_dir: str | os.PathLike[str],
    *,
    timeout_s: float = 120.0,
    memory_mb: int | None = None,
    unconfined: bool = False,
    env: Mapping[str, str] | None = None,
    readable: Sequence[str | os.PathLike[str]] = (),
    cwd: str | os.PathLike[str] | None = None,
    limits: SandboxLimits | None = None,
    output_name: str = "program",
) -> SandboxResult:
    """Run one program the caller vouches for (its executable is registered), confined.

    ``run_dir`` is the only writable place and the default working directory;
    ``readable`` are files or directories the program may read and name in its
    arguments; ``cwd`` must be ``run_dir`` or one of ``readable``. ``memory_mb`` caps
    memory in a cgroup where one can be made, else the address space. The kept output
    tails are saved as ``<run_dir>/<output_name>.stdout`` / ``.stderr`` (paths in the
    result). Never raises for a refusal or a limit: see ``status`` and ``reason``.
    """
    lim = (limits or SandboxLimits()).model_copy(update={"timeout_s": timeout_s})
    if memory_mb is not None:
        lim = lim.model_copy(update={"memory_bytes": int(memory_mb) * 2**20})
    if isinstance(argv, (str, bytes)) or not argv:
        return SandboxResult(status="refused", argv=[str(argv)],
                             reason="a command must be a non-empty list of arguments (no shell strings)")
    try:
        sb = Sandbox(run_dir, inputs=readable, cwd=cwd, limits=lim, unconfined=unconfined)
        sb.register(str(argv[0]))
    except ToolRefused as exc:  # "/" as readable, an unknown program
        return SandboxResult(status="refused", argv=[str(a) for a in argv], reason=str(exc))
    res = sb.run(argv)
    if res.status != "refused" or res.confinement.mode != "none":
        out = write_run_file(sb.run_dir / f"{output_name}.stdout", res.stdout)
        err = write_run_file(sb.run_dir / f"{output_name}.stderr", res.stderr)
        res.stdout_path, res.stderr_path = str(out), str(err)
    return res


# ---- files perfscout writes or reads in a run directory --------------------------------

def write_run_file(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` in a run directory without following a planted link.

    The program that ran there could have left a symlink (to ``/etc/passwd``, say) or a
    directory at this name; perfscout, unconfined, must write only a fresh regular file.
    """
    p = Path(path)
    for _ in range(3):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(p)
            else:
                p.unlink()
        elif st is not None and st.st_nlink > 1:
            p.unlink()  # a hard link shares its bytes with another name: start afresh
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.EEXIST):
                continue  # replaced between the check and the open: check again
            raise
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return p
    raise OSError(f"{p} keeps being replaced; not writing it")


def run_subdir(run_dir: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """The directory ``path`` inside ``run_dir``, made without following a planted link.

    :func:`write_run_file` never follows a link at the file's own name; the folders above it
    need the same care: a program that replaced ``raw`` or ``baseline`` with a symlink to a
    directory elsewhere would have perfscout write there. Each component below ``run_dir``
    that is not a real directory (a symlink, a file the program left) is removed and made
    afresh. ``path`` may be absolute (it must then be inside ``run_dir``) or relative to it.
    """
    root = Path(run_dir).resolve()
    p = Path(path)
    rel = p.relative_to(root) if p.is_absolute() else p
    if any(part == ".." for part in rel.parts):
        raise ToolRefused(f"{path} is outside the run directory {root}")
    current = root
    for part in rel.parts:
        if part in ("", "."):
            continue
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            current.unlink()  # a link or a file planted where perfscout keeps a folder
            st = None
        if st is None:
            os.mkdir(current, 0o755)
    return current


#: The most perfscout reads back of any file a sandboxed program could have written.
RUN_FILE_READ_CAP = 64 * 2**20


def read_run_file(path: str | os.PathLike[str], limit: int | None = RUN_FILE_READ_CAP) -> str:
    """Read a file a sandboxed program may have replaced: never through a link, never
    anything but a regular file (a FIFO would block), never one with another name (a hard
    link), and never more than ``limit`` bytes (a planted 1.5 GiB file is refused, not read:
    OSError ``EFBIG``). ``limit=None`` only for files of known, bounded size."""
    fd = os.open(Path(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        if st.st_nlink > 1:
            raise OSError(errno.EINVAL, f"{path} has {st.st_nlink} names (a hard link): not read")
        if limit is not None and max(st.st_size, st.st_blocks * 512) > limit:
            raise OSError(errno.EFBIG, f"{path} is larger than the {limit} bytes perfscout reads back "
                                       f"({st.st_size} bytes): not read")
        data = f.read() if limit is None else f.read(limit + 1)
        if limit is not None and len(data) > limit:  # grew while being read
            raise OSError(errno.EFBIG, f"{path} is larger than the {limit} bytes perfscout reads back: not read")
    return data.decode("utf-8", errors="replace")


def take_run_file(path: str | os.PathLike[str], dest: str | os.PathLike[str], limit: int) -> Path:
    """Copy a file a sandboxed tool wrote in the run directory (an ncu report) to ``dest``,
    a place the program cannot reach, with :func:`read_run_file`'s checks (no link, no hard
    link, a regular file, at most ``limit`` bytes), streaming; OSError otherwise. Everything
    perfscout does with the file afterwards uses the copy: what the program might do to the
    original once the checks passed no longer matters."""
    fd = os.open(Path(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            raise OSError(errno.EINVAL, f"{path} is not a regular file of its own: not read")
        if max(st.st_size, st.st_blocks * 512) > limit:
            raise OSError(errno.EFBIG, f"{path} is larger than the {limit} bytes perfscout reads back: not read")
        out = Path(dest)
        copied = 0
        with open(out, "xb") as w:
            while chunk := f.read(2**20):
                copied += len(chunk)
                if copied > limit:
                    raise OSError(errno.EFBIG, f"{path} grew past {limit} bytes while being read: not read")
                w.write(chunk)
    return out


def _set_limits(lim: SandboxLimits, cgroup_procs: list[bytes], data_bytes: int | None = None) -> None:
    """Runs in the child between fork and exec: keep it to plain syscalls."""
    def cap(which: int, value: int | None, hard_extra: int = 0) -> None:
        if value is None:
            return
        soft, hard = resource.getrlimit(which)
        new_hard = value + hard_extra
        if hard != resource.RLIM_INFINITY:
            new_hard = min(new_hard, hard)
        resource.setrlimit(which, (min(value, new_hard), new_hard))

    cgroup_limits.attach_self(cgroup_procs)
    cap(resource.RLIMIT_AS, lim.address_space_bytes)
    # soft < hard for CPU: the soft limit sends SIGXCPU, which we can name.
    cap(resource.RLIMIT_CPU, lim.cpu_seconds, hard_extra=1)
    cap(resource.RLIMIT_NOFILE, lim.open_files)
    cap(resource.RLIMIT_NPROC, lim.processes)
    cap(resource.RLIMIT_FSIZE, lim.file_size_bytes)
    cap(resource.RLIMIT_DATA, data_bytes)


#: A flag's own name, so that "-o/etc/x" and "-I../inc" are checked as the paths they carry.
_FLAG_NAME = re.compile(r"^-{1,2}[A-Za-z][A-Za-z0-9_]*")
_BARE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


def _is_bare_name(arg: str) -> bool:
    return bool(_BARE_NAME.match(arg)) and len(arg) < 256


def _path_pieces(arg: str) -> list[str]:
    """The parts of ``arg`` that name a file: the whole argument, the value of
    ``--opt=V`` / ``key=V``, the text after a glued short flag (``-o/tmp/x``), the file
    of a response-file argument (``@/etc/passwd``: gcc, clang, nvcc and ld read their
    arguments from it), and each ``:`` or ``,`` separated part (``file:/etc/passwd``,
    ``a.txt,/etc/shadow``). Only path tokens are returned: parts that contain ``/`` or
    start with ``.`` or ``~`` and hold none of the characters of code (spaces, quotes,
    brackets, shell punctuation). ``print(open('/x').read())`` is data.
    """
    body = arg
    if arg.startswith("-"):
        if "=" in arg:
            body = arg.split("=", 1)[1]
        else:
            body = _FLAG_NAME.sub("", arg, count=1)
    body = body.removeprefix("@")
    pieces = {body, *re.split(r"[=:,]", body)}
    return [p for p in pieces
            if p and (os.sep in p or p.startswith((".", "~"))) and not _NOT_A_PATH.search(p)]


def _limit_in_text(lim: SandboxLimits, stderr: str) -> str:
    """Which limit the child's last words point at ("" if none)."""
    tail = stderr[-4000:]
    for field, markers in _LIMIT_MARKERS.items():
        value = getattr(lim, field)
        if value is not None and any(m in tail for m in markers):
            return f"{field.replace('_', ' ')} limit ({value})"
    return ""


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _read_status(fd: int | None) -> list[dict]:
    """bwrap's --json-status-fd lines: ``child-pid`` once the program started, then
    ``exit-code``. Read without blocking: a descendant may still hold the pipe."""
    if fd is None:
        return []
    os.set_blocking(fd, False)
    data = b""
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    out = []
    for line in data.decode(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _close_all(pipes: list[tuple[int, int]]) -> None:
    for pair in pipes:
        for fd in pair:
            try:
                os.close(fd)
            except OSError:
                pass


#: Where no memory cgroup can be made: RLIMIT_DATA (heap, anonymous and private writable
#: mappings; not the address-space reservations CUDA makes, which RLIMIT_AS would count).
_FALLBACK_MEMORY_RLIMIT = "RLIMIT_DATA"
_RLIMIT_OF = {"address_space": ("RLIMIT_AS", "address_space_bytes"), "cpu": ("RLIMIT_CPU", "cpu_seconds"),
              "open_files": ("RLIMIT_NOFILE", "open_files"), "file_size": ("RLIMIT_FSIZE", "file_size_bytes")}


def _limit_states(lim: SandboxLimits, cg: cgroup_limits.RunCgroup | None, cg_why: str,
                  evidence: dict[str, tuple[int | None, int | None]], rlimits: dict[str, int] | None,
                  disk: _DiskWatch | None, confined: bool) -> dict[str, LimitState]:
    """Every limit of the run and whether it took effect. ``rlimits``: what the launcher,
    the program's parent inside the sandbox, saw (None unconfined: then set before exec,
    where a refusal would have failed the start); ``evidence``: the cgroup's values."""
    st: dict[str, LimitState] = {
        "wall_clock": LimitState(value=f"{lim.timeout_s:g} s", mechanism="watched by perfscout; the process "
                                 "group and PID namespace killed", took_effect=True)}

    def rl(name: str, expected: int) -> tuple[bool, str]:
        if rlimits is None:
            return True, "set in the child before exec"
        seen = rlimits.get(name)
        return seen == expected, f"the program's parent saw {name}={seen}"

    described = cg.described if cg else {}
    for key, (rname, field) in _RLIMIT_OF.items():
        value = getattr(lim, field)
        if value is not None:
            ok, why = rl(rname, value)
            st[key] = LimitState(value=str(value), mechanism=rname, took_effect=ok, detail=why)
    if lim.memory_bytes is not None:
        if "memory" in described:
            cap, peak = evidence.get("memory", (None, None))
            # the cap read back, and the run charged to it (where the kernel keeps a peak)
            ok = cap is not None and abs(cap - lim.memory_bytes) < 2 * 4096 and (peak is None or peak > 0)
            st["memory"] = LimitState(
                value=f"{lim.memory_bytes} bytes", mechanism=described["memory"], took_effect=ok,
                detail=f"read back {cap}; the run was charged up to {peak} bytes")
        else:
            ok, why = rl(_FALLBACK_MEMORY_RLIMIT, lim.memory_bytes)
            st["memory"] = LimitState(
                value=f"{lim.memory_bytes} bytes", mechanism=f"{_FALLBACK_MEMORY_RLIMIT} (no memory cgroup: {cg_why})",
                took_effect=ok, detail=f"per process, not for the run as a whole; {why}")
    if lim.processes is not None:
        if "processes" in described:
            cap, used = evidence.get("pids", (None, None))
            st["processes"] = LimitState(value=str(lim.processes), mechanism=described["processes"],
                                         took_effect=cap == lim.processes, detail=f"read back {cap}; peak {used}")
        elif os.geteuid() == 0:
            st["processes"] = LimitState(value=str(lim.processes), mechanism="RLIMIT_NPROC", took_effect=False,
                                         detail=f"the kernel does not apply RLIMIT_NPROC to root; no pids cgroup: {cg_why}")
        else:
            ok, why = rl("RLIMIT_NPROC", lim.processes)
            st["processes"] = LimitState(value=str(lim.processes), mechanism="RLIMIT_NPROC", took_effect=ok,
                                         detail=f"per user, not per run; {why}")
    if lim.disk_bytes is not None or lim.disk_entries is not None:
        watched = disk is not None and disk.looks > 0
        st["disk"] = LimitState(
            value=f"{lim.disk_bytes} bytes, {lim.disk_entries} files in the run directory",
            mechanism="watched: the run directory's allocated blocks and entries, every "
                      f"{disk.interval_s if disk else 0:g}-{_DiskWatch.MAX_INTERVAL_S:g} s; one file at most "
                      "RLIMIT_FSIZE" + (f"; private tmpfs {lim.disk_bytes} bytes each" if confined else ""),
            took_effect=watched,
            detail=(f"{disk.looks} looks; at most {disk.peak_bytes} bytes, {disk.peak_entries} entries added"
                    if disk else "no run directory to watch"))
    return st


class _DiskWatch:
    """The run directory's disk budget: what the program added (allocated blocks, entries),
    looked at while it runs; the run is killed once it is past either."""

    MAX_INTERVAL_S = 5.0  # a run directory that takes long to walk is walked at most a fifth of the time

    def __init__(self, root: Path, max_bytes: int | None, max_entries: int | None) -> None:
        self.root, self.max_bytes, self.max_entries = root, max_bytes, max_entries
        self.interval_s = 0.05
        self.looks = 0
        self.peak_bytes = self.peak_entries = 0
        self.base_bytes, self.base_entries = self._usage(None, None)

    def _usage(self, stop_bytes: int | None, stop_entries: int | None) -> tuple[int, int]:
        total = entries = 0
        stack = [str(self.root)]
        while stack:
            try:
                it = os.scandir(stack.pop())
            except OSError:
                continue
            with it:
                for e in it:
                    entries += 1
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(e.path)
            if (stop_bytes is not None and total > stop_bytes) or (stop_entries is not None and entries > stop_entries):
                break  # past the budget: no need to count the rest
        return total, entries

    def check(self) -> str:
        """'' while within the budget, else what was exceeded."""
        t0 = time.monotonic()
        stop_b = None if self.max_bytes is None else self.base_bytes + self.max_bytes
        stop_e = None if self.max_entries is None else self.base_entries + self.max_entries
        used, entries = self._usage(stop_b, stop_e)
        self.looks += 1
        added_b, added_e = max(used - self.base_bytes, 0), max(entries - self.base_entries, 0)
        self.peak_bytes, self.peak_entries = max(self.peak_bytes, added_b), max(self.peak_entries, added_e)
        # a walk that takes long is not repeated at once
        self.interval_s = min(self.MAX_INTERVAL_S, max(0.05, 4 * (time.monotonic() - t0)))
        if self.max_bytes is not None and added_b > self.max_bytes:
            return f"disk budget of the run directory ({self.max_bytes} bytes): more than {added_b} written"
        if self.max_entries is not None and added_e > self.max_entries:
            return f"disk budget of the run directory ({self.max_entries} files): more than {added_e} files made"
        return ""


def _execute(argv: list[str], cwd: Path, env: dict[str, str], lim: SandboxLimits,
             conf: Confinement, *, shown_argv: list[str],
             pipes: Sequence[tuple[int, int]] = (), watch_dir: Path | None = None,
             keep_fds: Sequence[int] = (), after_start=None, outer: str = "") -> SandboxResult:
    start = time.monotonic()
    pipes = list(pipes)
    cg, cg_why = cgroup_limits.create(lim.processes if os.geteuid() == 0 else None, lim.memory_bytes)
    # no memory cgroup: RLIMIT_DATA per process is the nearest thing to a memory cap
    data_bytes = lim.memory_bytes if lim.memory_bytes is not None and not (cg and "memory" in cg.described) else None
    disk = _DiskWatch(watch_dir, lim.disk_bytes, lim.disk_entries) \
        if watch_dir is not None and (lim.disk_bytes is not None or lim.disk_entries is not None) else None
    procs = cg.attach_fd_paths() if cg else []
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd if conf.mode != "bwrap" else None,  # bwrap --chdir sets it inside
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own process group: killpg reaches every descendant
            preexec_fn=lambda: _set_limits(lim, procs, data_bytes),
            close_fds=True,
            pass_fds=(*(w for _, w in pipes), *keep_fds),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        # OSError: e.g. exec format error. SubprocessError: _set_limits raised in the
        # child (setrlimit refused a value, e.g. a negative limit).
        _close_all(pipes)
        if cg:
            cg.destroy()
        conf = conf.model_copy(update={"limit_states": _limit_states(
            lim, cg, cg_why, {}, None, None, conf.mode == "bwrap")})
        return SandboxResult(status="refused", argv=shown_argv, cwd=str(cwd), confinement=conf,
                             reason=f"could not start: {exc}", wall_s=time.monotonic() - start)
    for _, w in pipes:  # only the children hold the write ends now
        os.close(w)
    if after_start is not None:
        after_start()
    pgid = proc.pid  # with start_new_session the leader's pid is the group id
    out = _TailBuffer(proc.stdout, lim.output_cap_bytes)
    err = _TailBuffer(proc.stderr, lim.output_cap_bytes)
    # Reap with wait4 in a thread: it gives this child's own rusage (the getrusage
    # fallback of perf stat needs it), and the join gives us the wall-clock timeout.
    waited: dict[str, object] = {}

    def reap() -> None:
        _, wstatus, ru = os.wait4(proc.pid, 0)
        waited["status"], waited["ru"] = wstatus, ru

    reaper = threading.Thread(target=reap, daemon=True)
    reaper.start()
    deadline = start + lim.timeout_s
    over_disk = ""
    while (left := deadline - time.monotonic()) > 0:
        reaper.join(min(left, disk.interval_s) if disk else left)
        if not reaper.is_alive():
            break
        if disk and (over_disk := disk.check()):
            break
    timed_out = reaper.is_alive() and not over_disk
    # Kill the group in both cases: on timeout that is the point; after a normal exit
    # it removes descendants left running in the background. Under bwrap, killing its
    # group ends the PID namespace and with it every process the program started.
    _kill_group(pgid)
    reaper.join()
    if disk and not over_disk:
        over_disk = disk.check()  # what it wrote in the last interval counts too
    oom = cg.memory_events_oom() if cg else False
    evidence = cg.evidence() if cg else {}
    if cg:
        cg.destroy()
    proc.returncode = os.waitstatus_to_exitcode(waited["status"])  # Popen must not wait again
    ru = waited["ru"]
    usage = {
        "user_s": ru.ru_utime, "system_s": ru.ru_stime, "max_rss_kib": float(ru.ru_maxrss),
        "minor_faults": float(ru.ru_minflt), "major_faults": float(ru.ru_majflt),
        "voluntary_ctx_switches": float(ru.ru_nvcsw),
        "involuntary_ctx_switches": float(ru.ru_nivcsw),
    }
    for buf in (out, err):
        buf.thread.join(timeout=5.0)  # a descendant that left the group may hold the pipe
    wall = time.monotonic() - start
    stdout, out_trunc = out.text()
    stderr, err_trunc = err.text()
    rc = proc.returncode
    statuses = [line for r, _ in pipes for line in _read_status(r)]
    rlimits: dict[str, int] | None = None
    program_wall: float | None = None
    signum = -rc if rc is not None and rc < 0 else 0

    def stated(rl: dict[str, int] | None) -> Confinement:
        states = _limit_states(lim, cg, cg_why, evidence, rl, disk, conf.mode == "bwrap")
        return conf.model_copy(update={"limit_states": states, "limits": {
            k: f"{v.mechanism} {v.value}" + ("" if v.took_effect else f" (did NOT take effect: {v.detail})")
            for k, v in states.items()}})

    if conf.mode == "bwrap" and not timed_out and not over_disk:
        if not any("child-pid" in s for s in statuses):
            # bwrap failed before starting the program: a sandbox failure, not the program's
            said = [ln for ln in stderr.splitlines() if ln.startswith("bwrap:")]
            last = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
            why = ("the OS sandbox could not be set up: " + said[-1]) if said or not outer else \
                (f"{outer} (run outside the sandbox, around it) failed before starting it (exit code {rc})"
                 + (f": {last[-1]}" if last else ""))
            return SandboxResult(
                status="refused", argv=shown_argv, returncode=rc, stdout=stdout, stderr=stderr,
                wall_s=wall, cwd=str(cwd), rusage=usage, confinement=stated(None),
                reason=why if said or outer else f"the OS sandbox could not be set up: bwrap exit code {rc}")
        waited_inside = next((s["perfscout-wait"] for s in statuses if "perfscout-wait" in s), None)
        if waited_inside is not None and isinstance(waited_inside.get("rlimits"), dict):
            rlimits = {k: int(v) for k, v in waited_inside["rlimits"].items()}
        if waited_inside is not None:
            # The launcher saw the program end: its exit code or signal, and its rusage.
            usage = {k: float(v) for k, v in waited_inside.get("rusage", {}).items()}
            signum = int(waited_inside.get("signal") or 0)
            rc = -signum if signum else int(waited_inside.get("exit_code") or 0)
            if isinstance(waited_inside.get("wall_s"), (int, float)):
                program_wall = float(waited_inside["wall_s"])
        elif rc is not None and rc > 128 and _signal_name(rc - 128) != f"signal {rc - 128}":
            # No report (the launcher itself was killed): bwrap says 128 + N for signal N.
            signum = rc - 128
    status: SandboxStatus
    sig = ""
    reason = ""
    conf = stated(rlimits)  # no launcher report (killed first): the values set before exec
    if over_disk:
        status, reason, sig = "killed_by_limit", f"{over_disk}; process group killed", "SIGKILL"
    elif timed_out:
        status, reason = "timed_out", f"wall-clock limit of {lim.timeout_s:g} s reached; process group killed"
        sig = "SIGKILL"
    elif signum:
        sig = _signal_name(signum)
        cpu_used = usage["user_s"] + usage["system_s"]
        if signum == signal.SIGXCPU or (signum == signal.SIGKILL and lim.cpu_seconds is not None
                                        and cpu_used >= lim.cpu_seconds):
            status, reason = "killed_by_limit", f"CPU-time limit of {lim.cpu_seconds} s"
        elif signum == signal.SIGXFSZ:
            status, reason = "killed_by_limit", f"file-size limit of {lim.file_size_bytes} bytes"
        elif signum == signal.SIGKILL and oom:
            status, reason = "killed_by_limit", f"memory limit of {lim.memory_bytes} bytes (cgroup OOM kill)"
        else:
            status, reason = "crashed", f"terminated by {sig}"
    elif rc == 0:
        status = "ok"
    elif oom:
        status, reason = "killed_by_limit", f"exit code {rc} after the memory limit of {lim.memory_bytes} bytes (cgroup OOM kill)"
    elif hit := _limit_in_text(lim, stderr):
        status, reason = "killed_by_limit", f"exit code {rc} after hitting the {hit}"
    else:
        status, reason = "exit_nonzero", f"exit code {rc}"
    return SandboxResult(
        status=status, argv=shown_argv, returncode=rc if not signum else -signum, signal=sig,
        stdout=stdout, stderr=stderr,
        stdout_truncated=out_trunc, stderr_truncated=err_trunc, stdout_bytes=out.total,
        stderr_bytes=err.total, wall_s=wall, reason=reason, cwd=str(cwd), rusage=usage,
        confinement=conf, program_wall_s=program_wall,
    )
