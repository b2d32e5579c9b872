"""Runs inside the bubblewrap sandbox as the program's parent and reports how it ended.

Started as ``python -I -S sandbox_launcher.py FD -- PROGRAM ARGS...``. Two things cannot be
learnt from outside: bwrap folds "killed by signal N" into exit code 128 + N, and the
program's own resource usage is lost when bwrap's init exits before being reaped. So this
launcher forks, execs the program, waits for it with ``wait4`` and writes one JSON line
(``{"perfscout-wait": {...}}``) to FD, a pipe perfscout reads; the program never sees FD.
Standard library only, no ``site`` and no ``json``: it must start in milliseconds and
import nothing from the project (``ctypes``, ~4 ms, only to make itself non-dumpable).

It runs as the sandbox's PID 1 (``bwrap --as-pid-1``: no bwrap init beside the program
holding the report pipe, which ``/proc/1/fd/N`` would reopen; orphans are reaped here), makes
itself non-dumpable and closes every descriptor it was not told to keep before
the program starts, so a program (same uid, same PID namespace) can neither patch its
memory (``/proc/1/mem``, ``process_vm_writev``, ``ptrace``) nor reopen what it holds. With
``--control-fd N`` (a profiler outside the sandbox: ``perf stat -D -1 --control``) the
child switches the counters on through N as its last step before ``exec`` and closes N
first: the counts cover the program and nothing of the sandbox's start.
"""

import os
import resource
import signal
import sys
import time


def _json(v) -> str:
    """JSON for the report's few types (bool before int: bool is an int)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f'"{k}": {_json(x)}' for k, x in v.items()) + "}"
    raise TypeError(type(v))


def _not_dumpable() -> bool:
    """PR_SET_DUMPABLE 0: the program (same uid, same PID namespace) can then neither open
    /proc/<launcher>/mem or /proc/<launcher>/fd nor use process_vm_writev or ptrace on it
    (the kernel refuses all of them for a non-dumpable process to anyone without
    CAP_SYS_PTRACE, which nothing in the sandbox has). The flag does not survive the
    program's exec, so the program itself is unaffected. ctypes costs ~4 ms here, before
    anything is counted."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE
    except (ImportError, OSError, AttributeError):
        return False


def _close_all_but(keep: set[int]) -> None:
    """Close every inherited descriptor but ``keep``: what bwrap or a profiler outside
    passed down (the profiler's end of its control socket among them) must not reach the
    program, nor stay open here for a program that hijacked this process."""
    last = -1
    for fd in sorted(keep) + [None]:
        hi = (fd if fd is not None else 1 << 20)
        if hi > last + 1:
            os.closerange(last + 1, hi)
        if fd is None:
            break
        last = fd


def main() -> None:
    fd = int(sys.argv[1])
    rest = sys.argv[2:]
    control = None
    if rest[:1] == ["--control-fd"] and len(rest) > 1:
        control, rest = int(rest[1]), rest[2:]
    if rest[:1] != ["--"] or len(rest) < 2:
        os.write(2, b"perfscout sandbox launcher: usage: FD [--control-fd N] -- PROGRAM [ARGS...]\n")
        os._exit(125)
    argv = rest[1:]
    dumpable = not _not_dumpable()
    _close_all_but({0, 1, 2, fd, *([control] if control is not None else [])})
    os.set_inheritable(fd, False)
    sync_r, sync_w = os.pipe()  # not inheritable: the program never holds either end
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(sync_w)
        # Python ignores SIGPIPE and SIGXFSZ; a program must start with the defaults
        # (as subprocess's restore_signals does). Before the counters go on: nothing but the
        # switch, one read and the exec is counted here.
        for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        exe = os.fsencode(argv[0])
        if control is not None:
            # The profiler runs outside the sandbox with its counters off (perf stat -D -1
            # --control): they are switched on here, as the last thing before the program's
            # exec, once the parent no longer holds the control socket, and the socket is
            # closed before the exec: nothing the program can reach holds it.
            os.read(sync_r, 1)
            os.close(sync_r)
            os.write(control, b"enable\n")
            said = os.read(control, 64)
            while said and b"ack\n" not in said:  # b"" : the profiler is gone; perfscout says so
                said += os.read(control, 64) or b"ack\n"
            os.close(control)
        else:
            os.close(sync_r)
        try:
            os.execv(exe, argv)
        except OSError as exc:
            os.write(2, f"perfscout sandbox: cannot execute {argv[0]}: {exc.strerror}\n".encode())
            os._exit(127)
    os.close(sync_r)
    if control is not None and dumpable:
        os.close(control)  # a process the program could patch must not hold it
        control = None
    # Non-dumpable, this process may keep the control socket to switch the counters off once
    # the program is gone (its report and exit are then not counted): the program can neither
    # patch its memory nor take its descriptors (see _not_dumpable; ptrace and pidfd_getfd are
    # refused by seccomp as well), and a socket cannot be reopened through /proc.
    os.close(sync_w)  # the child may go on
    # Signals meant for the run go to the program; the launcher just waits.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    while True:  # as PID 1 (bwrap --as-pid-1) orphans are reaped here too
        try:
            got, status, ru = os.wait4(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(125)
        if got == pid:
            break
    wall = time.monotonic() - started
    if control is not None:
        try:
            os.write(control, b"disable\n")
            said = os.read(control, 64)
            while said and b"ack\n" not in said:
                said += os.read(control, 64) or b"ack\n"
        except OSError:
            pass  # the profiler is gone: nothing left to switch off
        os.close(control)
    rlimits = {}
    for name in ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_FSIZE"):
        soft = resource.getrlimit(getattr(resource, name))[0]
        rlimits[name] = -1 if soft == resource.RLIM_INFINITY else soft
    report = {
        "rlimits": rlimits,
        "wall_s": wall,  # fork to reap: the program's own wall time
        "dumpable": dumpable,  # as the program's parent saw them, inside the sandbox
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "core_dumped": bool(os.WIFSIGNALED(status) and os.WCOREDUMP(status)),
        "rusage": {"user_s": ru.ru_utime, "system_s": ru.ru_stime, "max_rss_kib": float(ru.ru_maxrss),
                   "minor_faults": float(ru.ru_minflt), "major_faults": float(ru.ru_majflt),
                   "voluntary_ctx_switches": float(ru.ru_nvcsw),
                   "involuntary_ctx_switches": float(ru.ru_nivcsw)},
    }
    os.write(fd, ("{\"perfscout-wait\": " + _json(report) + "}\n").encode())
    os.close(fd)
    if report["signal"] is not None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the program's crash, not ours
        try:
            signal.signal(report["signal"], signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP cannot be handled anyway
            pass
        os.kill(os.getpid(), report["signal"])
        os._exit(128 + report["signal"])
    os._exit(report["exit_code"] or 0)


if __name__ == "__main__":
    main()
