"""The escape corpus (issue 12): hostile programs run for real under bubblewrap.

Every case asserts on the host, not on the program's exit status alone: the files outside
the run directory are byte-for-byte what they were, the host's /tmp and $HOME gained
nothing, no process of the run is left, the listening socket saw no connection. The
issue's own five cases go through the real ``perfscout profile`` command line; the others
through :func:`perfscout.tools.sandbox.run_sandboxed`, the API other parts call.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfscout.tools.bwrap import perfscout_source_root, probe_bwrap
from perfscout.tools.sandbox import SandboxLimits, run_sandboxed

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

_PROBE = probe_bwrap()
pytestmark = pytest.mark.skipif(not _PROBE.usable, reason=f"bubblewrap cannot run here: {_PROBE.reason}")


# ---- the host, observed ---------------------------------------------------------------------

def tree_state(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a digest of what it is (content, link target)."""
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                state[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                state[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                state[rel] = "dir"
    return state


def host_processes_with(token: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            if token.encode() not in (p / "cmdline").read_bytes():
                continue
            state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(p.name))
    return found


def assert_no_process_left(token: str, within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while host_processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_with(token) == [], f"processes of the run outlived it: {token}"


@pytest.fixture()
def token() -> str:
    return f"perfscout-escape-{os.getpid()}-{time.monotonic_ns()}"


@pytest.fixture()
def host(tmp_path: Path, token: str):
    """run/ (the only writable place), work/ (the program's read-only cwd), outside/
    (must stay untouched), and a check of all three plus the host's /tmp and $HOME."""
    run, work, outside = tmp_path / "run", tmp_path / "work", tmp_path / "outside"
    for d in (run, work, outside):
        d.mkdir()
    (outside / "secret.txt").write_text(f"TOP-SECRET-{token}")
    (outside / "victim.txt").write_text("intact")
    (work / "input.txt").write_text("read me")
    home = Path(os.path.expanduser("~"))
    before = {"outside": tree_state(outside), "work": tree_state(work),
              "parent": sorted(p.name for p in tmp_path.iterdir() if p.name != "home")}

    class Host:
        def __init__(self) -> None:
            self.run, self.work, self.outside, self.tmp = run, work, outside, tmp_path

        def run_prog(self, argv, **kw):
            kw.setdefault("timeout_s", 30)
            kw.setdefault("readable", [work])
            kw.setdefault("cwd", work)
            return run_sandboxed(argv, run, **kw)

        def settled(self) -> None:
            """The test's own setup is done: what is there now is the baseline."""
            before["outside"], before["work"] = tree_state(outside), tree_state(work)

        def assert_untouched(self) -> None:
            assert tree_state(outside) == before["outside"], "a file outside the run directory changed"
            assert tree_state(work) == before["work"], "the read-only working directory changed"
            # (home/ is PERFSCOUT_HOME, where perfscout itself stores runs)
            assert sorted(p.name for p in tmp_path.iterdir() if p.name != "home") == before["parent"]
            assert not list(Path("/tmp").glob(f"*{token}*")), "the host's /tmp gained a file"
            assert not list(home.glob(f"*{token}*")), "the host's $HOME gained a file"
            assert_no_process_left(token)

    yield Host()


def perfscout_cli(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFSCOUT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [PY, "-c", "import sys; from perfscout.cli import main; main(sys.argv[1:])", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def profiled(r: subprocess.CompletedProcess[str]) -> dict:
    assert "Traceback" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    assert doc["confinement"]["mode"] == "bwrap", doc["confinement"]
    return doc


# ---- the five escapes, through `perfscout profile` ------------------------------------

def test_sh_cd_parent_and_touch_stays_inside(host, perfscout_home: Path) -> None:
    r = perfscout_cli("profile", "--json", "--", "sh", "-c", "cd .. && touch X; touch ../../X Y; echo done",
                      cwd=host.work, home=perfscout_home)
    doc = profiled(r)
    assert doc["status"] in ("ok", "exit_nonzero")
    assert not (host.tmp / "X").exists() and not (host.tmp.parent / "X").exists()
    assert not (host.work / "Y").exists()
    host.assert_untouched()


def test_python_one_liner_cannot_read_etc_shadow(host, perfscout_home: Path) -> None:
    code = ("import glob\nfor p in ['/etc/shadow', '/etc/gshadow', *glob.glob('/etc/ssh/*key')]:\n"
            "    try: print(open(p).read())\n    except OSError as e: print('denied', p, e.errno)\n")
    r = perfscout_cli("profile", "--json", "--", PY, "-c", code, cwd=host.work, home=perfscout_home)
    doc = profiled(r)
    out = (Path(doc["run_dir"]) / "program.stdout").read_text()
    assert out.count("denied") >= 2
    if os.path.exists("/etc/shadow"):
        first = Path("/etc/shadow").read_text().splitlines()[0]
        assert first not in out and first not in r.stdout
    host.assert_untouched()


def test_bare_name_symlink_is_not_followed(host, perfscout_home: Path, token: str) -> None:
    (host.work / "innocent").symlink_to(host.outside / "secret.txt")
    host.settled()
    # As an argument it is refused before anything runs (exit 2) ...
    r = perfscout_cli("profile", "--json", "--", "cat", "innocent", cwd=host.work, home=perfscout_home)
    assert r.returncode == 2 and "outside the run directory" in r.stderr.replace("\n", " ")
    # ... and inside code, where no rule sees it, the sandbox's view has no such target.
    r = perfscout_cli("profile", "--json", "--", "sh", "-c", "cat innocent; cat ./innocent",
                      cwd=host.work, home=perfscout_home)
    doc = profiled(r)
    run_dir = Path(doc["run_dir"])
    assert f"TOP-SECRET-{token}" not in (run_dir / "program.stdout").read_text() + r.stdout
    assert "No such file" in (run_dir / "program.stderr").read_text()
    host.assert_untouched()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_gcc_response_file_cannot_write_elsewhere(host, perfscout_home: Path) -> None:
    (host.work / "hello.c").write_text("int main(void) { return 0; }\n")
    target = host.outside / "pwned"
    (host.work / "resp").write_text(f"-o {target} hello.c\n")
    host.settled()
    r = perfscout_cli("profile", "--json", "--", "gcc", "@resp", cwd=host.work, home=perfscout_home)
    doc = profiled(r)
    assert doc["status"] == "exit_nonzero"  # gcc could not write its output
    assert not target.exists()
    host.assert_untouched()


def test_setsid_child_dies_with_the_run(host, perfscout_home: Path, token: str) -> None:
    code = textwrap.dedent(f"""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:  # a classic double-forked daemon
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", "{token}"])
            os._exit(0)
        print("parent leaves")
        """)
    r = perfscout_cli("profile", "--json", "--", PY, "-c", code, cwd=host.work, home=perfscout_home)
    doc = profiled(r)
    assert doc["status"] == "ok"
    assert_no_process_left(token)
    host.assert_untouched()


# ---- more escapes, through run_sandboxed ------------------------------------------------------

def test_writing_home_host_tmp_cwd_and_inputs_stays_private(host, token: str) -> None:
    code = textwrap.dedent(f"""
        import os
        home = os.path.expanduser("~")
        for p in [home + "/{token}", "/tmp/{token}", "/var/tmp/{token}", "/dev/shm/{token}",
                  "{host.work}/{token}", "{host.work}/input.txt", "{host.outside}/victim.txt",
                  "/etc/{token}", "/usr/{token}", "/{token}"]:
            try:
                with open(p, "w") as f:
                    f.write("escaped")
                print("wrote", p)
            except OSError as e:
                print("denied", p, e.strerror)
        """)
    res = host.run_prog([PY, "-c", code])
    assert res.status == "ok", res.stderr
    # $HOME, /tmp, /var/tmp and /dev/shm are private: writable, and gone afterwards.
    for denied in (f"{host.work}/input.txt", f"{host.outside}/victim.txt", f"/etc/{token}", f"/usr/{token}"):
        assert f"denied {denied}" in res.stdout, res.stdout
    assert not Path(f"/{token}").exists() and not Path(f"/var/tmp/{token}").exists()
    assert not Path(f"/dev/shm/{token}").exists()
    host.assert_untouched()


def test_no_network_to_a_host_port(host, token: str) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.setblocking(False)
    port = server.getsockname()[1]
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0{token}")
    abstract.listen(4)
    abstract.setblocking(False)
    code = textwrap.dedent(f"""
        import socket
        for family, addr in [(socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_UNIX, "\\0{token}")]:
            s = socket.socket(family, socket.SOCK_STREAM)
            s.settimeout(3)
            try:
                s.connect(addr)
                s.sendall(b"escaped")
                print("connected", addr)
            except OSError as e:
                print("refused", e.errno)
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=3)
            print("internet")
        except OSError as e:
            print("no internet", e.errno)
        """)
    try:
        res = host.run_prog([PY, "-c", code])
        for srv in (server, abstract):
            try:
                conn, _ = srv.accept()
                conn.close()
                pytest.fail("the sandboxed program reached a host socket")
            except BlockingIOError:
                pass
    finally:
        server.close()
        abstract.close()
    assert res.status == "ok", res.stderr
    assert "connected" not in res.stdout and "internet\n" not in res.stdout.replace("no internet", "")
    assert res.confinement.network is False
    host.assert_untouched()


def test_fork_bomb_is_bounded_by_the_process_limit(host, token: str) -> None:
    # Capped at 200 forks by itself so that a broken limit cannot take the machine down.
    code = textwrap.dedent("""
        import os, time
        made = 0
        try:
            for _ in range(200):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                made += 1
        except OSError as e:
            print("fork refused", e.errno)
        print("made", made)
        """)
    res = host.run_prog([PY, "-c", code, token], limits=SandboxLimits(processes=24), timeout_s=20)
    assert res.status == "ok", (res.reason, res.stderr)
    made = int(res.stdout.split("made")[1])
    if os.geteuid() != 0 or res.confinement.limits["processes"].startswith("cgroup"):
        assert "fork refused" in res.stdout and made < 24, (res.stdout, res.confinement.limits)
    # The parent exited at once: its sleeping children die with the PID namespace.
    assert_no_process_left(token)
    host.assert_untouched()


def test_huge_file_is_bounded_by_the_file_size_limit(host) -> None:
    code = "f = open('big.bin', 'wb')\nfor _ in range(64):\n    f.write(b'0' * 2**20)\n"
    res = host.run_prog([PY, "-c", code], cwd=host.run, limits=SandboxLimits(file_size_bytes=2**20))
    assert res.status == "killed_by_limit" and "file size" in res.reason
    assert (host.run / "big.bin").stat().st_size <= 2**20
    host.assert_untouched()


def test_the_projects_git_is_masked(host) -> None:
    git = perfscout_source_root() / ".git"
    if not git.exists():
        pytest.skip(f"{perfscout_source_root()} is not a git checkout")
    code = f"import os\np = {str(git)!r}\nprint(sorted(os.listdir(p)) if os.path.isdir(p) else open(p).read())\n"
    res = host.run_prog([PY, "-c", code])
    assert res.status == "ok", res.stderr
    assert "HEAD" not in res.stdout and "gitdir" not in res.stdout
    # the project itself stays readable (a benchmark may import perfscout)
    res = host.run_prog([PY, "-c", "import perfscout, sys; print(perfscout.__file__)"],
                        env={"PYTHONPATH": str(ROOT)})
    assert res.status == "ok", res.stderr
    host.assert_untouched()


def test_no_host_process_can_be_traced_or_signalled(host, token: str) -> None:
    victim = subprocess.Popen([PY, "-c", "import time; time.sleep(60)", token + "-victim"])
    try:
        code = textwrap.dedent(f"""
            import ctypes, os, signal
            libc = ctypes.CDLL(None, use_errno=True)
            r = libc.ptrace(16, {victim.pid}, 0, 0)  # PTRACE_ATTACH a host pid
            print("ptrace", r, ctypes.get_errno())
            try:
                os.kill({victim.pid}, signal.SIGKILL)
                print("killed a host process")
            except OSError as e:
                print("kill refused", e.errno)
            print("visible", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
            """)
        res = host.run_prog([PY, "-c", code], timeout_s=15)
        assert victim.poll() is None, "the sandboxed program killed a host process"
        tracer = [ln for ln in Path(f"/proc/{victim.pid}/status").read_text().splitlines()
                  if ln.startswith("TracerPid")][0]
        assert tracer.split()[1] == "0", tracer
        assert res.status == "ok", (res.reason, res.stderr)
        assert "killed a host process" not in res.stdout
        visible = json.loads(res.stdout.split("visible", 1)[1].strip())
        assert victim.pid not in visible and max(visible) < 100  # its own PID namespace
    finally:
        victim.kill()
        victim.wait()
    host.assert_untouched()


@pytest.mark.parametrize("target", ["1", "os.getppid()"])
def test_tracing_its_parents_only_stalls_the_run_until_its_limit(host, token: str, target: str) -> None:
    # PID 1 of the namespace is bwrap's init and the parent is perfscout's launcher, both
    # inside, with no capabilities: stopping them stalls the run, which the wall-clock
    # limit then ends, taking every process with it.
    code = f"import ctypes, os, time\nctypes.CDLL(None).ptrace(16, {target}, 0, 0)\ntime.sleep(30)\n"
    res = host.run_prog([PY, "-c", code, token], timeout_s=3)
    # the program sleeps 30 s under a 3 s limit: only the limit (or a crash) can have ended it
    assert res.status in ("timed_out", "crashed"), res.reason
    assert_no_process_left(token)
    host.assert_untouched()


def test_proc_root_links_lead_only_into_the_sandbox(host, token: str) -> None:
    code = textwrap.dedent(f"""
        import os
        hits = []
        for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self", "thread-self"]:
            for rel in ("root/etc/shadow", "root/{host.outside.relative_to('/')}/secret.txt",
                        "cwd/../outside/secret.txt", "root/../../etc/shadow"):
                try:
                    hits.append(open(f"/proc/{{pid}}/{{rel}}").read()[:40])
                except OSError:
                    pass
        print("hits", hits)
        p = "/proc/sys/kernel/perf_event_max_sample_rate"
        try:
            v = open(p).read()
            open(p, "w").write(v)
            print("sysctl written")
        except OSError as e:
            print("sysctl refused", e.errno)
        print("fds", sorted(os.listdir("/proc/self/fd")))
        """)
    res = host.run_prog([PY, "-c", code])
    assert res.status == "ok", res.stderr
    assert "hits []" in res.stdout, res.stdout
    assert "sysctl refused" in res.stdout
    assert "fds ['0', '1', '2', '3']" in res.stdout  # stdio and listdir's own: nothing inherited
    host.assert_untouched()


def test_links_planted_in_the_run_dir_are_not_followed_by_perfscout(host, perfscout_home: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """perfscout writes program.stdout, profile.json... after the program ran in that
    directory: a link the program left there must not turn into a write outside."""
    victim = host.outside / "victim.txt"
    code = textwrap.dedent(f"""
        import glob, os
        # its run directory: the newest under $PERFSCOUT_HOME/runs, the one writable place
        os.chdir(max(glob.glob(os.environ["PERFSCOUT_HOME"] + "/runs/*"), key=os.path.getmtime))
        for name in ("program.stdout", "program.stderr", "profile.json", "platform.json",
                     "command.json", "perf_stat.jsonl", "perf_stat.csv"):
            try:
                os.remove(name)
            except OSError:
                pass
            os.symlink({str(victim)!r}, name)
        print("planted")
        """)
    from perfscout.tools.profile import profile_command

    monkeypatch.chdir(host.work)
    out = profile_command([PY, "-c", code], tool="perf", timeout_s=30)
    run_dir = Path(out.run_dir)
    assert out.confinement is not None and out.confinement.mode == "bwrap"
    assert victim.read_text() == "intact"
    for name in ("program.stdout", "profile.json", "platform.json", "command.json"):
        assert not (run_dir / name).is_symlink() and (run_dir / name).is_file(), name
    assert (run_dir / "program.stdout").read_text().strip() == "planted", out.exit
    host.assert_untouched()
