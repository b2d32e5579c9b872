"""How much does perfscout's harness add over calling pysz (SZ3) directly?

On one 64 MiB float32 field (a 256^3 Gaussian random field by default), the same SZ3
configuration (abs bound, interp+Lorenzo) is timed:

1. **paired**: N interleaved pairs of single calls, one *direct* (``pysz.sz.compress`` then
   ``sz.decompress``) and one through the *harness* path that
   :func:`perfscout.tools.evaluate.evaluate` times (the ``sz3`` codec wrapper with its input
   checks and stream checksum, called by ``perfscout.analysis.timing.time_callable``).
   Interleaving exposes both to the same machine load; the overhead is reported on the
   medians and as the median of per-pair ratios (robust to load drifting during the run).
2. **evaluate** and **sweep**: one full ``evaluate()`` call and one real sweep task (child
   process, store), with the median times they *record*, against the direct median.
   These are not interleaved, so on a busy machine they carry its noise.

The sweep's end-to-end wall time (process start, data generation, verification and
metrics, commit) is printed for what it is: the cost of a task, not of its timing.

    .venv/bin/python benchmarks/harness_overhead.py [--mib 64] [--pairs 21] [--repeats 5]
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

from perfscout.analysis.timing import time_callable  # noqa: E402
from perfscout.codecs import get_codec  # noqa: E402
from perfscout.datasets import synthetic  # noqa: E402
from perfscout.tools.evaluate import evaluate  # noqa: E402


def direct_calls(data: np.ndarray, bound: float):
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

    return once


def harness_calls(data: np.ndarray, bound: float):
    codec = get_codec("sz3", "abs", bound)

    def once() -> tuple[float, float]:
        # Exactly what evaluate() times: time_callable around the codec's methods.
        c_stats, compressed = time_callable(lambda: codec.compress(data), repeats=1, warmup=0)
        d_stats, _ = time_callable(lambda: codec.decompress(compressed), repeats=1, warmup=0)
        return c_stats.median_s, d_stats.median_s

    return once


def shape_for(mib: int) -> tuple[int, int, int]:
    n = round((mib * 2**20 / 4) ** (1 / 3))
    return (n, n, n)


def paired(a, b, n: int) -> tuple[float, float, float, float, float]:
    """Interleave n single calls of a and b (alternating which goes first); medians and ratio."""
    pairs = []
    for i in range(n):
        if i % 2 == 0:
            ra, rb = a(), b()
        else:
            rb, ra = b(), a()
        pairs.append((ra, rb))
    ac = statistics.median(p[0][0] for p in pairs)
    ad = statistics.median(p[0][1] for p in pairs)
    bc = statistics.median(p[1][0] for p in pairs)
    bd = statistics.median(p[1][1] for p in pairs)
    ratio = statistics.median((p[1][0] + p[1][1]) / (p[0][0] + p[0][1]) for p in pairs)
    return ac, ad, bc, bd, ratio


def pct(x: float, ref: float) -> str:
    return f"{100 * (x - ref) / ref:+.2f} %"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=21, help="interleaved direct/harness pairs")
    ap.add_argument("--repeats", type=int, default=5, help="repeats of the evaluate() and sweep runs")
    ap.add_argument("--rel", type=float, default=1e-3, help="bound relative to the value range")
    ap.add_argument("--no-sweep", action="store_true", help="skip the child-process sweep measurement")
    ap.add_argument("--no-control", action="store_true", help="skip the direct-vs-direct (A/A) noise control")
    args = ap.parse_args()

    shape = shape_for(args.mib)
    data = synthetic("grf", shape, "f32", seed=0).array
    bound = args.rel * float(data.max() - data.min())
    print(f"field: grf {shape} float32, {data.nbytes / 2**20:.1f} MiB; SZ3 abs bound {bound:.4g} (rel {args.rel:g})")

    direct, harness = direct_calls(data, bound), harness_calls(data, bound)
    direct(), harness()  # warm-up both paths
    dc, dd, hc, hd, ratio = paired(direct, harness, args.pairs)
    base = dc + dd
    print(f"paired, {args.pairs} interleaved single calls each, medians:")
    print(f"  direct pysz : compress {dc:.4f} s, decompress {dd:.4f} s, total {base:.4f} s")
    print(f"  harness     : compress {hc:.4f} s ({pct(hc, dc)}), decompress {hd:.4f} s ({pct(hd, dd)}), "
          f"total {hc + hd:.4f} s")
    print(f"  OVERHEAD    : {pct(hc + hd, base)} on medians; {100 * (ratio - 1):+.2f} % median of per-pair ratios")
    if not args.no_control:
        # A/A control: the same direct call against itself, interleaved the same way. What
        # it shows is the resolution of this measurement on this machine right now.
        other = direct_calls(data, bound)
        ac, ad, bc, bd, aratio = paired(direct, other, args.pairs)
        print(f"  A/A control : direct vs direct {pct(bc + bd, ac + ad)} on medians; "
              f"{100 * (aratio - 1):+.2f} % median of per-pair ratios (the noise floor)")

    rec = evaluate(data, "sz3", "abs", bound, repeats=args.repeats, dataset="grf")
    assert rec.status == "ok" and rec.bound_ok, rec.error
    ec, ed = rec.compress_s, rec.decompress_s
    print(f"evaluate() recorded (median of {args.repeats}): compress {ec:.4f} s, decompress {ed:.4f} s, "
          f"total {ec + ed:.4f} s ({pct(ec + ed, base)} vs the direct median; CR {rec.ratio:.2f})")

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
        print(f"sweep task recorded (child process): compress {sc:.4f} s, decompress {sd:.4f} s, "
              f"total {sc + sd:.4f} s ({pct(sc + sd, base)} vs the direct median)")
        print(f"sweep task end to end (child start, field generation, {args.repeats + 1}x compress and "
              f"decompress, verification, metrics, commit): {wall:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
