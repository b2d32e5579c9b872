"""What running the codec out of process costs per evaluation.

:func:`perfscout.tools.evaluate.evaluate` runs in a child process by default (forked for
CPU codecs, from a forkserver for CUDA ones; :mod:`perfscout.tools.isolate`). This times
the same evaluation in-process (``isolate=False``) and isolated, interleaved so both see
the same machine load, for a few field sizes; the overhead is the difference of the
medians and the median of per-pair differences.

    nice .venv/bin/python benchmarks/isolation_overhead.py --out benchmarks/results/isolation_overhead_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfscout.tools.evaluate import evaluate  # noqa: E402

CASES = [  # (codec, device, shape)
    ("sz3", "cpu", (16, 16, 16)),
    ("sz3", "cpu", (64, 64, 64)),
    ("sz3", "cpu", (256, 256, 64)),
    ("zfp", "cpu", (16, 16, 16)),
    ("szp-gpu", "cuda", (16, 16, 16)),
    ("szp-gpu", "cuda", (64, 64, 64)),
]


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"hostname": platform.node(), "cpu": cpu, "logical_cpus": os.cpu_count(), "python": platform.python_version(),
            "loadavg_at_start": list(os.getloadavg()),
            "note": "shared 2-core VM under other engineers' load; no GPU (szp-gpu runs its NumPy reference)"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for codec, device, shape in CASES:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        evaluate(x, codec, "abs", 1e-3, device=device, repeats=1)  # warm: imports, forkserver start
        evaluate(x, codec, "abs", 1e-3, device=device, repeats=1, isolate=False)
        here, child, diffs = [], [], []
        for _ in range(args.pairs):
            t0 = time.perf_counter()
            evaluate(x, codec, "abs", 1e-3, device=device, repeats=1, isolate=False)
            t1 = time.perf_counter()
            evaluate(x, codec, "abs", 1e-3, device=device, repeats=1)
            t2 = time.perf_counter()
            here.append(t1 - t0)
            child.append(t2 - t1)
            diffs.append((t2 - t1) - (t1 - t0))
        row = {"codec": codec, "device": device, "shape": list(shape), "nbytes": int(x.nbytes),
               "start_method": "forkserver" if device == "cuda" else "fork",
               "in_process_median_ms": round(1e3 * statistics.median(here), 2),
               "isolated_median_ms": round(1e3 * statistics.median(child), 2),
               "overhead_median_of_pairs_ms": round(1e3 * statistics.median(diffs), 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    doc = {"benchmark": "isolation_overhead", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": machine(), "pairs": args.pairs, "rows": rows}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
