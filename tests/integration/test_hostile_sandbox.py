"""Issue 30, the sandbox: what a profiled program can see, use up and forge, run for real
under bubblewrap (and perf where it is installed).

Every class is written so that it would fail against the sandbox of round 2: secrets at
any depth of a bound folder (a nested repository's ``.git/config``, ``.env``, ``.netrc``,
key files, the home directory's ``.ssh`` when the program runs from ``$HOME``), a host
service's Unix socket or FIFO inside the working directory, memory with and without a
writable cgroup, the disk under the run directory, and the profiler's own output.

Round 3: the profiler's memory (/proc/<perf>/mem, every visible pid's mem, process_vm_writev,
ptrace: perf now runs outside the sandbox, the launcher inside is PID 1 and non-dumpable),
the launcher's report (no bwrap init holding its pipe), ncu's table (read from the report,
never from the program's stdout; a `gpu` test with the real ncu) and secrets by content and
by hard link. Walk cost: ``benchmarks/sandbox_overhead.py --walk`` (20,200 entries with their
content read: 0.58-0.66 s on the 2-core dev VM at load ~3; 50,200: 1.2-2.6 s).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfscout.tools import cgroup_limits
from perfscout.tools.bwrap import probe_bwrap
from perfscout.tools.sandbox import SandboxLimits, read_run_file, run_sandboxed

PY = sys.executable
_PROBE = probe_bwrap()
pytestmark = pytest.mark.skipif(not _PROBE.usable, reason=f"bubblewrap cannot run here: {_PROBE.reason}")

#: What each planted secret holds: never to be seen in anything the program printed.
TOKEN = "ghp_SECRETTOKEN0123456789"

#: (relative path, is it a secret) for a project folder with secrets at several depths.
PROJECT_FILES = [
    (".git/config", True),
    ("vendor/lib/.git/config", True),  # a nested repository (the round-2 escape)
    ("vendor/other/.git", True),  # a worktree's .git file
    ("a/b/c/d/.env", True),
    (".env.production", True),
    ("deep/x/.netrc", True),
    ("keys/id_ed25519", True),
    ("keys/id_rsa", True),
    ("certs/server.pem", True),
    ("certs/tls.key", True),
    ("cloud/credentials", True),
    ("cloud/credentials.json", True),
    (".aws/config", True),
    (".ssh/known_hosts", True),
    (".git-credentials", True),
    (".pypirc", True),
    ("src/main.py", False),
    ("src/keys.py", False),  # a name about keys is not a key file
    ("data/field.f32", False),
    ("README.md", False),
]


def _plant(root: Path) -> None:
    for rel, secret in PROJECT_FILES:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"{TOKEN} {rel}\n" if secret else f"ordinary {rel}\n")


_READ_ALL = textwrap.dedent("""
    import os, sys
    seen, denied = [], []
    for top in sys.argv[1:]:
        for dirpath, dirnames, filenames in os.walk(top):
            for name in filenames:
                p = os.path.join(dirpath, name)
                try:
                    with open(p, errors="replace") as f:
                        seen.append(p + ": " + f.read(200))
                except OSError as e:
                    denied.append(p)
    for top in sys.argv[1:]:
        for rel in ("vendor/lib/.git/config", ".git/config", "vendor/other/.git", ".ssh/id_rsa"):
            try:
                seen.append(open(os.path.join(top, rel)).read(200))
            except OSError:
                denied.append(rel)
    print("\\n".join(seen))
    print("denied", len(denied))
    """)


def test_secrets_at_any_depth_of_the_working_directory_are_masked(tmp_path: Path) -> None:
    work, run = tmp_path / "project", tmp_path / "run"
    _plant(work)
    res = run_sandboxed([PY, "-c", _READ_ALL, str(work)], run, readable=[work], cwd=work, timeout_s=30)
    assert res.status == "ok", (res.reason, res.stderr)
    assert TOKEN not in res.stdout, [ln for ln in res.stdout.splitlines() if TOKEN in ln]
    for rel, secret in PROJECT_FILES:
        if not secret:  # what the program needs is still there
            assert f"ordinary {rel}" in res.stdout, rel
    masked = "\n".join(res.confinement.masked)
    assert "vendor/lib/.git" in masked and "keys/id_rsa" in masked


def test_run_from_the_home_directory_hides_its_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, run = tmp_path / "home" / "alice", tmp_path / "run"
    for rel in (".ssh/id_rsa", ".ssh/config", ".gnupg/private-keys-v1.d/k.key", ".netrc",
                ".config/gh/hosts.yml", ".docker/config.json", ".kube/config", ".bash_history",
                ".local/share/keyrings/login.keyring", "proj/.git/config"):
        p = home / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"{TOKEN} {rel}\n")
    (home / "proj" / "bench.py").write_text("print('bench')\n")
    monkeypatch.setenv("HOME", str(home))
    res = run_sandboxed([PY, "-c", _READ_ALL, str(home)], run, readable=[home], cwd=home, timeout_s=30)
    assert res.status == "ok", (res.reason, res.stderr)
    assert TOKEN not in res.stdout, [ln for ln in res.stdout.splitlines() if TOKEN in ln]
    assert "bench.py: print('bench')" in res.stdout


def test_a_tree_too_large_to_vet_is_not_bound_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the walk's budget the folder is not shown at all: only the paths the command
    names (each vetted) are; a secret the walk never reached stays out of view."""
    from perfscout.tools import secret_mask

    work, run = tmp_path / "big", tmp_path / "run"
    for i in range(40):
        (work / f"d{i:02d}").mkdir(parents=True)
        (work / f"d{i:02d}" / "f.txt").write_text("x")
    (work / "zz" / "deep").mkdir(parents=True)
    (work / "zz" / "deep" / "unnamed_secret").write_text(TOKEN)  # not a known secret name
    (work / "input.txt").write_text("the input")
    monkeypatch.setattr(secret_mask, "WALK_MAX_ENTRIES", 30)
    code = ("import sys, os\nprint(open(sys.argv[1]).read())\n"
            "for p in ('zz/deep/unnamed_secret', 'd00/f.txt'):\n"
            "    try: print(open(os.path.join(sys.argv[2], p)).read())\n"
            "    except OSError as e: print('denied', p)\n")
    res = run_sandboxed([PY, "-c", code, str(work / "input.txt"), str(work)], run,
                        readable=[work], cwd=run, timeout_s=30)
    assert res.status == "ok", (res.reason, res.stderr)
    assert "the input" in res.stdout and TOKEN not in res.stdout
    assert "denied d00/f.txt" in res.stdout
    assert any("too large to vet" in n for n in res.confinement.notes), res.confinement.notes


def test_host_sockets_and_fifos_in_bound_folders_are_unreachable(tmp_path: Path) -> None:
    work, run = tmp_path / "w", tmp_path / "run"
    (work / "sub" / "deeper").mkdir(parents=True)
    servers = []
    for rel in ("svc.sock", "sub/deeper/agent.sock"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(work / rel))
        s.listen(4)
        s.setblocking(False)
        servers.append(s)
    fifo = work / "sub" / "ctl.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    code = textwrap.dedent(f"""
        import os, socket
        for rel in ("svc.sock", "sub/deeper/agent.sock"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            try:
                s.connect(os.path.join({str(work)!r}, rel)); s.sendall(b"escaped"); print("connected", rel)
            except OSError as e:
                print("refused", rel, e.errno)
        try:
            fd = os.open(os.path.join({str(work)!r}, "sub/ctl.fifo"), os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"escaped"); print("fifo written")
        except OSError as e:
            print("fifo refused", e.errno)
        """)
    try:
        res = run_sandboxed([PY, "-c", code], run, readable=[work], cwd=work, timeout_s=30)
        for s in servers:
            with pytest.raises(BlockingIOError):
                s.accept()
        try:  # no writer ever: EOF; a writer that left nothing: EAGAIN
            got = os.read(reader, 100)
        except BlockingIOError:
            got = b""
        assert got == b"", got
    finally:
        for s in servers:
            s.close()
        os.close(reader)
    assert res.status == "ok", (res.reason, res.stderr)
    assert "connected" not in res.stdout and "fifo written" not in res.stdout, res.stdout


_EAT = textwrap.dedent("""
    import sys
    blocks = []
    for i in range(int(sys.argv[1])):
        b = bytearray(2**20 * 16)
        for j in range(0, len(b), 4096):
            b[j] = 1  # touched: resident, not just reserved
        blocks.append(b)
    print("allocated", len(blocks) * 16, "MiB")
    """)


def test_memory_limit_takes_effect_in_a_cgroup(tmp_path: Path) -> None:
    res = run_sandboxed([PY, "-c", _EAT, "64"], tmp_path / "run", memory_mb=256, timeout_s=60)
    assert res.status == "killed_by_limit" and "memory" in res.reason, (res.status, res.reason, res.stdout)
    state = res.confinement.limit_states["memory"]
    assert state.took_effect is True, state
    assert "allocated" not in res.stdout


def test_memory_limit_without_a_writable_cgroup_falls_back_to_rlimit_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroup_limits, "create", lambda processes, memory: (None, "no cgroup (test)"))
    res = run_sandboxed([PY, "-c", _EAT, "64"], tmp_path / "run", memory_mb=256, timeout_s=60)
    assert res.status == "killed_by_limit", (res.status, res.reason, res.stderr[-500:])
    state = res.confinement.limit_states["memory"]
    assert "RLIMIT_DATA" in state.mechanism and state.took_effect is True, state
    # an honest statement: a per-process cap, not a cap on the run
    assert "per process" in state.detail


def test_every_limit_is_stated_with_whether_it_took_effect(tmp_path: Path) -> None:
    res = run_sandboxed([PY, "-c", "print('hi')"], tmp_path / "run", memory_mb=512, timeout_s=30)
    assert res.status == "ok", res.reason
    states = res.confinement.limit_states
    for name in ("wall_clock", "memory", "processes", "open_files", "file_size", "disk"):
        assert name in states, (name, sorted(states))
        assert isinstance(states[name].took_effect, bool)
    assert states["memory"].took_effect and states["disk"].took_effect


def test_disk_budget_of_the_run_directory_kills_a_run_that_fills_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    code = ("import os\nfor i in range(400):\n"
            "    with open(f'f{i:04d}.bin', 'wb') as f:\n        f.write(os.urandom(2**20))\n"
            "print('wrote everything')\n")
    lim = SandboxLimits(disk_bytes=32 * 2**20)
    t0 = time.monotonic()
    res = run_sandboxed([PY, "-c", code], run, limits=lim, timeout_s=120)
    assert res.status == "killed_by_limit" and "disk" in res.reason, (res.status, res.reason)
    assert "wrote everything" not in res.stdout
    used = sum(p.stat().st_blocks * 512 for p in run.rglob("*") if p.is_file())
    assert used < 3 * 32 * 2**20, used / 2**20
    assert time.monotonic() - t0 < 100


def test_disk_budget_counts_files_too(tmp_path: Path) -> None:
    run = tmp_path / "run"
    code = ("import os\nos.mkdir('many')\nfor i in range(200000):\n"
            "    open(f'many/{i}', 'w').close()\nprint('made everything')\n")
    res = run_sandboxed([PY, "-c", code], run, limits=SandboxLimits(disk_entries=2000), timeout_s=120)
    assert res.status == "killed_by_limit" and "files" in res.reason, (res.status, res.reason)
    assert "made everything" not in res.stdout


def test_private_tmp_is_size_limited(tmp_path: Path) -> None:
    code = ("import os\nn = 0\ntry:\n    with open('/tmp/fill', 'wb') as f:\n"
            "        for _ in range(256):\n            f.write(b'0' * 2**20); f.flush(); n += 1\n"
            "except OSError as e:\n    print('full', e.errno)\nprint('wrote', n)\n")
    res = run_sandboxed([PY, "-c", code], tmp_path / "run", limits=SandboxLimits(disk_bytes=32 * 2**20),
                        timeout_s=60)
    assert "full" in res.stdout or res.status == "killed_by_limit", (res.status, res.stdout)
    if "wrote" in res.stdout:
        assert int(res.stdout.split("wrote")[1]) <= 33


# ---- item 2: the profiler's output ------------------------------------------------------------

_FORGE = textwrap.dedent("""
    import glob, os, time
    forged = "4242424242,,cycles:u,1000,100.00,,\\n4242424242,,instructions:u,1000,100.00,,\\n"
    jforged = '{"counter-value" : "4242424242", "unit" : "", "event" : "cycles:u"}\\n'
    run = max(glob.glob(os.environ["PERFSCOUT_HOME"] + "/runs/*"), key=os.path.getmtime)
    for name in ("perf_stat.csv", "perf_stat.jsonl"):
        p = os.path.join(run, name)
        if os.path.lexists(p):
            os.remove(p)  # perf keeps writing to the old inode; perfscout would read this one
        with open(p, "w") as f:
            f.write(jforged if name.endswith("jsonl") else forged)
    # every descriptor of every process it can see: the profiler's output among them
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            w = os.open(fd, os.O_WRONLY | os.O_NONBLOCK)
            os.write(w, forged.encode()); os.close(w)
        except OSError:
            pass
    for fd in range(3, 64):
        try:
            os.write(fd, forged.encode())
        except OSError:
            pass
    print("forged")
    """)


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_a_program_cannot_forge_perf_counters(tmp_path: Path, perfscout_home: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from perfscout.tools.profile import profile_command

    monkeypatch.chdir(tmp_path)
    out = profile_command([PY, "-c", _FORGE], tool="perf", timeout_s=60)
    assert out.status == "ok", out.exit
    assert (Path(out.run_dir) / "program.stdout").read_text().strip().endswith("forged")
    assert out.perf is not None
    values = [m.value for m in out.perf.events.values()]
    assert 4242424242 not in values, out.perf.events
    assert "task-clock:u" in out.perf.events or "task-clock" in out.perf.events, out.perf
    saved = next(Path(out.run_dir).glob("perf_stat.*"))
    assert "4242424242" not in saved.read_text()


def test_a_huge_planted_file_is_not_read_whole(tmp_path: Path) -> None:
    big = tmp_path / "perf_stat.csv"
    with open(big, "wb") as f:
        f.truncate(3 * 2**30 // 2)
    with pytest.raises(OSError, match="larger than"):
        read_run_file(big)
    small = tmp_path / "ok.csv"
    small.write_text("1,,task-clock\n")
    assert read_run_file(small) == "1,,task-clock\n"
    (tmp_path / "link").symlink_to(small)
    with pytest.raises(OSError):
        read_run_file(tmp_path / "link")


# ---- item 3's file part: a sparse input -------------------------------------------------------

def test_a_sparse_stream_is_refused_before_any_read(tmp_path: Path) -> None:
    import resource
    import subprocess

    sparse = tmp_path / "bomb.pscz"
    with open(sparse, "wb") as f:
        f.write(b"PSCZ")
        f.truncate(3 * 2**30)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "PERFSCOUT_HOME": str(tmp_path / "home")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = subprocess.run([PY, "-m", "perfscout", "decompress", str(sparse), "--out", str(tmp_path / "o.f32")],
                       capture_output=True, text=True, timeout=120, env=env)
    peak_mib = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "sparse" in r.stderr, r.stderr
    assert peak_mib < 1024, peak_mib
    assert not (tmp_path / "o.f32").exists()


def test_input_file_sizing_uses_allocated_blocks(tmp_path: Path) -> None:
    from perfscout.errors import InputError
    from perfscout.io import check_input_file

    sparse = tmp_path / "holes.bin"
    with open(sparse, "wb") as f:
        f.write(b"x" * 4096)
        f.truncate(64 * 2**20)
    with pytest.raises(InputError, match="sparse"):
        check_input_file(sparse, "compressed file", dense=True)
    dense = tmp_path / "dense.bin"
    dense.write_bytes(os.urandom(2**20))
    assert check_input_file(dense, "compressed file", dense=True) == 2**20


def test_profile_outcome_json_states_the_limits(tmp_path: Path, perfscout_home: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from perfscout.tools.profile import profile_command

    monkeypatch.chdir(tmp_path)
    out = profile_command([PY, "-c", "print(1)"], tool="perf", timeout_s=60)
    doc = json.loads(out.model_dump_json())
    states = doc["confinement"]["limit_states"]
    assert states["memory"]["took_effect"] is True, states["memory"]
    assert states["disk"]["took_effect"] is True, states["disk"]


# ---- item 2 for ncu: the report is taken back with the run file checks ------------------------

_FX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"


def _stand_in_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `ncu` on PATH (no GPU here): profiling runs the program, then writes the fixture's
    raw page as NAME.ncu-rep through the shell (following any link, as a tool would), or,
    without -o, prints it on the stdout it shares with the program;
    --import prints the report (raw page) or the details fixture."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ncu = bindir / "ncu"
    ncu.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "--import" ]; then
          case "$*" in *details*) cat {_FX / 'h200_transpose_details.csv'};; *) cat "$2";; esac
          exit 0
        fi
        out=""
        while [ "$#" -gt 0 ]; do
          case "$1" in -o) out=$2; shift 2;; -k|-c|-s|--set|--clock-control|--print-units|--page) shift 2;;
                       -f|--csv) shift;; *) break;; esac
        done
        "$@"
        if [ -z "$out" ]; then cat {_FX / 'h200_transpose_raw.csv'}; exit 0; fi  # the page on stdout
        cat {_FX / 'h200_transpose_raw.csv'} > "$out.ncu-rep"
        """))
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def test_ncu_report_is_taken_back_checked_and_a_planted_link_is_refused(
        tmp_path: Path, perfscout_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from perfscout.tools.profile import profile_command

    _stand_in_ncu(tmp_path, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    out = profile_command([PY, "-c", "print('kernel')"], tool="ncu", timeout_s=60)
    assert out.status == "ok", out.exit
    assert out.kernels and not out.ncu_error, out.ncu_error
    rep = Path(out.run_dir) / "ncu_profile.ncu-rep"
    assert rep.is_file() and not rep.is_symlink()
    assert any("injects into the program" in n for n in out.notes)
    # the program leaves a link where ncu writes its report: ncu writes through it, perfscout
    # does not read it (nor anything the link points at)
    plant = ("import glob, os\nrun = max(glob.glob(os.environ['PERFSCOUT_HOME'] + '/runs/*'), key=os.path.getmtime)\n"
             "open(os.path.join(run, 'elsewhere'), 'w').close()\n"
             "os.symlink(os.path.join(run, 'elsewhere'), os.path.join(run, 'ncu_profile.ncu-rep'))\n")
    out = profile_command([PY, "-c", plant], tool="ncu", timeout_s=60)
    assert "not read back" in out.ncu_error and not out.kernels, (out.ncu_error, out.kernels[:1])


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_a_profiled_program_cannot_attach_to_its_profiler(tmp_path: Path) -> None:
    """Under perf, ptrace / process_vm_writev / pidfd_getfd on the profiler fail at once
    (seccomp) instead of stopping it (before: the run hung until its wall-clock limit)."""
    from perfscout.tools.perf_stat import run_perf_stat
    from perfscout.tools.sandbox import Sandbox

    code = textwrap.dedent("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        pp = os.getppid()
        print("ptrace", libc.ptrace(16, pp, 0, 0), ctypes.get_errno())
        print("vm_writev", libc.syscall(311, pp, 0, 0, 0, 0, 0), ctypes.get_errno())
        print("pidfd_getfd", libc.syscall(438, 0, 9, 0), ctypes.get_errno())
        """)
    sb = Sandbox(tmp_path / "run", limits=SandboxLimits(timeout_s=20))
    prof, res = run_perf_stat(sb, [PY, "-c", code])
    assert res.status == "ok", (res.status, res.reason, res.stderr[-400:])
    assert "ptrace -1 1" in res.stdout, res.stdout  # EPERM
    if os.uname().machine == "x86_64":
        assert "vm_writev -1 1" in res.stdout and "pidfd_getfd -1 1" in res.stdout, res.stdout
    assert prof.events, prof
    assert any("seccomp" in n for n in res.confinement.notes)


def test_a_too_large_working_directory_still_runs_the_script_the_command_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from perfscout.tools import secret_mask

    work, run = tmp_path / "big", tmp_path / "run"
    for i in range(40):
        (work / f"d{i:02d}").mkdir(parents=True)
        (work / f"d{i:02d}" / "f.txt").write_text("x")
    (work / "bench.py").write_text("import os\nprint('bench ran in', os.getcwd(), sorted(os.listdir('.')))\n")
    monkeypatch.setattr(secret_mask, "WALK_MAX_ENTRIES", 30)
    res = run_sandboxed([PY, "bench.py"], run, readable=[work], cwd=work, timeout_s=30)
    assert res.status == "ok", (res.reason, res.stderr)
    assert f"bench ran in {work} ['bench.py']" in res.stdout, res.stdout


# ---- round 3, item 1: the profiler's memory ---------------------------------------------------

_PATCH_PROFILER = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    me, pp = os.getpid(), os.getppid()
    pids = sorted({pp, *(int(p) for p in os.listdir("/proc") if p.isdigit())} - {me, 0})
    print("ppid", pp, "visible", pids)

    class iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    for pid in pids:
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            comm = "?"
        addr = None
        try:  # a writable mapping of the target: read one byte and write the same byte back
            for line in open(f"/proc/{pid}/maps"):
                a, perms = line.split()[:2]
                if perms.startswith("rw"):
                    addr = int(a.split("-")[0], 16)
                    break
        except OSError as e:
            print("maps denied", pid, comm, e.errno)
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDWR)
            try:
                if addr is not None:
                    b = os.pread(fd, 1, addr)
                    print("MEM WRITTEN", pid, comm, os.pwrite(fd, b, addr))
                else:
                    print("MEM OPENED", pid, comm)
            finally:
                os.close(fd)
        except OSError as e:
            print("mem denied", pid, comm, e.errno)
        buf = ctypes.create_string_buffer(1)
        local, remote = iovec(ctypes.addressof(buf), 1), iovec(addr or 0x1000, 1)
        n = libc.syscall(311, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)  # process_vm_writev
        print("VM WRITTEN" if n >= 0 else "vm_writev denied", pid, comm, ctypes.get_errno())
        r = libc.ptrace(0x4206, pid, 0, 0)  # PTRACE_SEIZE
        print("PTRACED" if r == 0 else "ptrace denied", pid, comm, ctypes.get_errno())
        for fdpath in (os.listdir(f"/proc/{pid}/fd") if os.path.isdir(f"/proc/{pid}/fd") else []):
            try:
                w = os.open(f"/proc/{pid}/fd/{fdpath}", os.O_WRONLY | os.O_NONBLOCK)
                os.close(w)
                print("FD REOPENED", pid, comm, fdpath)
            except OSError:
                pass
    # the work to be measured: a known loop
    x = 0
    for i in range(int(sys.argv[1])):
        x += i
    print("loop done", x)
    """)


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_a_profiled_program_cannot_reach_the_profilers_memory(tmp_path: Path) -> None:
    """/proc/<perf>/mem, /proc/<every visible pid>/mem, process_vm_writev and ptrace against the
    profiler all fail, and the counts perf reports are still the program's own work."""
    from perfscout.state.perf_events import event_base
    from perfscout.tools.perf_stat import run_perf_stat
    from perfscout.tools.sandbox import Sandbox

    loops = 2_000_000
    sb = Sandbox(tmp_path / "run", limits=SandboxLimits(timeout_s=60))
    prof, res = run_perf_stat(sb, [PY, "-c", _PATCH_PROFILER, str(loops)])
    assert res.status == "ok", (res.status, res.reason, res.stderr[-600:])
    out = res.stdout
    assert f"loop done {loops * (loops - 1) // 2}" in out, out
    for hit in ("MEM WRITTEN", "MEM OPENED", "VM WRITTEN", "PTRACED", "FD REOPENED"):
        assert hit not in out, out
    # no process of the run but the program itself is within its reach
    assert "perf" not in out.split("visible", 1)[1].split("\n", 1)[0] or "denied" in out, out
    # the counters are still measured (not a timing check: that the program's own events were
    # counted at all, and the loop's work where the PMU counts instructions)
    by_base = {event_base(e): m.value for e, m in prof.events.items()}
    assert "task-clock" in by_base and by_base["task-clock"] > 0, prof
    if "instructions" in by_base:
        assert by_base["instructions"] >= 10 * loops, by_base
    assert any("outside" in n and "profiler" in n for n in res.confinement.notes), res.confinement.notes


# ---- round 3, item 3: secrets by content and by hard link -------------------------------------

# Built from pieces so that this file itself holds no secret-looking line (the project tree is
# vetted too, and the walk would mask this test file in the sandbox).
_DASH5 = "-" * 5
_PEM = f"{_DASH5}BEGIN RSA PRIVATE KEY{_DASH5}\nMIIEowIBAAKCAQEA{TOKEN}\n{_DASH5}END RSA PRIVATE KEY{_DASH5}\n"
_OPENSSH = f"{_DASH5}BEGIN OPENSSH PRIVATE KEY{_DASH5}\nb3BlbnNzaC1rZXktdjEAAAAA{TOKEN}\n"
_AWS = "[default]\naws_access_key_id = AKIAABCDEFGHIJKLMNOP\n" + "aws_secret_" + f"access_key = wJalrXUtnFEMI/K7MDENG/{TOKEN}\n"
_GCP = json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "abc",
                   "private" + "_key": f"MIIEvQIBADANBg{TOKEN}", "client_email": "x@p.iam.gserviceaccount.com"})
_REMOTE = f'[remote "origin"]\n\turl = https://x-access-token:{TOKEN}@github.com/org/repo.git\n'

#: (path under the project, content): none of the names says "secret"
BY_CONTENT = [("notes/deploy_key_backup.txt", _OPENSSH), ("data/rsa.txt", _PEM),
              ("config/settings.ini", _AWS), ("gcp/project.json", _GCP),
              ("vendor/lib/old-git-config", _REMOTE), ("a/b/c/d/e/readme2", "intro\n" * 10 + _PEM)]
#: prose about keys, and a key-like line past the first 4 KiB (the scan reads no further)
NOT_SECRETS = [("docs/howto.md", "Put your private key in ~/.ssh; never paste a BEGIN PRIVATE KEY block.\n"),
               ("src/aws.py", "import boto3  # reads aws_secret_access_key from the environment\n"),
               ("src/urls.txt", "clone https://github.com/org/repo.git or git@github.com:org/repo.git\n")]


def test_secrets_are_found_by_content_and_by_hard_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, work, run = tmp_path / "home" / "bob", tmp_path / "project", tmp_path / "run"
    for rel, text in [(".ssh/id_ed25519", f"{TOKEN} ssh\n"), (".netrc", f"machine h login u password {TOKEN}\n"),
                      (".aws/credentials", f"{TOKEN} aws\n"), (".git-credentials", f"https://u:{TOKEN}@h\n"),
                      (".docker/config.json", f'{{"auths": {{"h": {{"auth": "{TOKEN}"}}}}}}\n')]:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    monkeypatch.setenv("HOME", str(home))
    for rel, text in BY_CONTENT + NOT_SECRETS:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    # hard links of the home's secrets under innocent names
    links = {"data/ssh_copy.dat": ".ssh/id_ed25519", "results/n.txt": ".netrc", "x/aws.cfg": ".aws/credentials",
             "x/gc": ".git-credentials", "x/dock.json": ".docker/config.json"}
    for rel, secret in links.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(home / secret, work / rel)
    (work / "src" / "main.py").write_text("print('main')\n")
    res = run_sandboxed([PY, "-c", _READ_ALL, str(work)], run, readable=[work], cwd=work, timeout_s=60)
    assert res.status == "ok", (res.reason, res.stderr)
    assert TOKEN not in res.stdout, [ln for ln in res.stdout.splitlines() if TOKEN in ln]
    masked = set(res.confinement.masked)
    for rel in [r for r, _ in BY_CONTENT] + list(links):
        assert str(work / rel) in masked, (rel, sorted(masked))
    for rel, text in NOT_SECRETS:  # what merely talks about keys stays readable
        assert f"{work / rel}: {text[:40]}" in res.stdout, rel
    assert "main.py: print('main')" in res.stdout
    said = " ".join(res.confinement.notes)
    assert "by content" in said and "hard link" in said, said


def test_the_content_scan_reads_at_most_4_kib_a_file_and_its_budget_is_stated(tmp_path: Path) -> None:
    from perfscout.tools.secret_mask import CONTENT_BYTES, vet_tree

    work = tmp_path / "w"
    work.mkdir()
    (work / "late.txt").write_text("x" * (CONTENT_BYTES + 10) + _PEM)  # past the scanned head
    (work / "early.txt").write_text("x" * 100 + _PEM)
    v = vet_tree(work)
    assert work / "early.txt" in v.files and work / "late.txt" not in v.files, v.files
    assert v.bytes_read <= 2 * CONTENT_BYTES and v.scanned == 2, (v.bytes_read, v.scanned)
    # a budget too small to scan everything: the folder counts as too large (not bound whole)
    for i in range(30):
        (work / f"f{i}.txt").write_text("plain\n")
    small = vet_tree(work, max_entries=10)
    assert small.too_large, small


# ---- round 3, item 2: ncu's table never read from the program's stdout ------------------------

#: A program that prints an ncu raw page of its own: one kernel, "forged_kernel", 4242 cycles.
_FORGE_NCU = textwrap.dedent("""
    head = '"ID","Process ID","Process Name","Host Name","Kernel Name","Block Size","Grid Size","Device","CC","gpc__cycles_elapsed.max","gpu__time_duration.sum"'
    units = '"","","","","","","","","","cycle","second"'
    row = '"0","1","p","h","forged_kernel","(256, 1, 1)","(1, 1, 1)","0","9.0","4242","0.000004242"'
    print("==PROF== Connected to process 1 (forged)")
    print(head); print(units); print(row)
    print("==PROF== Disconnected from process 1")
    """)


@pytest.mark.parametrize("details", [False, True])
def test_a_forged_ncu_table_on_the_programs_stdout_gives_no_metrics(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, details: bool) -> None:
    """Without and with the details page, the metrics come from ncu's report (the stand-in
    writes the real H200 fixture), never from the stdout the program shares with ncu."""
    from perfscout.tools.ncu import NcuOptions, run_ncu
    from perfscout.tools.sandbox import Sandbox

    _stand_in_ncu(tmp_path, monkeypatch)
    sb = Sandbox(tmp_path / "run", limits=SandboxLimits(timeout_s=60))
    run = run_ncu(sb, [PY, "-c", _FORGE_NCU], NcuOptions(details=details, timeout_s=60))
    assert "forged_kernel" in run.results[0].stdout  # the program did print its table
    assert run.report is not None and not run.error, run.error
    names = {k.name for k in run.report.kernels}
    assert "forged_kernel" not in names and names, names
    assert all(k.metrics.get("gpc__cycles_elapsed.max") is None
               or k.metrics["gpc__cycles_elapsed.max"].value != 4242 for k in run.report.kernels)
    assert run.ncu_rep and Path(run.ncu_rep).is_file()
    assert not any("standard output" in n for n in run.notes), run.notes
    assert bool(run.details_csv) == details


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("ncu") is None, reason="Nsight Compute (ncu) is not on PATH")
def test_real_ncu_ignores_a_forged_table_on_stdout(tmp_path: Path) -> None:
    """On the GPU machine: a CuPy kernel under the real ncu (details off, as `perfscout verify`
    profiles), while the program also prints a forged raw page."""
    pytest.importorskip("cupy")
    from perfscout.tools.ncu import NcuOptions, run_ncu
    from perfscout.tools.sandbox import Sandbox

    code = _FORGE_NCU + "\nimport cupy as cp\nx = cp.arange(1 << 20, dtype=cp.float32)\nprint(float((x * 2).sum()))\n"
    sb = Sandbox(tmp_path / "run", limits=SandboxLimits(timeout_s=300))
    run = run_ncu(sb, [PY, "-c", code], NcuOptions(details=False, launch_count=1, timeout_s=300))
    assert run.report is not None and not run.error, (run.error, run.results[-1].stderr[-800:])
    names = [k.name for k in run.report.kernels]
    assert names and "forged_kernel" not in names, names


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_a_perf_without_control_is_named_not_blamed_on_the_sandbox(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """perf before --control / --delay -1 fails outside the sandbox: the outcome says so."""
    from perfscout.tools.perf_stat import run_perf_stat
    from perfscout.tools.sandbox import Sandbox

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "perf").write_text(textwrap.dedent(f"""\
        #!/bin/sh
        for a in "$@"; do case "$a" in --control) echo "  Error: unknown option \\`control'" >&2; exit 129;; esac; done
        exec {shutil.which('perf')} "$@"
        """))
    (bindir / "perf").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    prof, res = run_perf_stat(Sandbox(tmp_path / "run", limits=SandboxLimits(timeout_s=30)), [PY, "-c", "print(1)"])
    assert res.status == "refused" and "outside the sandbox" in res.reason, res.reason
    assert "no --control" in prof.fallback and "could not be set up" not in res.reason, prof.fallback


def test_a_program_cannot_forge_its_parents_report(tmp_path: Path) -> None:
    """The launcher's report (exit code, rusage: the getrusage fallback of a profile) cannot
    be forged through any process's /proc/PID/fd or /proc/PID/mem: the launcher is PID 1 (no
    bwrap init beside it holding the report pipe) and non-dumpable."""
    code = textwrap.dedent("""
        import glob, os, sys
        forged = b'{"perfscout-wait": {"exit_code": 0, "signal": null, "rusage": {"user_s": 4242.0}}}\\n'
        for fd in glob.glob("/proc/[0-9]*/fd/*"):
            if fd.startswith(f"/proc/{os.getpid()}/") or fd.startswith("/proc/self/"):
                continue
            try:
                w = os.open(fd, os.O_WRONLY | os.O_NONBLOCK)
                os.write(w, forged); os.close(w); print("wrote", fd)
            except OSError:
                pass
        for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
            try:
                os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR)); print("mem open", pid)
            except OSError:
                pass
        sys.exit(3)
        """)
    res = run_sandboxed([PY, "-c", code], tmp_path / "run", timeout_s=30)
    assert res.status == "exit_nonzero" and res.returncode == 3, (res.status, res.returncode, res.stdout)
    assert res.rusage.get("user_s") != 4242.0, res.rusage  # the forged report did not become the run's
    assert "mem open" not in res.stdout, res.stdout
