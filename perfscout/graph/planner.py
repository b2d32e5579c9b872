"""The deterministic planner: a YAML spec or a constrained intent -> typed tasks.

No network, no model: the same request always gives the same plan. It understands

* a spec (a dict as YAML loads it): ``datasets``, ``codecs``, ``mode``, ``bounds``,
  ``devices``, ``repeats``, ``fallback_dataset``, explicit ``tasks`` (tool + args) and
  ``sweep`` (a sweep spec file, or ``{spec, out, jobs}``, or a list of them);
* a sweep spec itself (:mod:`perfscout.tools.sweep.spec`), recognised by its shape;
* intents such as "compare sz3 and zfp at rel 1e-3 on vorticity on cpu and gpu",
  "evaluate every codec at abs 1e-4 on synthetic:grf:64,64 with 5 repeats" or
  "sweep examples/sweep_quick.yaml [into DIR]".

A request it cannot understand raises :class:`PlanningError` saying what it accepts.
"""

from __future__ import annotations

import importlib
import re
import shlex
from itertools import product
from pathlib import Path
from typing import Any

from perfscout.errors import InputError
from perfscout.state.agent import Plan, Task

MODES = ("abs", "rel", "pw_rel", "psnr", "ratio", "fixed_rate")

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

ACCEPTED_FORMS = (
    "compare CODEC [and CODEC ...] at MODE BOUND[, BOUND ...] on DATASET [on cpu|gpu ...]",
    "evaluate every codec at MODE BOUND on DATASET [with N repeats]",
    "sweep SPEC.yaml [into DIR] (run a sweep spec, see examples/sweep_*.yaml)",
    "MODE is abs|rel|pw_rel|psnr|ratio|fixed_rate; DATASET a dataset name, "
    "synthetic:KIND:SHAPE or a raw file path [shape Z,Y,X] [f32|f64]",
)


class PlanningError(InputError):
    """The request could not be turned into tasks."""


# ---- what exists here ------------------------------------------------------------

def codec_infos() -> list[dict[str, Any]]:
    from perfscout.codecs.registry import list_codecs

    return [i.model_dump() for i in list_codecs()]


def known_datasets() -> list[str]:
    """Names the datasets module knows (empty if it cannot list them)."""
    try:
        ds = importlib.import_module("perfscout.datasets")
    except ImportError:
        return []
    lister = getattr(ds, "list_datasets", None)
    if lister is None:
        return []
    names = []
    for item in lister():
        name = item if isinstance(item, str) else getattr(item, "name", None) or (
            item.get("name") if isinstance(item, dict) else None)
        if name:
            names.append(str(name))
    return names


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
    from perfscout.tools.sweep.spec import SweepSpec

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
    return Task(key=_key(i, "sweep", label), tool="run_sweep", args=args,
                purpose=f"run the sweep {label} (resumable) and write its report")


def plan_from_sweep_spec(spec: dict[str, Any]) -> Plan:
    """A sweep spec given as the request: one run_sweep task that carries it."""
    from perfscout.tools.sweep.spec import SpecError, load_spec

    try:
        model = load_spec(spec)
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
        plan = plan_from_intent(str(spec["intent"]))
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
    if mode not in MODES:
        raise PlanningError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
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
                              tool="evaluate_codec", args=args,
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

_NUM = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
_MODE_RE = re.compile(rf"\b(pw_rel|abs|rel|psnr|ratio|fixed_rate)\b\s*(?:=|:|of)?\s*((?:{_NUM})(?:\s*(?:,|/|and|or)\s*{_NUM})*)",
                      re.IGNORECASE)
_SYNTH_RE = re.compile(r"\bsynthetic[: ]\s*([a-z_]+:\d+(?:,\d+)*)", re.IGNORECASE)
_PATH_RE = re.compile(r"(?<![\w:])((?:~|\.{1,2})?/[\w./-]+|[\w-]+\.(?:raw|bin|dat|f32|f64))\b")
_SHAPE_RE = re.compile(r"\bshape\s*[:=]?\s*(\d+(?:\s*[,x]\s*\d+)*)", re.IGNORECASE)
_DTYPE_RE = re.compile(r"\b(f32|f64|float32|float64)\b", re.IGNORECASE)
_REPEATS_RE = re.compile(r"\b(\d+)\s+repeats\b|\brepeats?\s*[:=]?\s*(\d+)\b", re.IGNORECASE)
_PROFILE_RE = re.compile(r"\bprofile\s*:?(?:\s+(.*))?$", re.IGNORECASE)
_SWEEP_RE = re.compile(r"\bsweep\b.*?([^\s`'\"]+\.ya?ml)(?![\w.-])(?:[`'\"]?\s+(?:into|to|--out)\s+"
                       r"[`'\"]?([^\s`'\"]+))?", re.IGNORECASE)


def _device(word: str) -> str:
    w = str(word).lower()
    if w in ("gpu", "cuda"):
        return "cuda"
    if w == "cpu":
        return "cpu"
    raise PlanningError(f"device must be cpu or gpu/cuda, got {word!r}")


def _mentions(text: str, names: list[str]) -> list[str]:
    """Names mentioned as whole words (``sz3-h5`` does not also count as ``sz3``)."""
    found = []
    for name in sorted(names, key=len, reverse=True):
        pattern = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
        if re.search(pattern, text, re.IGNORECASE):
            found.append(name)
            text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    return sorted(found, key=names.index)


def intent_constraints(text: str) -> dict[str, Any]:
    """What an intent states explicitly: codecs, mode/bounds, datasets, devices, repeats.

    Used by the deterministic planner and to check that an LLM plan keeps to the request.
    """
    codec_ids = [i["id"] for i in codec_infos()]
    out: dict[str, Any] = {"codecs": _mentions(text, codec_ids)}
    if re.search(r"\b(every|all)\s+(installed\s+|cpu\s+)?codecs?\b", text, re.IGNORECASE):
        out["codecs"] = out["codecs"] or ["cpu"]
    m = _MODE_RE.search(text)
    if m:
        out["mode"] = m.group(1).lower()
        out["bounds"] = [float(x) for x in re.findall(_NUM, m.group(2))]
    devices = []
    for word in re.findall(r"\b(cpu|gpu|cuda)s?\b", text, re.IGNORECASE):
        dev = _device(word)
        if dev not in devices:
            devices.append(dev)
    out["devices"] = devices or ["cpu"]
    datasets: list[Any] = [f"synthetic:{s}" for s in _SYNTH_RE.findall(text)]
    rest = _SYNTH_RE.sub(" ", text)
    names = known_datasets()
    datasets += _mentions(rest, names)
    if not datasets:
        # A family name ("vorticity") that several datasets share stays as written; the
        # tool then asks which one is meant (reflect turns that into a question).
        words = [w for w in re.findall(r"\bon\s+([A-Za-z][\w.-]*)", rest)
                 if w.lower() not in ("cpu", "gpu", "cuda", "the", "a", "my")]
        datasets += [w for w in words if any(n.startswith(w) for n in names) or not names]
    for path in _PATH_RE.findall(rest):
        entry: dict[str, Any] = {"path": path}
        if (sm := _SHAPE_RE.search(rest)):
            entry["shape"] = re.sub(r"\s*[x,]\s*", ",", sm.group(1))
        if (dm := _DTYPE_RE.search(rest)):
            entry["dtype"] = "f64" if "64" in dm.group(1) else "f32"
        datasets.append(entry)
    out["datasets"] = datasets
    if (rm := _REPEATS_RE.search(text)):
        out["repeats"] = int(rm.group(1) or rm.group(2))
    return out


def plan_from_intent(text: str) -> Plan:
    """Plan a constrained natural-language intent (see :data:`ACCEPTED_FORMS`)."""
    text = " ".join(str(text).split())
    if not text:
        raise PlanningError("empty request; accepted forms: " + " | ".join(ACCEPTED_FORMS))
    if _PROFILE_RE.search(text):
        return _profile_plan(text)
    if (sweep := requested_sweep(text)) is not None:
        return Plan(goal=text, tasks=[_sweep_task(1, sweep, Path(sweep["spec"]).stem)],
                    planner="deterministic")
    c = intent_constraints(text)
    missing = [what for what, ok in (("a codec", c["codecs"]), ("a mode and bound", c.get("bounds")),
                                     ("a dataset", c["datasets"])) if not ok]
    if missing:
        raise PlanningError(f"could not find {', '.join(missing)} in {text!r}; accepted forms: "
                            + " | ".join(ACCEPTED_FORMS))
    spec = {"goal": text, "datasets": c["datasets"], "codecs": c["codecs"], "mode": c["mode"],
            "bounds": c["bounds"], "devices": c["devices"], "repeats": c.get("repeats", 3)}
    return plan_from_spec(spec)


def requested_command(text: str) -> list[str] | None:
    """The argv after "profile" in an intent, or None."""
    m = _PROFILE_RE.search(" ".join(str(text).split()))
    if not m:
        return None
    try:
        return shlex.split((m.group(1) or "").strip().strip("`"))
    except ValueError as exc:  # unbalanced quotes
        raise PlanningError(f"cannot split the command to profile: {exc}") from exc


def requested_sweep(text: str) -> dict[str, str] | None:
    """run_sweep arguments named by an intent ("sweep SPEC.yaml [into DIR]"), or None."""
    m = _SWEEP_RE.search(" ".join(str(text).split()))
    if not m:
        return None
    return {"spec": m.group(1), **({"out": m.group(2).rstrip(".,;")} if m.group(2) else {})}


def _profile_plan(text: str) -> Plan:
    from perfscout.tools.agent_tools import tools_by_name

    argv = requested_command(text) or []
    if "profile_command" not in tools_by_name():
        raise PlanningError("profiling is not available in this installation (no profile tool)")
    if not argv:
        raise PlanningError("nothing to profile: write the command after 'profile', e.g. 'profile ./app --size 4096'")
    tasks = [Task(key="t01-profile", tool="profile_command", args={"command": argv},
                  purpose=f"measure {' '.join(argv)} with ncu or perf stat"),
             Task(key="t02-diagnose", tool="diagnose_profile", args={"profile_task": "t01-profile"},
                  purpose="turn the measured counters into the primary bottleneck and ranked findings")]
    return Plan(goal=text, tasks=tasks, planner="deterministic")


def plan_request(request: str | dict[str, Any]) -> Plan:
    """The deterministic plan for a request (intent string or spec mapping)."""
    return plan_from_spec(request) if isinstance(request, dict) else plan_from_intent(request)
