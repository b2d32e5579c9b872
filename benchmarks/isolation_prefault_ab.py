"""A/B of the first (two-children) isolated evaluate(): as perfscout runs it ("default": the
caller faults the hand-over mapping's pages beside the codec, tools/evaluate.py) against
"noprefault" (the codec child's copy faults them). One fresh process per run; prints one JSON
line: own = the codec's own compress + decompress (SZ3, the bound rel 1e-3 resolves to, mean
of three runs in this process), x = evaluate / own, and evaluate's timing split.

    for i in 1 2 3 4; do for v in default noprefault; do
      NUMPY_MADVISE_HUGEPAGE=0 .venv/bin/python benchmarks/isolation_prefault_ab.py $v; done; done

Results: benchmarks/results/isolation_prefault_ab_{h200,cpu}.log.
"""
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from isolation_fresh import _field  # noqa: E402
from perfscout.codecs.registry import get_codec  # noqa: E402
from perfscout.tools import bounds as B  # noqa: E402
import perfscout.tools.evaluate as E  # noqa: E402

variant = sys.argv[1] if len(sys.argv) > 1 else "default"
if variant not in ("default", "noprefault"):
    sys.exit(f"variant must be default or noprefault, got {variant!r}")
if variant == "noprefault":  # the caller does not fault the hand-over mapping beside the codec
    E._available_memory_bytes = lambda: 0
x = _field(256)
ab = B.rel_abs_bound(x, 1e-3)[0]


def own() -> float:
    c = get_codec("sz3", "abs", ab)
    t = time.perf_counter()
    c.decompress(c.compress(x))
    return time.perf_counter() - t


o = [own(), own()]
t = time.perf_counter()
ev = E.evaluate_full(x, "sz3", "rel", 1e-3, repeats=1, keep_reconstruction=False)  # = evaluate()
te = time.perf_counter() - t
o.append(own())
s = ev.extra["timing_split"]
m = statistics.fmean(o)
print(json.dumps({"variant": variant, "own_s": round(m, 3), "evaluate_s": round(te, 3), "x": round(te / m, 3),
                  **{k: round(v, 3) for k, v in s.items() if k not in ("started", "finished")}}), flush=True)
