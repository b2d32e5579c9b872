"""How close to the edge are the thresholds? Scale each one by 0.8 and 1.2 and re-score.

    .venv/bin/python benchmarks/planted/sensitivity.py [--suite planted|library|library-revised]

(``library`` scores against the labels committed before profiling, ``library-revised``
against planted_library/labels_revised.yaml.)

Every named numeric threshold of classify.py, mma.py, dependent_loads.py and the GPU rule
modules is scaled on its own; the planted top-1 accuracy and the false alarms on the controls are recomputed. A
threshold whose +-20 % change flips a label is reported: it sits close to a planted
kernel's measured value, which the closing note must say.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import accuracy  # noqa: E402

from perfscout.analysis.diagnosis import classify, dependent_loads, mma  # noqa: E402
from perfscout.analysis.diagnosis.rules import GPU_RULES, _occupancy  # noqa: E402

NOT_THRESHOLDS = {"WIDEST_REQUEST_BYTES", "AGGREGATION"}  # hardware facts, not cut-offs


def constants(mod):
    src = Path(mod.__file__).read_text()
    for m in re.finditer(r"^([A-Z][A-Z0-9_]+) = ([0-9.e-]+)\s*$", src, re.M):
        if m.group(1) not in NOT_THRESHOLDS:
            yield m.group(1)


def _scorer(suite: str):
    if suite == "planted":
        return accuracy.evaluate
    path = HERE.parent / "planted_library" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("library_accuracy", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    label_set = "revised" if suite == "library-revised" else "original"
    return lambda: mod.evaluate(label_set=label_set)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", choices=("planted", "library", "library-revised"), default="planted")
    evaluate = _scorer(ap.parse_args().suite)
    mods = [classify, mma, dependent_loads, _occupancy, *GPU_RULES]
    base = evaluate()["summary"]
    print(f"baseline: top-1 {base['ours_top1']:.0%}, false alarms {base['ours_false_alarms']}")
    fragile, count = [], 0
    for mod in mods:
        for name in constants(mod):
            count += 1
            orig = getattr(mod, name)
            for f in (0.8, 1.2):
                setattr(mod, name, orig * f)
                # rules import some constants from classify by value: patch those copies too
                patched = [m for m in mods if getattr(m, name, None) == orig and m is not mod]
                for m in patched:
                    setattr(m, name, orig * f)
                s = evaluate()["summary"]
                for m in [mod, *patched]:
                    setattr(m, name, orig)
                if s["ours_top1"] < base["ours_top1"] or s["ours_false_alarms"] > base["ours_false_alarms"]:
                    fragile.append((mod.__name__.split(".")[-1], name, f, s["ours_top1"], s["ours_false_alarms"]))
    for mod, name, f, t1, fa in fragile:
        print(f"{mod}.{name} x{f}: top-1 {t1:.0%}, false alarms {fa}")
    print(f"{len(fragile)} of the {2 * count} +-20% perturbations ({count} thresholds) change the result")


if __name__ == "__main__":
    main()
