"""How much does perfscout's harness add over calling pysz (SZ3) directly?

On one 64 MiB float32 field (a 256^3 Gaussian random field by default), the same SZ3
configuration (abs bound, interp+Lorenzo) is timed three ways:

1. **direct**: ``pysz.sz.compress`` / ``sz.decompress``, one warm-up, median of N calls;
2. **evaluate**: :func:`perfscout.tools.evaluate.evaluate` in this process (codec
   wrapper with its input checks and stream checksum, the timing helper), reporting the
   median compress/decompress times it records;
3. **sweep**: one task of a real sweep (child process, store), the same record columns.

Rounds alternate direct and evaluate so drift on a shared machine hits both alike. The
overhead is (harness median - direct median) / direct median on compress + decompress
time. The sweep's end-to-end wall time (process start, data generation, verification and
metrics, commit) is printed too, for what it is: the cost of a task, not of the timing.

    .venv/bin/python benchmarks/harness_overhead.py [--mib 64] [--repeats 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfscout.datasets import synthetic  # noqa: E402
from perfscout.tools.evaluate import evaluate  # noqa: E402


def direct(data: np.ndarray, bound: float, repeats: int) -> tuple[float, float]:
    from pysz import sz, szAlgorithm, szConfig, szErrorBoundMode

    conf = szConfig()
    conf.cmprAlgo = szAlgorithm.INTERP_LORENZO  # SZ3Codec's default
    conf.errorBoundMode = szErrorBoundMode.ABS
    conf.absErrorBound = bound

    def once() -> tuple[float, float]:
        t0 = time.perf_counter_ns()
        stream, _ = sz.compress(data, conf)
        t1 = time.perf_counter_ns()
        sz.decompress(stream, data.dtype, data.shape)
        t2 = time.perf_counter_ns()
        return (t1 - t0) / 1e9, (t2 - t1) / 1e9

    once()  # warm-up, as the harness does
    samples = [once() for _ in range(repeats)]
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def shape_for(mib: int) -> tuple[int, int, int]:
    n = round((mib * 2**20 / 4) ** (1 / 3))
    return (n, n, n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rel", type=float, default=1e-3, help="bound relative to the value range")
    ap.add_argument("--no-sweep", action="store_true", help="skip the child-process sweep measurement")
    args = ap.parse_args()

    shape = shape_for(args.mib)
    field = synthetic("grf", shape, "f32", seed=0)
    data = field.array
    bound = args.rel * float(data.max() - data.min())
    print(f"field: grf {shape} float32, {data.nbytes / 2**20:.1f} MiB; SZ3 abs bound {bound:.4g} "
          f"(rel {args.rel:g}); {args.repeats} repeats x {args.rounds} rounds")

    d_c, d_d, e_c, e_d = [], [], [], []
    for r in range(args.rounds):
        c, d = direct(data, bound, args.repeats)
        d_c.append(c)
        d_d.append(d)
        rec = evaluate(data, "sz3", "abs", bound, repeats=args.repeats, dataset="grf")
        assert rec.status == "ok" and rec.bound_ok, rec.error
        e_c.append(rec.compress_s)
        e_d.append(rec.decompress_s)
        print(f"  round {r + 1}: direct {c:.4f} + {d:.4f} s | evaluate {rec.compress_s:.4f} + "
              f"{rec.decompress_s:.4f} s (CR {rec.ratio:.2f})")

    dc, dd, ec, ed = (statistics.median(x) for x in (d_c, d_d, e_c, e_d))
    base = dc + dd

    def pct(x: float, ref: float) -> str:
        return f"{100 * (x - ref) / ref:+.2f} %"

    print(f"direct pysz   : compress {dc:.4f} s, decompress {dd:.4f} s, total {base:.4f} s")
    print(f"evaluate()    : compress {ec:.4f} s ({pct(ec, dc)}), decompress {ed:.4f} s ({pct(ed, dd)}), "
          f"total {ec + ed:.4f} s -> overhead {pct(ec + ed, base)}")

    if not args.no_sweep:
        from perfscout.api_sweep import sweep

        spec = {
            "name": "overhead", "repeats": args.repeats, "jobs": 1, "memory_limit_mb": 8192,
            "datasets": [{"synthetic": f"grf:{','.join(map(str, shape))}"}],
            "codecs": ["sz3"], "modes": ["abs"], "bounds": [bound],
        }
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            df = sweep(spec, out=Path(tmp) / "run", progress=False)
            wall = time.perf_counter() - t0
        row = df.iloc[0]
        sc, sd = float(row["compress_s"]), float(row["decompress_s"])
        print(f"sweep task    : compress {sc:.4f} s ({pct(sc, dc)}), decompress {sd:.4f} s ({pct(sd, dd)}), "
              f"total {sc + sd:.4f} s -> overhead {pct(sc + sd, base)}")
        print(f"sweep task end to end (child start, field generation, {args.repeats + 1}x compress and "
              f"decompress, verification, metrics, commit): {wall:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
