"""Runs one phrasing through the real graph up to its first tool call and checks the intent.

Shared by ``tests/intents/test_phrasings.py`` (every case must pass, offline) and
``benchmarks/intents/run_phrasings.py`` (pass rates by category, also with a local model).
"""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from perfscout.graph.context import Context
from perfscout.graph.graph import build

PHRASINGS = Path(__file__).with_name("phrasings.yaml")


def load_cases() -> list[dict[str, Any]]:
    return yaml.safe_load(PHRASINGS.read_text(encoding="utf-8"))


def make_files(tmp: Path) -> None:
    """The files the phrasings name: a 91^3 float32 raw field, a 64x64 one, a netCDF file
    with a geopotential and a temperature, and two run folders."""
    rng = np.random.default_rng(0)
    np.cumsum(rng.standard_normal((91, 91, 91)), axis=2).astype("<f4").tofile(tmp / "wmag91.f32")
    np.cumsum(rng.standard_normal((64, 64)), axis=1).astype("<f4").tofile(tmp / "field.bin")
    import netCDF4

    with netCDF4.Dataset(tmp / "era5.nc", "w") as nc:
        nc.createDimension("lat", 16)
        nc.createDimension("lon", 32)
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat[:] = np.linspace(-80, 80, 16)
        lon = nc.createVariable("lon", "f4", ("lon",))
        lon[:] = np.linspace(0, 350, 32)
        z = nc.createVariable("z", "f4", ("lat", "lon"))
        z.long_name, z.units, z.standard_name = "Geopotential", "m**2 s**-2", "geopotential"
        z[:] = rng.standard_normal((16, 32)).cumsum(axis=1)
        t = nc.createVariable("t", "f4", ("lat", "lon"))
        t.long_name, t.units = "Temperature", "K"
        t[:] = 280 + rng.standard_normal((16, 32))
    for run in ("runA", "runB"):
        (tmp / run).mkdir(exist_ok=True)
    # the same 91^3 field under names with other extensions (a bare name in the working
    # directory is a file whatever its extension), and a netCDF file with two wind components
    (tmp / "wmag91.float").write_bytes((tmp / "wmag91.f32").read_bytes())
    (tmp / "wmag91.sdat").write_bytes((tmp / "wmag91.f32").read_bytes())
    with netCDF4.Dataset(tmp / "uv.nc", "w") as nc:
        nc.createDimension("lat", 8)
        nc.createDimension("lon", 16)
        for name, long_name in (("u", "U component of wind"), ("v", "V component of wind"), ("z", "Geopotential")):
            var = nc.createVariable(name, "f4", ("lat", "lon"))
            var.long_name = long_name
            var[:] = rng.standard_normal((8, 16)).cumsum(axis=1)


def observe(request: str, ctx: Context, answers: list[Any] = ()) -> dict[str, Any]:
    """What the graph made of a request, stopped before any tool runs; each of ``answers``
    is given, in turn, to the question then open (what is seen is after the last)."""
    graph = build().compile(checkpointer=InMemorySaver(), interrupt_before=["act"])
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    graph.invoke({"request": request}, config, context=ctx)
    for answer in answers:
        if not graph.get_state(config).interrupts:
            break  # nothing asked: the answers left over are compared by check()
        graph.invoke(Command(resume=answer), config, context=ctx)
    snap = graph.get_state(config)
    values = dict(snap.values or {})
    question = snap.interrupts[0].value if snap.interrupts else None
    plan = values.get("plan") or {}
    return {"intent": values.get("intent") or {}, "tasks": plan.get("tasks") or [],
            "question": question, "refusal": values.get("refusal", ""), "plan_error": values.get("plan_error", ""),
            "planner": plan.get("planner") or values.get("planner_kind", ""), "next": list(snap.next),
            "skipped": plan.get("skipped") or []}


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-9) for x, y in zip(sorted(a), sorted(b)))


def check(case: dict[str, Any], seen: dict[str, Any], tmp: Path) -> list[str]:
    """The differences between what a case expects and what the graph made of it."""
    exp = {k: (v.replace("{tmp}", str(tmp)) if isinstance(v, str) else
               [x.replace("{tmp}", str(tmp)) if isinstance(x, str) else x for x in v] if isinstance(v, list) else v)
           for k, v in case["expect"].items()}
    intent, tasks, question = seen["intent"], seen["tasks"], seen["question"]
    problems: list[str] = []

    def differ(what: str, want: Any, got: Any) -> None:
        problems.append(f"{what}: expected {want!r}, got {got!r}")

    if exp.get("refused"):
        if not seen["refusal"]:
            differ("refused", True, seen["refusal"] or (question or {}).get("question") or intent.get("question"))
        if tasks:
            differ("tasks when refused", 0, len(tasks))
        for said in ([exp["says"]] if isinstance(exp.get("says"), str) else exp.get("says") or []):
            if said.lower() not in str(seen["refusal"]).lower():
                differ("refusal says", said, seen["refusal"])
        return problems
    if seen["refusal"]:
        differ("refusal", "", seen["refusal"])
    if "asks" in exp:
        slot = (question or {}).get("slot")
        if slot != exp["asks"]:
            differ("asks", exp["asks"], slot or f"no question (plan error: {seen['plan_error']!r})")
        if tasks:
            differ("tasks while asking", 0, len(tasks))
        for said in ([exp["says"]] if isinstance(exp.get("says"), str) else exp.get("says") or []):
            if said.lower() not in str((question or {}).get("question", "")).lower():
                differ("question says", said, (question or {}).get("question"))
        for c in exp.get("candidates") or []:
            if c not in (question or {}).get("candidates", []) and c.replace("x", "×") not in (question or {}).get("question", ""):
                differ("candidate", c, (question or {}).get("candidates"))
    elif question is not None:
        differ("question asked", None, question.get("question"))
    elif "plan_error" in exp:
        if exp["plan_error"] not in seen["plan_error"] or tasks:
            differ("plan error", exp["plan_error"], seen["plan_error"] or f"{len(tasks)} task(s)")
    elif seen["plan_error"]:
        differ("plan error", "", seen["plan_error"])
    if "skipped" in exp and sorted(s["codec"] for s in seen["skipped"]) != sorted(exp["skipped"]):
        differ("skipped", exp["skipped"], seen["skipped"])
    checks = {
        "question": lambda: intent.get("question"),
        "codecs": lambda: sorted(intent.get("codecs") or []),
        "groups": lambda: sorted(intent.get("codec_groups") or []),
        "mode": lambda: intent.get("mode"),
        "data": lambda: [_arg(d) for d in intent.get("data") or []],
        "repeats": lambda: intent.get("repeats"),
        "command": lambda: intent.get("command"),
        "targets": lambda: sorted(f"{t['metric']} {t['op']} {t['value']:g}" for t in intent.get("targets") or []),
        "devices": lambda: sorted({t["args"].get("device") for t in tasks if t["tool"] == "evaluate_codec"}),
        "tasks": lambda: len(tasks),
        "tools": lambda: sorted({t["tool"] for t in tasks}),
        "shape": lambda: (intent.get("data") or [{}])[0].get("shape"),
        "dtype": lambda: (intent.get("data") or [{}])[0].get("dtype"),
        "endian": lambda: (intent.get("data") or [{}])[0].get("endian"),
        "var": lambda: (intent.get("data") or [{}])[0].get("var"),
        "runs": lambda: intent.get("runs"),
        "sweep_out": lambda: intent.get("sweep_out"),
        "vars": lambda: [d.get("var") for d in intent.get("data") or []],
        "language": lambda: intent.get("language"),
    }
    for key, got in checks.items():
        if key not in exp:
            continue
        want = exp[key]
        if key in ("codecs", "groups", "devices", "tools", "targets"):
            want = sorted(f"{w}" if key != "targets" else _target(w) for w in want)
        value = got()
        if key == "targets":
            want = sorted(_target(w) for w in exp[key])
        if value != want:
            differ(key, want, value)
    if "bounds" in exp and not _close([float(b) for b in exp["bounds"]], list(intent.get("bounds") or [])):
        differ("bounds", exp["bounds"], intent.get("bounds"))
    return problems


def _arg(d: dict[str, Any]) -> str:
    if d.get("kind") == "synthetic":
        return f"synthetic:{d['name']}"
    return d.get("path") if d.get("kind") in ("raw", "file") else d.get("name", "")


def _target(text: str) -> str:
    metric, op, value = str(text).split()
    return f"{metric} {op} {float(value):g}"
