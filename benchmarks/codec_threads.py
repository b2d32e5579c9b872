"""The CPU codecs' ``threads`` option measured: wall time and ratio, one stream against N chunks.

For each codec and thread count: compress and decompress wall-clock medians over
``--repeats`` calls (after one untimed call), the compression ratio, and the bound checked
on the reconstruction; CPU seconds (this process plus the chunk processes) beside the wall
time, because on a shared machine a second process may find no free core. The libraries here have no OpenMP (pysz's version, hdf5plugin's
``get_config().build_config.openmp`` and zfpy are recorded), so N > 1 is N independent slabs
in forked processes (:mod:`perfscout.codecs.chunked`).

    .venv/bin/python benchmarks/codec_threads.py [--mib 64] [--threads 1 2] [--repeats 3]
        [--out benchmarks/results/codec_threads_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfscout import datasets  # noqa: E402
from perfscout.codecs.registry import get_codec  # noqa: E402

CASES = [("sz3", "abs", 1e-3), ("sz3", "rel", 1e-3), ("zfp", "abs", 1e-3), ("sz2", "abs", 1e-3),
         ("sz3-h5", "abs", 1e-3)]


def machine() -> dict:
    import hdf5plugin

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "")
    return {"hostname": platform.node(), "cpu": cpu, "logical_cpus": os.cpu_count(),
            "python": platform.python_version(), "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
            "pysz": metadata.version("pysz"), "zfpy": metadata.version("zfpy"),
            "hdf5plugin": metadata.version("hdf5plugin"),
            "hdf5plugin_openmp": bool(hdf5plugin.get_config().build_config.openmp),
            "note": "shared 2-core VM: other engineers' jobs run at the same time"}


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the chunk processes)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """Median wall and CPU seconds of ``fn`` (CPU: this process plus the chunk processes)."""
    out = fn()  # untimed: first-call costs stay out of the median
    walls, cpus = [], []
    for _ in range(repeats):
        c0, t0 = _cpu(), time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "codec_threads_cpu.json")
    a = ap.parse_args()
    n = a.mib * 2**20 // 4
    side = round((n / 4) ** (1 / 3))
    shape = (4 * side, side, side)
    made = datasets.synthetic("smooth", shape, "float32", 0)
    field = np.asarray(getattr(made, "array", made))
    value_range = float(field.max()) - float(field.min())
    rows = []
    for codec_id, mode, bound in CASES:
        base = None
        for threads in a.threads:
            codec = get_codec(codec_id, mode=mode, bound=bound, threads=threads)
            load = os.getloadavg()[0]
            c_s, c_cpu, z = timed(lambda: codec.compress(field), a.repeats)
            d_s, d_cpu, out = timed(lambda: codec.decompress(z), a.repeats)
            err = float(np.max(np.abs(out.astype(np.float64) - field)))
            abs_bound = bound * value_range if mode == "rel" else bound
            row = {"codec": codec_id, "mode": mode, "bound": bound, "threads": threads,
                   "chunks": int(z.meta.get("chunks", 1)), "ratio": field.nbytes / z.nbytes,
                   "compress_s": c_s, "decompress_s": d_s, "compress_cpu_s": c_cpu, "decompress_cpu_s": d_cpu,
                   "max_abs_err": err, "bound_ok": err <= abs_bound, "loadavg_1min": round(load, 2)}
            if base is None:
                base = row
            row["compress_speedup"] = base["compress_s"] / c_s
            row["decompress_speedup"] = base["decompress_s"] / d_s
            # what chunking costs in CPU: above 1, the chunked work is more than the single stream's
            row["compress_cpu_ratio"] = c_cpu / base["compress_cpu_s"]
            row["decompress_cpu_ratio"] = d_cpu / base["decompress_cpu_s"]
            row["ratio_change_pct"] = 100 * (row["ratio"] / base["ratio"] - 1)
            rows.append(row)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}),
                  file=sys.stderr)
    doc = {"benchmark": "codec_threads", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "field": {"kind": "smooth", "shape": list(shape), "dtype": "float32", "MiB": field.nbytes / 2**20},
           "repeats": a.repeats, "machine": machine(), "rows": rows}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
