"""Calibration of the regression runner's verdicts: how often it decides on noise, how often
it finds a known change. Two parts, one JSON document on stdout:

1. **simulated** (seeded, exact): same-configuration pairs on a noisy shared machine (repeats
   scattered 8-35 % log-normal or heavy-tailed t(3), drift between the two runs as large as
   that scatter), and known effects under several noise levels.
2. **real, on this machine**: pairs of measurements of one configuration (a real codec
   evaluation, and a sandboxed benchmark program), taken back to back, compared like any
   two runs. Every one should come out unchanged or too noisy to tell.

    python benchmarks/regression_calibration.py [--quick] > benchmarks/results/regression_calibration_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from perfscout.analysis import regression as R


def _shared(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    sigma = rng.uniform(0.08, 0.35)
    drift = rng.normal(0.0, sigma)
    return rng.lognormal(0.0, sigma, n), rng.lognormal(drift, sigma, n)


def _shared_t(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    sigma = rng.uniform(0.08, 0.35)
    drift = rng.normal(0.0, sigma)
    return np.exp(sigma * rng.standard_t(3, n)), np.exp(drift + sigma * rng.standard_t(3, n))


def _overshoot(rng: np.random.Generator, n: int, effect: float) -> tuple[np.ndarray, np.ndarray]:
    """A sleep-like floor plus one-sided overshoot on about half of the repeats."""
    def side(m: float) -> np.ndarray:
        return m + rng.exponential(m * rng.uniform(0.05, 0.6), n) * (rng.random(n) < 0.5)
    return side(0.08), side(0.08 * effect)


def simulate(pairs: int) -> dict:
    out: dict = {"same_configuration": {}, "known_effects": []}
    for name, model in (("lognormal", _shared), ("t3", _shared_t)):
        for n in (5, 10, 20):
            c = Counter(R.compare_measured("t", *model(np.random.default_rng(s), n)).verdict for s in range(pairs))
            out["same_configuration"][f"{name}_n{n}"] = dict(c)
    cases = [("lognormal", 0.005, 1.05, 0.03, 10), ("lognormal", 0.01, 1.05, 0.03, 10),
             ("lognormal", 0.02, 1.10, 0.05, 10), ("lognormal", 0.10, 1.5, 0.05, 10),
             ("lognormal", 0.30, 3.0, 0.05, 10), ("overshoot", None, 1 / 3.3, 0.05, 6),
             ("overshoot", None, 1 / 3.3, 0.05, 10)]
    for kind, sigma, effect, thr, n in cases:
        c: Counter = Counter()
        for s in range(pairs):
            rng = np.random.default_rng(s)
            if kind == "overshoot":
                b, x = _overshoot(rng, n, effect)
            else:
                b, x = rng.lognormal(0.0, sigma, n), rng.lognormal(np.log(effect), sigma, n)
            c[R.compare_measured("t", b, x, threshold=thr).verdict] += 1
        out["known_effects"].append({"noise": kind if sigma is None else f"lognormal sigma {sigma}",
                                     "true_ratio": round(effect, 4), "threshold": thr, "repeats": n,
                                     "verdicts": dict(c)})
    return out


def real_codec_pairs(pairs: int, repeats: int) -> dict:
    from perfscout.datasets import synthetic
    from perfscout.tools.evaluate import evaluate_full
    from perfscout.tools.regress import RunSamples, compare_runs, task_from_evaluation

    field = synthetic("grf", (64, 64, 64), dtype="f32", seed=1)
    verdicts: Counter = Counter()
    metric_verdicts: Counter = Counter()
    spreads = []
    for _ in range(pairs):
        runs = [RunSamples(source=f"run{i}", tasks=[task_from_evaluation(
            evaluate_full(field, "sz3", "rel", 1e-3, repeats=repeats, dataset="grf"), "sz3")]) for i in (1, 2)]
        res = compare_runs(*runs)
        verdicts[res.verdict] += 1
        for m in res.tasks[0].metrics:
            if m.kind == "measured":
                metric_verdicts[f"{m.metric}:{m.verdict}"] += 1
                spreads.append(max(m.range_baseline, m.range_candidate))
    return {"what": f"sz3 rel 1e-3 on grf 64^3 (1 MiB), {repeats} repeats per run, two runs back to back",
            "pairs": pairs, "verdicts": dict(verdicts), "timing_metric_verdicts": dict(metric_verdicts),
            "spread_median": float(np.median(spreads)), "spread_max": float(np.max(spreads))}


def real_bench_pairs(pairs: int, repeats: int) -> dict:
    from perfscout.tools.bench import parse_bench_spec, run_bench
    from perfscout.tools.regress import compare_runs

    prog = "import time; t0 = time.perf_counter(); sum(range(300000)); print(f'elapsed: {time.perf_counter() - t0:.6f}')"
    verdicts: Counter = Counter()
    spreads = []
    with tempfile.TemporaryDirectory() as d:
        for p in range(pairs):
            runs = []
            for side in ("a", "b"):
                spec = parse_bench_spec({"benchmarks": [{"name": "loop", "command": [sys.executable, "-c", prog],
                                                         "figure": {"regex": r"elapsed: (\S+)"}}],
                                         "repeats": repeats, "warmup": 1})
                runs.append(run_bench(spec, Path(d) / f"{p}{side}", cwd=Path(d))[""])
            res = compare_runs(*runs)
            verdicts[res.verdict] += 1
            m = next(x for x in res.tasks[0].metrics if x.kind == "measured")
            spreads.append(max(m.range_baseline or 0, m.range_candidate or 0))
    return {"what": f"a sandboxed Python loop (sum of 300k ints), {repeats} repeats per run, two runs back to back",
            "pairs": pairs, "verdicts": dict(verdicts), "spread_median": float(np.median(spreads)),
            "spread_max": float(np.max(spreads))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer pairs (a smoke run)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    pairs = 200 if args.quick else 1000
    doc = {
        "benchmark": "regression runner calibration: decisions on noise vs known effects",
        "rules": {"min_repeats": R.MIN_REPEATS, "alpha": R.ALPHA, "noise_factor": R.NOISE_FACTOR,
                  "noisy_spread": R.NOISY_SPREAD, "confidence": R.CONFIDENCE, "default_threshold": 0.05},
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                    "loadavg_at_start": list(os.getloadavg())},
        "simulated": simulate(pairs),
        "real_codec": real_codec_pairs(4 if args.quick else 20, 10),
        "real_bench": real_bench_pairs(2 if args.quick else 6, 10),
    }
    doc["machine"]["loadavg_at_end"] = list(os.getloadavg())
    doc["wall_s"] = time.perf_counter() - t0
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
