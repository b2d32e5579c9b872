"""``perf stat`` through the sandbox, and parsers for its CSV (``-x,``) and JSON (``-j``) output.

perf writes its counts to a file in the run directory (``-o``) so they never mix with
the program's own stderr. ``<not supported>`` / ``<not counted>`` become explicit
``unavailable`` entries. When no hardware event counted (no PMU: VMs, containers,
locked-down kernels) the profile says so, keeps the software events perf could count
(task-clock, context-switches, cpu-migrations, page-faults) and adds the child's own
``getrusage`` figures, naming exactly what was used instead.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

from perfscout.errors import InputError, ToolRefused
# The event names live in state/ (the diagnosis reads them too); re-exported here for callers.
from perfscout.state.perf_events import DEFAULT_EVENTS, HARDWARE_EVENTS, SOFTWARE_EVENTS, event_base
from perfscout.state.profiles import Metric, PerfProfile
from perfscout.state.records import Finding
from perfscout.tools.profile_text import read_profile_text
from perfscout.tools.sandbox import (PROFILER_CONTROL, PROFILER_OUTPUT, Sandbox, SandboxLimits, SandboxResult, read_run_file,
                                    write_run_file)

__all__ = ["DEFAULT_EVENTS", "HARDWARE_EVENTS", "SOFTWARE_EVENTS", "counters_unavailable_finding",
           "event_base", "load_perf_file", "parse_perf_csv", "parse_perf_json", "perf_supports_json",
           "run_perf_stat", "software_findings"]

log = logging.getLogger(__name__)

#: perf's time units -> the project's normalised unit ("second", as for ncu metrics)
_UNIT_SCALE = {"msec": ("second", 1e-3), "usec": ("second", 1e-6), "nsec": ("second", 1e-9),
               "sec": ("second", 1.0)}


def _event_name(event: str) -> str:
    # Kept as perf printed it, modifiers (":u") and hybrid PMU ("cpu_core/cycles/")
    # included, so both cores' counts stay apart; event_base() names the event underneath.
    return event.strip()


def _value(text: str, unit: str) -> tuple[float | None, str]:
    try:
        v = float(text.replace(",", ""))
    except ValueError:
        return None, unit
    norm, scale = _UNIT_SCALE.get(unit, (unit, 1.0))
    return v * scale, norm


#: A counter line's value: a number perf printed (``-x`` prints no thousands separators)
#: or its ``<not supported>`` / ``<not counted>`` marker.
_COUNT = re.compile(r"^(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|<not supported>|<not counted>)$")
#: perf's units are short words (msec, %, K/sec) or empty.
_UNIT = re.compile(r"^[A-Za-z%/]{0,12}$")
#: An event name: a letter first, then perf's characters (``cycles:u``, ``cpu_core/cycles/``,
#: ``L1-dcache-load-misses``, ``tma_backend_bound``); never spaces.
_EVENT = re.compile(r"^[A-Za-z][\w.:/=@\-]*$")


def _counter_fields(line: str) -> tuple[str, str, str, list[str]] | None:
    """(value, unit, event, rest) of a perf stat -x, counter line, or None for any other line."""
    f = line.split(",")
    if len(f) < 3:
        return None
    raw, unit, event = f[0].strip(), f[1].strip(), _event_name(f[2])
    if not (_COUNT.match(raw) and _UNIT.match(unit) and _EVENT.match(event)):
        return None
    return raw, unit, event, f[3:]


def _split_mode(text: str) -> str:
    """The perf stat option whose extra leading fields these lines carry, or ''.

    ``-I`` prefixes a timestamp, ``-A`` / ``--per-core`` a CPU or core name (with
    ``--per-socket`` / ``--per-die`` also a CPU count): counts split over time or CPUs."""
    for line in text.splitlines():
        f = line.split(",")
        for skip in (1, 2):
            if len(f) > skip + 2 and _counter_fields(",".join(f[skip:])) is not None:
                head = f[0].strip()
                if re.match(r"^\d+\.\d+$", head):
                    return "-I (interval)"
                if re.match(r"^(CPU|S|D|N|C|L)\d", head):
                    return "-A / --per-core / --per-socket"
    return ""


#: A metric perf computed and printed beside the counts: a TopDown share ("70.1,%  tma_backend_bound",
#: on a counter line or a line of its own) or the CPU utilisation of the task-clock line
#: ("0.470,CPUs utilized").
_TOPDOWN_METRIC = re.compile(r"^\s*%\s+(tma_[A-Za-z0-9_]+)\s*$")
#: The group header of a hybrid CPU's metrics: "TopdownL1 (cpu_atom)"
_METRIC_GROUP_PMU = re.compile(r"^\s*Topdown\w*\s+\((\w+)\)\s*$")


def _metric_fields(fields: list[str]) -> tuple[float, str] | None:
    """(value in percent, metric name) of a TopDown share among a line's fields, or None."""
    for j in range(1, len(fields)):
        m = _TOPDOWN_METRIC.match(fields[j])
        if m:
            value = _float(fields[j - 1])  # empty or "nan" where perf could not compute it (an idle core type)
            return (value, m.group(1)) if value is not None and math.isfinite(value) else None
    return None


def _record_metric(prof: PerfProfile, name: str, value: float, pmu: str) -> None:
    """A TopDown share perf printed, as an event in percent ("tma_retiring", or "cpu_core/tma_retiring/"
    on a hybrid CPU, so each core type keeps its own)."""
    event = f"{pmu}/{name}/" if pmu else name
    if event not in prof.events:
        prof.events[event] = Metric(name=event, value=value, unit="%", raw=f"{value:g}", raw_unit="%")


def _cpus_utilized(prof: PerfProfile, event: str, fields: list[str]) -> None:
    """The wall time a saved file does not hold, from perf's own 'CPUs utilized' beside task-clock."""
    if event_base(event) not in ("task-clock", "cpu-clock") or prof.elapsed_s is not None:
        return
    for j in range(1, len(fields)):
        if fields[j].strip() == "CPUs utilized":
            used, cpu = _float(fields[j - 1]), prof.events.get(event)
            if used and used > 0 and cpu is not None and isinstance(cpu.value, (int, float)):
                prof.elapsed_s = float(cpu.value) / used
                prof.notes.append(f"wall time {prof.elapsed_s:.4g} s from perf's 'CPUs utilized' ({used:g}) "
                                  f"and {event}")
            return


def parse_perf_csv(text: str, command: Sequence[str] = ()) -> PerfProfile:
    """Parse ``perf stat -x,`` output: value,unit,event,[variance,]runtime,pct,metric,metric-unit.

    ``runtime`` is how long the counter ran (ns); ``pct`` the share of the run it was
    scheduled on a hardware counter (below 100: multiplexed, perf scaled the count).
    Only lines of that shape count (a number or perf's ``<not ...>`` marker, a unit, an
    event name); a file with none is refused, and other lines (a program's stderr mixed
    in) are counted in the profile's notes, never read as counters.
    """
    prof = PerfProfile(command=list(command))
    seen = False
    ignored = 0
    pmu = ""  # the core type of a hybrid CPU's metric group, from its header line
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = _counter_fields(line)
        if fields is None:
            f = line.split(",")
            if line.startswith(","):  # perf's own line of metrics only (",,,,,70.1,%  tma_backend_bound")
                group = _METRIC_GROUP_PMU.match(f[-1])
                pmu = group.group(1) if group else pmu
                if metric := _metric_fields(f):
                    _record_metric(prof, metric[1], metric[0], pmu)
                continue
            ignored += 1
            continue
        raw, unit, event, rest = fields
        seen = True
        if rest and rest[0].endswith("%"):  # -r N adds the run-to-run variance here
            rest = rest[1:]
        pct = _float(rest[1]) if len(rest) > 1 else None
        runtime_ns = _float(rest[0]) if rest else None
        _record(prof, event, raw, unit, pct, runtime_ns)
        _cpus_utilized(prof, event, rest)
        if metric := _metric_fields(rest):  # "4677067630,,TOPDOWN.SLOTS,...,31.1,%  tma_backend_bound"
            _record_metric(prof, metric[1], metric[0], pmu)
    if not seen:
        split = _split_mode(text)
        if split:
            raise InputError(f"this is perf stat {split} output (one count per {'interval' if '-I' in split else 'CPU or unit'}), "
                             "which perfscout does not read: run perf stat -x, without it")
        raise InputError("no perf stat counter lines found (expected the output of perf stat -x, : "
                         "lines such as '1234567,,cycles,1000000,100.00,,')")
    if ignored:
        prof.notes.append(f"{ignored} line(s) that are not perf stat counter lines were ignored")
    _settle(prof)
    return prof


def parse_perf_json(text: str, command: Sequence[str] = ()) -> PerfProfile:
    """Parse ``perf stat -j`` output: one JSON object per line."""
    prof = PerfProfile(command=list(command))
    seen = False
    pmu = ""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        event = _event_name(str(obj.get("event", "")))
        unit_text = str(obj.get("metric-unit", ""))
        group = _METRIC_GROUP_PMU.match(str(obj.get("metricgroup", "")))
        pmu = group.group(1) if group else pmu if "metricgroup" not in obj else ""
        if (m := _TOPDOWN_METRIC.match(unit_text)) and math.isfinite(_float(str(obj.get("metric-value", ""))) or math.nan):
            _record_metric(prof, m.group(1), float(obj["metric-value"]), pmu)  # a TopDown share perf computed
        if not event or "counter-value" not in obj:
            continue
        seen = True
        pct = obj.get("pcnt-running")
        runtime_ns = obj.get("event-runtime")
        _record(prof, event, str(obj["counter-value"]), str(obj.get("unit", "")),
                float(pct) if pct is not None else None,
                float(runtime_ns) if runtime_ns is not None else None)
        _cpus_utilized(prof, event, [str(obj.get("metric-value", "")), unit_text])
    if not seen:
        raise InputError("no perf stat JSON counter objects found (expected perf stat -j output)")
    _settle(prof)
    return prof


def _record(prof: PerfProfile, event: str, raw: str, unit: str, pct: float | None,
            runtime_ns: float | None = None) -> None:
    if raw.startswith("<"):  # "<not supported>", "<not counted>"
        prof.unavailable[event] = raw
        return
    value, norm = _value(raw, unit)
    if value is None:
        prof.unavailable[event] = f"unparsable value {raw!r}"
        return
    prof.events[event] = Metric(name=event, value=value, unit=norm, raw=raw, raw_unit=unit)
    if pct is not None:
        prof.multiplexing[event] = pct
    if runtime_ns is not None:
        prof.event_runtime_s[event] = runtime_ns * 1e-9  # perf prints nanoseconds


def _settle(prof: PerfProfile) -> None:
    hw = [e for e in prof.events if event_base(e) in HARDWARE_EVENTS]
    prof.hardware_counters = bool(hw)
    if not prof.hardware_counters and prof.fallback == "":
        counted = [e for e in prof.events if event_base(e) in SOFTWARE_EVENTS]
        prof.fallback = ("no hardware counters: software events only ("
                         + (", ".join(counted) or "none counted") + ")")
    multiplexed = {e: p for e, p in prof.multiplexing.items() if p < 100.0}
    if multiplexed:
        prof.notes.append("multiplexed (counted part of the time, scaled by perf): "
                          + ", ".join(f"{e} {p:.1f}%" for e, p in multiplexed.items()))


def _float(text: str) -> float | None:
    try:
        return float(text.strip())
    except (ValueError, AttributeError):
        return None


def counters_unavailable_finding(prof: PerfProfile) -> Finding | None:
    """The DESIGN.md finding ``cpu_counters_unavailable`` when no hardware event counted.

    Built by the diagnosis rule itself, so ``perfscout profile`` and ``perfscout diagnose``
    on the saved output report the same finding.
    """
    # Imported here, not at the top: parsing perf output should not load the rule engine.
    from perfscout.analysis.diagnosis.cpu_context import CpuContext
    from perfscout.analysis.diagnosis.rules import cpu_counters_unavailable

    return cpu_counters_unavailable.check(CpuContext(prof))


def software_findings(prof: PerfProfile) -> list[Finding]:
    """What ``perfscout profile`` reports for a run without hardware counters: the CPU diagnosis
    of its software events and getrusage (busy cores, waiting, switches, faults, memory), the
    primary first and ``cpu_counters_unavailable`` among them; [] when counters counted (the
    diagnosis then reads them). The same findings as ``perfscout diagnose`` on the saved output."""
    if prof.hardware_counters:
        return []
    from perfscout.analysis.diagnosis import diagnose_perf

    (program,) = diagnose_perf(prof)["programs"]
    return [Finding.model_validate(f) for f in program["findings"]]


_JSON_SUPPORT: dict[str, bool] = {}


def perf_supports_json(sandbox: Sandbox) -> bool:
    """Does this perf accept ``-j``? (perf 6.2+ and some 6.1 backports.) Cached per binary."""
    try:
        exe = str(sandbox.resolve_executable("perf"))
    except ToolRefused:
        return False
    if exe not in _JSON_SUPPORT:
        res = sandbox.run(["perf", "stat", "-j", "-e", "task-clock", "true"],
                          limits=SandboxLimits(timeout_s=20))
        _JSON_SUPPORT[exe] = res.ok and '"counter-value"' in res.stderr
    return _JSON_SUPPORT[exe]


#: Said when perf refuses --delay -1 / --control (perf before 5.11).
_OLD_PERF = ("perf stat did not run: this perf has no --control / --delay -1, which perfscout needs to count a "
             "sandboxed program from outside the sandbox without counting the sandbox's start-up (perf 5.11 or "
             "newer; or --unconfined)")


def run_perf_stat(
    sandbox: Sandbox,
    command: Sequence[str],
    *,
    events: Sequence[str] = DEFAULT_EVENTS,
    repeats: int = 1,
    use_json: bool | None = None,
    limits: SandboxLimits | None = None,
    out_name: str = "perf_stat",
) -> tuple[PerfProfile, SandboxResult]:
    """Run ``command`` under ``perf stat`` in ``sandbox``; raw output saved in the run dir.

    Without perf the command still runs (through the sandbox) and the profile carries
    the child's getrusage figures and says that perf was missing.
    """
    cmd = list(command)
    try:
        sandbox.resolve_executable("perf")
        have_perf = True
    except ToolRefused:
        have_perf = False
    if not have_perf:
        log.info("perf not found: running %s without counters (getrusage of the child only)", cmd[:1])
        res = sandbox.run(cmd, limits=limits)
        prof = PerfProfile(command=cmd, hardware_counters=False,
                           fallback="perf not installed: getrusage of the child only")
        _add_rusage(prof, res)
        return prof, res
    if use_json is None:
        use_json = perf_supports_json(sandbox)
    out_file = sandbox.run_dir / f"{out_name}.{'jsonl' if use_json else 'csv'}"
    fmt = ["-j"] if use_json else ["-x", ","]
    # Confined, perf runs outside the sandbox, as bwrap's parent (the program cannot name it,
    # so cannot patch its memory), writes to a file in a directory the sandbox does not show,
    # and starts with its counters off: the sandbox's launcher switches them on over the
    # control socket just before the program's exec (see Sandbox.run). Unconfined, the
    # program can do anything anyway: perf writes a file, as before.
    channel = sandbox.can_confine()
    dest = ["-o", PROFILER_OUTPUT, "--delay", "-1", "--control", f"fd:{PROFILER_CONTROL},{PROFILER_CONTROL}"] \
        if channel else ["-o", str(out_file)]
    wrap = ["perf", "stat", *fmt, *dest, "-e", ",".join(events)]
    if repeats > 1:
        wrap += ["-r", str(repeats)]
    wrap.append("--")
    log.debug("perf stat: %s -- %s", " ".join(wrap[:-1]), " ".join(cmd))
    res = sandbox.run(cmd, wrap=wrap, limits=limits, profiler_channel=channel)
    old_perf = channel and re.search(r"unknown (?:option|switch).*(?:control|delay|\bD\b)", res.stderr)
    if res.status == "refused" or (not channel and not out_file.exists()):
        prof = PerfProfile(command=cmd, fallback=_OLD_PERF if old_perf else f"perf stat did not run: {res.reason}")
        _add_rusage(prof, res)
        return prof, res
    if channel:
        text = res.profiler_output
        write_run_file(out_file, text)  # the record, written after the program is gone
    else:
        try:  # written inside the run directory: the program could have swapped it for a link
            text = read_run_file(out_file)
        except OSError as exc:
            prof = PerfProfile(command=cmd, fallback=f"perf stat output unreadable: {exc}")
            _add_rusage(prof, res)
            return prof, res
    try:
        prof = parse_perf_json(text, cmd) if use_json else parse_perf_csv(text, cmd)
    except InputError:
        # perf started but wrote no counts (killed at the timeout, or refused by the
        # kernel): the command's run and its getrusage figures are still worth returning.
        prof = PerfProfile(command=cmd, fallback=_OLD_PERF if old_perf else
                           f"perf stat wrote no counts ({res.status}: {res.reason or 'see stderr'})")
        _add_rusage(prof, res)
        return prof, res
    if res.profiler_output_truncated:
        prof.notes.append(f"perf stat's output was longer than {len(text)} bytes; only its start was read")
    # perf's own wall time of the program (from its "CPUs utilized") where it printed one: the
    # sandbox's wall time adds the sandbox's and perf's start-up
    if channel and res.program_wall_s is not None:
        # perf's "CPUs utilized" divides by the time since bwrap started, counters off at
        # first: the launcher's fork-to-reap time is the program's own
        prof.elapsed_s = res.program_wall_s
        prof.notes = [n for n in prof.notes if "from perf's 'CPUs utilized'" not in n]
    prof.elapsed_s = prof.elapsed_s or res.wall_s
    if not prof.hardware_counters:
        prof.fallback += " + getrusage of the child (perf's own process included)"
    _add_rusage(prof, res)
    return prof, res


def _add_rusage(prof: PerfProfile, res: SandboxResult) -> None:
    prof.rusage = dict(res.rusage)
    if prof.elapsed_s is None and res.wall_s:
        prof.elapsed_s = res.wall_s


def load_perf_file(path: str | Path) -> PerfProfile:
    """Parse a saved ``perf stat -x,`` or ``-j`` output file (format detected)."""
    p = Path(path)
    text = read_profile_text(p, "perf output")
    if any(ln.lstrip().startswith("{") for ln in text.splitlines()):
        try:
            return parse_perf_json(text)
        except InputError:
            pass  # a CSV file with a stray '{' line: read it as CSV below
    try:
        return parse_perf_csv(text)
    except InputError as exc:
        raise InputError(f"{p}: {exc} (nor perf stat -j JSON objects)") from exc
