"""Fuzz campaign of the bound contract: many evaluations, every codec and mode, hostile data.

Each evaluation is a real :func:`perfscout.tools.evaluate.evaluate_full` call with its
default out-of-process codec (a native crash becomes a ``codec_crashed`` record, and this
process lives on). Every result is then re-checked here, independently of perfscout's
verdict, from the original and the reconstruction the evaluation returned:

* **unflagged violation**: the record says ``ok`` (or ``bound_ok`` is true) but an element
  is beyond the bound by more than its rounding slack, or the enforced ``abs_bound`` /
  ``max_abs_err`` is not finite, or (``rel``) the enforced bound is looser than
  ``bound * (max - min)`` computed exactly (``fractions.Fraction``), or (``psnr``) the
  PSNR is below the target. The campaign's goal is 0.
* **caller crash**: this process catching anything but a :class:`PerfscoutError` (bad
  input refused with a clear error is counted as ``refused``). Goal 0.

Families: ``normal`` (smooth / noise / decades at a random scale), ``overflow`` (values
near +-max of the dtype: the value range overflows float64 for f64 data), ``huge_range``
(tiny and huge magnitudes mixed), ``edge`` (constants, zeros, subnormals, spikes). The
known crashers (sz3-h5 near max, zfp rates below zfp's floor, sz2 pw_rel >= 16) are
in the draws: they must come back refused or as records, never as a dead caller.

    nice .venv/bin/python benchmarks/fuzz_bounds.py --n 10000 --seed 1 --out /tmp/fuzz_1.json &
    nice .venv/bin/python benchmarks/fuzz_bounds.py --n 10000 --seed 2 --out /tmp/fuzz_2.json
    .venv/bin/python benchmarks/fuzz_bounds.py --merge /tmp/fuzz_1.json /tmp/fuzz_2.json \\
        --out benchmarks/results/fuzz_bounds_cpu.json

A checkpoint of the counts is written every 500 evaluations.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import traceback
import warnings
from collections import Counter
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfscout.errors import PerfscoutError  # noqa: E402
from perfscout.tools.bounds import rounding_slack  # noqa: E402
from perfscout.tools.evaluate import evaluate_full  # noqa: E402

#: (codec, device, modes) fuzzed; szp-gpu runs its NumPy reference on a machine without a GPU.
CODECS = (
    ("sz3", "cpu", ("abs", "rel", "psnr", "ratio")),
    ("sz2", "cpu", ("abs", "rel", "pw_rel", "psnr", "ratio")),
    ("sz3-h5", "cpu", ("abs", "rel", "psnr", "ratio")),
    ("zfp", "cpu", ("abs", "rel", "psnr", "ratio", "fixed_rate")),
    ("szp-gpu", "cuda", ("abs", "rel", "psnr", "ratio")),
)
FAMILIES = ("normal", "overflow", "huge_range", "edge")


def draw_array(rng: np.random.Generator, family: str) -> np.ndarray:
    dtype = np.float32 if rng.random() < 0.5 else np.float64
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(rng.integers(2, 13 if ndim > 1 else 400)) for _ in range(ndim))
    n = math.prod(shape)
    fmax = float(np.finfo(dtype).max)
    with np.errstate(all="ignore"):
        if family == "normal":
            scale = 10.0 ** rng.uniform(-8, 8)
            kind = rng.integers(0, 3)
            if kind == 0:
                x = np.cumsum(rng.standard_normal(n)) * scale
            elif kind == 1:
                x = rng.standard_normal(n) * scale
            else:
                x = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)
        elif family == "overflow":
            top = fmax * rng.uniform(0.05, 0.999)
            kind = rng.integers(0, 3)
            if kind == 0:  # both signs at the top: max - min overflows (float64)
                x = rng.choice([-1.0, 1.0], n) * top * rng.uniform(0.5, 1.0, n)
            elif kind == 1:  # a smooth field scaled to the top
                x = np.cumsum(rng.standard_normal(n))
                x = x / max(float(np.max(np.abs(x))), 1e-300) * top
            else:  # ordinary values with a few at +-top
                x = rng.standard_normal(n)
                k = max(1, n // 20)
                x[rng.integers(0, n, k)] = rng.choice([-top, top], k)
        elif family == "huge_range":
            lo_exp = -300 if dtype is np.float64 else -37
            hi_exp = 300 if dtype is np.float64 else 37
            x = rng.standard_normal(n) * 10.0 ** rng.integers(lo_exp, hi_exp, n).astype(np.float64)
        else:
            kind = rng.integers(0, 4)
            if kind == 0:
                x = np.full(n, rng.standard_normal() * 10.0 ** rng.uniform(-30, 30))
            elif kind == 1:
                x = np.zeros(n)
            elif kind == 2:
                tiny = float(np.finfo(dtype).smallest_subnormal)
                x = rng.integers(-50, 50, n) * tiny
            else:
                x = np.zeros(n)
                x[rng.integers(0, n)] = 10.0 ** rng.uniform(-10, 30)
    x = np.clip(np.nan_to_num(x, nan=0.0, posinf=fmax, neginf=-fmax), -fmax, fmax)
    return np.ascontiguousarray(x.astype(dtype).reshape(shape))


def draw_bound(rng: np.random.Generator, codec: str, mode: str) -> float:
    if mode in ("abs",):
        return float(10.0 ** rng.uniform(-6, 2))
    if mode == "rel":
        return float(rng.choice([1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 0.5, 0.9]))
    if mode == "pw_rel":
        return float(rng.choice([1e-4, 1e-3, 1e-2, 1e-1, 0.5, 4.0, 16.0, 32.0]))
    if mode == "psnr":
        return float(rng.choice([20.0, 40.0, 60.0, 80.0, 100.0]))
    if mode == "ratio":
        return float(rng.choice([2.0, 5.0, 10.0, 30.0]))
    return float(rng.choice([0.001, 0.1, 1.0, 4.0, 8.0, 16.0, 32.0]))  # fixed_rate


def exact_rel_bound(x: np.ndarray, bound: float) -> float:
    """bound * (max - min) in exact rational arithmetic, rounded once (or the constant rules)."""
    finite = x[np.isfinite(x)].astype(np.float64)
    lo, hi = float(finite.min()), float(finite.max())
    if hi > lo:
        exact = Fraction(bound) * (Fraction(hi) - Fraction(lo))
    else:
        mag = max(abs(lo), abs(hi))
        exact = Fraction(bound) * Fraction(mag) if mag > 0 else Fraction(bound)
    return float(min(exact, Fraction(float(np.finfo(np.float64).max))))


def independent_check(x: np.ndarray, y: np.ndarray, mode: str, bound: float, rec) -> str:  # noqa: ANN001
    """'' when the record is honest, else why it is not."""
    ok_claimed = rec.status == "ok" or rec.bound_ok is True
    if not ok_claimed:
        return ""
    if mode == "fixed_rate":
        return ""
    if rec.max_abs_err is not None and not math.isfinite(rec.max_abs_err):
        return f"max_abs_err {rec.max_abs_err} with status ok"
    if y is None or y.shape != x.shape:
        return "status ok without a reconstruction of the input's shape"
    with np.errstate(all="ignore"):
        err = np.abs(x.astype(np.float64) - y.astype(np.float64))
    err = np.where(np.isnan(err), np.inf, err)
    if mode == "pw_rel":
        allowed = bound * np.abs(x.astype(np.float64))
        beyond = err - allowed > rounding_slack(x, y, allowed)
        return f"{int(beyond.sum())} element(s) beyond the pw_rel bound with status ok" if beyond.any() else ""
    ab = rec.abs_bound
    if ab is None or not math.isfinite(ab) or ab < 0:
        return f"abs_bound {ab!r} with status ok"
    if mode == "rel":
        want = exact_rel_bound(x, bound)
        if ab > want * (1 + 1e-12):
            return f"rel: enforced abs bound {ab!r} is looser than bound x R = {want!r}"
    beyond = err - ab > rounding_slack(x, y, ab)
    if beyond.any():
        return f"{int(beyond.sum())} element(s) beyond abs bound {ab:.6g} with status ok (worst {float(err.max()):.6g})"
    if mode == "psnr" and rec.psnr is not None and rec.psnr < bound:
        return f"psnr {rec.psnr} below the target {bound} with status ok"
    return ""


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"hostname": platform.node(), "cpu": cpu, "logical_cpus": os.cpu_count(), "memory_gib": round(mem, 1),
            "os": platform.platform(), "python": platform.python_version(), "numpy": np.__version__,
            "loadavg_at_start": list(os.getloadavg()),
            "note": "shared 2-core VM: other engineers' jobs run at the same time; no GPU (szp-gpu ran its NumPy reference)"}


def run(n: int, seed: int, out: Path | None, progress_every: int = 500) -> dict:
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(seed)
    statuses: Counter = Counter()
    per_codec: dict[str, Counter] = {}
    unflagged: list[dict] = []
    caller_crashes: list[dict] = []
    refused: Counter = Counter()
    crashed_examples: list[dict] = []
    started = time.perf_counter()
    cpu0 = time.process_time()
    machine_at_start = machine()

    def summary(done: int) -> dict:
        return {
            "benchmark": "fuzz_bounds", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": machine_at_start, "seed": seed, "evaluations": done, "planned": n,
            "wall_s": round(time.perf_counter() - started, 1), "caller_cpu_s": round(time.process_time() - cpu0, 1),
            "unflagged_violations": len(unflagged), "caller_crashes": len(caller_crashes),
            "statuses": dict(statuses), "refused": dict(refused),
            "per_codec_mode": {k: dict(v) for k, v in sorted(per_codec.items())},
            "unflagged_examples": unflagged[:50], "caller_crash_examples": caller_crashes[:20],
            "codec_crash_examples": crashed_examples,
        }

    def save(doc: dict) -> None:
        if out is not None:  # every checkpoint is a complete document (an interrupted run keeps its counts)
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc, indent=1, allow_nan=False))
            os.replace(tmp, out)

    for i in range(n):
        codec, device, modes = CODECS[int(rng.integers(len(CODECS)))]
        mode = modes[int(rng.integers(len(modes)))]
        family = FAMILIES[int(rng.integers(len(FAMILIES)))]
        x = draw_array(rng, family)
        bound = draw_bound(rng, codec, mode)
        key = f"{codec}/{mode}/{family}"
        counter = per_codec.setdefault(f"{codec}/{mode}", Counter())
        try:
            ev = evaluate_full(x, codec, mode, bound, device=device, repeats=1, timeout_s=60)
        except PerfscoutError:
            refused[key] += 1
            counter["refused"] += 1
            statuses["refused"] += 1
            continue
        except Exception as exc:  # noqa: BLE001 - a caller crash is what this campaign counts
            caller_crashes.append({"i": i, "case": key, "bound": bound, "dtype": str(x.dtype), "shape": list(x.shape),
                                   "error": "".join(traceback.format_exception(exc))[-2000:]})
            continue
        rec = ev.result
        statuses[rec.status] += 1
        counter[rec.status] += 1
        if rec.status in ("codec_crashed", "codec_timeout") and len(crashed_examples) < 20:
            crashed_examples.append({"case": key, "bound": bound, "dtype": str(x.dtype), "shape": list(x.shape),
                                     "status": rec.status, "error": rec.error[:300]})
        why = independent_check(x, ev.reconstructed, mode, bound, rec)
        if why:
            unflagged.append({"i": i, "case": key, "bound": bound, "dtype": str(x.dtype), "shape": list(x.shape),
                              "status": rec.status, "why": why})
        if progress_every and (i + 1) % progress_every == 0:
            print(f"{i + 1}/{n} {time.perf_counter() - started:.0f}s unflagged={len(unflagged)} "
                  f"caller_crashes={len(caller_crashes)} {dict(statuses)}", flush=True)
            save(summary(i + 1))
    result = summary(n)
    save(result)
    return result


def merge(parts: list[Path]) -> dict:
    """One campaign from several runs (different seeds, e.g. one per core)."""
    docs = [json.loads(p.read_text()) for p in parts]

    def add(key: str) -> dict:
        total: Counter = Counter()
        for d in docs:
            total.update(d[key])
        return dict(total)

    per: dict[str, Counter] = {}
    for d in docs:
        for k, v in d["per_codec_mode"].items():
            per.setdefault(k, Counter()).update(v)
    return {
        "benchmark": "fuzz_bounds", "when": max(d["when"] for d in docs), "machine": docs[0]["machine"],
        "runs": [{k: d[k] for k in ("seed", "evaluations", "planned", "wall_s", "caller_cpu_s", "when")} for d in docs],
        "evaluations": sum(d["evaluations"] for d in docs),
        "unflagged_violations": sum(d["unflagged_violations"] for d in docs),
        "caller_crashes": sum(d["caller_crashes"] for d in docs),
        "statuses": add("statuses"), "refused": add("refused"),
        "per_codec_mode": {k: dict(v) for k, v in sorted(per.items())},
        "unflagged_examples": [e for d in docs for e in d["unflagged_examples"]][:50],
        "caller_crash_examples": [e for d in docs for e in d["caller_crash_examples"]][:20],
        "codec_crash_examples": [e for d in docs for e in d["codec_crash_examples"]][:20],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--merge", type=Path, nargs="+", default=None, help="combine these result files into --out")
    args = ap.parse_args()
    if args.merge:
        r = merge(args.merge)
        if args.out is not None:
            args.out.write_text(json.dumps(r, indent=1, allow_nan=False))
    else:
        r = run(args.n, args.seed, args.out)
    print(json.dumps({k: r.get(k) for k in ("evaluations", "wall_s", "unflagged_violations", "caller_crashes",
                                         "statuses")}, indent=1))
    return 0 if r["unflagged_violations"] == 0 and r["caller_crashes"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
