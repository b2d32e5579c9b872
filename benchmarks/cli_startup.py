"""How long does `perfscout --help` take, lazily loaded against every command imported?

Two whole-process commands run in turn (A B A B ...), each a fresh interpreter:

- **lazy**: ``perfscout --help`` as shipped (commands listed from the table in
  ``perfscout/cli/__init__.py``, no command module imported);
- **eager**: the same help after importing every command module first, which is what the
  CLI did before commands were loaded lazily.

Wall time is a monotonic clock around each child; CPU time is the child's user + system
from ``resource.getrusage(RUSAGE_CHILDREN)``. Medians are reported (and min/max), with the
machine description, as JSON on stdout.

    .venv/bin/python benchmarks/cli_startup.py [--runs 20] > benchmarks/results/cli_startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAZY = "from perfscout.cli import main; main(['--help'])"
EAGER = ("import importlib\nfrom perfscout.cli import COMMANDS, main\n"
         "for c in COMMANDS: importlib.import_module('perfscout.cli.' + c.module)\nmain(['--help'])")


def _one(code: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    _one(LAZY), _one(EAGER)  # warm the page cache and the .pyc files
    samples: dict[str, dict[str, list[float]]] = {k: {"wall_s": [], "cpu_s": []} for k in ("lazy", "eager")}
    for _ in range(args.runs):
        for name, code in (("lazy", LAZY), ("eager", EAGER)):
            wall, cpu = _one(code)
            samples[name]["wall_s"].append(wall)
            samples[name]["cpu_s"].append(cpu)
    doc = {
        "benchmark": "perfscout --help start-up, whole process",
        "runs": args.runs,
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count()},
        "results": {name: {k: _stats(v) for k, v in s.items()} for name, s in samples.items()},
    }
    lazy, eager = doc["results"]["lazy"], doc["results"]["eager"]
    doc["lazy_over_eager_median"] = {k: lazy[k]["median"] / eager[k]["median"] for k in ("wall_s", "cpu_s")}
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
