"""cpu_busy_cores: the program computes on the CPU for most of its wall time (task-clock against wall).

The one reading software events always allow: the CPU time the program used (task-clock,
or the child's getrusage where perf could not count) over the wall time is the number of
cores it kept busy. Near a whole number of cores for the run, the program is CPU-bound
there; counters would then say why (IPC, cache, branches), and without them a sampling
profiler says where.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.rules._cpu import cpu_and_wall, make, sampling_step
from perfscout.state.records import Evidence, Finding

ID = "cpu_busy_cores"
ROLE = "roof"
READS = {"task-clock": ("task-clock", "cpu-clock")}

#: Busy at least 80 % of the wall time on its cores: CPU-bound (start-up, page-cache reads and
#: exit take the rest even for a pure loop; cpu_waiting covers programs mostly idle).
BUSY_MIN = 0.8
#: A run shorter than 50 ms is mostly process start-up: too short to call anything CPU-bound.
WALL_MIN_S = 0.05
#: Under 0.2 GHz of cycles per CPU-second the clock counted idle CPUs, not work: perf stat -a
#: counts every CPU's clock (a 224-CPU machine asleep reads "224 CPUs utilized" at 0.000 GHz).
BUSY_HZ_MIN = 0.2e9


def check(ctx: CpuContext) -> Finding | None:
    cpu_s, wall, source = cpu_and_wall(ctx)
    if not cpu_s or not wall or wall < WALL_MIN_S:
        return None
    cycles = ctx.val("cycles", "cpu-cycles")
    if cycles is not None and source != "getrusage" and cycles / cpu_s < BUSY_HZ_MIN:
        return None  # the CPUs were idle: system-wide counting, not a busy program
    cores = cpu_s / wall
    whole = max(1, round(cores))
    if cores / whole < BUSY_MIN:
        return None
    ev = [_utilisation(ctx, cores, source), ctx.ev("task-clock", "cpu-clock") if source != "getrusage"
          else Evidence(metric="host:rusage_cpu_s", value=round(cpu_s, 6), unit="second", threshold="")]
    single = whole == 1
    return make(
        ctx, ID, "roof",
        f"CPU-bound on {cores:.2f} core{'s' if whole > 1 else ''}: busy {cores / whole:.0%} of the "
        f"{wall:.3g} s wall time ({cpu_s:.3g} s of CPU time)",
        confidence=0.8, evidence=ev,
        recommendation=(f"The time goes to computing on the CPU. To see where: {sampling_step(ctx)}. "
                        + ("It uses one core: if the machine has more, parallelize the hot loop "
                           "(threads, processes, OpenMP) or vectorize it. " if single else
                           f"It keeps {whole} cores busy: check that the work per core is even. ")
                        + "Hardware counters (IPC, cache and branch misses) would say why the hot code is slow."),
        verify=f"task-clock per wall second should fall (less CPU for the same work) or the wall time should: "
               f"perf stat -e task-clock -- {' '.join(ctx.profile.command) or '<your program>'}",
        not_when="the wall time includes long waits the software events do not show (then see cpu_waiting)",
        expected_gain=None,
    )


def _utilisation(ctx: CpuContext, cores: float, source: str) -> Evidence:
    if source == "getrusage":
        return Evidence(metric="host:cores_busy", value=round(cores, 4), unit="cores",
                        threshold=f">= {BUSY_MIN:.0%} of a whole core count")
    return ctx.derived("cores_busy", cores, [source], "cores", f">= {BUSY_MIN:.0%} of a whole core count")
