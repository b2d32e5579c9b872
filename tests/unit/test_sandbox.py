"""The sandbox against a corpus of hostile inputs, and its limits against real processes."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfscout.errors import ToolRefused
from perfscout.tools.bwrap import probe_bwrap
from perfscout.tools.sandbox import Sandbox, SandboxLimits

PY = sys.executable
_BWRAP = probe_bwrap()
#: Tests of the confinement itself; the argv rules and limits are tested everywhere.
needs_bwrap = pytest.mark.skipif(not _BWRAP.usable, reason=f"bubblewrap cannot run here: {_BWRAP.reason}")


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    return d


@pytest.fixture()
def sentinel(tmp_path: Path) -> Path:
    """A file outside the run directory that no refused command may touch."""
    f = tmp_path / "outside" / "sentinel.txt"
    f.parent.mkdir()
    f.write_text("intact")
    return f


@pytest.fixture()
def sb(run_dir: Path) -> Sandbox:
    # Where bubblewrap cannot run, the argv rules and the limits are still tested, unconfined.
    return Sandbox(run_dir, limits=SandboxLimits(timeout_s=20), unconfined=not _BWRAP.usable)


def script(run_dir: Path, name: str, body: str) -> str:
    (run_dir / name).write_text(textwrap.dedent(body))
    return name


def _alive(pid: int) -> bool:
    """Running (not a zombie waiting for a reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _host_processes_with(token: str) -> list[int]:
    """Host pids whose command line holds ``token`` (zombies excluded)."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            if token.encode() in (p / "cmdline").read_bytes() and _alive(int(p.name)):
                found.append(int(p.name))
        except OSError:
            continue
    return found


def _wait_gone(token: str, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while _host_processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _host_processes_with(token)


# ---- refusals: every argument naming a path outside is refused before anything runs ----

HOSTILE_ARGUMENTS = [
    "nul\x00byte",
    "../../etc/passwd",
    "../outside/sentinel.txt",
    "/etc/passwd",
    "{sentinel}",
    "--output={sentinel}",
    "--log=../../etc/shadow",
    "~/.ssh/id_rsa",
    "-o/etc/passwd",
    "-o../../etc/passwd",
    "-I{sentinel_dir}",
    "if={sentinel}",
    "@{sentinel}",
    "@../../etc/passwd",
    "of=../outside/new_file",
    "file:/etc/passwd",
    "regex:x,/etc/shadow",
]


@pytest.mark.parametrize("template", HOSTILE_ARGUMENTS)
def test_hostile_argument_is_refused_and_nothing_runs(sb: Sandbox, run_dir: Path, sentinel: Path,
                                                       template: str) -> None:
    arg = template.format(sentinel=sentinel, sentinel_dir=sentinel.parent)
    marker = script(run_dir, "touch_marker.py", "open('ran', 'w').write('x')\n")
    res = sb.run([PY, marker, arg])
    assert res.status == "refused", (arg, res)
    assert res.reason
    assert not (run_dir / "ran").exists()
    assert sentinel.read_text() == "intact"


# ---- data that only a shell would act on is passed verbatim, and is inert --------------

INERT_DATA = [
    "; rm -rf {sentinel_dir}",
    "x; rm -rf {sentinel_dir}",
    "$(rm -rf {sentinel_dir})",
    "`rm -rf {sentinel_dir}`",
    "${{HOME}}",
    "ok\nrm -rf {sentinel_dir}",
    "ok\rrm",
    "./a|b",
    "./x&&y",
    "./x>y",
    "./*",
    "./$HOME",
    "import os; os.system('rm -rf {sentinel_dir}')",
    "print(open('{sentinel}').read())",
]


@pytest.mark.parametrize("template", INERT_DATA)
def test_shell_syntax_is_data_passed_verbatim(sb: Sandbox, run_dir: Path, sentinel: Path,
                                              template: str) -> None:
    arg = template.format(sentinel=sentinel, sentinel_dir=sentinel.parent)
    echo = script(run_dir, "echo_arg.py", "import sys; open('got', 'w').write(sys.argv[1])\n")
    res = sb.run([PY, echo, arg])
    assert res.status == "ok", res.reason
    assert (run_dir / "got").read_bytes() == arg.encode()  # exactly one argv element, unchanged
    assert sentinel.read_text() == "intact"


def test_semicolons_in_python_code_run(sb: Sandbox, run_dir: Path) -> None:
    """The issue's case: ``;`` inside one ``python3 -c`` element is code, not shell."""
    res = sb.run([PY, "-c", "import sys; x = 6; print(x * 7); sys.exit(0)"])
    assert res.status == "ok", res.reason
    assert res.stdout.strip() == "42"
    res = sb.run([PY, "-c", "a = 1\nb = 2\nprint(a + b)"])
    assert res.ok and res.stdout.strip() == "3"


def test_code_naming_an_outside_file_is_stopped_by_the_confinement(sb: Sandbox, sentinel: Path) -> None:
    """``print(open('/x').read())`` is data to the argv rules; the mount view stops it."""
    res = sb.run([PY, "-c", f"print(open({str(sentinel)!r}).read())"])
    if res.confinement.mode != "bwrap":
        pytest.skip(f"no bubblewrap here: {res.reason}")
    assert res.status == "exit_nonzero" and "FileNotFoundError" in res.stderr
    assert "intact" not in res.stdout


@pytest.mark.parametrize("arg", [
    "-e", "--set", "full", "regex:vec_add|strided", "cycles,instructions,task-clock",
    "cpu_core/cycles/", "-o./out.csv", "--output=./out.csv", "-c", "3", "1.5", ".5", "x=1",
])
def test_ordinary_arguments_pass(sb: Sandbox, arg: str) -> None:
    res = sb.run(["true", arg])
    assert res.status == "ok", res.reason


def test_symlink_escaping_the_run_dir_is_refused(sb: Sandbox, run_dir: Path, sentinel: Path) -> None:
    (run_dir / "innocent.txt").symlink_to(sentinel)
    res = sb.run(["true", "./innocent.txt"])
    assert res.status == "refused"
    assert str(sentinel) in res.reason


def test_bare_name_symlink_escaping_the_run_dir_is_refused(sb: Sandbox, run_dir: Path, sentinel: Path) -> None:
    """A bare word that is a link in the working directory is a path too (issue 12)."""
    (run_dir / "innocent").symlink_to(sentinel)
    res = sb.run(["true", "innocent"])
    assert res.status == "refused" and str(sentinel) in res.reason
    (run_dir / "inside").symlink_to(run_dir / "data.txt")
    assert sb.run(["true", "inside"]).ok  # a link that stays inside is fine
    assert sb.run(["true", "plainword"]).ok


@pytest.mark.parametrize("argv", [
    "true; rm -rf /",  # a shell string, not an argv list
    [],
    ["bash", "-c", "id"],
    ["/bin/sh", "-c", "id"],
    ["rm", "-rf", "x"],
    ["true;id"],
    ["../../bin/true"],
])
def test_commands_off_the_allowlist_are_refused(sb: Sandbox, argv) -> None:
    res = sb.run(argv)
    assert res.status == "refused"


def test_wrapped_command_is_validated_too(sb: Sandbox) -> None:
    res = sb.run(["bash", "-c", "id"], wrap=["true"])
    assert res.status == "refused" and "allowlist" in res.reason
    res = sb.run(["true"], wrap=["true", "/etc/passwd"])
    assert res.status == "refused"


def test_environment_values_with_injection_are_refused(sb: Sandbox) -> None:
    res = sb.run(["true"], env={"X": "a\nb"})
    assert res.status == "refused"


def test_environment_values_naming_outside_paths_are_refused(sb: Sandbox, sentinel: Path) -> None:
    # The loader would map a library from outside the run directory into the child.
    res = sb.run(["true"], env={"LD_PRELOAD": str(sentinel)})
    assert res.status == "refused" and str(sentinel) in res.reason
    assert sb.run(["true"], env={"OMP_NUM_THREADS": "4"}).ok


def test_resolve_and_register(sb: Sandbox, run_dir: Path) -> None:
    with pytest.raises(ToolRefused):
        sb.resolve_executable("bash")
    with pytest.raises(ToolRefused):
        sb.register("definitely-not-a-program-here")
    assert Path(sb.register("bash")).is_absolute()
    res = sb.run(["bash", "--version"])
    assert res.status == "ok" and res.argv[0].startswith("/")


# ---- what is allowed runs, confined ----------------------------------------------------

def test_paths_inside_run_dir_and_declared_inputs_are_allowed(sb: Sandbox, run_dir: Path,
                                                              sentinel: Path) -> None:
    s = script(run_dir, "cat.py", "import sys; print(open(sys.argv[1]).read())\n")
    (run_dir / "data.txt").write_text("inside")
    res = sb.run([PY, s, "./data.txt"])
    assert res.status == "ok" and res.stdout.strip() == "inside"
    assert sb.run([PY, s, str(sentinel)]).status == "refused"
    sb.declare_input(sentinel)
    res = sb.run([PY, s, str(sentinel)])
    assert res.status == "ok" and res.stdout.strip() == "intact"


def test_the_filesystem_root_cannot_be_declared_an_input(run_dir: Path) -> None:
    with pytest.raises(ToolRefused, match="every path"):
        Sandbox(run_dir, inputs=["/"])
    sb = Sandbox(run_dir)
    with pytest.raises(ToolRefused):
        sb.declare_input("/etc/..")


def test_environment_is_scrubbed(sb: Sandbox, run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSCOUT_TEST_SECRET_TOKEN", "hunter2")
    s = script(run_dir, "env.py", "import os, json; print(json.dumps(dict(os.environ)))\n")
    res = sb.run([PY, s], env={"EXTRA_OK": "1"})
    assert res.status == "ok"
    import json

    env = json.loads(res.stdout)
    assert "PERFSCOUT_TEST_SECRET_TOKEN" not in env
    assert env["LC_ALL"] == "C" and env["EXTRA_OK"] == "1" and "PATH" in env


def test_interpreter_keeps_its_environment(sb: Sandbox, run_dir: Path) -> None:
    """sys.executable runs under its own name: a venv's python keeps its site-packages."""
    s = script(run_dir, "prefix.py", "import sys; print(sys.prefix)\n")
    res = sb.run([PY, s])
    assert res.status == "ok" and res.stdout.strip() == sys.prefix
    assert res.argv[0] == os.path.abspath(PY)


def test_a_symlink_to_an_unlisted_program_is_refused(sb: Sandbox, run_dir: Path) -> None:
    import shutil

    (run_dir / "innocent").symlink_to(shutil.which("bash"))
    res = sb.run(["./innocent", "-c", "id"])
    assert res.status == "refused" and "allowlist" in res.reason


def test_exit_codes_and_crashes_are_typed(sb: Sandbox, run_dir: Path) -> None:
    res = sb.run([PY, script(run_dir, "exit3.py", "import sys; sys.exit(3)\n")])
    assert (res.status, res.returncode) == ("exit_nonzero", 3)
    res = sb.run([PY, script(run_dir, "segv.py", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)\n")])
    assert res.status == "crashed" and res.signal == "SIGSEGV"
    res = sb.run([PY, script(run_dir, "ok.py", "print('hi')\n")])
    assert res.ok and res.stdout == "hi\n" and res.rusage["user_s"] >= 0


# ---- limits ------------------------------------------------------------------------------

def test_sleep_forever_is_killed_with_its_grandchildren(sb: Sandbox, run_dir: Path) -> None:
    token = f"perfscout-sleeper-{os.getpid()}-{time.monotonic_ns()}"
    s = script(run_dir, "sleeper.py", f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(1)", "{token}"])
        open("started", "w").write("yes")
        while True:
            time.sleep(1)
        """)
    res = sb.run([PY, s, token], limits=SandboxLimits(timeout_s=2))
    assert res.status == "timed_out" and "killed" in res.reason
    assert (run_dir / "started").exists()
    assert _wait_gone(token), "a grandchild survived the timeout"


def test_fork_bomb_is_contained(sb: Sandbox, run_dir: Path) -> None:
    # The bomb caps itself at 150 forks so that, should both the pids cgroup and
    # RLIMIT_NPROC be unavailable (root without a writable cgroup), a test failure can
    # never take the shared machine down.
    token = f"perfscout-bomb-{os.getpid()}-{time.monotonic_ns()}"
    s = script(run_dir, "bomb.py", """
        import os, time
        made = refused = 0
        for _ in range(150):
            try:
                if os.fork() == 0:
                    while True:
                        time.sleep(1)
                made += 1
            except OSError:
                refused += 1
                break
        open("forks", "w").write(f"{made} {refused}")
        while True:
            time.sleep(1)
        """)
    res = sb.run([PY, s, token], limits=SandboxLimits(timeout_s=3, processes=32))
    assert res.status == "timed_out"
    made, refused = map(int, (run_dir / "forks").read_text().split())
    capped = os.geteuid() != 0 or res.confinement.limits["processes"].startswith("cgroup")
    if capped:
        assert refused == 1 and made < 32, (made, res.confinement.limits)
    assert _wait_gone(token), "processes of the bomb survived"


def test_huge_output_is_capped_keeping_the_tail(sb: Sandbox, run_dir: Path) -> None:
    s = script(run_dir, "flood.py", """
        import sys
        line = "x" * 1023 + "\\n"
        for _ in range(50 * 1024):
            sys.stdout.write(line)
        sys.stdout.write("THE END\\n")
        sys.stderr.write("e" * 300000)
        """)
    cap = 64 * 1024
    res = sb.run([PY, s], limits=SandboxLimits(timeout_s=30, output_cap_bytes=cap))
    assert res.status == "ok"
    assert res.stdout_truncated and res.stderr_truncated
    assert len(res.stdout.encode()) <= cap and res.stdout.endswith("THE END\n")
    assert res.stdout_bytes == 50 * 1024 * 1024 + len("THE END\n")
    assert res.stderr_bytes == 300000 and len(res.stderr) == cap


def test_cpu_time_limit(sb: Sandbox, run_dir: Path) -> None:
    s = script(run_dir, "spin.py", "while True:\n    pass\n")
    res = sb.run([PY, s], limits=SandboxLimits(timeout_s=30, cpu_seconds=1))
    assert res.status == "killed_by_limit" and "CPU" in res.reason
    assert res.signal in ("SIGXCPU", "SIGKILL")


def test_address_space_limit(sb: Sandbox, run_dir: Path) -> None:
    s = script(run_dir, "hog.py", "b = bytearray(4 * 1024**3)\n")
    res = sb.run([PY, s], limits=SandboxLimits(timeout_s=30, address_space_bytes=512 * 2**20))
    assert res.status == "killed_by_limit" and "address space" in res.reason


def test_file_size_limit(sb: Sandbox, run_dir: Path) -> None:
    s = script(run_dir, "big.py", "open('big.bin', 'wb').write(b'0' * (8 * 1024 * 1024))\n")
    res = sb.run([PY, s], limits=SandboxLimits(timeout_s=30, file_size_bytes=1024 * 1024))
    assert res.status == "killed_by_limit" and "file size" in res.reason
    assert (run_dir / "big.bin").stat().st_size <= 1024 * 1024


def test_open_files_limit(sb: Sandbox, run_dir: Path) -> None:
    s = script(run_dir, "fds.py", "fs = [open('fds.py') for _ in range(500)]\n")
    res = sb.run([PY, s], limits=SandboxLimits(timeout_s=30, open_files=64))
    assert res.status == "killed_by_limit" and "open files" in res.reason


def test_limit_the_kernel_refuses_is_a_refusal_not_an_exception(sb: Sandbox) -> None:
    # setrlimit raises in the child between fork and exec; Popen reports that as a
    # SubprocessError, which must come back as a result like every other refusal.
    res = sb.run(["true"], limits=SandboxLimits(timeout_s=10, open_files=-3))
    assert res.status == "refused" and "could not start" in res.reason


def test_signal_names_in_results(sb: Sandbox, run_dir: Path) -> None:
    s = script(run_dir, "term.py", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)\n")
    res = sb.run([PY, s])
    assert res.status == "crashed" and res.signal == signal.Signals.SIGTERM.name


# ---- the confinement's view ------------------------------------------------------------------

@needs_bwrap
def test_a_registered_program_brings_its_installation(tmp_path: Path, run_dir: Path) -> None:
    """A tool installed outside the system (pyenv, conda, a build prefix) needs its own
    prefix readable, e.g. ``~/.pyenv/shims/python3`` runs ``~/.pyenv/libexec/pyenv``."""
    prefix = tmp_path / "opt-tool"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "share").mkdir()
    (prefix / "share" / "data.txt").write_text("from the prefix")
    tool = prefix / "bin" / "tool"
    tool.write_text("#!/bin/sh\ncat \"$(dirname \"$0\")/../share/data.txt\"\n")
    tool.chmod(0o755)
    sb = Sandbox(run_dir, executables=[str(tool)], limits=SandboxLimits(timeout_s=20))
    res = sb.run([str(tool)])
    if res.confinement.mode != "bwrap":
        pytest.skip(f"no bubblewrap here: {res.reason}")
    assert res.ok and res.stdout == "from the prefix", (res.reason, res.stderr)
    assert str(prefix) in res.confinement.readable


@needs_bwrap
def test_a_program_in_the_working_directory_exposes_nothing_more(tmp_path: Path) -> None:
    work, run = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    (tmp_path / "secret.txt").write_text("nope")
    prog = work / "prog"
    prog.write_text(f"#!/bin/sh\ncat {tmp_path / 'secret.txt'} 2>&1\n")
    prog.chmod(0o755)
    sb = Sandbox(run, inputs=[work], cwd=work, executables=["./prog"], limits=SandboxLimits(timeout_s=20))
    res = sb.run(["./prog"])
    if res.confinement.mode != "bwrap":
        pytest.skip(f"no bubblewrap here: {res.reason}")
    assert "nope" not in res.stdout and "No such file" in res.stdout
    assert str(tmp_path) not in res.confinement.readable


def test_unconfined_runs_are_marked(run_dir: Path) -> None:
    sb = Sandbox(run_dir, unconfined=True, limits=SandboxLimits(timeout_s=20))
    res = sb.run(["true"])
    assert res.ok and res.confinement.mode == "unconfined"
    assert res.confinement.warning.startswith("UNCONFINED")


def test_refusal_without_bwrap_names_the_fix(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSCOUT_BWRAP", str(run_dir / "no-bwrap"))
    res = Sandbox(run_dir, limits=SandboxLimits(timeout_s=20)).run(["true"])
    assert res.status == "refused" and "apt-get install bubblewrap" in res.reason
    assert "--unconfined" in res.reason
    # perfscout's own probes may fall back, and say so
    res = Sandbox(run_dir, allow_unconfined_fallback=True).run(["true"])
    assert res.ok and res.confinement.mode == "unconfined" and "bubblewrap" in res.confinement.warning


@needs_bwrap
def test_run_sandboxed_api(tmp_path: Path) -> None:
    from perfscout.tools.sandbox import run_sandboxed

    run = tmp_path / "r"
    res = run_sandboxed([PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                        run, timeout_s=20, memory_mb=512)
    assert res.status == "exit_nonzero" and res.returncode == 3 and not res.timed_out
    assert Path(res.stdout_path).read_text() == "out\n" and Path(res.stderr_path).read_text() == "err\n"
    assert "memory" in res.confinement.limits
    res = run_sandboxed([PY, "-c", "import time; time.sleep(30)"], run, timeout_s=1)
    assert res.timed_out and res.signal == "SIGKILL"
    assert run_sandboxed("true; id", run).status == "refused"
    assert run_sandboxed(["true"], run, readable=["/"]).status == "refused"
    assert run_sandboxed(["no-such-program-xyz"], run).status == "refused"


@needs_bwrap
def test_memory_cap_stops_a_hog(tmp_path: Path) -> None:
    from perfscout.tools.sandbox import run_sandboxed

    res = run_sandboxed([PY, "-c", "b = bytearray(2 * 1024**3); b[::4096] = b'x' * len(b[::4096])"],
                        tmp_path / "r", timeout_s=60, memory_mb=256)
    assert res.status == "killed_by_limit" and "memory" in res.reason, (res.reason, res.stderr[-300:])


# ---- any argv: passed verbatim or refused for a named reason; never touches the outside -------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PIECES = st.sampled_from(["/", "..", ".", "~", ";", "$(", "`", "'", '"', "|", "&", ">", "@", "=",
                           ":", ",", "-o", "--out=", " ", "\n", "etc", "passwd", "x", "*", "{", "}"])
_ARG = st.one_of(st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=30),
                 st.lists(_PIECES, max_size=8).map("".join))


@needs_bwrap
@settings(max_examples=40, deadline=None)
@given(args=st.lists(_ARG, min_size=1, max_size=4))
def test_any_argv_is_verbatim_or_refused_with_a_reason(tmp_path_factory, args) -> None:
    base = tmp_path_factory.mktemp("argv")
    run = base / "run"
    run.mkdir()
    outside = base / "outside.txt"
    outside.write_text("intact")
    (run / "echo.py").write_text("import json, sys; open('got.json', 'w').write(json.dumps(sys.argv[1:]))\n")
    res = Sandbox(run, limits=SandboxLimits(timeout_s=20)).run([PY, "echo.py", *args])
    if res.status == "refused":
        assert "outside the run directory" in res.reason or "NUL" in res.reason, res.reason
        assert not (run / "got.json").exists()
    else:
        assert res.status == "ok", (res.reason, res.stderr[-300:])
        import json

        assert json.loads((run / "got.json").read_text()) == args  # one element each, unchanged
    assert outside.read_text() == "intact"


def test_perfscouts_own_package_holds_nothing_the_content_scan_masks() -> None:
    """The content patterns are written in pieces: perfscout's own modules (bound into every
    sandbox with the project tree) must never be masked as secrets."""
    import perfscout
    from perfscout.tools.secret_mask import vet_tree

    v = vet_tree(Path(perfscout.__file__).parent)
    assert not v.too_large and v.scanned > 50, v
    assert not v.by_content and not v.by_link, (v.by_content, v.by_link)


def test_content_scan_finds_keys_and_tokens_but_not_prose(tmp_path: Path) -> None:
    from perfscout.tools.secret_mask import content_secrets

    d5 = "-" * 5
    cases = {
        "pem": (f"{d5}BEGIN EC PRIVATE KEY{d5}\nMHcCAQEE\n", "private key"),
        "pgp": (f"{d5}BEGIN PGP PRIVATE KEY BLOCK{d5}\n", "private key"),
        "pkcs8": (f"x\n{d5}BEGIN ENCRYPTED PRIVATE KEY{d5}\n", "private key"),
        "aws": ("aws_secret_" + "access_key=abcdEFGHijklMNOPqrstUVWXyz0123456789ABCD\n", "AWS"),
        "url": ("url = https://bob:" + "hunter22secret@git.example.org/x.git\n", "URL"),
        "pg": ("DSN=postgresql://app:" + "s3cr3tpass@db:5432/app\n", "URL"),
        "tok": ("token: ghp_" + "A" * 36 + "\n", "token"),
        "public": (f"{d5}BEGIN PUBLIC KEY{d5}\nMFkw\n", ""),
        "prose": ("set aws_secret_access_key in your env; see https://github.com/org/repo\n", ""),
        "sshurl": ("git@github.com:org/repo.git and https://user@host/x\n", ""),
    }
    for name, (text, want) in cases.items():
        (tmp_path / name).write_text(text)
        ((why, n),) = content_secrets([tmp_path / name])
        assert (want in why) if want else why == "", (name, why)
        assert n == len(text.encode())


def test_vetting_a_folder_keeps_the_locks_of_a_store_this_process_has_open(tmp_path: Path) -> None:
    """The content scan reads files' heads out of process: an open and close of a store's
    file here would drop this process's POSIX locks on it, and another process's close would
    then checkpoint and delete the WAL this one still writes into (the sweep whose results
    went to a deleted file while a poller opened its store)."""
    import subprocess
    import sys

    from perfscout.tools.results_store import ResultStore
    from perfscout.tools.secret_mask import vet_tree

    path = tmp_path / "run" / "results.sqlite"
    other = ("import sys; from perfscout.tools.results_store import ResultStore\n"
             "with ResultStore(sys.argv[1]) as s: print(s.get_meta(sys.argv[2]))\n")
    root = str(Path(__file__).resolve().parents[2])
    with ResultStore(path) as store:
        store.set_meta("k0", "before")
        v = vet_tree(tmp_path)
        assert v.scanned >= 1 and not v.too_large, v  # the store's file was looked at
        env = {**__import__("os").environ, "PYTHONPATH": root}

        def seen_by_another_process(key: str) -> str:
            return subprocess.run([sys.executable, "-c", other, str(path), key], check=True, timeout=60, env=env,
                                  capture_output=True, text=True).stdout.strip()

        assert seen_by_another_process("k0") == "before"
        store.set_meta("k1", "after")  # into the WAL: it must still be the file's WAL
        assert seen_by_another_process("k1") == "after"  # committed means visible, while the writer runs


def test_a_head_reader_that_cannot_run_leaves_the_folder_unvetted(tmp_path: Path, monkeypatch) -> None:
    """No verdict from the child means unseen, never "seen clean": the folder counts as too
    large to vet (the sandbox then binds only the paths named)."""
    import sys

    from perfscout.tools.secret_mask import vet_tree

    (tmp_path / "notes.txt").write_text("nothing here\n")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    v = vet_tree(tmp_path)
    assert v.too_large and "0 of 1 read" in v.too_large, v
