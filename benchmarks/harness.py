"""Evaluation at the speed of the codec (issue #13): every figure of the issue in one run.

For a smooth float32 field (``synthetic smooth``) at REL 1e-3 with SZ3, per size
(64 MiB and 256 MiB by default; ``--sizes 64,256,1024`` adds 1 GiB):

- **direct**: ``pysz`` compress + decompress called directly (SZ3Codec's configuration);
- **evaluate**: ``evaluate(..., repeats=1)`` in this process (``isolate=False``, as a
  sweep worker runs it) and with the default child process; ratio to direct;
- **metric pass**: the one pass evaluate runs (``verify_and_measure``: the bound check
  and every metric) on every core this process may use and on one thread, its share of
  evaluate and its ratio to one SZ3 compress; ``quality_metrics`` and ``verify_bound``
  alone for reference; evaluate also with ``metric_threads=1``. The backend is said
  (``numba``: the compiled kernels of analysis/stream_compiled.py, loaded before the
  timings, the load time recorded; ``numpy``: the NumPy fast path) and the NumPy fast
  path is timed on one thread beside it;
- **peak RSS**: a fresh process loads the field and runs evaluate once; its peak RSS
  minus what it held before loading (the interpreter and imports, the compiled metric
  kernels included: numba's fixed cost is recorded apart), as a multiple of the input (and the same for the direct pysz calls: what the codec itself needs);
- **synthetic generators**: peak RSS of building a float32 grf / grayscott (3 steps) /
  smooth field of that shape in a fresh process, as a multiple of the output;

then **sweep tasks/s** for examples/sweep_quick.yaml (the real CLI, a temporary run
directory) and **diagnose** of 1,000 kernels (benchmarks/ncu_parse_bench.py's files,
verbatim and perturbed copies of real H200 rows) end to end through the CLI, with the
parse / diagnosis / JSON split measured in-process.

Every time is reported as wall and CPU seconds (CPU time is what the code costs; wall
time also counts waiting for a shared CPU: the load average is recorded). With
``--profile`` the metric pass is run under cProfile and its top functions are listed.
Results go to ``--out`` (JSON, with the machine). Asserts nothing.

    .venv/bin/python benchmarks/harness.py [--sizes 64,256] [--repeats 3] [--profile]
        [--out benchmarks/results/harness_cpu.json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

#: Field shapes per size in MiB (float32).
SHAPES = {4: (64, 128, 128), 64: (256, 256, 256), 256: (256, 512, 512), 1024: (1024, 512, 512)}
REL_BOUND = 1e-3
TARGETS = {"evaluate_over_direct": 1.5, "metrics_over_compress": 0.5, "peak_rss_over_input": 3.0,
           "diagnose_1000_s": 2.0}


def _timed(fn: Callable[[], Any], repeats: int) -> dict[str, Any]:
    walls, cpus, value = [], [], None
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        value = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus),
            "walls": [round(w, 4) for w in walls], "value": value}


def _strip(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "value"}


def _sz_conf():
    from pysz import szAlgorithm, szConfig, szErrorBoundMode

    conf = szConfig()
    conf.cmprAlgo = szAlgorithm.INTERP_LORENZO  # SZ3Codec's default
    conf.errorBoundMode = szErrorBoundMode.REL
    conf.relErrorBound = REL_BOUND
    return conf


def _profile_top(fn: Callable[[], Any], n: int = 10) -> list[str]:
    prof = cProfile.Profile(time.process_time)  # CPU seconds: the machine is shared, wall time waits
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(n)
    lines = [ln.strip() for ln in out.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if ln.startswith("ncalls")), 0)
    return lines[start : start + n + 1]


# -- child: one size, timing -------------------------------------------------------------


def child_timing(path: str, repeats: int, profile: bool) -> dict[str, Any]:
    from pysz import sz

    from perfscout.analysis.metrics import quality_metrics
    from perfscout.analysis.tile_pool import resolve_threads
    from perfscout.tools.bounds import rel_abs_bound, verify_and_measure, verify_bound
    from perfscout.tools.evaluate import evaluate_full

    from perfscout.analysis import streaming

    # The metric pass's backend (compiled kernels or the NumPy fast path), and the cost of
    # loading the compiled kernels in this fresh process (numba's import and its on-disk
    # cache; a compile when the cache is cold), paid before any timing below.
    x = np.load(path)
    backend = streaming.metrics_backend(int(x.size))
    c0, t0 = time.process_time(), time.perf_counter()
    if backend == "numba":
        from perfscout.analysis import stream_compiled

        stream_compiled.warm()
    kernel_load = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    conf = _sz_conf()

    def compress():
        return sz.compress(x, conf)[0]

    stream = compress()

    def decompress():
        return sz.decompress(stream, x.dtype, x.shape)[0].reshape(x.shape)

    comp = _timed(compress, repeats)
    dec = _timed(decompress, repeats)
    y = dec["value"]
    direct = {"wall_s": comp["wall_s"] + dec["wall_s"], "cpu_s": comp["cpu_s"] + dec["cpu_s"]}
    eb = rel_abs_bound(x, REL_BOUND)[0]
    metrics = _timed(lambda: quality_metrics(x, y, int(stream.nbytes)), repeats)
    check = _timed(lambda: verify_bound(x, y, abs_bound=eb), repeats)
    # The metric pass as evaluate runs it: the bound check and every metric in one pass,
    # on every core this process may use and on one thread.
    n_threads = resolve_threads(None)
    one_pass = _timed(lambda: verify_and_measure(x, y, int(stream.nbytes), abs_bound=eb, threads=n_threads), repeats)
    one_pass_1t = _timed(lambda: verify_and_measure(x, y, int(stream.nbytes), abs_bound=eb, threads=1), repeats)
    # The NumPy fast path on one thread, for comparison (the backend switch).
    os.environ[streaming.ENV_BACKEND] = "numpy"
    one_pass_numpy_1t = _timed(lambda: verify_and_measure(x, y, int(stream.nbytes), abs_bound=eb, threads=1), repeats)
    os.environ.pop(streaming.ENV_BACKEND)
    here = _timed(lambda: evaluate_full(x, "sz3", "rel", REL_BOUND, repeats=1, isolate=False), repeats)
    here_1t = _timed(lambda: evaluate_full(x, "sz3", "rel", REL_BOUND, repeats=1, isolate=False, metric_threads=1),
                     repeats)
    isolated = _timed(lambda: evaluate_full(x, "sz3", "rel", REL_BOUND, repeats=1), max(1, repeats // 2))
    ev = here["value"].result
    out = {
        "shape": list(x.shape), "dtype": str(x.dtype), "nbytes": int(x.nbytes),
        "ratio": ev.ratio, "status": ev.status, "psnr": ev.psnr, "ssim": ev.ssim,
        "direct_compress": _strip(comp), "direct_decompress": _strip(dec), "direct": direct,
        "evaluate_in_process": _strip(here), "evaluate_isolated": _strip(isolated),
        "quality_metrics": _strip(metrics), "verify_bound": _strip(check), "metric_threads": n_threads,
        "metric_pass": _strip(one_pass), "metric_pass_1t": _strip(one_pass_1t),
        "metrics_backend": backend, "kernel_load": kernel_load, "metric_pass_numpy_1t": _strip(one_pass_numpy_1t),
        "evaluate_in_process_1t": _strip(here_1t),
        "recorded_compress_s": ev.compress_s, "recorded_decompress_s": ev.decompress_s,
    }
    for clock in ("wall_s", "cpu_s"):
        tag = clock[:-2]
        out[f"evaluate_over_direct_{tag}"] = here[clock] / direct[clock]
        out[f"evaluate_isolated_over_direct_{tag}"] = isolated[clock] / direct[clock] if clock == "wall_s" else None
        out[f"metrics_over_compress_{tag}"] = metrics[clock] / comp[clock]
        out[f"check_over_compress_{tag}"] = check[clock] / comp[clock]
        out[f"evaluate_1t_over_direct_{tag}"] = here_1t[clock] / direct[clock]
        out[f"metric_pass_over_compress_{tag}"] = one_pass[clock] / comp[clock]
        out[f"metric_pass_1t_over_compress_{tag}"] = one_pass_1t[clock] / comp[clock]
        out[f"metric_pass_numpy_1t_over_compress_{tag}"] = one_pass_numpy_1t[clock] / comp[clock]
        out[f"metric_pass_share_of_evaluate_{tag}"] = one_pass[clock] / here[clock]
    if profile:  # one thread: cProfile sees only the thread that enabled it
        out["metric_pass_profile"] = _profile_top(
            lambda: verify_and_measure(x, y, int(stream.nbytes), abs_bound=eb, threads=1))
        out["evaluate_profile"] = _profile_top(
            lambda: evaluate_full(x, "sz3", "rel", REL_BOUND, repeats=1, isolate=False, metric_threads=1), 14)
    return out


# -- child: one size, peak memory ------------------------------------------------------------


def _status_bytes(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def _rss_now() -> int:
    return _status_bytes("VmRSS:")


def child_rss(path: str, what: str) -> dict[str, Any]:
    from pysz import sz  # imports first: the baseline holds them

    from perfscout.analysis import streaming
    from perfscout.tools.evaluate import evaluate_full

    # The compiled metric kernels are part of the imports too (numba, llvmlite's LLVM and
    # the cached kernels: a fixed cost, whatever the field's size, recorded apart).
    before_kernels = _rss_now()
    if what == "evaluate" and streaming.metrics_backend(int(np.load(path, mmap_mode="r").size)) == "numba":
        from perfscout.analysis import stream_compiled

        stream_compiled.warm()
    kernels_bytes = _rss_now() - before_kernels
    base = _rss_now()
    x = np.load(path)
    loaded = _rss_now()
    if what == "evaluate":
        ev = evaluate_full(x, "sz3", "rel", REL_BOUND, repeats=1, isolate=False)
        status = ev.result.status
    else:
        stream = sz.compress(x, _sz_conf())[0]
        sz.decompress(stream, x.dtype, x.shape)
        status = "ok"
    # VmHWM is this process image's own high-water mark: ru_maxrss would also count the
    # forked parent's pages (Linux folds the pre-exec peak into it).
    peak = _status_bytes("VmHWM:")
    return {"what": what, "status": status, "baseline_bytes": base, "after_load_bytes": loaded,
            "metric_kernels_bytes": kernels_bytes,
            "peak_bytes": peak, "nbytes": int(x.nbytes),
            "peak_over_input": (peak - base) / x.nbytes, "peak_total_over_input": peak / x.nbytes}


def child_generate(kind: str, shape_text: str) -> dict[str, Any]:
    """Peak RSS and time of building one synthetic float32 field in a fresh process.
    ``grayscott`` runs 3 steps (its memory is the same at every step; 200 steps of a
    1 GiB field would take an hour here)."""
    import importlib

    syn = importlib.import_module("perfscout.datasets.synthetic")
    import scipy.fft  # noqa: F401  (imports in the baseline)

    shape = tuple(int(n) for n in shape_text.split(","))
    base = _rss_now()
    c0, t0 = time.process_time(), time.perf_counter()
    if kind == "grayscott":
        out = syn._grayscott(shape, np.random.default_rng(0), steps=3, dtype=np.float32)
    else:
        out = syn.synthetic(kind, shape, "f32").array
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _status_bytes("VmHWM:")
    return {"kind": kind, "shape": list(shape), "steps": 3 if kind == "grayscott" else None,
            "wall_s": wall, "cpu_s": cpu, "nbytes": int(out.nbytes), "peak_over_output": (peak - base) / out.nbytes}


def _child(*args: str, timeout: float = 3000) -> dict[str, Any]:
    cmd = ["nice", "-n", "5", sys.executable, __file__, "--child", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- sweep and diagnose ----------------------------------------------------------------------------


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("perfscout")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "perfscout"]


def _run_timed(cmd: list[str], **kw: Any) -> tuple[subprocess.CompletedProcess, float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc, wall, cpu


def sweep_rate(task_start: str = "fork") -> dict[str, Any]:
    """tasks/s of the quick sweep through the CLI; ``task_start``: CPU tasks forked from the
    sweep's task server (the default) or ``spawn`` (a fresh interpreter per task)."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "PERFSCOUT_HOME": str(home)}
        proc, wall, cpu = _run_timed([*_cli(), "sweep", str(ROOT / "examples/sweep_quick.yaml"), "--out",
                                      str(Path(tmp) / "run"), "--json", "--no-progress",
                                      "--task-start", task_start], env=env, cwd=tmp, timeout=1800)
        if proc.returncode != 0:
            return {"error": proc.stderr[-2000:], "wall_s": wall}
        summary = json.loads(proc.stdout)
    tasks = summary.get("tasks") or summary.get("n_tasks") or summary.get("total")
    if isinstance(tasks, dict):
        tasks = tasks.get("total") or sum(v for v in tasks.values() if isinstance(v, int))
    return {"spec": "examples/sweep_quick.yaml", "task_start": task_start, "tasks": tasks, "wall_s": wall,
            "cpu_s": cpu, "tasks_per_s": (tasks / wall) if tasks else None, "summary": summary}


def _sweep_part() -> dict[str, Any]:
    """The sweep part: forked tasks (the default), and spawned ones for comparison."""
    s = sweep_rate("fork")
    s["spawn"] = {k: v for k, v in sweep_rate("spawn").items() if k != "summary"}
    for label, r in (("fork", s), ("spawn", s["spawn"])):
        print(f"[sweep examples/sweep_quick.yaml, {label}] {r.get('tasks')} tasks in {r['wall_s']:.1f} s wall = "
              f"{_fmt(r.get('tasks_per_s'))} tasks/s (children cpu {_fmt(r.get('cpu_s'))} s)")
    return s


def diagnose_times(n_kernels: int, repeats: int = 3) -> dict[str, Any]:
    """1,000-kernel diagnose through the real CLI (median of ``repeats``), default (cited
    metrics: only the columns the engine reads are parsed) and ``--all-metrics``; then the
    in-process split of the default path (parse / diagnosis / JSON) and its profile."""
    import gc

    from ncu_parse_bench import make_csv

    from perfscout.analysis.diagnosis import diagnose as run_diagnosis
    from perfscout.analysis.diagnosis.reads import reads_metric
    from perfscout.tools.ncu_parse import parse_raw_csv

    out: dict[str, Any] = {"kernels": n_kernels, "repeats": repeats}
    with tempfile.TemporaryDirectory() as tmp:
        for label, perturb in (("verbatim", False), ("perturbed", True)):
            path = Path(tmp) / f"{label}.csv"
            text = make_csv(n_kernels, perturb=perturb)
            path.write_text(text)
            entry: dict[str, Any] = {"csv_bytes": len(text)}
            for mode, extra in (("cli", []), ("cli_all_metrics", ["--all-metrics"])):
                runs = [_run_timed([*_cli(), "diagnose", "--ncu-csv", str(path), "--json", *extra], cwd=tmp)
                        for _ in range(repeats)]
                entry.update({f"{mode}_wall_s": statistics.median(w for _, w, _ in runs),
                              f"{mode}_cpu_s": statistics.median(c for _, _, c in runs),
                              f"{mode}_walls": [round(w, 3) for _, w, _ in runs],
                              f"{mode}_rc": runs[-1][0].returncode,
                              f"{mode}_json_bytes": len(runs[-1][0].stdout)})
            c0, t0 = time.process_time(), time.perf_counter()
            report = parse_raw_csv(text, source=str(path), keep=reads_metric)
            gc.freeze()  # as the CLI does after loading
            c1, t1 = time.process_time(), time.perf_counter()
            result = run_diagnosis(report.kernels, platform={})
            c2, t2 = time.process_time(), time.perf_counter()
            json.dumps(result, separators=(",", ":"), default=str)
            c3, t3 = time.process_time(), time.perf_counter()
            entry.update(parse_wall_s=t1 - t0, parse_cpu_s=c1 - c0, diagnose_wall_s=t2 - t1,
                         diagnose_cpu_s=c2 - c1, json_wall_s=t3 - t2, json_cpu_s=c3 - c2)
            entry["diagnose_profile"] = _profile_top(
                lambda ks=report.kernels: run_diagnosis(ks, platform={}), 6)
            gc.unfreeze()
            out[label] = entry
    return out


# -- the run ---------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    from perfscout.tools.evaluate import cpu_name

    mem = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            mem = int(next(ln for ln in fh if ln.startswith("MemTotal:")).split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        pass
    import pysz  # noqa: F401
    from importlib.metadata import version

    return {"cpu": cpu_name(), "cores": os.cpu_count(), "memory_bytes": mem, "platform": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__, "pysz": version("pysz"),
            "numba": version("numba"),
            "usable_cores": len(os.sched_getaffinity(0)), "loadavg_start": os.getloadavg()}


def _fmt(v: Any, spec: str = ".3g") -> str:
    return "n/a" if v is None else format(v, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256", help="MiB, from " + ",".join(map(str, SHAPES)))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kernels", type=int, default=1000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--skip-diagnose", action="store_true",
                    help="With --out, a skipped sweep/diagnose part keeps its value from the existing file.")
    ap.add_argument("--generators", default="grf,grayscott,smooth",
                    help="Synthetic kinds whose generation peak RSS is measured per size ('' for none).")
    ap.add_argument("--only-diagnose", action="store_true",
                    help="Only the diagnose part; with --out, replace that part of an existing file.")
    ap.add_argument("--only-sweep", action="store_true",
                    help="Only the sweep part (forked and spawned tasks); with --out, replace that part.")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "timing":
            print(json.dumps(child_timing(rest[0], int(rest[1]), rest[2] == "1")))
        elif kind == "generate":
            print(json.dumps(child_generate(rest[0], rest[1])))
        else:
            print(json.dumps(child_rss(rest[0], rest[1])))
        return

    if args.only_diagnose:
        _diagnose_only(args)
        return
    if args.only_sweep:
        _sweep_only(args)
        return

    from perfscout.datasets.synthetic import synthetic

    doc: dict[str, Any] = {"machine": machine(), "rel_bound": REL_BOUND, "targets": TARGETS, "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for mib in (int(s) for s in args.sizes.split(",")):
            shape = SHAPES[mib]
            path = str(Path(tmp) / f"smooth_{mib}.npy")
            t0 = time.perf_counter()
            np.save(path, synthetic("smooth", shape, "f32").array)
            gen_s = time.perf_counter() - t0
            entry = {"synthetic_wall_s": gen_s,
                     "timing": _child("timing", path, str(args.repeats if mib < 1024 else 1),
                                      "1" if args.profile else "0"),
                     "rss_evaluate": _child("rss", path, "evaluate"),
                     "rss_direct": _child("rss", path, "direct"),
                     "rss_synthetic": {k: _child("generate", k, ",".join(map(str, shape)))
                                       for k in args.generators.split(",") if k}}
            doc["sizes"][str(mib)] = entry
            os.remove(path)
            t = entry["timing"]
            if "error" in t:
                print(f"[{mib} MiB] timing failed: {t['error']}")
                continue
            r, rd = entry["rss_evaluate"], entry["rss_direct"]
            print(f"[{mib} MiB smooth f32 {tuple(shape)}, SZ3 REL {REL_BOUND:g}, ratio {t['ratio']:.1f}]")
            print(f"  direct pysz compress+decompress: wall {t['direct']['wall_s']:.3f} s, cpu {t['direct']['cpu_s']:.3f} s "
                  f"(compress cpu {t['direct_compress']['cpu_s']:.3f} s)")
            print(f"  evaluate(repeats=1) in process:  wall {t['evaluate_in_process']['wall_s']:.3f} s, cpu "
                  f"{t['evaluate_in_process']['cpu_s']:.3f} s -> {t['evaluate_over_direct_wall']:.2f}x direct (wall), "
                  f"{t['evaluate_over_direct_cpu']:.2f}x (cpu); target <= {TARGETS['evaluate_over_direct']}x")
            print(f"  evaluate(repeats=1) isolated:    wall {t['evaluate_isolated']['wall_s']:.3f} s -> "
                  f"{t['evaluate_isolated_over_direct_wall']:.2f}x direct")
            print(f"  quality_metrics: cpu {t['quality_metrics']['cpu_s']:.3f} s = {t['metrics_over_compress_cpu']:.2f}x one "
                  f"compress (target <= {TARGETS['metrics_over_compress']}x); verify_bound cpu "
                  f"{t['verify_bound']['cpu_s']:.3f} s = {t['check_over_compress_cpu']:.2f}x")
            print(f"  metric pass backend: {t['metrics_backend']} (kernels loaded in {t['kernel_load']['wall_s']:.2f} s "
                  f"wall in this fresh process); the NumPy fast path on 1 thread: cpu "
                  f"{t['metric_pass_numpy_1t']['cpu_s']:.3f} s = {t['metric_pass_numpy_1t_over_compress_cpu']:.2f}x one compress")
            print(f"  one pass (verify_and_measure, {t['metric_threads']} threads): wall {t['metric_pass']['wall_s']:.3f} s, "
                  f"cpu {t['metric_pass']['cpu_s']:.3f} s = {t['metric_pass_over_compress_wall']:.2f}x one compress (wall), "
                  f"{t['metric_pass_over_compress_cpu']:.2f}x (cpu); 1 thread: cpu {t['metric_pass_1t']['cpu_s']:.3f} s = "
                  f"{t['metric_pass_1t_over_compress_cpu']:.2f}x; target <= {TARGETS['metrics_over_compress']}x")
            print(f"  evaluate with 1 metric thread: wall {t['evaluate_in_process_1t']['wall_s']:.3f} s, cpu "
                  f"{t['evaluate_in_process_1t']['cpu_s']:.3f} s -> {t['evaluate_1t_over_direct_wall']:.2f}x direct (wall), "
                  f"{t['evaluate_1t_over_direct_cpu']:.2f}x (cpu)")
            print(f"  metric pass share of evaluate: {t['metric_pass_share_of_evaluate_cpu']:.0%} (cpu), "
                  f"{t['metric_pass_share_of_evaluate_wall']:.0%} (wall)")
            print(f"  peak RSS of evaluate: {_fmt(r.get('peak_over_input'), '.2f')}x the input above the interpreter "
                  f"and its imports ({_fmt(r.get('peak_total_over_input'), '.2f')}x in all; numba and the compiled "
                  f"metric kernels {_fmt((r.get('metric_kernels_bytes') or 0) / 2**20, '.0f')} MiB of those "
                  f"imports); pysz alone: "
                  f"{_fmt(rd.get('peak_over_input'), '.2f')}x; target <= {TARGETS['peak_rss_over_input']}x")
            for k, g in entry["rss_synthetic"].items():
                print(f"  synthetic {k}: peak RSS {_fmt(g.get('peak_over_output'), '.2f')}x the output, "
                      f"cpu {_fmt(g.get('cpu_s'))} s" + (f" ({g['steps']} steps)" if g.get("steps") else ""))
            for key in ("metric_pass_profile", "evaluate_profile"):
                if key in t:
                    print(f"  {key}:\n    " + "\n    ".join(t[key]))
    if not args.skip_sweep:
        doc["sweep"] = _sweep_part()
    if not args.skip_diagnose:
        doc["diagnose"] = _print_diagnose(diagnose_times(args.kernels), args.kernels)
    if args.out and args.out.exists():  # parts not measured this run stay as they were
        old_doc = json.loads(args.out.read_text())
        for part in ("sweep", "diagnose"):
            if part not in doc and part in old_doc:
                doc[part] = old_doc[part]
    doc["machine"]["loadavg_end"] = os.getloadavg()
    print(f"load average: start {doc['machine']['loadavg_start'][0]:.1f}, end {doc['machine']['loadavg_end'][0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        print(f"wrote {args.out}")


def _print_diagnose(d: dict[str, Any], n: int) -> dict[str, Any]:
    for label in ("verbatim", "perturbed"):
        e = d[label]
        print(f"[diagnose {n} kernels, {label}] CLI end to end: wall {e['cli_wall_s']:.2f} s, cpu "
              f"{e['cli_cpu_s']:.2f} s (target < {TARGETS['diagnose_1000_s']} s), JSON {e['cli_json_bytes'] / 1e6:.1f} MB; "
              f"--all-metrics: wall {e['cli_all_metrics_wall_s']:.2f} s, cpu {e['cli_all_metrics_cpu_s']:.2f} s, "
              f"JSON {e['cli_all_metrics_json_bytes'] / 1e6:.1f} MB; in-process cpu: parse {e['parse_cpu_s']:.2f} s, "
              f"diagnosis {e['diagnose_cpu_s']:.2f} s, JSON {e['json_cpu_s']:.2f} s")
        print("  diagnosis profile:\n    " + "\n    ".join(e["diagnose_profile"]))
    return d


def _diagnose_only(args: argparse.Namespace) -> None:
    """Re-measure the diagnose part alone; the other parts of ``--out`` are kept as they were."""
    doc = json.loads(args.out.read_text()) if args.out and args.out.exists() else {"targets": TARGETS}
    mach = machine()
    d = _print_diagnose(diagnose_times(args.kernels, args.repeats), args.kernels)
    mach["loadavg_end"] = os.getloadavg()
    d["machine"] = mach  # measured apart from the rest of the file: its own machine record
    d["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc["diagnose"] = d
    print(f"load average: start {mach['loadavg_start'][0]:.1f}, end {mach['loadavg_end'][0]:.1f} on {os.cpu_count()} CPUs")
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        print(f"wrote {args.out} (diagnose part)")


def _sweep_only(args: argparse.Namespace) -> None:
    """Re-measure the sweep part alone; the other parts of ``--out`` are kept as they were."""
    doc = json.loads(args.out.read_text()) if args.out and args.out.exists() else {"targets": TARGETS}
    mach = machine()
    s = _sweep_part()
    mach["loadavg_end"] = os.getloadavg()
    s["machine"] = mach  # measured apart from the rest of the file: its own machine record
    s["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc["sweep"] = s
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        print(f"wrote {args.out} (sweep part)")


if __name__ == "__main__":
    main()
