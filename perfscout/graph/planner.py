"""The deterministic planner: a YAML spec or a constrained intent -> typed tasks.

No network, no model: the same request always gives the same plan. It understands

* a spec (a dict as YAML loads it), validated by the sweep's schema
  (:class:`perfscout.sweep.spec.SweepSpec`): its grid (``datasets``, ``codecs``, ``devices``,
  ``modes``, ``bounds``, ``repeats``, ``experiments``; the aliases ``dataset``, ``mode``,
  ``bound``) becomes evaluate_codec tasks, plus the agent's own keys ``goal``, ``intent``,
  ``fallback_dataset``, explicit ``tasks`` (tool + args) and ``sweep`` (a sweep spec file, or
  ``{spec, out, jobs}``, or a list of them); a sweep spec with ``plugins:`` is one run_sweep task;
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


#: Sweep spec settings the agent's evaluations leave to ``perfscout sweep`` (noted, not used).
_SWEEP_ONLY_KEYS = ("jobs", "cores", "max_memory_mb", "task_start", "output", "report")


def _sweep_task(i: int, args: dict[str, Any], label: str) -> Task:
    return Task(key=_key(i, "sweep", label), tool=SWEEP.name, args=args,
                purpose=f"run the sweep {label} (resumable) and write its report")


def plan_from_sweep_spec(spec: dict[str, Any]) -> Plan:
    """A sweep spec whose ``plugins:`` register codecs, given as the request: one run_sweep
    task carries it (the tool imports the plug-ins only with ``--allow-plugins``)."""
    from perfscout.sweep.spec import SpecError, load_spec

    try:
        # checked here without importing its plug-ins; whether they may run is run_sweep's decision
        model = load_spec({k: v for k, v in spec.items() if k != "plugins"})
    except SpecError as exc:
        raise PlanningError(f"the request is a sweep spec with plug-ins but not a valid one: {exc}") from exc
    goal = f"sweep {model.name}" + (f": {model.description}" if model.description else "")
    return Plan(goal=goal, tasks=[_sweep_task(1, {"spec_doc": dict(spec)}, model.name)],
                planner="deterministic", notes=["the spec names plug-ins (code that registers codecs): one "
                                                "run_sweep task runs it as a sweep"])


def _evaluate_args(point: Any, model: Any) -> dict[str, Any]:
    """evaluate_codec's arguments for one grid point of a spec (:class:`perfscout.sweep.spec.GridPoint`)."""
    ds = point.dataset
    given = ds.model_fields_set
    if ds.synthetic:
        dataset = f"synthetic:{ds.synthetic}" + (f":{ds.dtype}" if "dtype" in given else "") \
            + (f":seed={ds.seed}" if ds.seed else "")
    else:
        dataset = str(ds.path or ds.name)
    args: dict[str, Any] = {"dataset": dataset}
    if ds.path and ds.shape:
        args["shape"] = ",".join(map(str, ds.shape))
    if ds.path and ("dtype" in given or (ds.shape and not ds.var)):  # a raw file's dtype defaults to f32, as in a sweep
        args["dtype"] = ds.dtype
    if ds.var:
        args["var"] = ds.var
    if ds.endian == ">":
        args["endian"] = ">"
    if ds.fill_masked is not None:
        args["masked"] = float(ds.fill_masked)
    if ds.label:
        args["label"] = ds.label
    if point.device not in ("cpu", "cuda"):
        raise PlanningError(f"device {point.device!r}: the agent measures on 'cpu' or 'cuda' (the default GPU); "
                            f"a grid over {point.device} runs with `perfscout sweep`")
    if point.mode not in REQUEST_MODES:
        raise PlanningError(f"mode must be one of {', '.join(REQUEST_MODES)}, got {point.mode!r}")
    args.update(codec=point.codec.id, mode=point.mode, bound=point.bound, device=point.device,
                repeats=point.repeats)
    if point.codec.options:
        args["options"] = dict(point.codec.options)
    for key in ("nonfinite", "timeout_s", "memory_limit_mb"):
        if key in model.model_fields_set:
            args[key] = getattr(model, key)
    return args


def _with_fallback(model: Any, notes: list[str]) -> Any:
    """The spec with each named dataset that is absent here replaced by ``fallback_dataset``."""
    fallback = model.fallback_dataset
    if fallback is None:
        return model
    shown = f"synthetic:{fallback.synthetic}" if fallback.synthetic else (fallback.path or fallback.name)

    def checked(entries: list[Any] | None) -> list[Any] | None:
        if entries is None:
            return None
        out = []
        for entry in entries:
            ok, why = dataset_available(entry.name) if entry.name else (True, "")
            if ok:
                out.append(entry)
                if entry.name:
                    notes.append(f"dataset {entry.name} found: using the real field (the synthetic "
                                 f"fallback {shown} was not needed)")
            else:
                notes.append(f"dataset {entry.name} is not available here ({why}); "
                             f"using the synthetic fallback {shown} instead")
                out.append(fallback)
        return out

    exps = [e.model_copy(update={"datasets": checked(e.datasets)}) for e in model.experiments or []]
    return model.model_copy(update={"datasets": checked(model.datasets), "experiments": exps or model.experiments})


def _group_notes(model: Any, notes: list[str]) -> None:
    """What a codec group word (``cpu``, ``all``) selected here, and what it left out and why."""
    from perfscout.sweep.spec import CODEC_GROUPS, resolve_grid

    infos = codec_infos()
    for exp in model.experiments or [None]:
        grid = resolve_grid(model, exp)
        named = (exp.codecs if exp is not None and exp.codecs is not None else model.codecs) or []
        for entry in named:
            word = entry if isinstance(entry, str) else entry.id
            if word not in CODEC_GROUPS:
                continue
            kinds = CODEC_GROUPS[word] or tuple(dict.fromkeys(d.split(":")[0] for d in grid["devices"]))
            chosen = [i["id"] for i in infos if i["available"] and i["device"] in kinds]
            unusable = [f"{i['id']} ({i['reason'] or 'not usable'})" for i in infos
                        if not i["available"] and i["device"] in kinds]
            note = (f"'{word}' codecs installed here: {', '.join(chosen) or 'none'}"
                    + (f"; not usable: {', '.join(unusable)}" if unusable else ""))
            if note not in notes:
                notes.append(note)


def plan_from_spec(spec: dict[str, Any]) -> Plan:
    """Expand a spec into tasks: its grid (:func:`perfscout.sweep.spec.grid_points`, the
    expansion a sweep uses) as evaluate_codec tasks, explicit tasks, sweeps.

    The spec is validated by the sweep's schema (:func:`perfscout.sweep.spec.load_spec` with
    ``for_agent``), so a key means what it means in ``perfscout sweep FILE``."""
    from perfscout.sweep.spec import SpecError, grid_points, has_grid, load_spec

    if not isinstance(spec, dict):
        raise PlanningError(f"a spec must be a mapping, got {type(spec).__name__}")
    if spec.get("plugins") and not set(spec) & {"goal", "intent", "fallback_dataset", "tasks", "sweep"}:
        return plan_from_sweep_spec(spec)
    try:
        model = load_spec(spec, for_agent=True)
    except SpecError as exc:
        raise PlanningError(str(exc)) from exc
    if model.plugins:
        raise PlanningError("plugins: a spec that imports code runs as a sweep (one run_sweep task, with "
                            "--allow-plugins); leave out goal, intent, fallback_dataset, tasks and sweep")
    if model.intent is not None:
        if set(spec) - {"intent", "goal"}:
            raise PlanningError("'intent' is a request in words: give it alone (with an optional 'goal')")
        plan = plan_request(model.intent)
        plan.goal = str(model.goal or plan.goal)
        return plan
    notes: list[str] = []
    tasks: list[Task] = []
    if has_grid(model):
        model = _with_fallback(model, notes)
        _group_notes(model, notes)
        try:
            points, skipped = grid_points(model)
        except SpecError as exc:
            raise PlanningError(str(exc)) from exc
        notes += [f"{s.codec} on {s.device}" + (f" ({s.mode})" if s.mode != "*" else "") + f": {s.reason}; not run"
                  for s in skipped]
        seen: set[str] = set()
        lossless = sorted({p.codec.id for p in points if p.mode not in REQUEST_MODES})
        if lossless:
            notes.append(f"lossless points not run ({', '.join(lossless)}): the agent measures error-bounded "
                         "modes; `perfscout sweep FILE` runs them")
        for point in (p for p in points if p.mode in REQUEST_MODES):
            args = _evaluate_args(point, model)
            ident = repr(sorted(args.items()))
            if ident in seen:  # a point shared by two experiments is measured once
                continue
            seen.add(ident)
            tasks.append(Task(key=_key(len(tasks) + 1, point.codec.id, point.device, point.mode,
                                       _fmt_bound(point.bound)),
                              tool=EVALUATE.name, args=args,
                              purpose=f"{point.codec.id} on {args.get('label') or args['dataset']} ({point.device}) "
                                      f"at {point.mode} {point.bound:g}"))
        unused = [k for k in _SWEEP_ONLY_KEYS if k in model.model_fields_set]
        if unused:
            notes.append(f"not used by the agent: {', '.join(unused)} (its evaluations run one at a time in "
                         "the agent's run directory; `perfscout sweep FILE` uses them)")
    for extra in model.tasks or []:
        tasks.append(Task(key=_key(len(tasks) + 1, extra.tool), tool=extra.tool, args=dict(extra.args),
                          purpose=extra.purpose))
    sweeps = model.sweep if isinstance(model.sweep, list) else [model.sweep] if model.sweep is not None else []
    for entry in sweeps:
        args = {"spec": entry} if isinstance(entry, str) else entry.model_dump(exclude_none=True)
        if not str(args["spec"]).strip():
            raise PlanningError("a 'sweep' entry is the path of a sweep spec (YAML) or a mapping with 'spec' "
                                "and optional 'out', 'jobs'")
        tasks.append(_sweep_task(len(tasks) + 1, args, Path(args["spec"]).stem))
    if not tasks:
        raise PlanningError("the spec asks for nothing: give datasets, codecs and bounds, tasks, or sweep")
    goal = model.goal or model.description or ("" if "name" not in model.model_fields_set else f"sweep {model.name}")
    return Plan(goal=str(goal), tasks=tasks, planner="deterministic", notes=notes)


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
