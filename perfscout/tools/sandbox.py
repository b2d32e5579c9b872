"""The whitelisted command runner: the only way perfscout starts an external program.

Rules, in the order they are applied:

1. argv is a list of strings; a shell is never involved (``shell=False``).
2. The executable must be on the allowlist (system tools perfscout knows, the running
   Python, plus commands the caller registers explicitly) and is resolved to an
   absolute path before anything runs.
3. No argument may contain a newline, carriage return or NUL, nor the shell's
   command-substitution or chaining syntax (``;``, backticks, ``$(``, ``${``). Without a
   shell these are inert, but they only ever appear in injection attempts, so refusing
   them keeps a generated command honest.
4. An argument that names a path (contains ``/``, starts with ``.`` or ``~``, or is
   ``--opt=PATH``) must be free of shell metacharacters and resolve (symlinks
   followed) inside the run directory or a declared input. The values of extra
   environment variables passed to ``run`` are held to the same rule.
5. The child gets a new session (its own process group), a scrubbed environment
   (explicit allowlist of variables) and ``resource`` limits set in the child before
   exec: address space, CPU seconds, open files, processes and file size.
6. A wall-clock timeout kills the whole process group, grandchildren included; the
   group is also killed once the leader exits so no stray descendant outlives a run.
7. stdout and stderr are read by threads into bounded buffers that keep the tail.

Every outcome, refusals and limit hits included, comes back as a :class:`SandboxResult`;
``run`` never raises for them. ``RLIMIT_NPROC`` is not enforced by the kernel for
root (CAP_SYS_RESOURCE), so for root the process-group kill is what contains a fork bomb.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from perfscout.errors import ToolRefused

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

#: Refused anywhere in any argument (see rule 3 above).
_INJECTION = re.compile(r"[\n\r\x00;`]|\$\(|\$\{")
#: Refused in an argument that names a path (rule 4).
_PATH_METACHARS = re.compile(r"[|&<>*?!\[\]{}()'\"\\$\s]")

#: stderr phrases that mean a limit was hit although the child exited normally (Python,
#: for one, ignores SIGXFSZ and turns a failed allocation into MemoryError), so the
#: text is the only witness. Checked only when that limit was set.
_LIMIT_MARKERS = {
    "address_space_bytes": ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory"),
    "file_size_bytes": ("File too large",),
    "open_files": ("Too many open files",),
}


class SandboxLimits(BaseModel):
    """Per-run limits. ``None`` leaves that limit as inherited.

    Address space defaults to unlimited because CUDA programs reserve terabytes of
    virtual addresses at start-up; callers running CPU-only tools should set it.
    """

    timeout_s: float = 120.0
    address_space_bytes: int | None = None
    cpu_seconds: int | None = None
    open_files: int | None = 1024
    processes: int | None = 4096
    file_size_bytes: int | None = 2 * 2**30
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

    @property
    def ok(self) -> bool:
        return self.status == "ok"


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
    """Runs allowlisted commands confined to ``run_dir`` (see module docstring)."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        inputs: Iterable[str | os.PathLike[str]] = (),
        executables: Iterable[str] = (),
        limits: SandboxLimits | None = None,
        env_allow: Sequence[str] = ENV_ALLOWLIST,
        cwd: str | os.PathLike[str] | None = None,
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

    # ---- configuration -------------------------------------------------------------
    def register(self, executable: str) -> Path:
        """Allow one more executable (a name on PATH or a path); returns its absolute path."""
        path = self._which(executable)
        if path is None:
            raise ToolRefused(f"cannot register {executable!r}: not found or not executable")
        self._allowed_paths.add(path.resolve())
        return path

    def declare_input(self, path: str | os.PathLike[str]) -> None:
        """Allow arguments naming ``path`` (a file or a directory tree) to pass rule 4."""
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
        if _INJECTION.search(name) or _PATH_METACHARS.search(name):
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
        if _INJECTION.search(arg):
            raise ToolRefused(f"argument {arg!r} contains a newline, NUL, ';', backtick or $(...)")
        for piece in _path_pieces(arg):
            self._check_path(arg, piece, cwd)

    def _check_path(self, arg: str, piece: str, cwd: Path) -> None:
        if _PATH_METACHARS.search(piece):
            raise ToolRefused(f"path argument {arg!r} contains shell metacharacters")
        p = Path(piece).expanduser()
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

    # ---- running -------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        wrap: Sequence[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SandboxResult:
        """Run ``argv`` (optionally as ``wrap + argv``, e.g. a profiler around a program).

        Both the wrapper and the wrapped command are validated: each one's executable
        must be allowed and each argument must pass the argument rules.
        """
        lim = limits or self.limits
        work = Path(cwd).resolve() if cwd else self.cwd
        shown = [*(wrap or []), *argv] if not isinstance(argv, str) else [argv]
        try:
            if not self._inside_allowed(work):
                raise ToolRefused(f"working directory {work} is outside the run directory")
            full = (self.prepare(wrap, work) if wrap else []) + self.prepare(argv, work)
            child_env = self.child_env(env)
            for value in (env or {}).values():  # LD_PRELOAD=/elsewhere/x.so is an argument too
                self.check_argument(value, work)
        except ToolRefused as exc:
            return SandboxResult(status="refused", argv=[str(a) for a in shown],
                                 reason=str(exc), cwd=str(work))
        return _execute(full, work, child_env, lim)


def _set_limits(lim: SandboxLimits) -> None:
    """Runs in the child between fork and exec: keep it to plain syscalls."""
    def cap(which: int, value: int | None, hard_extra: int = 0) -> None:
        if value is None:
            return
        soft, hard = resource.getrlimit(which)
        new_hard = value + hard_extra
        if hard != resource.RLIM_INFINITY:
            new_hard = min(new_hard, hard)
        resource.setrlimit(which, (min(value, new_hard), new_hard))

    cap(resource.RLIMIT_AS, lim.address_space_bytes)
    # soft < hard for CPU: the soft limit sends SIGXCPU, which we can name.
    cap(resource.RLIMIT_CPU, lim.cpu_seconds, hard_extra=1)
    cap(resource.RLIMIT_NOFILE, lim.open_files)
    cap(resource.RLIMIT_NPROC, lim.processes)
    cap(resource.RLIMIT_FSIZE, lim.file_size_bytes)


#: A flag's own name, so that "-o/etc/x" and "-I../inc" are checked as the paths they carry.
_FLAG_NAME = re.compile(r"^-{1,2}[A-Za-z][A-Za-z0-9_]*")


def _path_pieces(arg: str) -> list[str]:
    """The parts of ``arg`` that may name a file: the whole argument, the value of
    ``--opt=V`` / ``key=V``, the text after a glued short flag (``-o/tmp/x``), the file
    of a response-file argument (``@/etc/passwd``: gcc, clang, nvcc and ld read their
    arguments from it), and each ``:`` or ``,`` separated part (``file:/etc/passwd``,
    ``a.txt,/etc/shadow``). Only parts that look like paths (contain ``/``, start with
    ``.`` or ``~``) are returned.
    """
    body = arg
    if arg.startswith("-"):
        if "=" in arg:
            body = arg.split("=", 1)[1]
        else:
            body = _FLAG_NAME.sub("", arg, count=1)
    body = body.removeprefix("@")
    pieces = {body, *re.split(r"[=:,]", body)}
    return [p for p in pieces if p and (os.sep in p or p.startswith((".", "~")))]


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


def _execute(argv: list[str], cwd: Path, env: dict[str, str], lim: SandboxLimits) -> SandboxResult:
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own process group: killpg reaches every descendant
            preexec_fn=lambda: _set_limits(lim),
            close_fds=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        # OSError: e.g. exec format error. SubprocessError: _set_limits raised in the
        # child (setrlimit refused a value, e.g. a negative limit).
        return SandboxResult(status="refused", argv=argv, cwd=str(cwd),
                             reason=f"could not start: {exc}", wall_s=time.monotonic() - start)
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
    reaper.join(lim.timeout_s)
    timed_out = reaper.is_alive()
    # Kill the group in both cases: on timeout that is the point; after a normal exit
    # it removes descendants left running in the background.
    _kill_group(pgid)
    reaper.join()
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
    status: SandboxStatus
    sig = ""
    reason = ""
    if timed_out:
        status, reason = "timed_out", f"wall-clock limit of {lim.timeout_s:g} s reached; process group killed"
        sig = "SIGKILL"
    elif rc is not None and rc < 0:
        sig = _signal_name(-rc)
        cpu_used = usage["user_s"] + usage["system_s"]
        if -rc == signal.SIGXCPU or (-rc == signal.SIGKILL and lim.cpu_seconds is not None
                                      and cpu_used >= lim.cpu_seconds):
            status, reason = "killed_by_limit", f"CPU-time limit of {lim.cpu_seconds} s"
        elif -rc == signal.SIGXFSZ:
            status, reason = "killed_by_limit", f"file-size limit of {lim.file_size_bytes} bytes"
        else:
            status, reason = "crashed", f"terminated by {sig}"
    elif rc == 0:
        status = "ok"
    elif hit := _limit_in_text(lim, stderr):
        status, reason = "killed_by_limit", f"exit code {rc} after hitting the {hit}"
    else:
        status, reason = "exit_nonzero", f"exit code {rc}"
    return SandboxResult(
        status=status, argv=argv, returncode=rc, signal=sig, stdout=stdout, stderr=stderr,
        stdout_truncated=out_trunc, stderr_truncated=err_trunc, stdout_bytes=out.total,
        stderr_bytes=err.total, wall_s=wall, reason=reason, cwd=str(cwd), rusage=usage,
    )

