"""Accuracy of the diagnosis engine on the library-kernel suite, against Nsight Compute's top rule.

    .venv/bin/python benchmarks/planted_library/accuracy.py [--profiles DIR] [--labels both|original|revised] [--json]

Scores against labels.yaml (written and committed before any profile existed) and against
labels_revised.yaml (the labels the measurements support, each change documented with the
metric values that contradict the first label; every quoted value is checked against the
profile first), and reports both. Also counts cited metrics absent from the profile (must
be 0). Reads the committed device output in profiles/ (library_raw.csv, library_details.csv,
timings.json, run.log).
run.log maps every profiled launch to its case: ``CASE <name>`` is printed before the
case's one profiled call and ncu prints ``==PROF== Profiling "<kernel>" - <ID>`` for each
launch in it. A case is scored on its longest launch (gpu__time_duration). The scoring
(ours: primary, top-3, false alarms on controls; ncu: its highest-estimated-speedup OPT
rule mapped to an id) is the planted suite's (benchmarks/planted/accuracy.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent / "planted"))

from accuracy import ncu_ranked  # noqa: E402  (benchmarks/planted/accuracy.py)

from perfscout.analysis.diagnosis import diagnose  # noqa: E402
from perfscout.tools.ncu_parse import kernel_duration_s, load_details_csv, load_raw_csv  # noqa: E402

_PROF = re.compile(r'^==PROF== Profiling "(?P<kernel>.*?)" - (?P<id>\d+) ')


def labels(path: Path = HERE / "labels.yaml") -> list[dict]:
    return yaml.safe_load(path.read_text())["cases"]


def revisions(path: Path = HERE / "labels_revised.yaml") -> list[dict]:
    return yaml.safe_load(path.read_text())["revisions"]


def revised_labels() -> list[dict]:
    """labels.yaml with the documented revisions applied (the original file is unchanged)."""
    cases = {c["name"]: dict(c) for c in labels()}
    for r in revisions():
        c = cases[r["name"]]
        if c["expected"] != r["original"]:
            raise ValueError(f"labels_revised.yaml: {r['name']} was labelled {c['expected']}, not {r['original']}")
        c["expected"] = r["revised"]
    return list(cases.values())


#: A quoted value must match the profile to 1 % (they are quoted rounded).
QUOTE_TOLERANCE = 0.01


def check_revision_evidence(by_id: dict) -> list[str]:
    """Every metric value labels_revised.yaml quotes, against the launch it names: mismatches."""
    bad = []
    for r in revisions():
        k = by_id.get(r["launch_id"])
        if k is None:
            bad.append(f"{r['name']}: launch {r['launch_id']} not in the profile")
            continue
        for name, quoted in r["evidence"].items():
            m = k.metrics.get(name)
            if m is None or not isinstance(m.value, float):
                bad.append(f"{r['name']}: {name} not in launch {k.id}")
            elif abs(m.value - quoted) > QUOTE_TOLERANCE * max(abs(m.value), 1e-12):
                bad.append(f"{r['name']}: {name} is {m.value:g} in the profile, quoted {quoted:g}")
    return bad


def absent_citations(kernel, diag: dict) -> list[str]:  # noqa: ANN001 - a KernelProfile
    """Metrics a finding cites (directly or as a derived input) that the profile lacks."""
    out = []
    for f in diag["findings"]:
        for e in f["evidence"]:
            names = e["inputs"] if e["metric"].startswith("derived:") else \
                [] if e["metric"].startswith("host:") else [e["metric"]]
            out.extend(f"{f['id']}: {n}" for n in names if n not in kernel.metrics)
    return out


def launches_by_case(run_log: Path) -> dict[str, list[int]]:
    """case name -> the ncu launch IDs profiled inside that case's range, in order."""
    out: dict[str, list[int]] = {}
    case = None
    for line in run_log.read_text().splitlines():
        if line.startswith("CASE "):
            case = line.split()[1]
            out[case] = []
        elif line.startswith("END "):
            case = None
        else:
            m = _PROF.match(line)
            if m and case is not None:
                out[case].append(int(m.group("id")))
    return out


def evaluate(profiles: Path = HERE / "profiles", label_set: str = "original") -> dict:
    """Score against ``label_set``: "original" (labels.yaml) or "revised" (labels_revised.yaml)."""
    report = load_raw_csv(profiles / "library_raw.csv")
    rules = load_details_csv(profiles / "library_details.csv")
    timing = json.loads((profiles / "timings.json").read_text())
    by_id = {k.id: k for k in report.kernels}
    if label_set == "revised":
        bad = check_revision_evidence(by_id)
        if bad:
            raise ValueError("labels_revised.yaml quotes values the profile does not hold: " + "; ".join(bad))
    cases = revised_labels() if label_set == "revised" else labels()
    cases_ids = launches_by_case(profiles / "run.log")
    rows, missing = [], []
    scored = {}
    for c in cases:
        ids = [i for i in cases_ids.get(c["name"], []) if i in by_id]
        if not ids:
            missing.append(c["name"])
            continue
        scored[c["name"]] = max((by_id[i] for i in ids), key=lambda k: kernel_duration_s(k) or 0.0)
    # Host timing is measured per case; the engine looks it up by kernel name.
    host = {scored[n].name: t for n, t in timing.get("launch_overhead", {}).items() if n in scored}
    kernels = list(scored.values())
    diag = diagnose(kernels, host_timing=host)["kernels"]
    for c, (name, k), d in zip((c for c in cases if c["name"] in scored), scored.items(), diag, strict=True):
        allowed = tuple(c.get("allowed", ()))
        ours = [f["id"] for f in d["findings"]]
        ncu = ncu_ranked(rules, k.id)
        ncu_ids = list(dict.fromkeys(i for _, _, i in ncu))
        control = bool(c.get("control"))
        rows.append({
            "case": name, "kernel": k.name[:80], "launches_in_case": len(cases_ids[name]),
            "expected": c["expected"], "control": control,
            "ours_primary": d["primary"]["id"] if d["primary"] else None,
            "ours_top3": ours[:3],
            "ours_false_alarms": [i for i in ours if i not in allowed] if control else [],
            "ncu_top_rule": ncu[0][0] if ncu else None,
            "ncu_top_id": ncu[0][2] if ncu else None,
            "ncu_top3": ncu_ids[:3],
            "ncu_false_alarms": [r for r, _, i in ncu if i not in allowed] if control else [],
            "cited_absent": absent_citations(k, d),
        })

    def frac(pred):
        return sum(1 for r in rows if pred(r)) / len(rows) if rows else 0.0

    summary = {
        "cases": len(rows), "controls": sum(r["control"] for r in rows), "not_profiled": missing,
        "ours_top1": frac(lambda r: r["ours_primary"] == r["expected"]),
        "ours_top3": frac(lambda r: r["expected"] in r["ours_top3"]),
        "ours_false_alarms": sum(len(r["ours_false_alarms"]) for r in rows),
        "ncu_top1": frac(lambda r: r["ncu_top_id"] == r["expected"]),
        "ncu_top3": frac(lambda r: r["expected"] in r["ncu_top3"]),
        "ncu_false_alarms": sum(len(r["ncu_false_alarms"]) for r in rows),
        "cited_metrics_absent": sum(len(r["cited_absent"]) for r in rows),
        "labels": label_set,
        "device": timing.get("device"), "torch": timing.get("torch"),
    }
    return {"summary": summary, "rows": rows}


def markdown(result: dict) -> str:
    s = result["summary"]
    source = "labels_revised.yaml" if s["labels"] == "revised" else "labels.yaml"
    lines = [
        f"Library suite against {source}: {s['cases']} cases ({s['controls']} control), {s['device']}, "
        f"torch {s['torch']}; cited metrics absent from the profile: {s['cited_metrics_absent']}.",
        "",
        "| | top-1 | top-3 | false alarms on controls |",
        "|---|---|---|---|",
        f"| perfscout | {s['ours_top1']:.0%} | {s['ours_top3']:.0%} | {s['ours_false_alarms']} |",
        f"| ncu top rule | {s['ncu_top1']:.0%} | {s['ncu_top3']:.0%} | {s['ncu_false_alarms']} |",
        "",
        f"| case | expected ({source}) | perfscout primary | ncu top rule -> id |",
        "|---|---|---|---|",
    ]
    for r in result["rows"]:
        ok = "ok" if r["ours_primary"] == r["expected"] else "MISS"
        lines.append(f"| {r['case']} | {r['expected']} | {r['ours_primary']} ({ok}) | "
                     f"{r['ncu_top_rule']} -> {r['ncu_top_id']} |")
    if s["not_profiled"]:
        lines.append(f"\nNot profiled: {', '.join(s['not_profiled'])}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=Path, default=HERE / "profiles")
    ap.add_argument("--labels", choices=("both", "original", "revised"), default="both")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sets = ("original", "revised") if a.labels == "both" else (a.labels,)
    results = {name: evaluate(a.profiles, name) for name in sets}
    if a.json:
        print(json.dumps(results if a.labels == "both" else results[a.labels], indent=1))
    else:
        print("\n\n".join(markdown(r) for r in results.values()))


if __name__ == "__main__":
    main()
