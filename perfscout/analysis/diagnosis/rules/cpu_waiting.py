"""cpu_waiting: the program is off the CPU most of its wall time (I/O, sleep, locks, a child).

task-clock (or getrusage) far below the wall time means the program waited: for the disk or
the network, in a sleep, on a lock, or for another process. Voluntary context switches
(the program gave up its CPU) say it blocked; few of them with little CPU time means one
long wait (a sleep, one read).
"""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.rules._cpu import cpu_and_wall, is_python, make, switch_count
from perfscout.analysis.diagnosis.rules.cpu_busy_cores import BUSY_MIN
from perfscout.state.records import Evidence, Finding

ID = "cpu_waiting"
ROLE = "cause"
READS = {"task-clock": ("task-clock", "cpu-clock"), "context-switches": ("context-switches", "cs")}

#: On the CPU less than cpu_busy_cores' threshold (80 % of the wall time on one core): off the
#: CPU for a share worth naming. The two rules meet there, so every run long enough gets one
#: of them (a program given 65 % of a core on a busy machine was answered by neither).
BUSY_MAX = BUSY_MIN
#: A run shorter than 50 ms is mostly process start-up and exit: no waiting to speak of.
WALL_MIN_S = 0.05
#: Over 1,000 switches per CPU-second the program gives up the CPU far more often than the
#: scheduler's tick (100-1000 Hz) would take it: it blocks (the threshold of cpu_context_switches).
BLOCKED_SWITCHES_PER_CPU_S = 1000.0


def check(ctx: CpuContext) -> Finding | None:
    cpu_s, wall, source = cpu_and_wall(ctx)
    if cpu_s is None or not wall or wall < WALL_MIN_S:
        return None
    busy = cpu_s / wall
    if busy >= BUSY_MAX:
        return None
    waited = 1.0 - busy
    ev: list[Evidence] = []
    if source != "getrusage":
        ev.append(ctx.derived("cpu_busy_share", busy, [source], "fraction", f"< {BUSY_MAX:.0%}"))
        ev.append(ctx.ev("task-clock", "cpu-clock"))
    else:
        ev.append(Evidence(metric="host:cpu_busy_share", value=round(busy, 4), unit="fraction",
                           threshold=f"< {BUSY_MAX:.0%}"))
    voluntary = ctx.profile.rusage.get("voluntary_ctx_switches")
    involuntary = ctx.profile.rusage.get("involuntary_ctx_switches")
    switches = switch_count(ctx)
    if switches is not None:
        ev.append(ctx.ev("context-switches", "cs"))
    for name, v in (("voluntary_ctx_switches", voluntary), ("involuntary_ctx_switches", involuntary)):
        if v is not None:
            ev.append(Evidence(metric=f"host:{name}", value=v, unit="", threshold=""))
    # the program's own waits (getrusage's voluntary switches) where known, else all of perf's switches
    count = voluntary if voluntary is not None else switches
    rate = count / cpu_s if count is not None and cpu_s else None
    cmd = " ".join(ctx.profile.command) or "<your program>"
    if voluntary is not None and involuntary is not None and involuntary > max(voluntary, 10):
        # switched out against its will more than it gave up the CPU: it was runnable, the
        # machine's other work had the CPU
        return _preempted(ctx, busy, wall, cpu_s, ev, voluntary, involuntary, cmd)
    if rate is not None and rate >= BLOCKED_SWITCHES_PER_CPU_S:
        what = f"{rate:,.0f} context switches per CPU-second"
        title = (f"Waiting, not computing: off the CPU {waited:.0%} of the {wall:.3g} s wall time, blocked in many "
                 f"short waits ({what}: I/O, sleeps, locks)")
    elif rate is not None:
        title = (f"Off the CPU {waited:.0%} of the {wall:.3g} s wall time: a few long waits (a sleep, a large read, "
                 "a child process) or a machine busy with other work")
    else:
        title = f"Off the CPU {waited:.0%} of the {wall:.3g} s wall time (I/O, a sleep, a lock or another process)"
    py = (f" For Python, py-spy record --idle -o profile.svg -- {cmd} shows the waiting lines too." if is_python(ctx)
          else "")
    return make(
        ctx, ID, "cause", title,
        confidence=0.7, evidence=ev,
        recommendation=(f"It used {cpu_s:.3g} s of CPU in {wall:.3g} s. If the machine was busy with other work, "
                        "run it again on an idle one (context switches alone do not tell a wait from a preemption). "
                        f"Find what it waits for: perf trace -s -- {cmd} (or strace -c -f -- {cmd}) counts the "
                        f"system calls it blocks in, and perf record -e sched:sched_switch -g -- {cmd} shows where "
                        f"it leaves the CPU.{py} Then overlap the waits with work (asynchronous or batched I/O, "
                        "prefetching, fewer synchronous flushes), or remove sleeps and lock hold times."),
        verify=f"the share of wall time on the CPU should rise (or the wall time fall): perf stat -e task-clock -- {cmd}",
        not_when="the program waits by design (a server, a timer) or for a GPU or another machine",
        expected_gain=min(0.99, waited),
    )


def _preempted(ctx: CpuContext, busy: float, wall: float, cpu_s: float, ev: list[Evidence], voluntary: float,
               involuntary: float, cmd: str) -> Finding:
    return make(
        ctx, ID, "cause",
        f"Waiting for a CPU: on it {busy:.0%} of the {wall:.3g} s wall time, switched out "
        f"{involuntary:,.0f} times against {voluntary:,.0f} waits of its own: the machine's other work had the CPU",
        confidence=0.7, evidence=ev,
        recommendation=("The program was ready to run but other processes held the CPUs: measure it on an idle "
                        "machine (or reserve cores: taskset -c N, a batch job with exclusive cores), and meanwhile "
                        f"read its CPU time (task-clock) rather than the wall time. Where it spends that time: perf "
                        f"record -g -- {cmd}."),
        verify=f"on an idle machine task-clock should be close to the wall time: perf stat -e task-clock -- {cmd}",
        not_when="the program itself starts more threads or processes than there are cores (then it preempts itself)",
        expected_gain=min(0.99, 1.0 - busy),
    )
