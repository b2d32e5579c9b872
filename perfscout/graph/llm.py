"""The LLM planner: an OpenAI-compatible chat model fills the request's Intent; perfscout checks it.

:func:`intent_with_llm` asks the model for the same :class:`~perfscout.state.intent.Intent`
the offline parser fills (structured output of its slots), then applies the same
validation: what the person wrote explicitly (the parser's reading) always wins, codecs
must exist, files must be ones the request names or lie inside the allowed roots, a
program to profile can only come from the request itself, and a refusal by the parser is
final (the model is not even asked). The same questions follow for what stays open.

After the measurements, :func:`review_with_llm` may propose follow-up tool calls (a Plan),
validated as below.

The model answers through structured output (one ``Plan`` function call). Its plan is
*untrusted*: every task must name a tool of the fixed whitelist
(:data:`perfscout.graph.toolbox.AGENT_TOOLS`), its arguments must validate against that
tool's schema, codecs and datasets must exist, and an intent's explicit constraints
(codecs, mode, bounds, datasets, devices) must be kept. A rejected or unreachable plan
is retried once with the reasons; then the caller falls back to the deterministic
planner and the report says so. Text that tools produced reaches the model only inside
a ``<data>`` block, and nothing the model says can add a tool.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from typing import Any, Callable, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from perfscout.graph.context import Context
from perfscout.state.agent import Plan, Task
from perfscout.state.intent import DataRef, Intent, Target
from perfscout.state.llm_endpoint import LLMEndpoint
from perfscout.state.llm_endpoint import make_chat_model as chat_model_for
from perfscout.state.modes import REQUEST_MODES, RequestMode
from perfscout.graph.tool_common import allowed_roots
from perfscout.graph.toolbox import EVALUATE, PROFILE, SWEEP, AgentTool, PlanCheck, find, tool_functions

MAX_TASKS = 48


class PlannedCall(BaseModel):
    """One tool call of the plan, normalised: the tool's name and its arguments."""

    tool: str = Field(description="Name of one of the listed tools.")
    args: dict[str, Any] = Field(default_factory=dict, description="Arguments for that tool.")
    purpose: str = Field(default="", description="Why this call is needed.")

    @classmethod
    def from_reply(cls, item: Any) -> PlannedCall:
        """Accept ``{"tool", "args": {...}}`` and the flat ``{"tool", ARG: VALUE, ...}`` form."""
        if isinstance(item, PlannedCall):
            return item
        if not isinstance(item, dict):
            return cls(tool=f"<not an object: {str(item)[:40]}>")
        flat = {k: v for k, v in item.items() if k not in ("tool", "args", "purpose")}
        nested = item.get("args") if isinstance(item.get("args"), dict) else {}
        return cls(tool=str(item.get("tool", "")), args={**flat, **nested},
                   purpose=str(item.get("purpose") or ""))


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    """The parts of a JSON schema that grammar-constrained servers understand."""
    if "anyOf" in schema:
        options = [_plain(o) for o in schema["anyOf"] if o.get("type") != "null"]
        return options[0] if len(options) == 1 else {"anyOf": options}
    out = {k: schema[k] for k in ("type", "enum") if k in schema}
    if "items" in schema:
        out["items"] = _plain(schema["items"])
    return out


def _task_schemas() -> list[dict[str, Any]]:
    """One object schema per whitelisted tool: its name, then its own typed arguments."""
    items = []
    for t in tool_functions():
        schema = t.tool_call_schema.model_json_schema()
        props = {"tool": {"type": "string", "enum": [t.name]}}
        props.update({k: _plain(v) for k, v in schema.get("properties", {}).items()})
        if "codec" in props:
            from perfscout.graph.planner import codec_infos

            props["codec"]["enum"] = [i["id"] for i in codec_infos() if i["available"]]
        items.append({"type": "object", "properties": props,
                      "required": ["tool", *schema.get("required", [])]})
    return items


def _plan_schema(min_tasks: int) -> Any:
    def extra(schema: dict[str, Any]) -> None:
        # The model sees typed task shapes (so a constrained server can only produce
        # well-formed calls); parsing stays lenient so that a wrong call is *reported*.
        schema["properties"]["tasks"] = {"type": "array", "items": {"anyOf": _task_schemas()},
                                         "minItems": min_tasks, "description": "Tool calls, in order."}
    return extra


class LLMPlan(BaseModel):
    """The plan: the tool calls to make, in order."""

    model_config = ConfigDict(json_schema_extra=_plan_schema(1))

    goal: str = Field(default="", description="The request in one line.")
    tasks: list[Any] = Field(default_factory=list)

    @field_validator("tasks", mode="after")
    @classmethod
    def _normalise(cls, value: list[Any]) -> list[Any]:
        return [PlannedCall.from_reply(v) for v in value]


class LLMFollowUp(LLMPlan):
    """Follow-up tool calls after the results (may be none)."""

    model_config = ConfigDict(json_schema_extra=_plan_schema(0))


# Structured output names the function after the class: the prompts say `Plan`.
LLMPlan.__name__ = LLMFollowUp.__name__ = "Plan"


@lru_cache(maxsize=None)
def load_prompt(name: str) -> str:
    return resources.files("perfscout.prompts").joinpath(f"{name}.txt").read_text(encoding="utf-8")


def endpoint_of(ctx: Context) -> LLMEndpoint:
    """The endpoint ``ctx`` names (its fields already fell back to PERFSCOUT_LLM_*)."""
    return LLMEndpoint(base_url=ctx.llm_base_url, model=ctx.llm_model, api_key=ctx.llm_api_key,
                       timeout_s=ctx.llm_timeout_s, max_tokens=ctx.llm_max_tokens)


def make_chat_model(ctx: Context) -> Any:
    """The chat model for ``ctx``: an injected one, or the one chat-model factory's
    ChatOpenAI at ``llm_base_url`` (:func:`perfscout.state.llm_endpoint.make_chat_model`)."""
    if ctx.chat_model is not None:
        return ctx.chat_model
    return chat_model_for(endpoint_of(ctx))


def model_label(ctx: Context) -> str:
    if ctx.chat_model is not None:
        return type(ctx.chat_model).__name__
    return endpoint_of(ctx).label()


def _tool_catalogue() -> str:
    """Names and descriptions; the typed arguments travel in the Plan function's schema."""
    return "\n".join(f"- {t.name}: {' '.join(t.description.split())}" for t in tool_functions())


def _system_prompt() -> str:
    from perfscout.graph.planner import codec_infos

    codecs = ", ".join(f"{i['id']} ({i['device']})" for i in codec_infos() if i["available"])
    return load_prompt("planner_system").format(tools=_tool_catalogue(), codecs=codecs or "none")


def _platform_text(platform: dict[str, Any]) -> str:
    cpu = platform.get("cpu") or {}
    gpus = ", ".join(g.get("name", "") for g in platform.get("gpus") or []) or "none"
    return (f"host {platform.get('hostname', '')}; CPU {cpu.get('model', '')} "
            f"({cpu.get('logical_cpus', '?')} logical CPUs); GPUs: {gpus}")


# ---- validation ------------------------------------------------------------------

def _slug(task: PlannedCall, args: dict[str, Any], i: int, prefix: str) -> str:
    from perfscout.graph.planner import _fmt_bound, _key

    if EVALUATE.owns(task):
        key = _key(i, args["codec"], args.get("device", "cpu"), args["mode"], _fmt_bound(args["bound"]))
    else:
        key = _key(i, task.tool)
    return prefix + key[1:] if prefix else key


def _dataset_ok(name: str) -> str:
    from pathlib import Path

    from perfscout.graph.planner import known_datasets

    if name.startswith("synthetic:"):
        return ""
    if "/" in name:
        if not Path(name).expanduser().is_file():
            return f"data file {name!r} does not exist"
        return _outside_roots(name)
    names = known_datasets()
    if not names or any(n == name or n.startswith(name) for n in names):
        return ""
    return f"unknown dataset {name!r}"


def _outside_roots(path: str, request: str = "") -> str:
    """'' when a file the model names may be read, else why not: resolved before the check
    (every spelling, symlinks followed), inside the allowed roots or written absolute by the
    person in the request outside system folders and secrets (see tool_common.check_named_path).
    Being written in the request is no pass by itself: "../../../etc/shadow" is written there too."""
    from perfscout.errors import InputError
    from perfscout.graph.tool_common import check_named_path

    try:  # an absolute path is the person's only where their request wrote it
        check_named_path(path, "file", allowed_roots(), absolute_is_theirs=bool(request) and path in request)
    except InputError as exc:
        return str(exc)
    return ""


def _command_error(command: list[str], request: Any) -> str:
    """A model may only profile the very command the user wrote after "profile"."""
    from perfscout.graph.planner import requested_command

    asked = requested_command(request) if isinstance(request, str) else None
    if not asked:
        return "the request asks to profile no program"
    if list(command) != asked:
        return f"command {command!r} is not the one the request names ({asked!r})"
    return ""


def _same_path(a: str, b: str) -> bool:
    import os

    return os.path.normpath(os.path.expanduser(a)) == os.path.normpath(os.path.expanduser(b))


def _sweep_error(args: dict[str, Any], request: Any) -> str:
    """A model may only run the sweep spec the request names, into the directory it names."""
    from perfscout.graph.planner import requested_sweep

    if "spec_doc" in args:
        return f"{SWEEP.name} takes `spec` (the path the request names); `spec_doc` is for YAML requests"
    asked = requested_sweep(request) if isinstance(request, str) else None
    if not asked:
        return "the request names no sweep spec (write e.g. 'sweep examples/sweep_quick.yaml')"
    if not _same_path(str(args.get("spec", "")), asked["spec"]):
        return f"sweep spec {args.get('spec')!r} is not the one the request names ({asked['spec']!r})"
    if args.get("out") and not (asked.get("out") and _same_path(str(args["out"]), asked["out"])):
        return f"output directory {args['out']!r} was not asked for" + (
            f" (asked: {asked['out']!r})" if asked.get("out") else " (leave `out` out)")
    return ""


def _constraint_errors(calls: list[dict[str, Any]], request: Any) -> list[str]:
    """An intent's explicit codecs/mode/bounds/datasets/devices must be kept and covered."""
    if not isinstance(request, str):
        return []
    from perfscout.graph.planner import understand_request

    reading = understand_request(request)
    c = {"codecs": list(reading.codecs) + list(reading.codec_groups), "mode": reading.mode,
         "bounds": list(reading.bounds), "devices": list(reading.devices) or ["cpu", "cuda"],
         "datasets": [d.dataset_arg() for d in reading.data]}
    errors: list[str] = []
    named_codecs = [x for x in c["codecs"] if x not in ("cpu", "all")]
    named_sets = [d for d in c["datasets"] if isinstance(d, str)]
    for n, a in enumerate(calls, 1):
        if named_codecs and a["codec"] not in named_codecs and a.get("device") != "cuda":
            errors.append(f"task {n}: codec {a['codec']!r} was not asked for (asked: {', '.join(named_codecs)})")
        if c.get("mode") and a["mode"] != c["mode"]:
            errors.append(f"task {n}: mode {a['mode']!r} but the request asks for {c['mode']!r}")
        if c.get("bounds") and not any(math.isclose(a["bound"], b, rel_tol=1e-9) for b in c["bounds"]):
            errors.append(f"task {n}: bound {a['bound']:g} was not asked for "
                          f"(asked: {', '.join(f'{b:g}' for b in c['bounds'])})")
        if named_sets and not any(a["dataset"] == d or a["dataset"].startswith(d) for d in named_sets):
            errors.append(f"task {n}: dataset {a['dataset']!r} was not asked for (asked: {', '.join(named_sets)})")
        if a.get("device", "cpu") not in c["devices"]:
            errors.append(f"task {n}: device {a.get('device')!r} was not asked for")
    for codec in named_codecs:
        for b in c.get("bounds") or []:
            if not any(a["codec"] == codec and math.isclose(a["bound"], b, rel_tol=1e-9) for a in calls):
                errors.append(f"the plan has no task for {codec} at {c.get('mode', '')} {b:g}")
    return errors


class _Checking:
    """What the checks of one plan share: the request, the codecs here, the tasks so far."""

    def __init__(self, request: Any, allow_empty: bool) -> None:
        from perfscout.graph.planner import codec_infos

        self.request, self.allow_empty = request, allow_empty
        self.codecs = {i["id"] for i in codec_infos()}
        self.tasks: list[Task] = []
        self.evaluations: list[dict[str, Any]] = []


def _check_command(n: int, tool: AgentTool, args: dict[str, Any], c: _Checking) -> tuple[list[str], bool]:
    why = _command_error(args["command"], c.request)
    return ([f"task {n}: {why}"] if why else []), True


def _check_sweep(n: int, tool: AgentTool, args: dict[str, Any], c: _Checking) -> tuple[list[str], bool]:
    if c.allow_empty:
        # a follow-up task has a new key, hence a new sweep directory: it would
        # repeat every finished task of the sweep the plan already ran
        return [f"task {n}: {tool.name} is not a follow-up (the plan's sweep already ran)"], True
    why = _sweep_error(args, c.request)
    return ([f"task {n}: {why}"] if why else []), True


def _check_after_profile(n: int, tool: AgentTool, args: dict[str, Any], c: _Checking) -> tuple[list[str], bool]:
    # the model cannot know our task keys: tie it to the plan's latest profile task
    earlier = [t.key for t in c.tasks if PROFILE.owns(t)]
    if not earlier:
        return [f"task {n}: {tool.name} needs an earlier {PROFILE.name} task"], False
    args["profile_task"] = earlier[-1]
    return [], True


def _check_evaluation(n: int, tool: AgentTool, args: dict[str, Any], c: _Checking) -> tuple[list[str], bool]:
    errors = []
    if args["codec"] not in c.codecs:
        errors.append(f"task {n}: unknown codec {args['codec']!r} (known: {', '.join(sorted(c.codecs))})")
    if (why := _dataset_ok(args["dataset"])):
        errors.append(f"task {n}: {why}")
    c.evaluations.append(args)
    return errors, True


#: What a tool's ``plan_check`` asks of a model's call of it (after its schema): the errors,
#: and whether the call stays in the plan (repaired in place where it can be).
_PLAN_CHECKS: dict[PlanCheck, Callable[[int, AgentTool, dict[str, Any], _Checking], tuple[list[str], bool]]] = {
    PlanCheck.SCHEMA: lambda n, tool, args, c: ([], True), PlanCheck.COMMAND: _check_command,
    PlanCheck.SWEEP: _check_sweep, PlanCheck.AFTER_PROFILE: _check_after_profile,
    PlanCheck.EVALUATION: _check_evaluation}


def validate_plan(plan: LLMPlan, request: Any, *, key_prefix: str = "",
                  allow_empty: bool = False) -> tuple[list[Task], list[str]]:
    """Tasks from an untrusted plan, or the reasons it is rejected (never both)."""
    errors: list[str] = []
    if not plan.tasks and not allow_empty:
        errors.append("the plan has no tasks")
    if len(plan.tasks) > MAX_TASKS:
        errors.append(f"the plan has {len(plan.tasks)} tasks; at most {MAX_TASKS} are allowed")
    checking = _Checking(request, allow_empty)
    for n, call in enumerate(plan.tasks, 1):
        tool = find(call.tool)
        if tool is None:
            allowed = ", ".join(t.name for t in tool_functions())
            errors.append(f"task {n}: {call.tool!r} is not a tool (allowed: {allowed})")
            continue
        try:
            parsed = tool.tool.tool_call_schema.model_validate(call.args)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            errors.append(f"task {n}: bad arguments for {call.tool}: {problems}")
            continue
        args = parsed.model_dump(exclude_none=True)
        found, keep = _PLAN_CHECKS[tool.plan_check](n, tool, args, checking)
        errors += found
        if keep:
            checking.tasks.append(Task(key=_slug(call, args, n, key_prefix), tool=call.tool, args=args,
                                       purpose=call.purpose[:200]))
    tasks = checking.tasks
    if any("unknown dataset" in e for e in errors):
        from perfscout.graph.planner import known_datasets

        errors.append("known datasets: " + ", ".join(known_datasets())
                      + "; or synthetic:KIND:SHAPE, or an existing raw file path")
    if not errors:
        errors += _constraint_errors(checking.evaluations, request)
    if not errors and not allow_empty and isinstance(request, str):
        from perfscout.graph.planner import requested_sweep

        if (asked := requested_sweep(request)) and not any(SWEEP.owns(t) for t in tasks):
            errors.append(f"the plan has no {SWEEP.name} task for {asked['spec']}")
    return ([], errors) if errors else (tasks, [])


# ---- asking ----------------------------------------------------------------------

def _ask(model: Any, messages: list[Any], schema: type[Any] = LLMPlan) -> tuple[Any, str]:
    """(reply, "") or (None, why there is none), for the Plan or the Intent function. Never
    raises for a model's failure."""
    try:
        structured = model.with_structured_output(schema, method="function_calling", include_raw=True)
        out = structured.invoke(messages)
    except Exception as exc:  # unreachable endpoint, HTTP error, unsupported feature
        return None, f"the model could not be asked: {type(exc).__name__}: {str(exc)[:300]}"
    if _no_call(out):
        # Servers that take `tools` but not a forced `tool_choice` object (llama.cpp's
        # llama-server among them) let the model answer in prose; a JSON-schema response
        # format is grammar-constrained there, so the same schema is asked for that way.
        try:
            out = model.with_structured_output(schema, method="json_schema", include_raw=True).invoke(messages)
        except Exception as exc:  # noqa: BLE001 - the endpoint has no JSON-schema mode either
            return None, (f"the reply had no {schema.__name__} function call, and a JSON-schema reply "
                          f"could not be asked for: {type(exc).__name__}: {str(exc)[:240]}")
    if out.get("parsing_error") is not None:
        return None, f"the reply did not parse: {str(out['parsing_error'])[:300]}"
    parsed = out.get("parsed")
    if parsed is None:
        raw = out.get("raw")
        bad = getattr(raw, "invalid_tool_calls", None) or []
        if bad:
            return None, f"the reply's function call was malformed: {str(bad[0].get('error') or bad[0].get('args'))[:300]}"
        return None, f"the reply had no {schema.__name__} function call"
    if isinstance(parsed, dict):  # some parsers hand back a dict
        try:
            parsed = schema.model_validate(parsed)
        except ValidationError as exc:
            return None, f"the reply did not match the {schema.__name__} schema: {exc}"
    return parsed, ""


def _no_call(out: Any) -> bool:
    """True when a function-calling reply has neither a parsed call nor a malformed one: the
    model answered in text (its server did not force the call)."""
    if not isinstance(out, dict) or out.get("parsed") is not None or out.get("parsing_error") is not None:
        return False
    raw = out.get("raw")
    return not (getattr(raw, "tool_calls", None) or getattr(raw, "invalid_tool_calls", None))


def _plan_loop(model: Any, messages: list[Any], request: Any, *, key_prefix: str = "",
               allow_empty: bool = False) -> tuple[list[Task] | None, str, list[str]]:
    """Ask, validate, repair once. (tasks, goal, reasons-for-failure)."""
    reasons: list[str] = []
    for attempt in (1, 2):
        plan, why = _ask(model, messages, LLMFollowUp if allow_empty else LLMPlan)
        if plan is not None:
            tasks, errors = validate_plan(plan, request, key_prefix=key_prefix, allow_empty=allow_empty)
            if not errors:
                return tasks, plan.goal, reasons
            why = "; ".join(errors[:8])
            previous = plan.model_dump_json()[:600]  # enough to recognise; short to stay fast
        else:
            previous = "(none)"
        reasons.append(f"attempt {attempt}: {why}")
        if attempt == 1:
            messages = [*messages, HumanMessage(load_prompt("planner_repair").format(
                errors=why, previous=previous))]
    return None, "", reasons


def review_with_llm(request: Any, observations: list[dict[str, Any]], ctx: Context,
                    max_tasks: int = 4) -> tuple[list[Task], list[str]]:
    """Ask the model once for follow-up tasks after seeing the results (validated the same way)."""
    text = request["intent"] if isinstance(request, dict) else str(request)
    lines = []
    for o in observations[-24:]:
        detail = o.get("summary", "")
        if o.get("error"):
            detail += f" error: {o['error']}"
        lines.append(f"{o['task_key']} {o['tool']}: {detail[:400]}")
    try:
        model = make_chat_model(ctx)
    except Exception as exc:
        return [], [f"follow-up review skipped: {type(exc).__name__}: {exc}"]
    messages = [SystemMessage(_system_prompt()),
                HumanMessage(load_prompt("review_user").format(
                    request=text, observations="\n".join(lines), max_tasks=max_tasks))]
    tasks, _, reasons = _plan_loop(model, messages, text, key_prefix="f", allow_empty=True)
    if tasks is None:
        return [], ["the model's follow-up was rejected: " + " | ".join(reasons)]
    if len(tasks) > max_tasks:
        return [], [f"the model's follow-up was rejected: {len(tasks)} tasks, at most {max_tasks}"]
    return tasks, ([f"follow-up from the model: {', '.join(t.key for t in tasks)}"] if tasks else [])


# ---- the intent ------------------------------------------------------------------

QuestionName = Literal["compare", "best_ratio", "fastest_compress", "fastest_decompress", "lowest_error",
                       "evaluate", "sweep", "profile", "diagnose", "describe_machine", "list_codecs",
                       "compare_runs"]


class LLMTarget(BaseModel):
    metric: Literal["ratio", "psnr", "bitrate", "max_abs_err"]
    op: Literal[">=", "<="] = ">="
    value: float


class LLMIntent(BaseModel):
    """What the request asks for, in slots; empty where the request does not say."""

    question: QuestionName | None = None
    codecs: list[str] = Field(default_factory=list)
    mode: RequestMode | None = None
    bounds: list[float] = Field(default_factory=list)
    datasets: list[str] = Field(default_factory=list)
    shape: list[int] | None = None
    dtype: Literal["f32", "f64"] | None = None
    var: str | None = None
    devices: list[Literal["cpu", "cuda"]] = Field(default_factory=list)
    repeats: int | None = None
    targets: list[LLMTarget] = Field(default_factory=list)


LLMIntent.__name__ = "Intent"


def _intent_system_prompt() -> str:
    from perfscout.graph.understand import codec_catalogue, dataset_catalogue

    codecs = ", ".join(c for c, i in codec_catalogue().items() if i.get("available")) or "none"
    datasets = ", ".join(d["name"] for d in dataset_catalogue()) or "none"
    return load_prompt("intent_system").format(codecs=codecs, datasets=datasets)


def _ask_intent(model: Any, messages: list[Any]) -> tuple[LLMIntent | None, str]:
    return _ask(model, messages, LLMIntent)  # type: ignore[arg-type]


def merge_llm_intent(parsed: Intent, reply: LLMIntent, text: str) -> tuple[Intent, list[str]]:
    """The parser's reading completed by the model's, validated; (intent, notes).

    Explicit words win: a slot the parser filled keeps the parser's value. The model may
    fill empty slots only with known codecs, positive finite bounds, registry or synthetic
    datasets, and files the request names or that lie inside the allowed roots. It can
    never add a program to profile, undo a refusal or silence a question about an unknown
    name by inventing one.
    """
    from perfscout.graph.understand import assess, codec_catalogue, dataset_catalogue, path_kind

    out = parsed.model_copy(deep=True)
    notes: list[str] = []
    used: list[str] = []
    known = codec_catalogue()
    if out.question is None and reply.question and not (reply.question == "profile" and not out.command):
        out.question = reply.question
        used.append("question")
    if not out.codecs and not out.codec_groups and reply.codecs:
        for c in reply.codecs:
            if c == "all":
                out.codec_groups.append("all")
            elif c in known:
                out.codecs.append(c)
            else:
                notes.append(f"the model named codec {c!r}, which does not exist here (ignored)")
        used.append("codecs")
    if not out.mode and reply.mode in REQUEST_MODES:
        out.mode = reply.mode
        used.append("mode")
    if not out.bounds and reply.bounds:
        good = [b for b in reply.bounds if isinstance(b, (int, float)) and b > 0 and math.isfinite(b)]
        if len(good) != len(reply.bounds):
            notes.append("the model gave bounds that are not positive, finite numbers (ignored)")
        out.bounds = good[:16]
        used.append("bounds")
    if not out.data and reply.datasets:
        names = {d["name"] for d in dataset_catalogue()}
        for name in reply.datasets[:8]:
            if name.startswith("synthetic:"):
                out.data.append(DataRef(kind="synthetic", name=name.split(":", 1)[1], text=name))
            elif name in names:
                out.data.append(DataRef(kind="named", name=name, text=name))
            elif (why := _outside_roots(name, text)):
                notes.append(f"the model named a file it may not read: {why} (ignored)")
            else:
                kind = path_kind(name)
                ref = DataRef(kind="file" if kind in ("netcdf", "hdf5", "zarr") else "raw", path=name, text=name)
                if reply.shape and ref.kind == "raw" and all(isinstance(d, int) and d > 0 for d in reply.shape):
                    ref.shape = list(reply.shape)
                if reply.dtype:
                    ref.dtype = reply.dtype
                if reply.var and ref.kind == "file":
                    ref.var = reply.var
                out.data.append(ref)
        if out.data:
            used.append("data")
    if not out.devices and reply.devices:
        out.devices = list(dict.fromkeys(reply.devices))
        used.append("devices")
    if out.repeats is None and reply.repeats and 1 <= reply.repeats <= 50:
        out.repeats = reply.repeats
        used.append("repeats")
    if not out.targets and reply.targets:
        out.targets = [Target(metric=t.metric, op=t.op, value=t.value) for t in reply.targets
                       if math.isfinite(t.value)]
        used.append("targets")
    if used:
        out.filled_by = "parser+llm"
        # a clause the parser could not place may be what the model read into the new slots
        clauses = [p for p in out.missing if p.slot == "clause"]
        if clauses and any(u in used for u in ("data", "codecs", "question", "bounds")):
            out.ignored += [f"\"{p.detail}\" (read by the model as part of: {', '.join(used)})" for p in clauses]
        out.missing = [p for p in out.missing if p.slot != "clause" or not used]
        # an ambiguous or misspelt name is settled only by one of its candidates
        out.missing = [p for p in out.missing if not (p.slot == "data" and p.candidates and any(
            d.kind == "named" and d.name in p.candidates for d in out.data))]
    notes.insert(0, "the model filled: " + (", ".join(used) if used else "nothing the parser had not"))
    return assess(out), notes


def intent_with_llm(text: str, parsed: Intent, platform: dict[str, Any], ctx: Context) -> tuple[Intent | None, list[str]]:
    """The intent completed by the model, or (None, why not) so the parser's reading stands."""
    label = model_label(ctx)
    try:
        model = make_chat_model(ctx)
    except Exception as exc:
        return None, [f"LLM planner ({label}) unavailable: {type(exc).__name__}: {exc}"]
    messages = [SystemMessage(_intent_system_prompt()),
                HumanMessage(load_prompt("intent_user").format(request=text, platform=_platform_text(platform)))]
    reasons = []
    for attempt in (1, 2):
        reply, why = _ask_intent(model, messages)
        if reply is not None:
            merged, notes = merge_llm_intent(parsed, reply, text)
            return merged, [f"intent read by {label} and validated"] + notes
        reasons.append(f"attempt {attempt}: {why}")
        messages = [*messages, HumanMessage(f"Your reply could not be used ({why}). Call the function "
                                            "Intent exactly once with the slots of the request.")]
    return None, [f"LLM planner ({label}) failed: " + " | ".join(reasons)]
