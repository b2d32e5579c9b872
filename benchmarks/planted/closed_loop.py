"""Closed loop on the planted suite: predicted vs measured change for each fixed variant.

    .venv/bin/python benchmarks/planted/closed_loop.py [--profiles DIR] [--json]

For every planted kernel, the finding the suite expects is verified against the kernel's
fixed variant, both profiled in the same ncu run on the H200 (profiles/planted_raw.csv);
measured time comes from CUDA events (profiles/timings.json, no profiler attached) and,
beside it, from ncu's gpu__time_duration. Misses are listed as misses.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from suite import CASES  # noqa: E402

from perfscout.tools.ncu_parse import load_raw_csv  # noqa: E402
from perfscout.tools.verify import find_kernel, verify_with_timings  # noqa: E402


def run(profiles: Path = HERE / "profiles") -> list[dict]:
    kernels = load_raw_csv(profiles / "planted_raw.csv").kernels
    timings = json.loads((profiles / "timings.json").read_text())
    out = []
    for c in CASES:
        if c.control:
            continue
        r = verify_with_timings(find_kernel(kernels, c.name), find_kernel(kernels, c.fixed),
                                c.expected, timings)
        out.append(r.model_dump())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=Path, default=HERE / "profiles")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = run(a.profiles)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print("| kernel | finding | predicted gain | measured (events) | measured (ncu) | metrics moved | verdict |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        moved = ", ".join(f"{m['metric'].split('.')[0]} {'ok' if m['ok'] else ('n/a' if m['ok'] is None else 'NO')}"
                          for m in r["metrics"]) or "-"
        pg = "-" if r["predicted_gain"] is None else f"{r['predicted_gain']:.0%}"
        mg = "-" if r["measured_gain"] is None else f"{r['measured_gain']:.0%}"
        ng = "-" if r["ncu_gain"] is None else f"{r['ncu_gain']:.0%}"
        print(f"| {r['kernel']} | {r['finding']} | {pg} | {mg} | {ng} | {moved} | {r['verdict']} |")
    hits = sum(r["verdict"] == "hit" for r in rows)
    print(f"\n{hits}/{len(rows)} predictions hit (within max(10 pts, half the prediction)).")


if __name__ == "__main__":
    main()
