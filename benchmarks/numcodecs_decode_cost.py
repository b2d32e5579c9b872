"""What the numcodecs adapter's decode costs over the native decoder, per transport and trust mode.

One 1 MiB chunk (512 x 512 float32, a smooth random-walk field) per codec, decoded by:

- ``native``: the backend's ``decompress`` alone, in this process (the floor);
- ``trusted_env``: the adapter with ``PERFSCOUT_TRUSTED_DECODE=1`` (every check, native decode here);
- ``trusted_mac``: the adapter with ``trusted_decode=True`` on a signed chunk (the checks, the
  MAC verified, native decode here);
- ``helper_shm``: the adapter's default, the helper process fed through the shared region;
- ``helper_pipe_1m``: the helper fed through its pipes, widened to 1 MiB;
- ``helper_pipe_64k``: the helper fed through 64 KiB pipes (the transport before this change).

The variants are interleaved round by round (the order shuffled each round), so a load change
on a shared machine hits all of them alike: compare the ratios within one run, not the
milliseconds across runs.

    .venv/bin/python benchmarks/numcodecs_decode_cost.py [--rounds 15] [--per-round 5]
        [--codecs sz3 zfp sz2] [--out benchmarks/results/numcodecs_decode_cost_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PERFSCOUT_HOME", tempfile.mkdtemp(prefix="perfscout-bench-"))  # the MAC key lives there

from perfscout.codecs import decoder_process as D  # noqa: E402
from perfscout.codecs.framing import from_bytes  # noqa: E402
from perfscout.codecs.numcodecs import BY_BACKEND, TRUSTED_DECODE_ENV  # noqa: E402

VARIANTS = ("native", "trusted_env", "trusted_mac", "helper_shm", "helper_pipe_1m", "helper_pipe_64k")


def machine() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "")
    return {"hostname": platform.node(), "cpu": cpu, "logical_cpus": os.cpu_count(),
            "python": platform.python_version(), "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
            "note": "shared 2-core VM: other engineers' jobs (tests, builds) ran at the same time"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--per-round", type=int, default=5)
    ap.add_argument("--codecs", nargs="+", default=["sz3", "zfp", "sz2"])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    x = np.cumsum(np.random.default_rng(0).standard_normal((512, 512)), axis=1).astype(np.float32)
    children = {"helper_shm": D._Child(shared=True), "helper_pipe_1m": D._Child(shared=False),
                "helper_pipe_64k": D._Child(shared=False, pipe_bytes=0)}
    default_child = D._CHILD
    info = machine()
    out: dict = {"machine": info, "chunk": {"shape": list(x.shape), "dtype": "float32", "nbytes": x.nbytes},
                 "rounds": args.rounds, "per_round": args.per_round, "codecs": {}}
    rng = random.Random(1)
    for backend in args.codecs:
        cls = BY_BACKEND[backend]
        plain, signed = cls("abs", 1e-2), cls("abs", 1e-2, trusted_decode=True)
        chunk, signed_chunk = plain.encode(x), signed.encode(x)
        compressed, _ = from_bytes(chunk)
        native = plain._codec

        def run(variant: str) -> None:
            if variant == "native":
                native.decompress(compressed)
            elif variant == "trusted_env":
                os.environ[TRUSTED_DECODE_ENV] = "1"
                try:
                    plain.decode(chunk)
                finally:
                    del os.environ[TRUSTED_DECODE_ENV]
            elif variant == "trusted_mac":
                signed.decode(signed_chunk)
            else:
                D._CHILD = children[variant]
                try:
                    plain.decode(chunk)
                finally:
                    D._CHILD = default_child

        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for v in VARIANTS:  # warm: helpers started, regions mapped, pages faulted in
            run(v)
            run(v)
        for _ in range(args.rounds):
            order = list(VARIANTS)
            rng.shuffle(order)
            for v in order:
                for _ in range(args.per_round):
                    t = time.perf_counter()
                    run(v)
                    times[v].append(time.perf_counter() - t)
        med = {v: statistics.median(ts) for v, ts in times.items()}
        q = {v: [float(np.percentile(ts, 25)), float(np.percentile(ts, 75))] for v, ts in times.items()}
        out["codecs"][backend] = {
            "chunk_bytes": len(chunk), "signed_chunk_bytes": len(signed_chunk),
            "median_ms": {v: round(med[v] * 1e3, 3) for v in VARIANTS},
            "iqr_ms": {v: [round(a * 1e3, 3), round(b * 1e3, 3)] for v, (a, b) in q.items()},
            "over_native_ms": {v: round((med[v] - med["native"]) * 1e3, 3) for v in VARIANTS},
            "ratio_to_native": {v: round(med[v] / med["native"], 3) for v in VARIANTS},
            "helper_overhead_ratio_to_pipe_64k": {
                v: round((med[v] - med["trusted_env"]) / (med["helper_pipe_64k"] - med["trusted_env"]), 3)
                for v in ("helper_shm", "helper_pipe_1m", "helper_pipe_64k")
                if med["helper_pipe_64k"] > med["trusted_env"]},
        }
        print(backend, json.dumps(out["codecs"][backend]["median_ms"]), flush=True)
    for child in children.values():
        child.close()
    info["loadavg_at_end"] = [round(v, 2) for v in os.getloadavg()]
    out["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
