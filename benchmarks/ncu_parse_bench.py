"""How long does parsing a 1,000-kernel ``ncu --csv --page raw`` file take?

The file is made by repeating the real kernel rows of the committed H200 fixture
(tests/fixtures/ncu/h200_cupy_kernels_raw.csv) with fresh launch IDs, so every cell is
something ncu really printed. Target (issues #3, #13): the whole ``perfscout diagnose`` of
1,000 kernels under 2 s (benchmarks/harness.py --only-diagnose measures it end to end); this
script times the parse alone, of every column and of the columns the engine reads. Prints
the timings; asserts nothing (performance is measured here, not in the test suite).

    .venv/bin/python benchmarks/ncu_parse_bench.py [--kernels 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import csv
import gc
import io
import os
import time
from pathlib import Path

from perfscout.analysis.diagnosis.reads import reads_metric
from perfscout.tools.ncu_parse import parse_raw_csv

FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/ncu/h200_cupy_kernels_raw.csv"


def _perturb(cell: str, factor: float) -> str:
    """A different but plausible number, printed the way ncu prints it."""
    try:
        v = float(cell.replace(",", ""))
    except ValueError:
        return cell
    return cell if v == 0 else f"{v * factor:,.2f}"


def make_csv(n_kernels: int, perturb: bool = False) -> str:
    lines = FIXTURE.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID",'))
    rows = list(csv.reader(lines[start:]))
    header, units, kernels = rows[0], rows[1], rows[2:]
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    out.write("\n".join(lines[:start]) + "\n")  # keep the real banner
    w.writerow(header)
    w.writerow(units)
    for i in range(n_kernels):
        row = list(kernels[i % len(kernels)])
        row[0] = str(i)
        if perturb:  # every copy gets its own non-zero measurements (device attributes kept)
            f = 1.0 + (i + 1) * 1e-4
            row = row[:11] + [c if h.startswith("device__attribute") else _perturb(c, f)
                              for h, c in zip(header[11:], row[11:])]
        w.writerow(row)
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    # Verbatim copies are what the issue asks for; perturbed copies are the harder case
    # (the parser shares Metric objects between identical cells of a column, so verbatim
    # copies would flatter it).
    for label, perturb in (("real rows repeated verbatim", False),
                           ("real rows, non-zero values perturbed per copy", True)):
        text = make_csv(args.kernels, perturb=perturb)
        # Every column (what --all-metrics needs), and only the columns the diagnosis reads
        # (what `perfscout diagnose` parses by default).
        for scope, keep in (("all columns", None), ("columns the engine reads", reads_metric)):
            times, cpu = [], []
            report = None
            for _ in range(args.repeats):
                report = None  # free the previous parse outside the timed region
                gc.collect()
                t0, c0 = time.perf_counter(), time.process_time()
                report = parse_raw_csv(text, source="bench", keep=keep)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            n_metrics = sum(len(k.metrics) for k in report.kernels)
            print(f"[{label}; {scope}] {len(report.kernels)} kernels, {len(report.columns)} columns, "
                  f"{n_metrics} metric values kept, {len(text) / 1e6:.1f} MB of CSV")
            print(f"  parse wall time: best {min(times):.3f} s, all {[round(t, 3) for t in times]}")
            # CPU time is what the parser costs; wall time also counts waiting for a shared CPU.
            print(f"  parse CPU time:  best {min(cpu):.3f} s, all {[round(t, 3) for t in cpu]}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
