"""What the bubblewrap sandbox costs per program started: confined vs unconfined wall time.

Each pair runs the same command once through ``Sandbox.run`` unconfined and once confined
(bwrap + the in-sandbox launcher), alternating so both see the same machine load; the
overhead is the difference of the medians. Commands: ``true`` (pure start-up cost) and
``python -c pass`` (an interpreter start-up, as for a Python benchmark command).

With ``--walk`` it also times the secret walk (:func:`perfscout.tools.secret_mask.vet_tree`)
that vets a bound folder before each sandbox's first run (names, the first 4 KiB of every
file, hard links of home secrets), on synthetic trees of 1,000, 10,000, 20,000 and 50,000
entries (the walk's entry budget), cold (first walk) and warm.

Usage: python benchmarks/sandbox_overhead.py [--pairs 30] [--walk] [--out benchmarks/results/sandbox_overhead_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import platform
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfscout.tools.bwrap import probe_bwrap  # noqa: E402
from perfscout.tools.sandbox import Sandbox, SandboxLimits  # noqa: E402


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    probe = probe_bwrap()
    return {"hostname": platform.node(), "cpu": cpu, "logical_cpus": os.cpu_count(),
            "kernel": platform.release(), "python": platform.python_version(),
            "bwrap": probe.description if probe.usable else probe.reason,
            "euid": os.geteuid(), "loadavg_at_start": list(os.getloadavg()),
            # what the machine is, as read (this runs on the 2-core dev VM and on the GPU machine)
            "note": (f"{os.cpu_count()} logical CPUs, load {os.getloadavg()[0]:.2f} at start; "
                     + ("a GPU is present (nvidia-smi found)" if shutil.which("nvidia-smi") else "no GPU"))}


def project_case(pairs: int) -> dict:
    """A fresh Sandbox per run whose working directory is a project of 2,000 files (what
    ``perfscout profile`` does: one sandbox per command), so each confined run pays for
    vetting the folder once."""
    with tempfile.TemporaryDirectory(prefix="perfscout-sandbox-bench-proj-") as d:
        proj = Path(d) / "proj"
        for i in range(20):
            sub = proj / f"pkg{i:02d}"
            sub.mkdir(parents=True)
            for j in range(99):
                (sub / f"m{j:02d}.py").write_text("x = 1\n")
        times: dict[str, list[float]] = {"unconfined": [], "bwrap": []}
        for k in range(pairs + 1):
            for mode in ("unconfined", "bwrap"):
                box = Sandbox(Path(d) / f"run-{mode}-{k}", inputs=[proj], cwd=proj,
                              unconfined=(mode == "unconfined"), limits=SandboxLimits(timeout_s=60))
                res = box.run([sys.executable, "-c", "pass"])
                assert res.ok and res.confinement.mode == mode, (mode, res.reason)
                if k:  # the first pair warms the page cache
                    times[mode].append(res.wall_s)
    med = {m: statistics.median(t) for m, t in times.items()}
    print(f"{'project cwd':16s} unconfined {med['unconfined'] * 1e3:7.1f} ms   bwrap {med['bwrap'] * 1e3:7.1f} ms"
          f"   overhead {(med['bwrap'] - med['unconfined']) * 1e3:6.1f} ms")
    return {"pairs": pairs, "median_s": med, "overhead_median_s": med["bwrap"] - med["unconfined"]}


def walk_costs(sizes: tuple[int, ...] = (1_000, 10_000, 20_000, 50_000)) -> dict:
    """Seconds vet_tree takes on trees of n entries (100 files per folder, 512 bytes of text
    each, so that the content scan reads every one; a few secrets by name, by content and as
    hard links of a home secret), first walk (cold dentries) and warm."""
    import time

    from perfscout.tools.secret_mask import vet_tree

    out = {}
    body = ("x = 1  # ordinary source line\n" * 20).encode()[:512]
    key = ("-" * 5 + "BEGIN OPENSSH PRIVATE KEY" + "-" * 5 + "\nb3BlbnNzaC1rZXktdjE\n").encode()
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="perfscout-walk-bench-") as d:
            root = Path(d) / "tree"
            home = Path(d) / "home"
            (home / ".ssh").mkdir(parents=True)
            (home / ".ssh" / "id_ed25519").write_bytes(key)
            old_home = os.environ.get("HOME")
            os.environ["HOME"] = str(home)
            root.mkdir()
            for i in range(n // 100):
                sub = root / f"d{i:04d}"
                sub.mkdir()
                for j in range(98):
                    (sub / f"f{j:02d}.dat").write_bytes(key if (i * 98 + j) % 997 == 0 else body)
                (sub / (".env" if i % 10 == 0 else "main.py")).write_bytes(body)
                if i % 50 == 0:
                    os.link(home / ".ssh" / "id_ed25519", sub / "copy.bin")
                else:
                    (sub / "copy.bin").write_bytes(body)
            times = []
            try:
                for _ in range(3):
                    t0 = time.perf_counter()
                    v = vet_tree(root, max_entries=10 * n, max_seconds=600)
                    times.append(time.perf_counter() - t0)
            finally:
                if old_home is None:
                    os.environ.pop("HOME", None)
                else:
                    os.environ["HOME"] = old_home
            warm = statistics.median(times[1:])
            out[str(n)] = {"entries": v.entries, "masks": len(v.masks), "scanned": v.scanned,
                           "bytes_read": v.bytes_read, "by_content": len(v.by_content), "by_link": len(v.by_link),
                           "first_s": times[0], "warm_median_s": warm,
                           "us_per_entry_warm": warm / max(v.entries, 1) * 1e6}
            print(f"walk {n:6d} entries: first {times[0] * 1e3:7.1f} ms, warm {warm * 1e3:7.1f} ms "
                  f"({v.scanned} files read, {len(v.by_content)} by content, {len(v.by_link)} hard links)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--walk", action="store_true", help="also time the secret walk")
    args = ap.parse_args()
    if not probe_bwrap().usable:
        print(f"bubblewrap is not usable here: {probe_bwrap().reason}", file=sys.stderr)
        return 2
    commands = {"true": ["true"],  # allowlisted by name
                "python -c pass": [sys.executable, "-c", "pass"]}
    results = {}
    with tempfile.TemporaryDirectory(prefix="perfscout-sandbox-bench-") as d:
        boxes = {mode: Sandbox(Path(d) / mode, unconfined=(mode == "unconfined"),
                               limits=SandboxLimits(timeout_s=60))
                 for mode in ("unconfined", "bwrap")}
        for name, argv in commands.items():
            times: dict[str, list[float]] = {"unconfined": [], "bwrap": []}
            for box in boxes.values():  # one warm-up each (bwrap probe, page cache)
                box.run(argv)
            for _ in range(args.pairs):
                for mode, box in boxes.items():
                    res = box.run(argv)
                    assert res.ok and res.confinement.mode == mode, (mode, res.reason)
                    times[mode].append(res.wall_s)
            med = {m: statistics.median(t) for m, t in times.items()}
            results[name] = {
                "pairs": args.pairs,
                "median_s": med,
                "p90_s": {m: sorted(t)[int(0.9 * (len(t) - 1))] for m, t in times.items()},
                "overhead_median_s": med["bwrap"] - med["unconfined"],
            }
            print(f"{name:16s} unconfined {med['unconfined'] * 1e3:7.1f} ms   bwrap {med['bwrap'] * 1e3:7.1f} ms"
                  f"   overhead {(med['bwrap'] - med['unconfined']) * 1e3:6.1f} ms")
    if args.walk:
        results["secret_walk"] = walk_costs()
    results["python -c pass, cwd a 2,000-file project, new Sandbox per run"] = project_case(args.pairs)
    doc = {"benchmark": "sandbox_overhead", "taken_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": machine(), "results": results,
           "method": "Sandbox.run wall time (spawn to reap, output pumped), confined and unconfined "
                     "alternated; medians over the pairs"}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
