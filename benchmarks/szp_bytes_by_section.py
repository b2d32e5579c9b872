"""Where the bytes of an szp stream go, format v2 against v3, next to cuSZp's size (CPU, NumPy).

    python3 benchmarks/szp_bytes_by_section.py --out benchmarks/results/szp_bytes_by_section_cpu.json

For every field x REL bound (1e-2, 1e-3, 1e-4) x block ndim (1, 2, 3 where the field has
the dimensions), the NumPy reference writes the v2 and the v3 stream (the GPU kernels write
the same bytes, tests/gpu/test_szp_gpu.py), and each is split into its sections: header,
widths, payload, corners (v3), outliers (index + value), 16-byte pads, CRC. Per stream it
also counts the blocks by kind (all-zero, plain, corner with payload words, corner only),
and, to size what a cheaper width section could win (nothing of it is built), the order-0
entropy of the width bytes (``widths_entropy_bytes``: a bound for coding them one by one) and
the 4-bit packing that fits when every width byte is below 16 (``widths_nibble_bytes``).
cuSZp's figure is its 1-D outlier mode's stream size from ``cuszp_model.py`` (validated
against cuSZp itself on the H200, tests/gpu/test_cuszp.py) at the same absolute bound.

Fields: the real fields of --data at their own size, smooth3d as the first 16 planes of
gpu_codec.py's 256 x 1024 x 1024 field and the Gaussian random field on 64 x 256 x 256 (both
from szp_cr_vs_cuszp.py). A real field missing from --data is skipped and said so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuszp_model  # noqa: E402
from szp_cr_vs_cuszp import gaussian_random_field, smooth_slab  # noqa: E402

from perfscout.codecs.szp import format as F  # noqa: E402

REAL = {"vorticity.512_512": (512, 512), "vorticity.128_128_41": (41, 128, 128),
        "999x999.float": (999, 999), "const32x32x59.float": (59, 32, 32)}
BOUNDS = (1e-2, 1e-3, 1e-4)


def sections(stream: bytes) -> dict:
    """Bytes of each section of a stream, its pads, and its blocks by kind."""
    p = F.parse(stream)
    h, lay = p.header, p.layout
    used = {
        "header": h.header_len,
        "widths": h.nblocks,
        "payload": 4 * h.payload_words,
        "corners": h.corner_bytes,
        "outliers": 8 * h.n_outliers + h.dtype.itemsize * h.n_outliers,
        "crc": 4,
    }
    used["pads"] = len(stream) - sum(used.values())
    assert used["pads"] >= 0 and lay.total == len(stream)
    w = p.widths
    corner = (w & F.CORNER_FLAG) != 0
    width = w & F.WIDTH_BITS
    blocks = {
        "zero": int(np.count_nonzero(~corner & (width == 0))),
        "plain": int(np.count_nonzero(~corner & (width > 0))),
        "corner_with_payload": int(np.count_nonzero(corner & ((width > 0) if h.version >= 3 else True))),
        "corner_only": int(np.count_nonzero(corner & (width == 0))) if h.version >= 3 else 0,
    }
    counts = np.bincount(w, minlength=256)
    prob = counts[counts > 0] / max(1, len(w))
    entropy_bytes = max(0.0, float(-(prob * np.log2(prob)).sum() * len(w) / 8)) if len(w) else 0.0
    nibble = (len(w) + 1) // 2 if len(w) and int(w.max()) < 16 else None
    return {"bytes": used, "total": len(stream), "blocks": blocks, "n_outliers": h.n_outliers,
            "widths_entropy_bytes": entropy_bytes, "widths_nibble_bytes": nibble}


def rows_for(name: str, x: np.ndarray) -> list[dict]:
    rows = []
    for rel in BOUNDS:
        qz = F.resolve_quantizer(x.dtype, "rel", rel, F.finite_range(x))
        cuszp = cuszp_model.stream_bytes(x, qz.abs_bound)
        for bnd in range(1, min(x.ndim, 3) + 1):
            v2 = F.encode(x, "rel", rel, bnd, version=2)
            v3 = F.encode(x, "rel", rel, bnd, version=3)
            assert np.array_equal(F.decode(v2), F.decode(v3))  # same reconstruction
            s2, s3 = sections(v2), sections(v3)
            row = {"field": name, "shape": list(x.shape), "nbytes": x.nbytes, "rel": rel,
                   "abs_bound": qz.abs_bound, "block_ndim": bnd, "v2": s2, "v3": s3,
                   "cr_v2": x.nbytes / s2["total"], "cr_v3": x.nbytes / s3["total"],
                   "cuszp_outlier_model_bytes": cuszp, "cr_cuszp_model": x.nbytes / cuszp}
            row["v3_vs_cuszp"] = row["cr_v3"] / row["cr_cuszp_model"]
            rows.append(row)
            b3 = s3["bytes"]
            print(f"{name:24} {rel:.0e} {bnd}-D  CR v2 {row['cr_v2']:6.2f}  v3 {row['cr_v3']:6.2f}  "
                  f"cuSZp {row['cr_cuszp_model']:6.2f} ({row['v3_vs_cuszp']:.3f}x)  v3 bytes: "
                  + " ".join(f"{k} {v}" for k, v in b3.items()), flush=True)
    return rows


def best_table(rows: list[dict]) -> str:
    """Markdown: per field and bound, v2's and v3's best block shape against cuSZp."""
    out = ["| field | REL | cuSZp (model) | v2 best (shape) | v3 best (shape) | v3 / cuSZp | v3 best: widths / payload / corners / outliers / header+pads+crc (% of stream) | widths' order-0 entropy (% of stream) |",
           "|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["field"], r["rel"]) for r in rows}, key=lambda k: (list(dict.fromkeys(r["field"] for r in rows)).index(k[0]), -k[1]))
    for f, rel in keys:
        rs = [r for r in rows if r["field"] == f and r["rel"] == rel]
        b2 = max(rs, key=lambda r: r["cr_v2"])
        b3 = max(rs, key=lambda r: r["cr_v3"])
        by = b3["v3"]["bytes"]
        tot = b3["v3"]["total"]
        pct = [100 * by[k] / tot for k in ("widths", "payload", "corners", "outliers")]
        pct.append(100 * (by["header"] + by["pads"] + by["crc"]) / tot)
        out.append(f"| {f} | {rel:.0e} | {b3['cr_cuszp_model']:.2f} | {b2['cr_v2']:.2f} ({b2['block_ndim']}-D) | "
                   f"{b3['cr_v3']:.2f} ({b3['block_ndim']}-D) | {b3['v3_vs_cuszp']:.3f} | "
                   + " / ".join(f"{v:.1f}" for v in pct)
                   + f" | {100 * b3['v3']['widths_entropy_bytes'] / tot:.1f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--out", default="szp_bytes_by_section_cpu.json")
    args = ap.parse_args()
    t0 = time.time()
    rows, skipped = [], []
    for name, shape in REAL.items():
        path = Path(args.data) / name
        if not path.is_file():
            print(f"(skipped {name}: not found in {args.data})")
            skipped.append(name)
            continue
        rows += rows_for(name, np.fromfile(path, dtype="<f4").reshape(shape))
    rows += rows_for("smooth3d[:16] (of 256x1024x1024)", smooth_slab())
    rows += rows_for("grf3d 64x256x256", gaussian_random_field())
    table = best_table(rows)
    print()
    print(table)
    machine = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
               "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__}
    doc = {"what": "szp stream bytes by section, format v2 vs v3, and cuSZp's outlier-mode size model",
           "command": "python3 benchmarks/szp_bytes_by_section.py --out " + args.out,
           "machine": machine, "skipped": skipped, "rows": rows, "best_table_md": table,
           "wall_s": time.time() - t0}
    Path(args.out).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
