"""Runs inside the bubblewrap sandbox as the program's parent and reports how it ended.

Started as ``python -I -S sandbox_launcher.py FD -- PROGRAM ARGS...``. Two things cannot be
learnt from outside: bwrap folds "killed by signal N" into exit code 128 + N, and the
program's own resource usage is lost when bwrap's init exits before being reaped. So this
launcher forks, execs the program, waits for it with ``wait4`` and writes one JSON line
(``{"perfscout-wait": {...}}``) to FD, a pipe perfscout reads; the program never sees FD.
Standard library only, no ``site``, not even ``json`` or ``ctypes``: it must start in
milliseconds and import nothing from the project. (The program could ptrace it, as the same
uid, and change the report: it would only lie about its own exit, which it controls anyway.)
"""

import os
import resource
import signal
import sys


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


#: The descriptor a profiler writes its output to (``perf stat --log-fd 9``): one digit, so
#: that ``/bin/sh``'s ``exec 9>&-`` can close it before the profiled program starts.
PROFILER_FD = 9


def main() -> None:
    fd = int(sys.argv[1])
    rest = sys.argv[2:]
    move = None
    if rest[:1] == ["--move-fd"] and len(rest) > 1:
        move, rest = int(rest[1]), rest[2:]
    if rest[:1] != ["--"] or len(rest) < 2:
        os.write(2, b"perfscout sandbox launcher: usage: FD [--move-fd N] -- PROGRAM [ARGS...]\n")
        os._exit(125)
    argv = rest[1:]
    os.set_inheritable(fd, False)
    if fd == PROFILER_FD:  # keep the report out of the profiler's way
        fd = os.dup(fd)
        os.close(PROFILER_FD)
    pid = os.fork()
    if pid == 0:
        if move is not None:  # the profiler's output channel, at the number it is told
            if move != PROFILER_FD:
                os.dup2(move, PROFILER_FD)
                os.close(move)
            os.set_inheritable(PROFILER_FD, True)
        # Python ignores SIGPIPE and SIGXFSZ; a program must start with the defaults
        # (as subprocess's restore_signals does).
        for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        try:
            os.execv(argv[0], argv)
        except OSError as exc:
            os.write(2, f"perfscout sandbox: cannot execute {argv[0]}: {exc.strerror}\n".encode())
            os._exit(127)
    if move is not None:
        os.close(move)  # only the profiler holds it now
    # Signals meant for the run go to the program; the launcher just waits.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    while True:
        try:
            _, status, ru = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    rlimits = {}
    for name in ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_FSIZE"):
        soft = resource.getrlimit(getattr(resource, name))[0]
        rlimits[name] = -1 if soft == resource.RLIM_INFINITY else soft
    report = {
        "rlimits": rlimits,  # as the program's parent saw them, inside the sandbox
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
