"""Format 4's step on fields far from zero (format.rounding_step): bytes and outliers, CPU.

    python3 benchmarks/szp_rounding_step.py --data ../shared/data --out benchmarks/results/szp_rounding_step_cpu.json

For each field and REL bound: the format 4 stream as written (its step leaves room for
the encoder's rounding), the same stream with the step at 2 * check (rounding_step
switched off in this process only), their outlier counts, and cuSZp's 1-D outlier-mode size from
``cuszp_model.py`` and how many of its reconstructions (``cuszp_model.reconstruct``) miss
the bound: it does not check them, and on these fields they miss by the same rounding. szp sizes are exact (the reference writes the streams the
GPU writes; the step comes from the host for both). Every stream is decoded and its
bound checked here.

Fields: temperature-, pressure- and density-like synthetic fields (a smooth pattern
plus noise on a physical offset), and the real fields of ``--data`` as they are and
shifted by an offset (real structure far from zero); on a field that reaches zero the
room is tiny, which its rows show.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuszp_model  # noqa: E402

from perfscout.codecs.szp import autoshape as A  # noqa: E402
from perfscout.codecs.szp import format as F  # noqa: E402

BOUNDS = (1e-2, 1e-3, 1e-4, 1e-5)
REAL = {"vorticity.512_512": (512, 512), "vorticity.128_128_41": (41, 128, 128), "999x999.float": (999, 999)}


def pattern(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """A smooth field in [-1, 1] with 1e-3 noise (float64)."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 1, n) for n in shape], indexing="ij")
    f = np.ones(shape)
    for k, g in enumerate(grids):
        f = f * np.sin(2 * np.pi * (k + 1) * g + 0.7 * k)
    return f + 1e-3 * rng.standard_normal(shape)


def fields(data: Path) -> list[tuple[str, np.ndarray]]:
    shape = (64, 256, 256)
    out = [
        ("temperature 280 +- 30 K", (280 + 30 * pattern(shape, 1)).astype(np.float32)),
        ("pressure 1e5 +- 5e3 Pa", (1e5 + 5e3 * pattern(shape, 2)).astype(np.float32)),
        ("density 1.15 +- 0.15", (1.15 + 0.15 * pattern(shape, 3)).astype(np.float32)),
    ]
    for name, shp in REAL.items():
        path = data / name
        if not path.is_file():
            print(f"(skipped {name}: not found in {data})")
            continue
        x = np.fromfile(path, dtype="<f4").reshape(shp)
        span = float(x.max() - x.min())
        out.append((name, x))
        out.append((f"{name} + 50 x range", (x + 50 * span).astype(np.float32)))
    return out


def stream(x: np.ndarray, rel: float, offset: bool) -> bytes:
    """The format 4 stream with the block shape szp chooses (its samples quantised with
    the same step), the rounding room on or off."""
    keep = F.rounding_step
    if not offset:
        F.rounding_step = lambda check, frange: None
    try:
        bnd = A.choose_for(x, "rel", rel).block_ndim
        s = F.encode(x, "rel", rel, bnd, auto_block=True)
    finally:
        F.rounding_step = keep
    h = F.parse_header(s)
    err = np.abs(F.decode(s).astype(np.float64) - x.astype(np.float64))
    assert float(np.nanmax(err)) <= h.abs_bound, (rel, bnd, offset)
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--out", default="szp_rounding_step_cpu.json")
    args = ap.parse_args()
    t0 = time.time()
    rows = []
    for name, x in fields(Path(args.data)):
        for rel in BOUNDS:
            new, old = stream(x, rel, True), stream(x, rel, False)
            hn, ho = F.parse_header(new), F.parse_header(old)
            qz = F.resolve_quantizer(x.dtype, "rel", rel, F.finite_range(x))
            cz = cuszp_model.stream_bytes(x, qz.abs_bound)
            cz_err = np.abs(cuszp_model.reconstruct(x, qz.abs_bound).astype(np.float64) - x.astype(np.float64))
            cz_viol = int(np.count_nonzero(cz_err > qz.abs_bound))
            row = {"field": name, "shape": list(x.shape), "rel": rel,
                   "block_ndim": hn.block_ndim, "block_ndim_step_2check": ho.block_ndim,
                   "abs_bound": qz.abs_bound, "rounding_step": hn.step != ho.step,
                   "cr": x.nbytes / len(new), "outliers": hn.n_outliers,
                   "cr_step_2check": x.nbytes / len(old), "outliers_step_2check": ho.n_outliers,
                   "cuszp_outlier_model_cr": x.nbytes / cz, "cuszp_bound_violations": cz_viol,
                   "cuszp_max_err_over_bound": float(cz_err.max()) / qz.abs_bound}
            rows.append(row)
            print(f"{name:34} {rel:.0e}  CR {row['cr']:7.3f} ({hn.n_outliers:7d} outliers)  "
                  f"step 2*check {row['cr_step_2check']:7.3f} ({ho.n_outliers:7d})  "
                  f"cuSZp-1D model {row['cuszp_outlier_model_cr']:7.3f} ({cz_viol} over its bound, "
                  f"max {row['cuszp_max_err_over_bound']:.3f} x)", flush=True)
    machine = {"platform": platform.platform(), "python": platform.python_version(),
               "processor": platform.processor() or platform.machine()}
    Path(args.out).write_text(json.dumps({"machine": machine, "rounding_allowance": F.ROUNDING_ALLOWANCE,
                                          "rows": rows, "wall_s": time.time() - t0}, indent=1))


if __name__ == "__main__":
    main()
