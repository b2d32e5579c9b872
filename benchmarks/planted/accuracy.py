"""Accuracy of the diagnosis engine on the planted suite, against Nsight Compute's top rule.

    .venv/bin/python benchmarks/planted/accuracy.py [--profiles DIR] [--json] [--no-host-timing]

Reads the committed fixtures (profiles/planted_raw.csv, planted_details.csv, timings.json)
and, for each planted kernel and negative control (suite.py), reports:
- ours: top-1 (primary == expected id), top-3 (expected among the first three findings),
  false alarms on the controls (any finding other than the control's roof finding);
- baseline: "Nsight Compute's highest-ranked rule", i.e. the details-page rule with the
  largest estimated speedup, mapped to the taxonomy id it points at (map below); top-3
  from its three largest; false alarms = OPT rules with a speedup on a control.
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

from perfscout.analysis.diagnosis import diagnose  # noqa: E402
from perfscout.analysis.diagnosis.ncu_rules import ncu_rule_to_id  # noqa: E402
from perfscout.tools.ncu_parse import load_details_csv, load_raw_csv  # noqa: E402


def ncu_ranked(rules, kernel_id: int) -> list[tuple[str, float, str | None]]:
    """(rule, estimated speedup %, mapped id) of one launch, largest speedup first."""
    rows = [(r.rule, r.estimated_speedup_pct, ncu_rule_to_id(r.rule, r.message))
            for r in rules if r.kernel_id == kernel_id and r.estimated_speedup_pct is not None
            and r.type == "OPT"]
    return sorted(rows, key=lambda t: -t[1])


def evaluate(profiles: Path = HERE / "profiles", host_timing: bool = True) -> dict:
    report = load_raw_csv(profiles / "planted_raw.csv")
    rules = load_details_csv(profiles / "planted_details.csv")
    timing = json.loads((profiles / "timings.json").read_text())
    host = timing.get("launch_overhead", {}) if host_timing else {}
    by_name = {k.name: k for k in report.kernels}
    diag = {d["name"]: d for d in diagnose(report.kernels, host_timing=host)["kernels"]}
    rows = []
    for case in CASES:
        k = by_name[case.name]
        d = diag[case.name]
        ours = [f["id"] for f in d["findings"]]
        ncu = ncu_ranked(rules, k.id)
        ncu_ids = list(dict.fromkeys(i for _, _, i in ncu))
        rows.append({
            "kernel": case.name, "expected": case.expected, "control": case.control,
            "ours_primary": d["primary"]["id"] if d["primary"] else None,
            "ours_top3": ours[:3],
            "ours_false_alarms": [i for i in ours if i not in case.allowed] if case.control else [],
            "ncu_top_rule": ncu[0][0] if ncu else None,
            "ncu_top_id": ncu[0][2] if ncu else None,
            "ncu_top3": ncu_ids[:3],
            "ncu_false_alarms": [r for r, _, i in ncu if i not in case.allowed] if case.control else [],
            "cited_absent": [f"{f['id']}: {n}" for f in d["findings"] for e in f["evidence"]
                             for n in (e["inputs"] if e["metric"].startswith("derived:") else
                                       [] if e["metric"].startswith("host:") else [e["metric"]])
                             if n not in k.metrics],
        })
    planted = [r for r in rows if not r["control"]]
    everything = rows

    def frac(pred):
        return sum(1 for r in everything if pred(r)) / len(everything)

    summary = {
        "cases": len(everything), "planted": len(planted), "controls": len(rows) - len(planted),
        "ours_top1": frac(lambda r: r["ours_primary"] == r["expected"]),
        "ours_top3": frac(lambda r: r["expected"] in r["ours_top3"]),
        "ours_false_alarms": sum(len(r["ours_false_alarms"]) for r in rows),
        "ncu_top1": frac(lambda r: r["ncu_top_id"] == r["expected"]),
        "ncu_top3": frac(lambda r: r["expected"] in r["ncu_top3"]),
        "ncu_false_alarms": sum(len(r["ncu_false_alarms"]) for r in rows),
        "cited_metrics_absent": sum(len(r["cited_absent"]) for r in rows),
        "host_timing": bool(host),
    }
    return {"summary": summary, "rows": rows}


def markdown(result: dict) -> str:
    s = result["summary"]
    lines = [
        f"Planted suite: {s['planted']} planted kernels + {s['controls']} negative controls "
        f"(host timing {'used' if s['host_timing'] else 'not used'}); cited metrics absent from the "
        f"profile: {s['cited_metrics_absent']}.",
        "",
        "| | top-1 | top-3 | false alarms on controls |",
        "|---|---|---|---|",
        f"| perfscout | {s['ours_top1']:.0%} | {s['ours_top3']:.0%} | {s['ours_false_alarms']} |",
        f"| ncu top rule | {s['ncu_top1']:.0%} | {s['ncu_top3']:.0%} | {s['ncu_false_alarms']} |",
        "",
        "| kernel | expected | perfscout primary | ncu top rule -> id |",
        "|---|---|---|---|",
    ]
    for r in result["rows"]:
        ok = "ok" if r["ours_primary"] == r["expected"] else "MISS"
        lines.append(f"| {r['kernel']} | {r['expected']} | {r['ours_primary']} ({ok}) | "
                     f"{r['ncu_top_rule']} -> {r['ncu_top_id']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=Path, default=HERE / "profiles")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-host-timing", action="store_true")
    a = ap.parse_args()
    result = evaluate(a.profiles, host_timing=not a.no_host_timing)
    print(json.dumps(result, indent=1) if a.json else markdown(result))


if __name__ == "__main__":
    main()
