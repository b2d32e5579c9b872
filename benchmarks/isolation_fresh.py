"""The default, isolated ``evaluate()`` against the codec's own time, each in a fresh process.

Issue 27's figure: ``evaluate()`` runs the whole evaluation in a forked child
(:mod:`perfscout.tools.isolate`); a user calls it once from a fresh interpreter. Each of
``--processes`` fresh Python processes builds the same smooth float32 field of ``--mib``
MiB and measures, in alternating order (so neither side is always the one with warm
caches):

- the codec's own work: SZ3 (``pysz`` through perfscout's Codec) compress + decompress at
  the same absolute bound, in this process;
- ``evaluate(x, "sz3", "rel", 1e-3, repeats=1)`` with its default child process;

and the split of the difference: the import of the evaluation code, the metric pass's
compiled kernels loaded before the fork (``warm_before_fork``), the codec time inside the
child (the record's compress_s + decompress_s), the metric pass alone (timed in-process on
the same pair), and what remains (fork, limits, the reply). Peak RSS is the largest of the
process's own and the child's (``RUSAGE_CHILDREN``), over the input's size.

    .venv/bin/python benchmarks/isolation_fresh.py --mib 256 --processes 10 \
        --out benchmarks/results/isolation_fresh_cpu.json
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


def _field(mib: int):
    import numpy as np

    n = mib * 2**20 // 4
    nz = max(1, n // (512 * 512))
    z, y, x = np.ogrid[0:nz, 0:512, 0:512]
    f = (np.sin(x / 37.0) * np.cos(y / 23.0) + 0.3 * np.sin((x + y + z) / 11.0)).astype(np.float32)
    return np.ascontiguousarray(f)


def child(mib: int, codec_first: bool) -> dict:
    t0 = time.perf_counter()
    import numpy as np  # noqa: F401

    from perfscout.tools.evaluate import evaluate

    t_import = time.perf_counter() - t0
    x = _field(mib)
    from perfscout.analysis.streaming import warm_before_fork
    from perfscout.codecs.registry import get_codec
    from perfscout.tools import bounds as B

    abs_bound = B.rel_abs_bound(x, 1e-3)[0]
    out: dict = {"nbytes": int(x.nbytes), "shape": list(x.shape), "import_s": round(t_import, 3),
                 "codec_first": codec_first}

    def own() -> None:
        codec = get_codec("sz3", "abs", abs_bound)
        t = time.perf_counter()
        packed = codec.compress(x)
        t1 = time.perf_counter()
        y = codec.decompress(packed)
        t2 = time.perf_counter()
        out["own_compress_s"], out["own_decompress_s"] = round(t1 - t, 3), round(t2 - t1, 3)
        out["own_s"] = round(t2 - t, 3)
        t3 = time.perf_counter()
        B.verify_and_measure(x, np.asarray(y).reshape(x.shape), packed.nbytes, abs_bound=abs_bound)
        out["metric_pass_in_process_s"] = round(time.perf_counter() - t3, 3)

    def isolated() -> None:
        t = time.perf_counter()
        warmed = warm_before_fork(x)
        t1 = time.perf_counter()
        r = evaluate(x, "sz3", "rel", 1e-3, repeats=1)
        t2 = time.perf_counter()
        out["warm_before_fork_s"], out["warmed"] = round(t1 - t, 3), warmed
        out["evaluate_s"] = round(t2 - t, 3)  # what the user waits for: the warm-up included
        out["child_codec_s"] = round((r.compress_s or 0) + (r.decompress_s or 0), 3)
        out["status"], out["bound_ok"], out["ratio"] = r.status, r.bound_ok, r.ratio

    for step in ((own, isolated) if codec_first else (isolated, own)):
        step()
    mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    out["peak_rss_self_x_input"] = round(mine / x.nbytes, 3)
    out["peak_rss_child_x_input"] = round(kids / x.nbytes, 3)
    out["evaluate_x_own"] = round(out["evaluate_s"] / out["own_s"], 3)
    out["rest_s"] = round(out["evaluate_s"] - out["warm_before_fork_s"] - out["child_codec_s"]
                          - out["metric_pass_in_process_s"], 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", choices=("codec", "evaluate"), default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.mib, args.child == "codec")))
        return 0
    rows = []
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for i in range(args.processes):
        first = "codec" if i % 2 == 0 else "evaluate"
        proc = subprocess.run([sys.executable, __file__, "--mib", str(args.mib), "--child", first],
                              capture_output=True, text=True, env=env, check=True)
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(json.dumps(row), flush=True)
    ratios = [r["evaluate_x_own"] for r in rows]
    doc = {
        "benchmark": "isolation_fresh", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"hostname": platform.node(), "cpu": platform.processor() or platform.machine(),
                    "logical_cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_at_start": list(os.getloadavg())},
        "codec": "sz3", "mode": "rel", "bound": 1e-3, "mib": args.mib, "processes": args.processes,
        "evaluate_x_own": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
        "peak_rss_child_x_input_max": max(r["peak_rss_child_x_input"] for r in rows),
        "rows": rows,
    }
    print(json.dumps({k: v for k, v in doc.items() if k != "rows"}, indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
