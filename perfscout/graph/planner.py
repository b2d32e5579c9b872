"""The deterministic planner: a YAML spec or a constrained intent -> typed tasks.

No network, no model: the same request always gives the same plan. It understands

* a spec (a dict as YAML loads it): ``datasets``, ``codecs``, ``mode``, ``bounds``,
  ``devices``, ``repeats``, ``fallback_dataset``, explicit ``tasks`` (tool + args) and
  ``sweep`` (a sweep spec file, or ``{spec, out, jobs}``, or a list of them);
* a sweep spec itself (:mod:`perfscout.sweep.spec`), recognised by its shape;
* an :class:`~perfscout.state.intent.Intent` (what a request in words asked for).

Natural-language requests are read by :mod:`perfscout.graph.understand` into an
:class:`~perfscout.state.intent.Intent`; :func:`plan_from_intent` turns a complete one into
tasks. A request that cannot be planned raises :class:`PlanningError` saying why.
"""

from __future__ import annotations

import importlib
import re
from itertools import product
from pathlib import Path
from typing import Any

from perfscout.errors import InputError
from perfscout.graph.toolbox import (COMPARE_RUNS, DIAGNOSE_FILE, DIAGNOSE_PROFILE, EVALUATE, LIST_CODECS, PLATFORM,
                                     PROFILE, SWEEP)
from perfscout.state.agent import Plan, Task
from perfscout.state.intent import CODEC_QUESTIONS, DataRef, Intent
from perfscout.state.modes import REQUEST_MODES


#: The embedded default request (``perfscout run --demo``, ``make demo``).
DEMO_SPEC: dict[str, Any] = {
    "goal": "Every installed CPU codec on the 2-D vorticity field at REL 1e-2, 1e-3, 1e-4",
    "datasets": ["vorticity.512_512"],
    "fallback_dataset": "synthetic:grf:512,512",
    "codecs": "cpu",
    "mode": "rel",
    "bounds": [1e-2, 1e-3, 1e-4],
    "devices": ["cpu"],
    "repeats": 3,
}



class PlanningError(InputError):
    """The request could not be turned into tasks."""


# ---- what exists here ------------------------------------------------------------

def codec_infos() -> list[dict[str, Any]]:
    from perfscout.codecs.registry import list_codecs

    return [i.model_dump() for i in list_codecs()]


def known_datasets() -> list[str]:
    """Names the dataset registry knows (empty if it cannot list them)."""
    from perfscout.graph.understand import dataset_catalogue

    return [d["name"] for d in dataset_catalogue()]


def dataset_available(name: str) -> tuple[bool, str]:
    """Whether a named dataset can be loaded here (synthetic ones always can)."""
    if name.startswith("synthetic:"):
        return True, ""
    try:
        importlib.import_module("perfscout.datasets").get_dataset(name)
    except Exception as exc:  # absent file, unknown name: the reason goes into the plan notes
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


# ---- expansion -------------------------------------------------------------------

def _fmt_bound(b: float) -> str:
    return f"{b:.0e}".replace("e-0", "e-").replace("e+0", "e") if b < 1e-2 or b >= 1e4 else f"{b:g}"


def _key(i: int, *parts: str) -> str:
    slug = "-".join(re.sub(r"[^A-Za-z0-9._+-]+", "", p) for p in parts if p)
    return f"t{i:02d}-{slug}"[:64]


def _resolve_codecs(codecs: Any, devices: list[str], notes: list[str]) -> list[tuple[str, str]]:
    """(codec, device) pairs. ``"cpu"``/``"all"`` select every usable codec of a device."""
    infos = {i["id"]: i for i in codec_infos()}
    if isinstance(codecs, str):
        codecs = [codecs]
    pairs: list[tuple[str, str]] = []
    for entry in codecs or ["cpu"]:
        if not isinstance(entry, str):
            raise PlanningError(f"a codec is named by its id (e.g. sz3), got {entry!r}")
        if entry in ("cpu", "all", "every", "installed"):
            wanted = devices if entry != "cpu" else ["cpu"]
            chosen = [c for c, i in infos.items() if i["available"] and i["device"] in wanted]
            skipped = [f"{c} ({i['reason'] or 'not usable'})" for c, i in infos.items()
                       if not i["available"] and i["device"] in wanted]
            notes.append(f"'{entry}' codecs installed here: {', '.join(chosen) or 'none'}"
                         + (f"; not usable: {', '.join(skipped)}" if skipped else ""))
            pairs += [(c, infos[c]["device"]) for c in chosen]
            continue
        info = infos.get(entry)
        for dev in devices:
            if info is not None and info["device"] and info["device"] != dev:
                notes.append(f"{entry} runs on {info['device']} only: no {dev} task for it")
                continue
            pairs.append((entry, dev))
        if info is not None and info["device"] not in devices:
            notes.append(f"{entry} needs device {info['device']}, which was not asked for")
    if "cuda" in devices and not any(d == "cuda" for _, d in pairs):
        gpu = [c for c, i in infos.items() if i["device"] == "cuda" or c.endswith("-gpu")]
        if gpu:
            notes.append(f"GPU side of the comparison uses {gpu[0]}, the GPU codec")
            pairs.append((gpu[0], "cuda"))
        else:
            notes.append("no GPU codec is known to this installation: no cuda task")
    seen: set[tuple[str, str]] = set()
    return [p for p in pairs if not (p in seen or seen.add(p))]


def _dataset_arg(entry: Any) -> dict[str, Any]:
    if isinstance(entry, dict):
        if "path" not in entry and "name" not in entry:
            raise PlanningError(f"a dataset entry needs 'name' or 'path': {entry!r}")
        out = {"dataset": str(entry.get("path") or entry.get("name"))}
        if entry.get("shape") is not None:
            shape = entry["shape"]
            out["shape"] = ",".join(str(s) for s in shape) if isinstance(shape, list) else str(shape)
        if entry.get("dtype"):
            out["dtype"] = str(entry["dtype"])
        return out
    return {"dataset": str(entry)}


#: Keys of an agent spec (what :func:`plan_from_spec` expands).
AGENT_SPEC_KEYS = frozenset({"goal", "datasets", "dataset", "fallback_dataset", "codecs", "mode",
                             "bounds", "bound", "devices", "repeats", "tasks", "intent", "sweep"})
#: Agent-spec keys a sweep spec never has: their presence means "agent spec".
_AGENT_ONLY_KEYS = frozenset({"goal", "dataset", "fallback_dataset", "mode", "bound", "tasks",
                              "intent", "sweep"})
_SWEEP_ARG_KEYS = frozenset({"spec", "out", "jobs"})


def is_sweep_spec(spec: dict[str, Any]) -> bool:
    """Whether a mapping is a sweep spec rather than an agent spec, judged by its shape.

    The two share ``datasets, codecs, devices, bounds, repeats``; a sweep spec is one with
    no agent-only key and either a key only sweep specs have (``name``, ``modes``,
    ``experiments``, ``timeout_s``...), per-mode ``bounds``, or a ``synthetic:`` dataset entry.
    """
    from perfscout.sweep.spec import SweepSpec

    keys = set(spec)
    if keys & _AGENT_ONLY_KEYS or not keys <= set(SweepSpec.model_fields):
        return False
    if keys - AGENT_SPEC_KEYS:
        return True
    datasets = spec.get("datasets")
    return isinstance(spec.get("bounds"), dict) or (isinstance(datasets, list) and any(
        isinstance(d, dict) and "synthetic" in d for d in datasets))


def _number(kind: type, value: Any, what: str) -> Any:
    """``kind(value)``, or a PlanningError naming the field (a spec is user input)."""
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise PlanningError(f"{what} must be a number, got {value!r}") from None


def _sweep_args(entry: Any) -> dict[str, Any]:
    """run_sweep arguments from a ``sweep:`` entry: a path, or ``{spec, out, jobs}``."""
    if isinstance(entry, str) and entry.strip():
        return {"spec": entry.strip()}
    if isinstance(entry, dict) and isinstance(entry.get("spec"), str) and set(entry) <= _SWEEP_ARG_KEYS:
        return {k: (_number(int, v, "jobs") if k == "jobs" else str(v)) for k, v in entry.items() if v is not None}
    raise PlanningError("a 'sweep' entry is the path of a sweep spec (YAML) or a mapping "
                        f"with 'spec' and optional 'out', 'jobs': got {entry!r}")


def _sweep_task(i: int, args: dict[str, Any], label: str) -> Task:
    return Task(key=_key(i, "sweep", label), tool=SWEEP.name, args=args,
                purpose=f"run the sweep {label} (resumable) and write its report")


def plan_from_sweep_spec(spec: dict[str, Any]) -> Plan:
    """A sweep spec given as the request: one run_sweep task that carries it."""
    from perfscout.sweep.spec import SpecError, load_spec

    try:
        # checked for shape here; whether its plug-ins may run is run_sweep's decision
        model = load_spec({k: v for k, v in spec.items() if k != "plugins"})
    except SpecError as exc:
        raise PlanningError(f"the request looks like a sweep spec but is not a valid one: {exc}") from exc
    goal = f"sweep {model.name}" + (f": {model.description}" if model.description else "")
    return Plan(goal=goal, tasks=[_sweep_task(1, {"spec_doc": dict(spec)}, model.name)],
                planner="deterministic", notes=["the request is a sweep spec: one run_sweep task runs it"])


def plan_from_spec(spec: dict[str, Any]) -> Plan:
    """Expand a spec into tasks: datasets x (codec, device) x bounds, explicit tasks, sweeps."""
    if not isinstance(spec, dict):
        raise PlanningError(f"a spec must be a mapping, got {type(spec).__name__}")
    if is_sweep_spec(spec):
        return plan_from_sweep_spec(spec)
    unknown = set(spec) - AGENT_SPEC_KEYS
    if unknown:
        raise PlanningError(f"unknown spec keys: {', '.join(sorted(unknown))}")
    if "intent" in spec and len(spec) <= 2:
        plan = plan_request(str(spec["intent"]))
        plan.goal = str(spec.get("goal") or plan.goal)
        return plan
    notes: list[str] = []
    datasets = spec.get("datasets", spec.get("dataset", []))
    datasets = datasets if isinstance(datasets, list) else [datasets]
    fallback = spec.get("fallback_dataset")
    if fallback:
        checked = []
        for entry in datasets:
            name = entry if isinstance(entry, str) else None
            ok, why = dataset_available(name) if name else (True, "")
            if ok:
                checked.append(entry)
                if name:
                    notes.append(f"dataset {name} found: using the real field (the synthetic "
                                 f"fallback {fallback} was not needed)")
            else:
                notes.append(f"dataset {name} is not available here ({why}); "
                             f"using the synthetic fallback {fallback} instead")
                checked.append(fallback)
        datasets = checked
    mode = str(spec.get("mode", "rel"))
    if mode not in REQUEST_MODES:
        raise PlanningError(f"mode must be one of {', '.join(REQUEST_MODES)}, got {mode!r}")
    bounds = spec.get("bounds", spec.get("bound", []))
    bounds = [_number(float, b, "a bound") for b in (bounds if isinstance(bounds, list) else [bounds])]
    devices = spec.get("devices") or ["cpu"]
    devices = [_device(d) for d in (devices if isinstance(devices, list) else [devices])]
    repeats = _number(int, spec.get("repeats", 3), "repeats")
    tasks: list[Task] = []
    if datasets or spec.get("codecs"):
        if not datasets or not bounds:
            raise PlanningError("a spec that evaluates codecs needs 'datasets' and 'bounds'")
        pairs = _resolve_codecs(spec.get("codecs", "cpu"), devices, notes)
        for ds_entry, (codec, dev), b in product(datasets, pairs, bounds):
            args = {**_dataset_arg(ds_entry), "codec": codec, "mode": mode, "bound": b,
                    "device": dev, "repeats": repeats}
            tasks.append(Task(key=_key(len(tasks) + 1, codec, dev, mode, _fmt_bound(b)),
                              tool=EVALUATE.name, args=args,
                              purpose=f"{codec} on {args['dataset']} ({dev}) at {mode} {b:g}"))
    for extra in spec.get("tasks") or []:
        if not isinstance(extra, dict) or "tool" not in extra or not isinstance(extra.get("args") or {}, dict):
            raise PlanningError(f"an explicit task needs 'tool' (and 'args', a mapping): {extra!r}")
        tasks.append(Task(key=_key(len(tasks) + 1, str(extra["tool"])), tool=str(extra["tool"]),
                          args=dict(extra.get("args") or {}), purpose=str(extra.get("purpose", ""))))
    sweeps = spec.get("sweep")
    for entry in (sweeps if isinstance(sweeps, list) else [sweeps] if sweeps is not None else []):
        args = _sweep_args(entry)
        tasks.append(_sweep_task(len(tasks) + 1, args, Path(args["spec"]).stem))
    if not tasks:
        raise PlanningError("the spec asks for nothing: give datasets, codecs and bounds, tasks, or sweep")
    return Plan(goal=str(spec.get("goal", "")), tasks=tasks, planner="deterministic", notes=notes)


# ---- intents ---------------------------------------------------------------------

def _device(word: str) -> str:
    w = str(word).lower()
    if w in ("gpu", "cuda"):
        return "cuda"
    if w == "cpu":
        return "cpu"
    raise PlanningError(f"device must be cpu or gpu/cuda, got {word!r}")


def _data_args(ref: DataRef) -> dict[str, Any]:
    args: dict[str, Any] = {"dataset": ref.dataset_arg()}
    if ref.kind == "raw":
        if ref.shape:
            args["shape"] = ",".join(map(str, ref.shape))
        if ref.dtype:
            args["dtype"] = ref.dtype
        if ref.endian == ">":
            args["endian"] = ">"
    elif ref.kind == "file":
        args["var"] = ref.var
        if ref.dtype:
            args["dtype"] = ref.dtype
    return args


def _missing_value_args(intent: Intent, ref: DataRef) -> dict[str, Any]:
    """The evaluate tool's missing-value policy, as the request stated it (else none: the
    tool asks when the data has missing values). A fill value is for a variable's masked
    points only; "nan" also keeps NaN/Inf of any data beside the stream."""
    if intent.masked == "nan":
        return {"masked": "nan", "nonfinite": "passthrough"} if ref.kind == "file" else {"nonfinite": "passthrough"}
    if intent.masked is not None and ref.kind == "file":
        return {"masked": float(intent.masked)}
    return {}


#: The plan's notes about codecs, in the request's language
_NOTES = {
    "en": {"group": "'{group}' compressors usable here on {devices}: {chosen}",
           "not_here": "not a codec of this installation", "unusable": "not usable here",
           "only_on": "{codec} runs on the {device} only: it is measured there",
           "no_gpu_codec": "the request names the GPU but no GPU compressor; say 'szp-gpu' or 'the GPU ones' to measure one",
           "excluded": "left out at the request's word: {codecs}", "none": "none",
           "no_mode": "has no {mode} mode (its modes: {modes})"},
    "zh": {"group": "这里 {devices} 上可用的“{group}”压缩器：{chosen}",
           "not_here": "不是这里安装的压缩器", "unusable": "这里不可用",
           "only_on": "{codec} 只在 {device} 上运行：在那里测量",
           "no_gpu_codec": "请求提到了 GPU，但没有指定 GPU 压缩器；说“szp-gpu”或“GPU 上的压缩器”来测量一个",
           "excluded": "按请求排除：{codecs}", "none": "无",
           "no_mode": "没有 {mode} 模式（它的模式：{modes}）"},
}


def _codec_pairs(intent: Intent, platform: dict[str, Any], notes: list[str],
                 skipped: list[dict[str, str]]) -> list[tuple[str, str]]:
    """(codec, device) to measure: named codecs where they run, groups expanded."""
    from perfscout.graph.understand import codec_catalogue

    say = _NOTES["zh" if intent.language == "zh" else "en"]

    cat = codec_catalogue()
    asked = list(intent.devices)
    has_gpu = bool(platform.get("gpus"))
    pairs: list[tuple[str, str]] = []
    for group in intent.codec_groups:
        devices = {"cpu": ["cpu"], "gpu": ["cuda"]}.get(group) or asked or (["cpu", "cuda"] if has_gpu else ["cpu"])
        chosen = [c for c, i in cat.items() if i.get("available") and i.get("device") in devices]
        for c, i in cat.items():
            if i.get("device") in devices and not i.get("available"):
                skipped.append({"codec": c, "why": i.get("reason") or say["unusable"]})
        notes.append(say["group"].format(group=group, devices="/".join(devices), chosen=", ".join(chosen) or say["none"]))
        pairs += [(c, cat[c]["device"]) for c in chosen]
    for c in intent.codecs:
        info = cat.get(c)
        if info is None:
            skipped.append({"codec": c, "why": say["not_here"]})
            continue
        if not info.get("available"):
            skipped.append({"codec": c, "why": info.get("reason") or say["unusable"]})
            continue
        dev = info.get("device") or "cpu"
        if asked and dev not in asked:
            notes.append(say["only_on"].format(codec=c, device="GPU" if dev == "cuda" else "CPU"))
        pairs.append((c, dev))
    if "cuda" in asked and not any(d == "cuda" for _, d in pairs) and intent.codecs and not intent.codec_groups:
        notes.append(say["no_gpu_codec"])
    seen: set[tuple[str, str]] = set()
    pairs = [p for p in pairs if not (p in seen or seen.add(p))]
    if intent.excluded_codecs:
        notes.append(say["excluded"].format(codecs=", ".join(intent.excluded_codecs)))
        pairs = [(c, d) for c, d in pairs if c not in intent.excluded_codecs]
    if intent.mode:
        kept = []
        for c, d in pairs:
            modes = cat.get(c, {}).get("modes") or []
            if modes and intent.mode not in modes:
                skipped.append({"codec": c, "why": say["no_mode"].format(mode=intent.mode, modes=", ".join(modes))})
            else:
                kept.append((c, d))
        pairs = kept
    return pairs


def _codecs_with_mode(mode: str | None) -> str:
    """"; usable here with pw_rel: sz2": what the person could ask for instead."""
    if not mode:
        return ""
    from perfscout.graph.understand import codec_catalogue

    have = [c for c, i in codec_catalogue().items() if i.get("available") and mode in (i.get("modes") or [])]
    return f"; usable here with {mode}: {', '.join(have)}" if have else f"; no codec usable here has {mode}"


def _run_path(ref: str, runs_dir: Path | None) -> str:
    """A run id of the agent's runs folder as its directory; anything else as written."""
    if runs_dir is not None and "/" not in ref and (runs_dir / ref).is_dir():
        return str(runs_dir / ref)
    return ref


def plan_from_intent(intent: Intent, platform: dict[str, Any] | None = None,
                     runs_dir: Path | None = None) -> Plan:
    """Tasks for a complete intent (refused or incomplete ones raise PlanningError)."""
    if intent.refusal:
        raise PlanningError(f"refused: {intent.refusal}")
    if intent.missing:
        raise PlanningError(intent.missing[0].question)
    platform = platform or {}
    notes = list(intent.notes)
    skipped: list[dict[str, str]] = []
    tasks: list[Task] = []
    q = intent.question  # a Question (state/intent.py), not a tool: each branch plans tool objects
    if q in CODEC_QUESTIONS:
        pairs = _codec_pairs(intent, platform, notes, skipped)
        repeats = intent.repeats or 3
        for ref, (codec, dev), b in product(intent.data, pairs, intent.bounds):
            args = {**_data_args(ref), **_missing_value_args(intent, ref), "codec": codec, "mode": intent.mode,
                    "bound": b, "device": dev, "repeats": repeats}
            tasks.append(EVALUATE.task(_key(len(tasks) + 1, codec, dev, str(intent.mode), _fmt_bound(b)), args,
                                       f"{codec} on {ref.label()} ({dev}) at {intent.mode} {b:g}"))
        if not tasks:
            why = "; ".join(f"{s['codec']}: {s['why']}" for s in skipped) or "no compressor is usable here"
            raise PlanningError(f"nothing to measure: {why}{_codecs_with_mode(intent.mode)}")
    elif q == "profile":
        argv = list(intent.command)
        tasks = [PROFILE.task("t01-profile", {"command": argv},
                              f"measure {' '.join(argv)} with ncu or perf stat (in the sandbox)"),
                 DIAGNOSE_PROFILE.task("t02-diagnose", {"profile_task": "t01-profile"},
                                       "turn the measured counters into the primary bottleneck and ranked findings")]
    elif q == "diagnose":
        tasks = [DIAGNOSE_FILE.task("t01-diagnose-file", {"path": intent.profile_file},
                                    f"diagnose the kernels (or program) profiled in {intent.profile_file}")]
    elif q == "describe_machine":
        tasks = [PLATFORM.task("t01-platform", {}, "probe CPU, memory, GPUs, compilers, MPI and perf on this machine")]
    elif q == "list_codecs":
        tasks = [LIST_CODECS.task("t01-codecs", {}, "list every codec, whether it is usable here, and its modes")]
    elif q == "sweep":
        args = {"spec": intent.sweep_spec, **({"out": intent.sweep_out} if intent.sweep_out else {})}
        tasks = [_sweep_task(1, args, Path(intent.sweep_spec).stem)]
    elif q == "compare_runs":
        base, cand = (_run_path(r, runs_dir) for r in intent.runs[:2])
        tasks = [COMPARE_RUNS.task("t01-compare-runs", {"baseline": base, "candidate": cand},
                                   f"is {intent.runs[1]} faster, slower or unchanged against {intent.runs[0]}")]
    else:
        raise PlanningError(f"no plan for the question {q!r}")
    return Plan(goal=intent.text or intent.summary(), tasks=tasks, planner="deterministic", notes=notes,
                intent=intent.model_dump(), skipped=skipped)


def understand_request(text: str) -> Intent:
    """The deterministic reading of a request in words."""
    from perfscout.graph.understand import parse

    return parse(" ".join(str(text).split()))


def plan_request(request: str | dict[str, Any], platform: dict[str, Any] | None = None) -> Plan:
    """The deterministic plan for a request (intent string or spec mapping).

    A request in words that is refused, or that leaves a question open, raises
    PlanningError with the reason or the question (the graph asks it instead).
    """
    if isinstance(request, dict):
        return plan_from_spec(request)
    text = " ".join(str(request).split())
    if not text:
        raise PlanningError("empty request: say what to find out, e.g. 'compare sz3 and zfp at rel 1e-3 on "
                            "vorticity.512_512'")
    return plan_from_intent(understand_request(text), platform)


def requested_sweep(text: str) -> dict[str, str] | None:
    """run_sweep arguments named by a request ("sweep SPEC.yaml [into DIR]"), or None."""
    intent = understand_request(text)
    if intent.question != "sweep" or not intent.sweep_spec:
        return None
    return {"spec": intent.sweep_spec, **({"out": intent.sweep_out} if intent.sweep_out else {})}


def requested_command(text: str) -> list[str] | None:
    """The argv a request asks to profile, or None."""
    intent = understand_request(text)
    return list(intent.command) if intent.command else None
