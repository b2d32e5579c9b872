"""szp's automatic block shape against every fixed shape, with the NumPy reference (CPU).

    python3 benchmarks/szp_autoshape_cpu.py --data ../shared/data --out benchmarks/results/szp_autoshape_cpu.json

For each field of tests/unit/test_szp_autoshape.py (the real fields of --data at their own
size, and the synthetic ones: smooth3d slab and GRF of szp_cr_vs_cuszp.py at reduced size,
stacked levels, anisotropic spacing, a k^-5 GRF, an image, noise, tiles with seams, last axes
of 1/3/33, a 4-D field, float64, non-finite values) and REL 1e-2/1e-3/1e-4: the full stream
of each block shape, the one ``block_ndim="auto"`` chose, how much larger it is than the best
(``auto_vs_best``), the sample's size and what the choice cost on this machine (wall µs with
NumPy; the GPU's cost comes from ``benchmarks/gpu_codec.py autoshape``).

``axis_order``: whether choosing an axis order as well would pay. For every 3-D field and
REL 1e-2/1e-4, the best stream over all 6 axis permutations x 3 block shapes against the best
over the block shapes in the array's own order (the format has no axis-order field: this
measures whether it should). Asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfscout.codecs.szp import autoshape as A  # noqa: E402
from perfscout.codecs.szp import format as F  # noqa: E402
from tests.unit.test_szp_autoshape import RELS, SYNTHETIC  # noqa: E402

REAL = {"vorticity.512_512": (512, 512), "vorticity.128_128_41": (41, 128, 128),
        "999x999.float": (999, 999), "const32x32x59.float": (59, 32, 32)}


def machine() -> dict:
    from perfscout.tools.evaluate import cpu_name

    return {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__, "loadavg": os.getloadavg()}


def fields(data: Path) -> dict[str, np.ndarray]:
    out = {name: make() for name, make in SYNTHETIC.items()}
    for name, shape in REAL.items():
        if (data / name).is_file():
            out[name] = np.fromfile(data / name, dtype="<f4").reshape(shape)
        else:
            print(f"(skipped {name}: not in {data})", flush=True)
    return out


def axis_orders(data: dict[str, np.ndarray]) -> list[dict]:
    out = []
    for name, x in data.items():
        if x.ndim != 3:
            continue
        for rel in (1e-2, 1e-4):
            eb = A.resolved_abs_bound(x, "rel", rel)
            own = min(len(F.encode(x, "abs", eb, b)) for b in A.candidates(3))
            best = (own, [0, 1, 2], None)
            for perm in itertools.permutations(range(3)):
                xt = np.ascontiguousarray(x.transpose(perm))
                for b in A.candidates(3):
                    n = len(F.encode(xt, "abs", eb, b))
                    if n < best[0]:
                        best = (n, list(perm), b)
            out.append({"field": name, "rel": rel, "own_order_best_bytes": own, "best_bytes": best[0],
                        "best_axes": best[1], "best_block_ndim": best[2], "gain": own / best[0]})
            print(f"axis order {name:<22} REL {rel:.0e}: x{own / best[0]:.3f} with axes {best[1]}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default="szp_autoshape_cpu.json")
    args = ap.parse_args()
    t0 = time.time()
    rows = []
    for name, x in fields(Path(args.data)).items():
        for rel in RELS:
            full = {b: len(F.encode(x, "rel", rel, b)) for b in A.candidates(x.ndim)}
            c = A.choose_for(x, "rel", rel)
            best = min(full, key=lambda b: (full[b], b))
            row = {"field": name, "shape": list(x.shape), "dtype": x.dtype.name, "rel": rel,
                   "stream_bytes": {str(k): v for k, v in full.items()}, "best_block_ndim": best,
                   "auto_block_ndim": c.block_ndim, "auto_vs_best": full[c.block_ndim] / full[best],
                   "ratio_auto": x.nbytes / full[c.block_ndim],
                   "sample_elems": c.sample_elems, "sample_fraction": c.sample_elems / x.size,
                   "sample_bytes": {str(k): v for k, v in c.sample_bytes.items()},
                   "estimated_bytes": {str(k): v for k, v in c.estimated_bytes.items()},
                   "choice_us_numpy": 1e6 * c.seconds}
            rows.append(row)
            print(f"{name:<22} {str(x.shape):<18} REL {rel:.0e}  best {best}-D  auto {c.block_ndim}-D  "
                  f"auto/best {row['auto_vs_best']:.4f}  sample {100 * row['sample_fraction']:5.1f} %  "
                  f"{row['choice_us_numpy'] / 1e3:6.1f} ms", flush=True)
    worst = max(rows, key=lambda r: r["auto_vs_best"])
    orders = axis_orders(fields(Path(args.data)))
    doc = {"machine": machine(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
           "wall_s": time.time() - t0, "format_version": F.VERSION,
           "sampling": {"fraction": A.SAMPLE_FRACTION, "min_elems": A.MIN_SAMPLE_ELEMS,
                        "max_elems": A.MAX_SAMPLE_ELEMS, "whole_elems": A.WHOLE_ELEMS},
           "summary": {"pairs": len(rows), "auto_is_best": sum(r["auto_block_ndim"] == r["best_block_ndim"] for r in rows),
                       "worst_auto_vs_best": worst["auto_vs_best"], "worst": [worst["field"], worst["rel"]]},
           "rows": rows, "axis_order": orders}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc["summary"]))
    print("axis order: best gain", max(r["gain"] for r in orders))


if __name__ == "__main__":
    main()
