"""How long the offline parser takes: per request of the phrasing set, and on long or odd input.

    python benchmarks/intents/parse_speed.py

The parser runs in the agent's understand step and in every answer to a question; its
patterns must stay linear in the request's length (a run of 5,000 digits took 4.5 s when a
number pattern could start inside a digit run; "/a" x 8,000 took 10 s and a quoted word
repeated 3.2 s at 16,000 characters when a pattern re-read the text before each match).
Writes parse_speed.json beside this file: the median and 95th percentile over the phrasing
set (best of three passes; CPU time of this process, and wall time, which adds the codec
registry's probes in child processes), the CPU time of each long input, and for each
repeated unit the CPU time at 8, 16 and 32 thousand characters (the parser's cap,
readers.MAX_REQUEST_CHARS) with the ratio of the last doubling (about 2 when linear), and
the time to refuse a 1 MiB request.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfscout.graph.understand import parse  # noqa: E402
from perfscout.graph.understand.readers import MAX_REQUEST_CHARS  # noqa: E402
from tests.intents.harness import load_cases  # noqa: E402

LONG = {"5,000 digits": "1" * 5000, "a/ x 3,000": "a/" * 3000, "./ x 3,000": "./" * 3000, "- x 10,000": "-" * 10000,
        "'1e-3 ' x 3,000": "1e-3 " * 3000, "Chinese request x 500": "用 sz3 压缩 " * 500,
        "request x 300": "compare sz3 and zfp " * 300, "profile + 5,000-char path": "profile ./" + "a" * 5000,
        "百分之 x 1,000": "百分之" * 1000 + "1"}


#: units repeated up to the cap: each made a pattern of the parser quadratic once
UNITS = {"and": "and ", "letters": "a", "slash": "/a", "quoted word": "'a' ", "backticks": "`x` ",
         "codec, bound, mode, field": "sz3 1e-3 rel vorticity ", "variables": "u and v in ", "runs": "run a1 and run b2 ",
         "bounds": "1e-3, ", "shapes": "64x64 ", "Chinese": "比较 sz3 和 zfp，", "zero-width": "删\u200b"}


def doubling(unit: str) -> dict[str, float]:
    times = {}
    for n in (MAX_REQUEST_CHARS // 4, MAX_REQUEST_CHARS // 2, MAX_REQUEST_CHARS):
        text = ("compare sz3 and zfp on era5.nc " + unit * (n // len(unit) + 1))[:n]
        times[f"{n // 1000}k_s"] = round(cpu(lambda t=text: parse(t)), 3)
    vals = list(times.values())
    times["last_doubling_x"] = round(vals[2] / max(vals[1], 1e-3), 2)
    return times


def cpu(fn) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def wall(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    os.chdir(ROOT)
    requests = [c["request"] for c in load_cases()]
    parse("warm up")
    per = [min(cpu(lambda r=r: parse(r)) for _ in range(3)) for r in requests]
    per_wall = [min(wall(lambda r=r: parse(r)) for _ in range(3)) for r in requests]
    q = statistics.quantiles(per, n=20)
    doc = {
        "machine": f"{platform.node()}: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_1min": os.getloadavg()[0],
        "phrasing_set": {"requests": len(per), "median_ms": round(1000 * statistics.median(per), 1),
                         "p95_ms": round(1000 * q[18], 1), "max_ms": round(1000 * max(per), 1),
                         "wall_median_ms": round(1000 * statistics.median(per_wall), 1)},
        "long_inputs_s": {name: round(cpu(lambda t=text: parse(t)), 3) for name, text in LONG.items()},
        "repeated_units_to_the_cap": {name: doubling(unit) for name, unit in UNITS.items()},
        "refuse_1MiB_s": round(wall(lambda: parse("compare sz3 and zfp " * (2 ** 20 // 20))), 4),
    }
    (Path(__file__).parent / "parse_speed.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(doc, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
