"""Pass rates of the phrasing set by category: the offline parser, and a local model.

    python benchmarks/intents/run_phrasings.py                 # offline parser only
    python benchmarks/intents/run_phrasings.py --llm URL MODEL # also the LLM planner

Each request of tests/intents/phrasings.yaml runs through the real graph up to its first
tool call (tests/intents/harness.py) and is checked against its expected intent. With
--llm the same requests go through the LLM planner (the model fills the intent, perfscout
validates it, questions and refusals as offline); a second table counts how often the
model's own reply matched the expected slots before validation, which is what "the model
fills the intent correctly" means. Writes results.json and results.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfscout.graph.context import Context  # noqa: E402
from tests.intents.harness import check, load_cases, make_files, observe  # noqa: E402


def run(ctx_kw: dict, tmp: Path, label: str) -> dict:
    by_cat: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    failures = []
    started = time.perf_counter()
    for i, case in enumerate(load_cases()):
        ctx = Context(home=str(tmp / f"home-{label}"), **ctx_kw)
        seen = observe(case["request"].replace("{tmp}", str(tmp)), ctx)
        problems = check(case, seen, tmp)
        by_cat[case["cat"]][1] += 1
        if not problems:
            by_cat[case["cat"]][0] += 1
        else:
            failures.append({"case": i, "request": case["request"], "problems": problems})
    total = [sum(v[0] for v in by_cat.values()), sum(v[1] for v in by_cat.values())]
    return {"label": label, "by_category": dict(by_cat), "total": total, "failures": failures,
            "seconds": round(time.perf_counter() - started, 1)}


SLOTS = ("question", "codecs", "mode", "bounds", "data")


def raw_model_fill(url: str, model: str, tmp: Path) -> dict:
    """How often the model's own Intent reply (before perfscout validates or merges it)
    gets each slot right, on the cases whose expectation names that slot."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from perfscout.graph import llm as L

    ctx = Context(planner="llm", llm_base_url=url, llm_model=model, llm_api_key="local", llm_timeout_s=120,
                  llm_max_tokens=256)
    chat = L.make_chat_model(ctx)
    per_slot = {s: [0, 0] for s in SLOTS}
    whole = [0, 0]
    replies = 0
    for case in load_cases():
        exp = case["expect"]
        named = [s for s in SLOTS if s in exp]
        if not named or exp.get("refused") or "asks" in exp:
            continue
        text = case["request"].replace("{tmp}", str(tmp))
        reply, _ = L._ask_intent(chat, [SystemMessage(L._intent_system_prompt()),
                                        HumanMessage(L.load_prompt("intent_user").format(request=text, platform=""))])
        replies += reply is not None
        got = {"question": reply.question, "codecs": sorted(reply.codecs), "mode": reply.mode,
               "bounds": sorted(reply.bounds), "data": list(reply.datasets)} if reply else {}
        want = {"question": exp.get("question"), "codecs": sorted(exp.get("codecs") or []), "mode": exp.get("mode"),
                "bounds": sorted(float(b) for b in exp.get("bounds") or []),
                "data": [d.replace("{tmp}", str(tmp)) for d in exp.get("data") or []]}
        all_ok = True
        for s in named:
            ok = bool(reply) and got[s] == want[s]
            per_slot[s][0] += ok
            per_slot[s][1] += 1
            all_ok &= ok
        whole[0] += all_ok
        whole[1] += 1
    return {"per_slot": per_slot, "whole": whole, "parsed_replies": replies}


def table(results: list[dict]) -> str:
    cats = sorted({c for r in results for c in r["by_category"]})
    head = "| category | " + " | ".join(r["label"] for r in results) + " |"
    lines = [head, "|---|" + "---|" * len(results)]
    for c in cats:
        cells = []
        for r in results:
            ok, n = r["by_category"].get(c, [0, 0])
            cells.append(f"{ok}/{n}")
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines.append("| **all** | " + " | ".join(f"**{r['total'][0]}/{r['total'][1]}** "
                                             f"({100 * r['total'][0] / max(1, r['total'][1]):.0f} %)" for r in results) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm", nargs=2, metavar=("URL", "MODEL"), help="an OpenAI-compatible endpoint and model")
    ap.add_argument("--raw-only", action="store_true", help="with --llm: only the model's own replies "
                    "(skip the full LLM-planner pass, which is slow on a small CPU)")
    args = ap.parse_args()
    os.chdir(ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="phrasings-"))
    make_files(tmp)
    results = [run({"planner": "deterministic"}, tmp, "offline parser")]
    if args.llm:
        url, model = args.llm
        if not args.raw_only:
            results.append(run({"planner": "llm", "llm_base_url": url, "llm_model": model, "llm_api_key": "local",
                                "llm_timeout_s": 120, "llm_max_tokens": 256, "llm_review": False}, tmp,
                               f"LLM planner ({model})"))
        raw = raw_model_fill(url, model, tmp)
    machine = f"{platform.node()}: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    out = Path(__file__).parent
    doc = {"machine": machine, "results": results}
    earlier = None
    if args.llm:
        doc["raw_model_fill"] = {**raw, "model": args.llm[1], "set_size": results[0]["total"][1]}
    elif (out / "results.json").is_file():  # keep the model's last measured figure, said to be earlier
        prev = json.loads((out / "results.json").read_text())
        earlier = prev.get("raw_model_fill") or prev.get("raw_model_fill_earlier")
        if earlier is not None:
            earlier = {**earlier, "set_size": earlier.get("set_size") or sum(
                r["total"][1] for r in prev.get("results", [])[:1])}
            doc["raw_model_fill_earlier"] = earlier
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    md = (f"# Phrasing set: pass rate by category\n\nMachine: {machine}. Each request runs through the real "
          f"graph up to its first tool call and must give exactly its expected intent, question or refusal "
          f"(tests/intents/phrasings.yaml).\n\n{table(results)}\n")
    if args.llm:
        md += (f"\n{model}'s own reply, before perfscout validates and merges it ({raw['parsed_replies']} replies "
               f"parsed): whole intent right on {raw['whole'][0]}/{raw['whole'][1]} actionable requests; by slot: "
               + ", ".join(f"{s} {ok}/{n}" for s, (ok, n) in raw["per_slot"].items()) + ".\n")
    elif earlier is not None:
        md += (f"\nThe local model ({earlier.get('model', 'smollm2')}) was not re-run this time (a pass takes minutes "
               f"on this CPU); its last measured "
               f"fill, on the {earlier['set_size']}-request set: whole intent right on {earlier['whole'][0]}/"
               f"{earlier['whole'][1]} actionable requests ({earlier['parsed_replies']} replies parsed); by slot: "
               + ", ".join(f"{s} {ok}/{n}" for s, (ok, n) in earlier["per_slot"].items()) + ".\n")
    for r in results:
        md += f"\n{r['label']}: {r['seconds']} s for {r['total'][1]} requests.\n"
        for f in r["failures"][:40]:
            md += f"- `{f['request'][:100]}`: {'; '.join(f['problems'])[:300]}\n"
    (out / "results.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
