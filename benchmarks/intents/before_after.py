"""How the phrasing cases added since a commit fare with the parser of that commit.

    python benchmarks/intents/before_after.py BASE_COMMIT [--first "REQUEST"]

The cases from ``--first`` (a request of tests/intents/phrasings.yaml, the first of a round)
to the end are run through the real graph twice: with the code of BASE_COMMIT (``git
archive`` into a temporary folder, run in a child Python whose import path starts there)
and with the working tree. Writes before_after.json and before_after.md beside this file:
what the new requests, written before the fixes, measured before and after them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).parent

CHILD = r"""
import json, os, sys, tempfile
from collections import defaultdict
from pathlib import Path
root, first = Path(sys.argv[1]), sys.argv[2]
sys.path.insert(0, str(root))
os.chdir(root)
import perfscout
assert Path(perfscout.__file__).resolve().is_relative_to(root.resolve()), perfscout.__file__
from perfscout.graph.context import Context
from tests.intents.harness import check, load_cases, make_files, observe
tmp = Path(tempfile.mkdtemp()); make_files(tmp)
cases = load_cases()
start = next(i for i, c in enumerate(cases) if c["request"] == first)
by = defaultdict(lambda: [0, 0]); failures = []
for c in cases[start:]:
    seen = observe(c["request"].replace("{tmp}", str(tmp)), Context(home=str(tmp / "home"), planner="deterministic"))
    problems = check(c, seen, tmp)
    by[c["cat"]][0] += not problems; by[c["cat"]][1] += 1
    if problems:
        failures.append({"request": c["request"], "problems": problems})
print(json.dumps({"by_category": by, "failures": failures}))
"""


def measure(tree: Path, first: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), first], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=1200, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="the commit whose parser is the 'before'")
    ap.add_argument("--first", default="用 ZFP 固定精度模式压缩 vorticity.512_512，精度 16，看看 PSNR",
                    help="the first request of the round (default: session 4's)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="before-") as tmp:
        old = Path(tmp) / "main"
        old.mkdir()
        archive = subprocess.run(["git", "archive", args.base, "perfscout", "examples"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        # today's cases and harness, the old code; the shared fields found beside it as beside the repo
        subprocess.run(["cp", "-r", str(ROOT / "tests"), str(old / "tests")], check=True)
        shared = ROOT.parent / "shared"
        if shared.is_dir():
            (Path(tmp) / "shared").symlink_to(shared)
        before = measure(old, args.first)
    after = measure(ROOT, args.first)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    machine = f"{platform.node()}: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    doc = {"machine": machine, "base": args.base, "head": head, "first": args.first, "before": before, "after": after}
    (OUT / "before_after.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")

    def total(r: dict) -> tuple[int, int]:
        return sum(v[0] for v in r["by_category"].values()), sum(v[1] for v in r["by_category"].values())

    cats = sorted(after["by_category"])
    lines = [f"# New phrasings: the parser before and after the round\n",
             f"Machine: {machine}. The requests added from `{args.first}` on, written before the fixes, run "
             f"through the real graph with the parser of {args.base} (before) and of {head} (after).\n",
             "| category | before | after |", "|---|---|---|"]
    for c in cats:
        b, a = before["by_category"].get(c, [0, 0]), after["by_category"][c]
        lines.append(f"| {c} | {b[0]}/{b[1]} | {a[0]}/{a[1]} |")
    (b0, n), (a0, _) = total(before), total(after)
    lines.append(f"| **all** | **{b0}/{n}** | **{a0}/{n}** |\n")
    lines.append("Failing before (first 30):\n")
    lines += [f"- `{f['request'][:110]}`: {'; '.join(f['problems'])[:220]}" for f in before["failures"][:30]]
    if after["failures"]:
        lines.append("\nStill failing after:\n")
        lines += [f"- `{f['request'][:110]}`: {'; '.join(f['problems'])[:220]}" for f in after["failures"]]
    (OUT / "before_after.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:len(cats) + 5]))


if __name__ == "__main__":
    main()
