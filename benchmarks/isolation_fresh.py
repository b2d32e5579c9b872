"""The default, isolated ``evaluate()`` against the codec's own time, each in a fresh process.

Issue 27's figure: ``evaluate()`` runs the whole evaluation out of process
(:mod:`perfscout.tools.isolate`); a user calls it once from a fresh interpreter. Each of
``--processes`` fresh Python processes builds the same smooth float32 field of ``--mib``
MiB and measures, in alternating order (so neither side is always the one with warm
caches):

- **own**: the codec's own work, SZ3 (``pysz`` through perfscout's Codec) compress +
  decompress at the bound ``rel 1e-3`` resolves to, in this process;
- **evaluate**: ``evaluate_full(x, "sz3", "rel", 1e-3, repeats=1, keep_reconstruction=False)``,
  exactly what ``evaluate()`` runs, with its default child process(es).

Each process runs A-B-A (own, evaluate, own; the next process evaluate, own, evaluate) and
compares the means of its runs: the codec's own time varies by 20-30 % from one run to the
next (0.95-1.39x on the H200 with one run a side), and a single run a side charged that to
the isolation.

The split of evaluate (``Evaluation.extra["timing_split"]``, one CLOCK_MONOTONIC on both
sides of the fork): the fork, the input's validation and the bound's resolution in the
child, the codec there, the hand-over (the codec child's reply with its reconstruction
through shared memory, the second fork; two children only), the bound check + metric pass,
the reply; and
the metric kernels' load (``warm_before_fork``: the library of analysis/stream_native.py,
0.04-0.06 s, before the one child; numba's import and its cached kernels beside the codec
where the library cannot be built, two children) and the shared mapping's page allocation.
The first-call compile share is the child's metric pass minus the same pass run again in
this process afterwards (kernels loaded and called once); ``kernel_cache_misses`` counts the
numba JIT kernels compiled instead of loaded from the cache (a cold start after an edit of
analysis/stream_kernels.py, where numba's JIT runs); ``kernels`` says which form ran.

Peak RSS, as the harness measures pysz alone (benchmarks/harness.py): the high-water mark
of each process minus this process's RSS after its imports, before the field exists, over
the field's size; the children's from ``RUSAGE_CHILDREN`` (a forked child's peak starts
at what it inherits), this process's from ``VmHWM`` reset before each step
(``/proc/self/clear_refs``). pysz alone is reported before and after the process loaded
the metric kernels: with numba's JIT they stay resident (numba, LLVM and the cached
kernels, ~128 MiB), the codec's own peak rises with them (3.06x -> 3.56x at 256 MiB) and a
child forked from such a process starts with their anonymous pages counted (~52 MiB, 0.2x:
3.22x one child against 3.03x two children); the library compiled ahead of time adds
~0.015x (3.05x -> 3.06-3.07x, children 3.02-3.04x, isolation_fresh_*_native.json).
PASS per process: evaluate within ``--time-limit`` (1.3) times own, and the largest peak
within ``--rss-limit`` (3.2) times the input. Exit status 1 when any process fails.

    .venv/bin/python benchmarks/isolation_fresh.py --mib 256 --processes 10 \\
        --out benchmarks/results/isolation_fresh_cpu.json

On a virtual machine whose huge-page faults are slow (the Firecracker guests measured: free
page reporting, nested), NumPy's huge-page advice makes a field-sized allocation cost 0.5 s
one time and nothing the next, whichever side runs then: ``NUMPY_MADVISE_HUGEPAGE=0`` (both
sides, the children inherit it) measures the isolation without that swing; the JSON records
the setting.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME_LIMIT = 1.3
RSS_LIMIT = 3.2
SPLIT_KEYS = ("fork_s", "validate_s", "plan_s", "codec_s", "handover_s", "metric_pass_s", "reply_s")
#: parts of handover_s (two children)
HANDOVER_KEYS = ("codec_reply_s", "kernel_wait_s", "second_fork_s")


def _field(mib: int):
    """sin(x/37) cos(y/23) + 0.3 sin((x+y+z)/11), float32, built a plane at a time (the
    whole-array float64 temporaries cost 4x the field and seconds on a busy machine)."""
    import numpy as np

    n = mib * 2**20 // 4
    nz = max(1, n // (512 * 512))
    y, x = np.ogrid[0:512, 0:512]
    base = np.sin(x / 37.0) * np.cos(y / 23.0)
    out = np.empty((nz, 512, 512), dtype=np.float32)
    for z in range(nz):
        out[z] = base + 0.3 * np.sin((x + y + z) / 11.0)
    return out


def _status_bytes(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def _cache_misses() -> int:
    """Kernels of analysis/stream_kernels.py that numba compiled in this process instead of
    loading them from its on-disk cache (0 where the library compiled ahead of time ran:
    numba is then not imported)."""
    mod = sys.modules.get("perfscout.analysis.stream_kernels")
    if mod is None:
        return 0
    total = 0
    for v in vars(mod).values():
        stats = getattr(v, "stats", None)
        if stats is not None and hasattr(stats, "cache_misses"):
            total += sum(stats.cache_misses.values())
    return total


def child(mib: int, codec_first: bool) -> dict:
    t0 = time.perf_counter()
    from perfscout.codecs.registry import get_codec
    from perfscout.tools import bounds as B
    from perfscout.tools.evaluate import evaluate_full

    get_codec("sz3", "abs", 1.0)  # pysz imported before the baseline, as in the harness
    out: dict = {"import_s": round(time.perf_counter() - t0, 3), "codec_first": codec_first,
                 "loadavg_before": list(os.getloadavg())}
    base = _status_bytes("VmRSS:")
    x = _field(mib)
    abs_bound = B.rel_abs_bound(x, 1e-3)[0]
    out.update(nbytes=int(x.nbytes), shape=list(x.shape), rss_baseline_bytes=base)
    stream: list = []

    def own() -> None:
        codec = get_codec("sz3", "abs", abs_bound)
        _reset_peak()
        t = time.perf_counter()
        packed = codec.compress(x)
        t1 = time.perf_counter()
        y = codec.decompress(packed)
        t2 = time.perf_counter()
        out.setdefault("own_compress_runs_s", []).append(round(t1 - t, 3))
        out.setdefault("own_decompress_runs_s", []).append(round(t2 - t1, 3))
        out.setdefault("own_runs_s", []).append(round(t2 - t, 3))
        peak = round((_status_bytes("VmHWM:") - base) / x.nbytes, 3)
        out["own_peak_rss_x_input"] = max(out.get("own_peak_rss_x_input", 0.0), peak)
        # pysz alone in a process that has not loaded the metric kernels yet, and in one that
        # has (their ~128 MiB stay resident: the codec's peak rises by as much)
        key = "own_peak_with_kernels_x_input" if "perfscout.analysis.stream_compiled" in sys.modules \
            else "own_peak_without_kernels_x_input"
        out[key] = max(out.get(key, 0.0), peak)
        stream.append((codec, packed))
        del y

    def isolated() -> None:
        _reset_peak()
        t = time.perf_counter()
        ev = evaluate_full(x, "sz3", "rel", 1e-3, repeats=1, keep_reconstruction=False)  # = evaluate()
        t2 = time.perf_counter()
        r = ev.result
        out.setdefault("evaluate_runs_s", []).append(round(t2 - t, 3))  # what the user waits for
        out["parent_peak_rss_x_input"] = max(out.get("parent_peak_rss_x_input", 0.0),
                                             round((_status_bytes("VmHWM:") - base) / x.nbytes, 3))
        out["child_codec_s"] = round((r.compress_s or 0) + (r.decompress_s or 0), 3)
        out["status"], out["bound_ok"], out["ratio"] = r.status, r.bound_ok, r.ratio
        split = ev.extra.get("timing_split", {})
        out["split"] = {k: round(v, 3) for k, v in split.items() if k not in ("started", "finished")}
        out["kernel_cache_misses"] = _cache_misses()
        compiled = sys.modules.get("perfscout.analysis.stream_compiled")
        # the kernels' form in this process: the library (analysis/stream_native.py) or numba's JIT
        out["kernels"] = "none" if compiled is None else ("library" if hasattr(compiled.K, "lib") else "numba-jit")
        out["numba_imported"] = "numba" in sys.modules

    # A-B-A: the side measured twice brackets the other, and processes alternate which side
    # that is, so a drift of the machine (or of the codec's speed) within a process does not
    # land on one side; each side's time is the mean of its runs in this process.
    for step in ((own, isolated, own) if codec_first else (isolated, own, isolated)):
        step()
    out["own_s"] = round(statistics.fmean(out["own_runs_s"]), 3)
    out["evaluate_s"] = round(statistics.fmean(out["evaluate_runs_s"]), 3)
    from perfscout.tools.isolate import reap_children

    reap_children(wait=True)  # children still exiting when evaluate returned count once reaped
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    out["children_peak_rss_x_input"] = round((kids - base) / x.nbytes, 3)
    # the metric pass again in this process (kernels loaded by evaluate): twice, the second warm
    codec, packed = stream[0]
    y = codec.decompress(packed).reshape(x.shape)
    for name in ("metric_pass_here_first_s", "metric_pass_here_s"):
        t = time.perf_counter()
        B.verify_and_measure(x, y, packed.nbytes, abs_bound=abs_bound, x_extremes=B.finite_extremes(x))
        out[name] = round(time.perf_counter() - t, 3)
    split = out["split"]
    out["first_call_compile_s"] = round(split.get("metric_pass_s", 0.0) - out["metric_pass_here_s"], 3)
    # the split is the last evaluate call's: what it does not account for, of that call
    out["unaccounted_s"] = round(out["evaluate_runs_s"][-1] - sum(split.get(k, 0.0) for k in SPLIT_KEYS), 3)
    out["evaluate_x_own"] = round(out["evaluate_s"] / out["own_s"], 3)
    # Not the verdict: the same call had the caller's kernel load ended within the codec's
    # time (a spare core; on a machine without one the low-priority load waits for the codec).
    out["evaluate_x_own_without_kernel_wait"] = round(
        (out["evaluate_s"] - split.get("kernel_wait_s", 0.0)) / out["own_s"], 3)
    out["peak_rss_x_input"] = max(out["children_peak_rss_x_input"], out["parent_peak_rss_x_input"])
    out["time_pass"] = out["evaluate_x_own"] <= TIME_LIMIT
    out["rss_pass"] = out["peak_rss_x_input"] <= RSS_LIMIT
    out["loadavg_after"] = list(os.getloadavg())
    return out


def _line(i: int, r: dict) -> str:
    s = r["split"]
    parts = " ".join(f"{k.removesuffix('_s')} {s[k]:.3f}" for k in SPLIT_KEYS if k in s)
    hand = ", ".join(f"{k.removesuffix('_s')} {s[k]:.3f}" for k in HANDOVER_KEYS if k in s)
    parts += f" ({hand})" if hand else ""
    where = "beside the codec" if s.get("children") == 2 else "before the fork"
    over = (f"kernels ({r.get('kernels', '?')}, numba imported: {r.get('numba_imported', '?')}) "
            f"{s.get('warm_before_fork_s', 0):.3f} + prefault {s.get('prefault_s', 0):.3f} {where}")
    return (f"process {i}: evaluate {r['evaluate_s']:.3f} s = {r['evaluate_x_own']:.3f}x own {r['own_s']:.3f} s "
            f"(limit {TIME_LIMIT}) {'PASS' if r['time_pass'] else 'FAIL'}; peak RSS {r['peak_rss_x_input']:.3f}x "
            f"(children {r['children_peak_rss_x_input']:.3f}, caller {r['parent_peak_rss_x_input']:.3f}; pysz alone "
            f"{_own_peaks(r)}; limit {RSS_LIMIT}) {'PASS' if r['rss_pass'] else 'FAIL'}; "
            f"load {r['loadavg_before'][0]:.2f}; without the kernel wait {r['evaluate_x_own_without_kernel_wait']:.3f}x"
            f"\n    split: {parts}; unaccounted {r['unaccounted_s']:.3f}; "
            f"{over}; first-call compiles {r['first_call_compile_s']:.3f}; cache misses {r['kernel_cache_misses']}; "
            f"children {s.get('children', 1)}")


def _own_peaks(r: dict) -> str:
    """pysz alone's peak, before and after this process loaded the metric kernels."""
    parts = [f"{r[k]:.3f} {label}" for k, label in (("own_peak_without_kernels_x_input", "before"),
                                                    ("own_peak_with_kernels_x_input", "with the kernels loaded"))
             if k in r]
    return ", ".join(parts) or f"{r['own_peak_rss_x_input']:.3f}"


def _machine() -> dict:
    from perfscout.tools.evaluate import cpu_name

    versions = {}
    for mod in ("numpy", "numba", "pysz"):
        try:
            from importlib.metadata import version

            versions[mod] = version(mod)
        except Exception:  # noqa: BLE001 - a missing distribution is just not listed
            pass
    # The guest's free page reporting (virtio-balloon) and NumPy's huge-page advice: together
    # they make every other field-sized allocation cost +0.55 s on the guests measured (pysz's
    # decompress 1.07/0.50 s alternating, 0.54 s steady with NUMPY_MADVISE_HUGEPAGE=0), and
    # which side gets the slow one follows the order of the steps. Both settings apply to both
    # sides (the children inherit them).
    try:
        reporting = Path("/sys/module/page_reporting/parameters/page_reporting_order").read_text().strip()
    except OSError:
        reporting = None
    return {"numpy_madvise_hugepage": os.environ.get("NUMPY_MADVISE_HUGEPAGE", "numpy's default (on)"),
            "free_page_reporting_order": reporting, "hostname": platform.node(), "cpu": cpu_name(),
            "logical_cpus": os.cpu_count(),
            "affinity_cpus": len(os.sched_getaffinity(0)), "kernel": platform.release(),
            "python": platform.python_version(), "versions": versions, "loadavg_at_start": list(os.getloadavg())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-prime", action="store_true",
                    help="measure from a possibly stale numba cache (no untimed cache-filling process first)")
    ap.add_argument("--note", default="", help="a sentence on the machine's state, kept in the JSON")
    ap.add_argument("--child", choices=("codec", "evaluate"), default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.mib, args.child == "codec")))
        return 0
    if args.mib < 1 or args.processes < 1:
        ap.error("--mib and --processes must be at least 1")
    sys.path.insert(0, str(ROOT))
    machine = _machine()
    rows = []
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    prime = None
    if not args.no_prime:
        # The metric kernels are built once per machine and version of analysis/stream_kernels.py
        # (the library of analysis/stream_native.py, ~10-25 s; or numba's on-disk cache where
        # it cannot be built: a process that finds the cache stale pays 5-15 s). Done here,
        # untimed, so that the fresh processes measure what every later one pays; its cost
        # is recorded.
        code = ("import json, sys, time; t = time.perf_counter(); from perfscout.analysis import stream_compiled as sc; "
                "sc.warm(); k = sys.modules.get('perfscout.analysis.stream_kernels'); "
                "print(json.dumps({'warm_s': round(time.perf_counter() - t, 3), "
                "'form': 'library' if hasattr(sc.K, 'lib') else 'numba-jit', 'compiled': 0 if k is None else sum("
                "sum(getattr(v, 'stats').cache_misses.values()) for v in vars(k).values() if hasattr(v, 'stats'))}))")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        prime = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"kernels ({prime['form']}): ready in {prime['warm_s']:.3f} s, {prime['compiled']} JIT kernel(s) compiled",
              flush=True)
    for i in range(args.processes):
        first = "codec" if i % 2 == 0 else "evaluate"
        proc = subprocess.run([sys.executable, __file__, "--mib", str(args.mib), "--child", first],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            raise SystemExit(f"process {i} failed with exit status {proc.returncode}")
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(_line(i, row), flush=True)
    ratios = [r["evaluate_x_own"] for r in rows]
    peaks = [r["peak_rss_x_input"] for r in rows]
    passed = all(r["time_pass"] and r["rss_pass"] for r in rows)
    machine["loadavg_at_end"] = list(os.getloadavg())
    if args.note:
        machine["note"] = args.note
    doc = {
        "benchmark": "isolation_fresh", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine, "codec": "sz3", "mode": "rel", "bound": 1e-3, "mib": args.mib,
        "processes": args.processes, "kernel_cache_prime": prime, "limits": {"evaluate_x_own": TIME_LIMIT, "peak_rss_x_input": RSS_LIMIT},
        "evaluate_x_own": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
        "evaluate_x_own_without_kernel_wait_median": statistics.median(
            r["evaluate_x_own_without_kernel_wait"] for r in rows),
        "peak_rss_x_input": {"median": statistics.median(peaks), "max": max(peaks)},
        "own_peak_rss_x_input_max": max(r["own_peak_rss_x_input"] for r in rows),
        # pysz alone, in the processes that ran it before the metric kernels were loaded
        "own_peak_without_kernels_x_input_max": max((r["own_peak_without_kernels_x_input"] for r in rows
                                                     if "own_peak_without_kernels_x_input" in r), default=None),
        "failed_processes": [i for i, r in enumerate(rows) if not (r["time_pass"] and r["rss_pass"])],
        "verdict": "PASS" if passed else "FAIL",
        "rows": rows,
    }
    print(f"{doc['verdict']}: evaluate/own median {doc['evaluate_x_own']['median']:.3f} "
          f"(max {doc['evaluate_x_own']['max']:.3f}, limit {TIME_LIMIT}), peak RSS max "
          f"{doc['peak_rss_x_input']['max']:.3f}x (limit {RSS_LIMIT}) over {args.processes} fresh processes; "
          f"load {machine['loadavg_at_start'][0]:.2f} -> {machine['loadavg_at_end'][0]:.2f}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
