"""Closed loop on the library suite: does the fix the finding names move time as predicted?

    .venv/bin/python benchmarks/planted_library/closed_loop.py [--profiles DIR] [--json]

For each case with a fixed variant (run_library.FIXED_CASES: the pointer chase with four
interleaved chains, the register-limited stream with 8 accumulators, the hot index_add as a
shared-memory histogram), the engine's primary finding on the case is verified against the
fixed variant's launch (both in the same ncu run); measured time is the whole call's CUDA-event
median (timings.json, no profiler). Same verdict rule as benchmarks/planted/closed_loop.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from perfscout.analysis.diagnosis import diagnose_kernel  # noqa: E402
from perfscout.tools.ncu_parse import kernel_duration_s, load_raw_csv  # noqa: E402
from perfscout.tools.verify import verify_pair  # noqa: E402


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"library_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(profiles: Path = HERE / "profiles", prefix: str = "fixes") -> list[dict]:
    """Reads ``<prefix>_raw.csv``, ``<prefix>_timings.json``, ``<prefix>_run.log``: the
    device run of the cases with fixes and their fixed variants (profile_device.sh with
    ONLY=... PREFIX=fixes), so that both sides come from one ncu run and one timing run."""
    acc, lib = _load("accuracy"), _load("run_library")
    by_id = {k.id: k for k in load_raw_csv(profiles / f"{prefix}_raw.csv").kernels}
    timing = json.loads((profiles / f"{prefix}_timings.json").read_text())
    launches = acc.launches_by_case(profiles / f"{prefix}_run.log")

    def longest(case: str):
        ids = [i for i in launches.get(case, []) if i in by_id]
        return max((by_id[i] for i in ids), key=lambda k: kernel_duration_s(k) or 0.0) if ids else None

    out = []
    for case in lib.FIXED_CASES:
        fixed = case + lib.FIXED_SUFFIX
        before, after = longest(case), longest(fixed)
        ms = timing.get("cases_ms", {})
        if before is None or after is None or case not in ms or fixed not in ms:
            out.append({"kernel": case, "verdict": "not measured"})
            continue
        primary = diagnose_kernel(before)["primary"]["id"]
        r = verify_pair(before, after, primary, times_s=(ms[case] / 1e3, ms[fixed] / 1e3),
                        time_source="CUDA events (median) of the whole call")
        out.append({"case": case, **r.model_dump()})
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
    print("| case | finding | predicted gain | measured (events) | measured (ncu) | verdict |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if r.get("verdict") == "not measured":
            print(f"| {r['kernel']} | - | - | - | - | not measured |")
            continue
        pg = "-" if r["predicted_gain"] is None else f"{r['predicted_gain']:.0%}"
        mg = "-" if r["measured_gain"] is None else f"{r['measured_gain']:.0%}"
        ng = "-" if r["ncu_gain"] is None else f"{r['ncu_gain']:.0%}"
        print(f"| {r['case']} | {r['finding']} | {pg} | {mg} | {ng} | {r['verdict']} |")


if __name__ == "__main__":
    main()
