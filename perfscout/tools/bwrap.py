"""Bubblewrap (``bwrap``): the OS-level isolation every sandboxed program runs under.

The argv rules of :mod:`perfscout.tools.sandbox` only look at a command's words; a program
can still open any file or start anything. This module confines the *program*, using
namespaces made for it (bubblewrap, Debian package ``bubblewrap``):

* **a read-only view of the system**: ``/usr`` (and the ``/bin``, ``/lib*``, ``/sbin``
  links), ``/opt``, ``/sys``, an allowlist of ``/etc`` entries (no ``shadow``, ``ssh``,
  ``sudoers``...), the Python installation running perfscout, perfscout's own source tree,
  the working directory and the declared inputs. The ``.git`` of the project and of the
  working directory are masked (credentials and history are nobody's input).
* **only the run directory is writable**, plus a private ``/tmp``, ``/var/tmp``,
  ``/dev/shm`` and an empty ``$HOME``, all gone when the run ends; the root is remounted
  read-only so nothing else can be created.
* **no network** (a new network namespace with only its own loopback), new IPC, UTS and
  cgroup namespaces, and **a new PID namespace**: when the program exits, the kernel kills
  every process left in it, ``setsid()`` daemons included, and the host's processes are
  invisible (so they cannot be signalled or traced).
* ``/proc`` is the new namespace's own, with ``/proc/sys`` read-only (uid 0 owns the
  sysctls, so without this a root-started program could still set them) and
  ``/proc/sysrq-trigger`` and ``/proc/kcore`` masked; ``/dev`` holds only the basic nodes
  and the NVIDIA GPU nodes where they exist (CUDA and ncu need them).
* **no capabilities** (``--cap-drop ALL``), ``PR_SET_NO_NEW_PRIVS``, ``--die-with-parent``
  (the sandbox dies with perfscout) and ``--new-session`` (no terminal injection).

``perf stat`` around a profiled program runs outside, as bwrap's parent (see
``Sandbox.run(profiler_channel=True)``): the program cannot name it, and its counters are
switched on by the launcher (PID 1 inside, ``--as-pid-1``, for every run it starts) just
before the program's exec. perf inside (the ``-j`` probe) counts user space only when
``kernel.perf_event_paranoid`` is 2 (the Debian default) and prints ``:u`` event names, which
:func:`perfscout.tools.perf_stat.event_base` reads. ncu works inside with the GPU nodes
bound (its frontend and the target talk over the sandbox's own loopback).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from perfscout.tools.secret_mask import CONTENT_BYTES, Vetting, vet_tree

#: How to get bubblewrap, said wherever it is missing.
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora/RHEL: "
                "dnf install bubblewrap; or point PERFSCOUT_BWRAP at a bwrap binary), or pass "
                "--unconfined (CLI) / unconfined=True (API) to run the program without isolation, "
                "which is recorded in the outcome")

#: /etc entries a program legitimately reads (the loader, users and groups by name, time
#: zone, alternatives links, Python's and MPI's config). Everything else in /etc is absent.
ETC_ALLOWLIST: tuple[str, ...] = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "hosts",
    "host.conf", "hostname", "gai.conf", "protocols", "services", "localtime", "timezone",
    "alternatives", "os-release", "debian_version", "lsb-release", "mime.types", "magic",
    "fonts", "locale.alias", "inputrc", "terminfo", "python3*", "openmpi", "mpi", "nvidia",
    "OpenCL", "vulkan", "glvnd", "perfconfig",
)
#: Extra /etc entries and sockets for perfscout's own scheduler probes (network on).
ETC_NETWORK_EXTRA: tuple[str, ...] = ("resolv.conf", "ssl", "ca-certificates", "slurm", "munge")
RUN_NETWORK_EXTRA: tuple[str, ...] = ("/run/munge", "/var/run/munge")

#: Top-level system directories bound read-only (those that exist).
SYSTEM_DIRS: tuple[str, ...] = ("/usr", "/opt")
#: Host links or directories recreated as they are (merged-/usr systems make them links).
ROOT_LINKS: tuple[str, ...] = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: /proc entries that must not be writable or readable even by uid 0 without capabilities.
PROC_READ_ONLY: tuple[str, ...] = ("/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs")
PROC_MASKED: tuple[str, ...] = ("/proc/sysrq-trigger", "/proc/kcore", "/proc/keys",
                                "/proc/timer_list", "/proc/sched_debug")
#: GPU device nodes (globs): CUDA, UVM, MIG capabilities.
GPU_DEVICES: tuple[str, ...] = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*")

#: Top-level directories never bound as a readable root of their own, even when they are the
#: working directory or an input: the view would hold all of them (``/etc``: ``shadow``).
_NEVER_ROOTS = {Path(p) for p in ("/", "/usr", "/etc", "/proc", "/sys", "/dev", "/var", "/run",
                                   "/boot", "/lib", "/lib64", "/bin", "/sbin")}
#: Directories an installation prefix is never widened to (see :func:`install_root`).
_NOT_A_PREFIX = _NEVER_ROOTS | {Path(p) for p in ("/root", "/home", "/tmp", "/opt", "/srv", "/mnt")}
#: A private empty $HOME is mounted unless $HOME is one of these.
_NO_PRIVATE_HOME = _NEVER_ROOTS | {Path(p) for p in ("/tmp", "/opt", "/srv", "/mnt")}


class LimitState(BaseModel):
    """One limit of a run: what was asked, how it was enforced, and whether it took effect
    (with the evidence: a cgroup's value read back and what it charged, the rlimit the
    program's parent inside the sandbox saw, or why it could not be applied)."""

    value: str
    mechanism: str
    took_effect: bool
    detail: str = ""


class Confinement(BaseModel):
    """How one program was isolated; copied into every result, outcome and report."""

    mode: Literal["bwrap", "unconfined", "none"]  # "none": refused before anything ran
    tool: str = ""  # e.g. "bubblewrap 0.8.0 at /usr/bin/bwrap"
    writable: list[str] = Field(default_factory=list)
    readable: list[str] = Field(default_factory=list)  # besides the system view
    masked: list[str] = Field(default_factory=list)
    network: bool = False
    pid_namespace: bool = False
    limits: dict[str, str] = Field(default_factory=dict)
    #: every limit with whether it took effect (see :class:`LimitState`)
    limit_states: dict[str, LimitState] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    #: non-empty whenever the program ran without isolation; reports show it verbatim
    warning: str = ""


class BwrapProbe(BaseModel):
    """Whether bubblewrap can confine a program on this machine, and why not."""

    usable: bool
    path: str = ""
    version: str = ""
    reason: str = ""  # why it is not usable (with the install hint)

    @property
    def description(self) -> str:
        return f"{self.version or 'bubblewrap'} at {self.path}"


def bwrap_path() -> str | None:
    """The bwrap binary: ``$PERFSCOUT_BWRAP`` when set, else ``bwrap`` on PATH."""
    override = os.environ.get("PERFSCOUT_BWRAP")
    if override:
        return override if os.path.isfile(override) and os.access(override, os.X_OK) else None
    # The system's own places too: a server started with a bare PATH is still confined.
    return shutil.which("bwrap") or next(
        (p for p in ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap")
         if os.path.isfile(p) and os.access(p, os.X_OK)), None)


def probe_bwrap() -> BwrapProbe:
    """Run a trivial program under the real plan once; the answer is cached per binary."""
    path = bwrap_path()
    if path is None:
        where = os.environ.get("PERFSCOUT_BWRAP")
        missing = f"PERFSCOUT_BWRAP={where} is not an executable file" if where else \
            "bubblewrap (bwrap) is not installed"
        return BwrapProbe(usable=False, reason=f"{missing}: {INSTALL_HINT}")
    return _probe(os.path.abspath(path))


@functools.lru_cache(maxsize=8)
def _probe(path: str) -> BwrapProbe:
    try:
        ver = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
        version = ver.stdout.strip() or ver.stderr.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return BwrapProbe(usable=False, path=path, reason=f"{path} cannot run ({exc}): {INSTALL_HINT}")
    true = shutil.which("true") or "/usr/bin/true"
    with tempfile.TemporaryDirectory(prefix="perfscout-bwrap-probe-") as d:
        argv, _ = build_argv([true], bwrap=path, run_dir=Path(d), cwd=Path(d))
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=20,
                                 stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            return BwrapProbe(usable=False, path=path, version=version,
                              reason=f"bwrap could not start ({exc}): {INSTALL_HINT}")
    if res.returncode != 0:
        said = (res.stderr.strip().splitlines() or [f"exit code {res.returncode}"])[-1]
        return BwrapProbe(
            usable=False, path=path, version=version,
            reason=(f"bwrap cannot create the sandbox's namespaces here ({said}); run as root, or "
                    "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 "
                    "or user.max_user_namespaces > 0; in a container, allow the unshare/mount "
                    "syscalls), or pass --unconfined (CLI) / unconfined=True (API)"))
    return BwrapProbe(usable=True, path=path, version=version)


def perfscout_source_root() -> Path:
    """The directory holding the ``perfscout`` package (the checkout for an editable install)."""
    return Path(__file__).resolve().parents[2]


def python_roots() -> list[Path]:
    """Where the running Python lives: a program started as ``sys.executable`` needs them."""
    roots = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
             Path(os.path.realpath(sys.executable)).parent.parent}
    return sorted(r.resolve() for r in roots if r.exists())


def _env_dirs(env: dict[str, str], name: str) -> list[Path]:
    """Existing directories named in a PATH-like variable (PYTHONPATH, LD_LIBRARY_PATH)."""
    out = []
    for part in env.get(name, "").split(os.pathsep):
        if part and os.path.isabs(part) and os.path.isdir(part):
            out.append(Path(part).resolve())
    return out


def _covered(p: Path, roots: Iterable[Path]) -> bool:
    return any(p == r or p.is_relative_to(r) for r in roots)


def _system_view(network: bool) -> tuple[list[str], list[str]]:
    """bwrap arguments for the read-only system, and its description."""
    args: list[str] = []
    shown: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):
            args += ["--ro-bind", d, d]
            shown.append(d)
    for link in ROOT_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    etc = [*ETC_ALLOWLIST, *(ETC_NETWORK_EXTRA if network else ())]
    for pattern in etc:
        for p in sorted(glob.glob(os.path.join("/etc", pattern))):
            args += ["--ro-bind", p, p]
    shown.append("/etc (" + ", ".join(etc) + " only)")
    if network:
        for p in RUN_NETWORK_EXTRA:
            if os.path.exists(p):
                args += ["--ro-bind", p, p]
    args += ["--ro-bind", "/sys", "/sys", "--proc", "/proc"]
    for p in PROC_READ_ONLY:
        args += ["--ro-bind-try", p, p]
    for p in PROC_MASKED:
        if os.path.exists(p):
            args += ["--ro-bind", "/dev/null", p]
    args += ["--dev", "/dev"]
    gpus = sorted({n for pattern in GPU_DEVICES for n in glob.glob(pattern)
                   if not os.path.isdir(n)})
    for node in gpus:
        args += ["--dev-bind", node, node]
    shown += ["/sys", "/proc (the new PID namespace's; /proc/sys read-only)",
              "/dev (null, zero, random, urandom, tty, pts, shm" + (", " + ", ".join(gpus) if gpus else "") + ")"]
    return args, shown


def build_argv(
    command: Sequence[str],
    *,
    bwrap: str,
    run_dir: Path,
    cwd: Path,
    readable: Sequence[Path] = (),
    network: bool = False,
    env: dict[str, str] | None = None,
    status_fd: int | None = None,
    launcher: Sequence[str] = (),
    programs: Sequence[str] = (),
    named: Sequence[tuple[Path, Path]] = (),
    vet: Callable[[Path], Vetting] | None = None,
    tmpfs_bytes: int | None = None,
    seccomp_fd: int | None = None,
    as_pid_1: bool = False,
    profiler_outside: bool = False,
) -> tuple[list[str], Confinement]:
    """``bwrap ... -- [launcher] command`` and the description of what the program will see.

    ``readable`` are extra directories or files bound read-only at their own paths (the
    declared inputs); with the working directory they are the *data roots*: each is vetted
    (:func:`perfscout.tools.secret_mask.vet_tree`) and bound with its secrets, sockets and
    FIFOs masked, or, when it is too large to vet within the walk's budget, not bound at all:
    then only ``named`` ((path as the command spells it, resolved path) pairs: the paths the
    command names) are. ``run_dir`` is the only writable host path. ``launcher`` runs inside
    as the program's parent (see ``sandbox_launcher``). ``programs`` are the executables that
    will run (the profiler's and the program's): each one's installation is made readable
    (see :func:`install_root`). ``as_pid_1``: the launcher is PID 1 of the sandbox (no
    bwrap init beside the program holding bwrap's descriptors, the launcher's report pipe
    among them). ``profiler_outside``: the profiler runs around bwrap, not inside. ``tmpfs_bytes`` sizes the private ``/tmp``, ``/var/tmp`` and
    ``$HOME``; ``seccomp_fd`` carries a compiled filter (see :mod:`perfscout.tools.seccomp`).
    """
    env = env or {}
    if vet is None:
        skip = python_roots()
        vet = functools.partial(vet_tree, skip=skip)
    run_dir = run_dir.resolve()
    cwd = cwd.resolve()
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if network:
        args.append("--share-net")
    if as_pid_1:
        args.append("--as-pid-1")
    if status_fd is not None:
        args += ["--json-status-fd", str(status_fd)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    sys_args, shown = _system_view(network)
    args += sys_args
    # Private scratch space. $HOME is an empty tmpfs at its own path: a program writing
    # caches there works, and nothing reaches the real home.
    private = ["/tmp", "/var/tmp"]
    home = env.get("HOME", "")
    if home and os.path.isabs(home) and Path(home).resolve() not in _NO_PRIVATE_HOME:
        private.append(str(Path(home).resolve()))
    for p in private:
        if tmpfs_bytes is not None:
            args += ["--size", str(int(tmpfs_bytes))]
        args += ["--tmpfs", p]
    notes: list[str] = []
    system = [Path(d) for d in SYSTEM_DIRS]
    # Data roots: the working directory and the declared inputs, vetted before binding.
    data = sorted({Path(r).resolve() for r in [*readable, *([cwd] if cwd != run_dir else [])]},
                  key=lambda q: len(q.parts))
    data_roots: list[Path] = []
    for p in data:
        if p.exists() and p not in _NEVER_ROOTS and not _covered(p, data_roots) \
                and not _covered(p, [run_dir]):
            data_roots.append(p)
    bound_data: list[Path] = []
    masks: list[Path] = []
    found_content: dict[Path, str] = {}
    found_link: dict[Path, str] = {}
    scanned = 0
    unvetted: list[Path] = []
    for root in data_roots:
        v = vet(root)
        if v.too_large:
            unvetted.append(root)
            notes.append(f"{root} is too large to vet for secrets ({v.too_large}, {v.entries} entries "
                         f"walked in {v.seconds:.2f} s): it is not shown; only the paths the command "
                         "names inside it are (declare others with --input)")
            continue
        bound_data.append(root)
        masks += v.masks
        found_content.update(v.by_content)
        found_link.update(v.by_link)
        scanned += v.scanned
    # Named paths inside an unvetted root: each bound alone (a directory vetted first).
    singles: list[tuple[Path, Path]] = []
    for spelled, real in named:
        if not (_covered(real, unvetted) or _covered(spelled, unvetted)) or not real.exists():
            continue
        if real.is_dir():
            v = vet(real)
            if v.too_large:
                notes.append(f"{spelled} is too large to vet for secrets ({v.too_large}): not shown")
                continue
            masks += v.masks
            found_content.update(v.by_content)
            found_link.update(v.by_link)
        elif (v := vet(real)).masks:  # a named file that is itself a secret (by content, a hard link)
            found_content.update(v.by_content)
            found_link.update(v.by_link)
            masks += v.masks
        for dest in {real, spelled}:
            singles.append((real, dest))
    # Support roots: the Python running perfscout, perfscout's own tree, the dirs of
    # PYTHONPATH / LD_LIBRARY_PATH and the programs' installations. Their secrets are masked
    # too (within the same budget; these are installations, so past it they stay bound).
    project = perfscout_source_root()
    env_dirs = [*_env_dirs(env, "PYTHONPATH"), *_env_dirs(env, "LD_LIBRARY_PATH")]
    support: list[Path] = [*python_roots(), project, *env_dirs]
    given = [run_dir, *bound_data, *[r for _, r in singles]]
    for exe in {command[0], *programs}:
        for path in {Path(exe), Path(os.path.realpath(exe))}:
            # a program outside every root brings its installation
            if path.is_absolute() and not _covered(path, given):
                support.append(install_root(path))
    support_roots: list[Path] = []
    for p in sorted({r for r in support if r.exists() and r not in _NEVER_ROOTS}, key=lambda q: len(q.parts)):
        if not _covered(p, system) and not _covered(p, support_roots) and not _covered(p, bound_data):
            support_roots.append(p)
    vetted_support = {project.resolve(), *env_dirs}
    for root in support_roots:
        git = root / ".git"
        if os.path.lexists(git) and not git.is_symlink():
            masks.append(git)
        if root in vetted_support or any(r.is_relative_to(root) for r in vetted_support):
            v = vet(root)
            masks += v.masks
            if v.too_large:
                notes.append(f"{root} (an installation perfscout or the program needs) was vetted for "
                             f"secrets only in part ({v.too_large}); what the walk reached is masked")
    ro_roots = sorted([*support_roots, *bound_data], key=lambda q: len(q.parts))
    masks = sorted({m for m in masks if _covered(m, ro_roots) or _covered(m, [s for _, s in singles])})
    # Mount order matters: parents before children, so the run directory (rw) and the
    # masks land on top of any read-only root that contains them.
    mounts: list[tuple[Path, str, Path]] = [(p, "ro", p) for p in ro_roots] + [(run_dir, "rw", run_dir)] \
        + [(dest, "ro", src) for src, dest in singles] + [(m, "mask", m) for m in masks]
    if cwd != run_dir and not _covered(cwd, [*ro_roots, *[d for _, d in singles]]):
        mounts.append((cwd, "dir", cwd))  # --chdir needs it; empty, read-only
    mounts.sort(key=lambda m: (len(m[0].parts), m[1] == "mask"))
    for dest, how, src in mounts:
        if how == "ro":
            args += ["--ro-bind", str(src), str(dest)]
        elif how == "rw":
            args += ["--bind", str(dest), str(dest)]
        elif how == "dir":
            args += ["--dir", str(dest)]
        elif _is_real_dir(dest):
            args += ["--tmpfs", str(dest), "--remount-ro", str(dest)]
        else:  # a file, socket, FIFO or device: an empty file in its place (connect: refused)
            args += ["--ro-bind", str(_empty_file()), str(dest)]
    args += ["--remount-ro", "/", "--chdir", str(cwd), "--"]
    args += [*launcher, *command]
    size = f", {tmpfs_bytes} bytes each" if tmpfs_bytes is not None else ""
    desc = Confinement(
        mode="bwrap",
        writable=[str(run_dir), *[f"{p} (private{size}, emptied after the run)" for p in private],
                  "/dev/shm (private)"],
        readable=shown + [str(p) for p in ro_roots] + sorted({str(d) for _, d in singles}),
        masked=[str(m) for m in masks] + ["/etc (all but the allowlist)", "every other host path"],
        network=network,
        pid_namespace=True,
        notes=["no capabilities, no new privileges; new PID, IPC, UTS, cgroup and mount namespaces; "
               "every process of the run dies when it exits",
               "secrets by name (.git, .env, .netrc, .ssh, key files, credentials...), sockets and FIFOs "
               "in the folders shown are masked at any depth",
               f"secrets by content are masked too (the first {CONTENT_BYTES} bytes of each of {scanned} files "
               f"read: private keys, cloud keys, URLs with a token): {len(found_content)} masked by content"
               + "".join(f"; {p} ({why})" for p, why in sorted(found_content.items())[:20]),
               f"a hard link of a home credential file is masked whatever its name: {len(found_link)} hard link(s)"
               + "".join(f"; {p} (= {same})" for p, same in sorted(found_link.items())[:20]),
               *notes,
               *([] if network else ["no network: a private network namespace with only loopback"]),
               *([] if profiler_outside else _perf_note())],
    )
    return args, desc


_EMPTY: list[Path] = []


def _empty_file() -> Path:
    """An empty read-only regular file of perfscout's own, bound over masked files (not
    /dev/null: bind mounts are ``nodev``, so opening it would fail where reading an empty
    file succeeds, and a program that reads a masked ``.git`` file gets no surprise)."""
    if not _EMPTY or not _EMPTY[0].is_file() or _EMPTY[0].stat().st_size:
        d = Path(tempfile.mkdtemp(prefix="perfscout-mask-"))
        f = d / "empty"
        f.touch(mode=0o444)
        _EMPTY[:] = [f]
    return _EMPTY[0]


def _is_real_dir(p: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(p).st_mode)
    except OSError:
        return False


def _perf_note() -> list[str]:
    try:
        paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return []
    if paranoid >= 2:
        return [f"perf counts user space only inside the sandbox (kernel.perf_event_paranoid="
                f"{paranoid}, no CAP_PERFMON): event names carry ':u'"]
    return []


def install_root(exe: Path) -> Path:
    """What a program outside the system directories needs readable: its installation
    prefix (``~/.pyenv`` for ``~/.pyenv/shims/python3``, ``~/miniconda3`` for
    ``~/miniconda3/bin/python``), else its own directory, never a system root or ``$HOME``
    itself (then only the file)."""
    home = Path(os.path.expanduser("~")).resolve()
    parent = exe.parent
    for cand in (parent.parent, parent):
        if cand not in _NOT_A_PREFIX and cand != home and len(cand.parts) > 1:
            return cand
    return exe
