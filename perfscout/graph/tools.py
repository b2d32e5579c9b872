"""The typed tools the agent may call; :mod:`perfscout.graph.toolbox` makes each one an
object and lists them (the whitelist).

Each tool is a plain typed function; its docstring is the description a model reads,
and its signature is the argument schema every call is validated against (by the
planner for LLM plans, and again by LangGraph's ``ToolNode`` for every call). Nothing
the agent reads at run time (tool output, a model's reply, a spec) can add a tool:
:data:`perfscout.graph.toolbox.AGENT_TOOLS` is fixed when it is imported.

Tools never raise for a failed measurement: they return ``(summary, artifact)`` where
the artifact is a dict with ``kind`` (result | error | refused | needs_input: refused means
the call was not run, e.g. a program the sandbox will not start), ``data``, ``error``,
``transient`` and ``needs``, which the observe node turns into an
:class:`~perfscout.state.agent.Observation`.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime
from pydantic import Field

from perfscout.errors import CodecUnavailable, InputError, PerfscoutError
from perfscout.state.modes import RequestMode
from perfscout.state.shapes import is_shape

from perfscout.graph.tool_common import (  # noqa: F401 - part of this module's API
    TRANSIENT_ERRORS,
    Artifact,
    _artifact,
    _failure,
    _run_info,
    allowed_roots,
    check_named_path,
    confine,
)


# ---- data resolution ---------------------------------------------------------------

def _datasets():
    return importlib.import_module("perfscout.datasets")


def resolve_data(dataset: str, shape: str | None, dtype: str | None, *, var: str | None = None,
                 endian: str | None = None, masked: str | float | None = None,
                 named_paths: list[str] | None = None) -> tuple[Any, Artifact | None]:
    """Turn a dataset argument into data, or say exactly what input is missing.

    ``dataset`` is a known dataset name, ``synthetic:KIND:SHAPE`` (e.g. ``synthetic:grf:64,64``),
    a netCDF/HDF5/Zarr file with ``var`` (the variable), a ``.npy`` file, or a path to a raw
    file, which also needs ``shape`` and ``dtype`` (little-endian unless ``endian`` is ``">"``).
    It is read by :func:`perfscout.datasets.open`, as ``eval`` and sweeps read it. A path must
    resolve inside the allowed roots, or be one of ``named_paths`` (written absolute in the
    request, outside system folders and secrets). ``masked``:
    a variable's masked points (fill / missing values), as datasets.load_variable takes it;
    None refuses them, and the evaluate tool then asks which the user wants.
    """
    ds = _datasets()
    if (not dataset.startswith("synthetic:") and not var and not ds.looks_like_file(dataset)
            and not _is_file(dataset)):
        return _named_dataset(ds, dataset)
    if not dataset.startswith("synthetic:"):
        # resolved and checked before anything is read or asked: ../../etc/shadow is refused
        checked = check_named_path(dataset, "data file", allowed_roots(),
                                   absolute_is_theirs=_is_named(dataset, named_paths or []))
        if not checked.exists():
            return None, _ask(f"data file {dataset!r} does not exist",
                              {"path": (f"an existing file to use instead of {dataset!r} (or skip: true)",
                                        f"一个存在的文件，代替 {dataset!r}")})
    given_shape = shape if shape and is_shape(shape) else None
    # a file of the working directory is data whatever its extension ("wmag91.float")
    make_ref = ds.file_ref if _is_file(dataset) else ds.parse_ref
    ref = make_ref(dataset, shape=given_shape, dtype=dtype if dtype in ("f32", "f64") else None,
                   endian=endian, var=var, masked="refuse" if masked is None else masked)
    # a raw file without its shape or dtype asks for them (a .npy file carries its own)
    needs: dict[str, tuple[str, str]] = {}
    path = Path(ref.path or dataset)
    if "shape" in ref.missing():
        size = path.stat().st_size
        needs["shape"] = (f"the shape of {path.name} in C order, slowest axis first, "
                          f"e.g. '512,512' ({size} bytes on disk)",
                          f"{path.name} 的形状（C 顺序，最慢的轴在前，例如 512,512；文件 {size} 字节）")
    if "dtype" in ref.missing():
        needs["dtype"] = ("the element type: 'f32' or 'f64' (little-endian)",
                          "元素类型：f32 或 f64（小端）")
    if needs:
        return None, _ask(f"raw file {path.name} needs " + " and ".join(needs), needs)
    # NaN/Inf are the evaluation's to refuse (nonfinite policy): it asks the user which they want
    return ds.open(ref), None


def _is_file(name: str) -> bool:
    """A name that is a file in the working directory ("wmag91.float", any extension): data to read."""
    try:
        return Path(name).expanduser().is_file()
    except (OSError, ValueError, RuntimeError):
        return False


def _named_dataset(ds: Any, name: str) -> tuple[Any, Artifact | None]:
    """A named dataset; a unique prefix selects it, an ambiguous or unknown one asks."""
    try:
        return ds.open(ds.DataRef(source="name", name=name)), None
    except Exception as exc:  # unknown name or data absent: ask, do not guess
        problem = f"{type(exc).__name__}: {exc}"
    names = [d.name for d in ds.list_datasets()]
    matches = [n for n in names if n.startswith(name)]
    if len(matches) == 1:
        return ds.open(ds.DataRef(source="name", name=matches[0])), None
    if len(matches) > 1:
        return None, _ask(f"dataset {name!r} is ambiguous",
                          {"dataset": ("one of: " + ", ".join(matches), "其中之一：" + "、".join(matches))})
    known = ", ".join(names) or "none"
    return None, _ask(f"dataset {name!r} is not available ({problem})", {"dataset": (
        f"a dataset name (known: {known}), synthetic:KIND:SHAPE (e.g. synthetic:grf:256,256), or a raw file path",
        f"一个数据集名（已知：{'、'.join(names) or '无'}）、synthetic:种类:形状（例如 synthetic:grf:256,256）"
        "或一个原始文件路径")})


def _ask(error: str, needs: dict[str, tuple[str, str]]) -> Artifact:
    """A needs_input artifact: ``needs`` maps each missing input to what it is, in English
    and in Chinese; the Chinese rides in ``data["needs_zh"]`` for a request written in
    Chinese (reflect.question_for asks in the request's language)."""
    return _artifact("needs_input", error=error, needs={k: en for k, (en, _) in needs.items()},
                     data={"needs_zh": {k: zh for k, (_, zh) in needs.items()}})


# ---- the tools -------------------------------------------------------------------

@tool(response_format="content_and_artifact")
def evaluate_codec(
    dataset: Annotated[str, Field(description="Dataset name (e.g. 'vorticity.512_512'), "
                                  "'synthetic:grf:64,64', or a path to a raw file.")],
    codec: Annotated[str, Field(description="Codec id, e.g. 'sz3', 'zfp', 'sz2', 'szp-gpu'.")],
    mode: RequestMode,
    bound: Annotated[float, Field(gt=0, description="Error bound in the unit of `mode`.")],
    device: Literal["cpu", "cuda"] = "cpu",
    repeats: Annotated[int, Field(ge=1, le=50)] = 3,
    shape: Annotated[str | None, Field(description="Raw files only: 'Z,Y,X'.")] = None,
    dtype: Annotated[Literal["f32", "f64"] | None, Field(description="Raw files only.")] = None,
    chunk_mb: Annotated[int | None, Field(ge=1, description="GPU codecs that stream: slab size "
                                          "in MiB (to fit GPU memory).")] = None,
    var: Annotated[str | None, Field(description="netCDF/HDF5/Zarr files: the variable to read.")] = None,
    endian: Annotated[Literal["<", ">"] | None, Field(description="Raw files only: '<' little "
                                                       "(default) or '>' big-endian.")] = None,
    masked: Annotated[Literal["nan"] | float | None, Field(
        description="netCDF/HDF5/Zarr variables with masked points (_FillValue, missing_value, "
                    "outside valid_range): 'nan' evaluates the unmasked values only (the mask is "
                    "kept losslessly beside the stream), a number fills them with it.")] = None,
    nonfinite: Annotated[Literal["refuse", "passthrough"], Field(
        description="NaN/Inf in the data: 'refuse' (default) or 'passthrough' (kept losslessly "
                    "beside the stream; the finite values are compressed and checked).")] = "refuse",
    options: Annotated[dict[str, Any] | None, Field(
        description="Codec options, as a sweep spec's {id, options} gives them (e.g. {threads: 2}).")] = None,
    label: Annotated[str | None, Field(description="Display name of the dataset in the record "
                                       "(default: the file name, the registry name or KIND:SHAPE).")] = None,
    timeout_s: Annotated[float | None, Field(gt=0, description="Wall-clock limit of the evaluation "
                                             "(default grows with the field).")] = None,
    memory_limit_mb: Annotated[int | None, Field(ge=64, description="Memory the evaluation may use "
                                                 "(default grows with the field).")] = None,
    runtime: ToolRuntime[Any, Any] = None,  # injected by ToolNode; not in the schema
) -> tuple[str, Artifact]:
    """Compress and decompress one dataset with one error-bounded codec, verify the bound
    element by element, and measure ratio, error metrics and throughput (medians over
    `repeats` after a warm-up)."""
    state = (runtime.state if runtime is not None else None) or {}
    try:
        data, missing = resolve_data(dataset, shape, dtype, var=var, endian=endian, masked=masked,
                                     named_paths=_request_named(state))
        if missing is not None:
            return f"needs input: {missing['error']}", missing
        info = _run_info(runtime)
        task = agent_task(data, dataset, codec, mode, bound, device=device, repeats=repeats, shape=shape,
                          dtype=dtype, var=var, endian=endian, masked=masked,
                          nonfinite="passthrough" if masked == "nan" else nonfinite,
                          options={**(options or {}), **({"chunk_bytes": int(chunk_mb) << 20} if chunk_mb else {})},
                          label=label, timeout_s=timeout_s, memory_limit_mb=memory_limit_mb,
                          experiment=info["task_key"] or "agent")
        call_id = (runtime.tool_call_id if runtime is not None else "") or ""
        out = run_evaluation(task, str(state.get("run_dir") or ""), run_id=info["run_id"], call_id=call_id)
    except (CodecUnavailable, InputError) as exc:
        if (asked := _missing_policy(exc)) is not None:
            return f"needs input: {asked['error']}", asked
        return f"refused: {exc}", _artifact("refused", error=str(exc))
    except PerfscoutError as exc:
        return f"failed: {exc}", _artifact("error", error=str(exc))
    except Exception as exc:  # a tool reports failures; reflect decides what they mean
        return _failure(exc)
    refused = out.pop("refused", None)
    if refused:  # the evaluation raised in its child: the same reply as when it raised here
        if (asked := _policy_question(refused)) is not None:
            return f"needs input: {asked['error']}", asked
        if refused.get("kind") == "input":
            return f"refused: {refused['message']}", _artifact("refused", error=refused["message"])
        msg = refused["message"] if refused.get("kind") == "perfscout" else f"{refused['type']}: {refused['message']}"
        return f"failed: {msg}", _artifact("error", error=msg, transient=bool(refused.get("transient")))
    row = out["record"]
    # the store keys the record by its configuration; the run's observations, notes and claims
    # by the agent's task (as before): the record says the latter, the store's key rides beside
    out["store_task_key"] = row["task_key"]
    row["task_key"] = info["task_key"] or row["task_key"]
    summary = (f"{codec} on {row['dataset']} ({device}) {mode} {bound:g}: status={row['status']} "
               f"ratio={row['ratio']} bound_ok={row['bound_ok']}"
               + (f" error={row['error'][:300]}" if row.get("error") else ""))
    out["field"] = field_facts(data)
    return summary, _artifact("result", data=out)


def agent_task(data: Any, dataset: str, codec: str, mode: str, bound: float, *, device: str, repeats: int,
               shape: str | None, dtype: str | None, var: str | None, endian: str | None,
               masked: str | float | None, nonfinite: str, options: dict[str, Any], label: str | None,
               timeout_s: float | None, memory_limit_mb: int | None, experiment: str) -> Any:
    """The sweep task of one evaluate_codec call, built as a sweep builds its tasks: the
    dataset as a spec entry (:class:`perfscout.sweep.spec.DatasetSpec`), resolved, sized and
    identified by :func:`perfscout.sweep.spec.resolve_data`, keyed by ``make_task_key``.
    ``data`` is the field :func:`resolve_data` opened (a unique prefix of a name resolved)."""
    from perfscout.sweep import spec as S
    from perfscout.tools.isolate import _default_timeout_s, default_memory_limit_mb

    entry: dict[str, Any]
    if dataset.startswith("synthetic:"):
        entry = S.dataset_from_string(dataset)
    elif not var and not _datasets().looks_like_file(dataset) and not _is_file(dataset):
        entry = {"name": getattr(data, "name", None) or dataset}  # the registry name a prefix chose
    else:
        path = Path(dataset).expanduser().resolve()
        entry = {"path": str(path)}
        kind = _datasets().file_ref(path, var=var).source  # as resolve_data read it: raw, npy or variable
        if kind == "variable":
            entry["var"] = var or getattr(data, "meta", {}).get("var") or ""
        if kind == "raw" and shape and is_shape(shape):
            entry["shape"] = shape
        if dtype and kind != "npy":  # a .npy file carries its own (a dtype given by mistake is moot)
            entry["dtype"] = dtype
        if endian == ">":
            entry["endian"] = ">"
        if masked is not None and masked != "nan":
            entry["fill_masked"] = float(masked)
    if label:
        entry["label"] = label
    try:
        ds_spec = S.DatasetSpec.model_validate(entry, context={"agent": True})
        ref = S.resolve_data(ds_spec, os.getcwd()).check_size()
    except ValueError as exc:  # a pydantic error or a SpecError: the data as given is refused
        raise InputError(str(exc)) from None
    nbytes = ref.nbytes
    return S.make_task(ref, S.CodecSpec(id=codec, options=options), device, mode, bound, repeats,
                       nonfinite=nonfinite, timeout_s=timeout_s or _default_timeout_s(nbytes),
                       memory_limit_mb=memory_limit_mb or default_memory_limit_mb(nbytes),
                       experiments=[experiment])


#: The store meta key under which an agent call remembers the attempt that answered it.
_CALL_META = "agent_call:"


def run_evaluation(task: Any, run_dir: str, *, run_id: str = "", call_id: str = "") -> dict[str, Any]:
    """Run one agent evaluation through the sweep engine into ``run_dir`` (the agent's run
    directory: its ``results.sqlite`` and ``raw/<task_key>/``), and return the observation's
    data: record, timing, notes, search (and ``refused`` when the evaluation raised).

    The same call again (a resumed run re-running the call it was in when it stopped) returns
    the stored attempt instead of measuring twice; another call of a configuration already
    stored (a retry) is a new attempt whose record replaces the stored one. Without a run
    directory (a tool called on its own) a temporary one is used and removed."""
    import json
    import tempfile

    from perfscout.sweep.runner import EVALUATION, run_tasks
    from perfscout.tools.results_store import STORE_NAME, ResultStore

    if not run_dir:
        with tempfile.TemporaryDirectory(prefix="perfscout-eval-") as tmp:
            return run_evaluation(task, tmp, run_id=run_id, call_id=call_id)
    out = Path(run_dir)
    key = task.task_key
    rerun: set[str] = set()
    if (out / STORE_NAME).is_file():
        with ResultStore(out / STORE_NAME) as store:
            seen = json.loads(store.get_meta(_CALL_META + call_id, "{}") or "{}") if call_id else {}
            stored = store.stored_attempt(key)
            answered = bool(seen) and seen.get("task_key") == key and stored is not None \
                and seen.get("attempt") == stored[0]
            if key in store.finished_keys() and not answered:
                rerun = {key}
    else:
        answered = False
    if not answered:
        # the task server stays up between the run's calls: the imports are paid once per run
        run_tasks([task], out, run_id=run_id, name="agent", kind="agent", rerun=rerun, keep_server=True,
                  export=False)
    with ResultStore(out / STORE_NAME) as store:
        row = store.result(key)
        stored = store.stored_attempt(key)
        if call_id and stored is not None:
            store.set_meta(_CALL_META + call_id, json.dumps({"task_key": key, "attempt": stored[0]}))
    if row is None:
        raise PerfscoutError(f"the evaluation of {task.codec} on {task.data.label} left no record in {out / STORE_NAME}")
    work = out / "raw" / key
    record_file = work / "result.json"
    if record_file.is_file():  # the child's own record: its values exactly (NaN stays NaN)
        from perfscout.state.records import CompressionResult

        record = CompressionResult.model_validate_json(record_file.read_text(encoding="utf-8"))
        if record.task_key == key and record.status == row["status"]:
            row = record.row()
    extra = _read_json(work / f"{EVALUATION}.json") or {}
    timing = extra.get("timing") or {"compress": None, "decompress": None}
    data: dict[str, Any] = {"record": row, "timing": timing, "notes": list(extra.get("notes") or [])}
    if row["status"] in ("codec_crashed", "codec_timeout"):  # no result of its own: said from outside
        data["notes"].append(f"{row['status']}: the evaluation ran in a child process, which did not survive; "
                             "this process did")
    search = _read_json(work / "search.json")
    if search is not None:
        data["search"] = search
    if extra.get("refused"):
        data["refused"] = extra["refused"]
    return data


def _read_json(path: Path) -> Any:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _policy_question(refused: dict[str, Any]) -> Artifact | None:
    """The question for an evaluation its child refused for want of a NaN/Inf or masked-points
    policy (:func:`_missing_policy`, from the counts the child wrote)."""
    kind = {"MaskedValuesError": "masked", "NonfiniteInputError": "nonfinite"}.get(str(refused.get("type")))
    if kind is None or not isinstance(refused.get("count"), int):
        return None
    return _policy_ask(kind, str(refused.get("message", "")), int(refused["count"]),
                       int(refused.get("total") or 0))


def _missing_policy(exc: Exception) -> Artifact | None:
    """A question, when the data is refused only for want of a policy the user must choose:
    masked points of a variable (evaluate the rest, or fill them), or NaN/Inf in the data
    (keep them beside the stream). Either changes what is measured, so it is asked, never
    assumed. None for any other refusal."""
    cf = importlib.import_module("perfscout.datasets.cf")
    bounds = importlib.import_module("perfscout.tools.bounds")
    if isinstance(exc, cf.MaskedValuesError):
        return _policy_ask("masked", str(exc), exc.count, exc.total)
    if isinstance(exc, bounds.NonfiniteInputError):
        return _policy_ask("nonfinite", str(exc), exc.count, 0)
    return None


def _policy_ask(kind: str, error: str, count: int, total: int) -> Artifact:
    if kind == "masked":
        kept = total - count
        return _ask(error, {"masked": (
            f"'nan' to evaluate only the {kept} unmasked values (the mask of {count} points kept "
            f"losslessly beside the stream), or a number to fill the {count} masked points with "
            "(they are then compressed and checked like data)",
            f"有 {count} 个被掩码的点（缺测/填充值）：回答 nan 只评估其余 {kept} 个有效值（掩码无损地存在"
            f"压缩流旁边），或给一个数值把这 {count} 个点填上（之后它们和数据一样被压缩和检查）")})
    return _ask(error, {"nonfinite": (
        f"'passthrough' to keep the {count} NaN/Inf value(s) losslessly beside the stream and "
        "compress and check the finite ones",
        f"数据里有 {count} 个 NaN/Inf：回答 passthrough（或“保留”）把它们无损地存在压缩流旁边，"
        "只压缩和检查有限值")})


def field_facts(data: Any) -> dict[str, Any]:
    """What the Answer's warnings rest on: the finite value range and largest magnitude of the
    field as evaluated, its type, and the type it was stored in where loading changed it
    (a netCDF variable packed as int16 with scale_factor/add_offset, say)."""
    import numpy as np

    arr = np.asarray(getattr(data, "array", data))
    meta = getattr(data, "meta", None) or {}
    out: dict[str, Any] = {"dtype": str(arr.dtype), "size": int(arr.size), "nbytes": int(arr.nbytes),
                           "min": None, "max": None, "absmax": None}
    finite = arr[np.isfinite(arr)] if arr.dtype.kind == "f" else arr
    if finite.size:
        lo, hi = float(finite.min()), float(finite.max())
        out.update(min=lo, max=hi, absmax=max(abs(lo), abs(hi)))
    stored = meta.get("dtype_on_disk")
    if stored:
        out.update(dtype_on_disk=str(stored), packed=bool(meta.get("packed")),
                   scale_factor=meta.get("scale_factor"), add_offset=meta.get("add_offset"),
                   stored_itemsize=int(np.dtype(str(stored)).itemsize))
    return out


@tool(response_format="content_and_artifact")
def list_codecs() -> tuple[str, Artifact]:
    """List every codec perfscout knows, whether it is usable here, and its modes."""
    try:
        from perfscout.codecs.registry import list_codecs as _list

        infos = [i.model_dump() for i in _list()]
    except Exception as exc:
        return _failure(exc)
    usable = [i["id"] for i in infos if i["available"]]
    return f"usable codecs: {', '.join(usable) or 'none'}", _artifact("result", data=infos)


@tool(response_format="content_and_artifact")
def platform_snapshot(gpus: bool = True) -> tuple[str, Artifact]:
    """Describe this machine: CPU, memory, GPUs, compilers, perf availability."""
    try:
        from perfscout.tools.snapshot import take_snapshot

        prof = take_snapshot(gpus=gpus)
    except Exception as exc:
        return _failure(exc)
    data = prof.model_dump(mode="json")
    gpus_ = ", ".join(g["name"] for g in data.get("gpus", [])) or "none"
    return (f"platform {data.get('platform_id', '')}: {data.get('cpu', {}).get('model', '')}; "
            f"GPUs: {gpus_}"), _artifact("result", data=data)


@tool("profile_command", response_format="content_and_artifact")
def profile_program(
    command: Annotated[list[str], Field(min_length=1, description="The program and its arguments, "
                                        "exactly as the user gave them (no shell).")],
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 600.0,
) -> tuple[str, Artifact]:
    """Run the user's program once under a profiler (Nsight Compute for a CUDA program on a
    machine with a GPU and ncu, perf stat otherwise) in the sandbox, and return the measured
    counters, the kernel digest and the findings."""
    try:
        from perfscout.tools.profile import profile_command

        outcome = profile_command(command, timeout_s=timeout_s)
    except PerfscoutError as exc:
        return f"refused: {exc}", _artifact("refused", error=str(exc))
    except Exception as exc:
        return _failure(exc)
    data = outcome.model_dump(mode="json")
    finding_ids = ", ".join(f["id"] for f in data.get("findings", [])) or "none"
    summary = (f"{outcome.tool} on {' '.join(command)[:200]}: status={outcome.status} "
               f"({outcome.reason}); findings: {finding_ids}; raw output in {outcome.run_dir}")
    if outcome.status == "refused":  # the sandbox would not start it: nothing ran
        return summary, _artifact("refused", data=data, error=f"profiled command refused: "
                                  f"{outcome.exit.get('reason', '') or outcome.reason}")
    if outcome.status not in ("ok", "exit_nonzero"):
        return summary, _artifact("error", data=data, error=f"profiled command {outcome.status}: "
                                  f"{outcome.exit.get('reason', '')}",
                                  transient=outcome.status == "timed_out")
    return summary, _artifact("result", data=data)


def _profiled_outcome(state: dict[str, Any], profile_task: str) -> dict[str, Any] | None:
    """The stored result of an earlier profile_command task of this run."""
    for obs in reversed(state.get("observations") or []):
        if (obs.get("task_key") == profile_task and obs.get("tool") == profile_program.name
                and obs.get("kind") == "result" and isinstance(obs.get("data"), dict)):
            return obs["data"]
    return None


@tool(response_format="content_and_artifact")
def diagnose_profile(
    profile_task: Annotated[str, Field(description="Key of an earlier profile_command task of this run.")],
    runtime: ToolRuntime[Any, Any] = None,  # injected by ToolNode; not in the schema
) -> tuple[str, Artifact]:
    """Turn what an earlier profile_command task measured (ncu kernels or perf stat counters)
    into the primary bottleneck and ranked, evidence-backed findings."""
    state = (runtime.state if runtime is not None else None) or {}
    outcome = _profiled_outcome(state, profile_task)
    if outcome is None:
        return (f"refused: no successful profile_command task {profile_task!r} in this run",
                _artifact("refused", error=f"no successful profile_command task {profile_task!r} in this run"))
    try:
        from perfscout.analysis.diagnosis import diagnose, diagnose_perf
        from perfscout.state.profiles import PerfProfile
        from perfscout.tools.profile import load_profiles

        run_dir = Path(outcome["run_dir"])
        if outcome.get("tool") == "perf" and outcome.get("perf"):
            doc = diagnose_perf(PerfProfile.model_validate(outcome["perf"]))
            items = doc.get("programs", [])
        else:
            raws = sorted(run_dir.glob("*raw.csv"))
            if not raws:
                return "failed: the profile holds no ncu CSV", _artifact(
                    "error", error=f"no ncu raw CSV in {run_dir} ({outcome.get('ncu_error', '')})")
            details = sorted(run_dir.glob("*details.csv"))
            loaded = load_profiles(ncu_csv=raws[0], ncu_details=details[0] if details else None)
            doc = diagnose(loaded.kernels, loaded.platform)
            items = doc.get("kernels", [])
    except PerfscoutError as exc:
        return f"failed: {exc}", _artifact("error", error=str(exc))
    except Exception as exc:
        return _failure(exc)
    return _diagnosis_reply(doc, items)


def _request_named(state: dict[str, Any]) -> list[str]:
    """Files the person named in the request itself, as written (its data, its profile, its
    sweep's output folder; in a spec they wrote, every ``path`` / ``out`` value)."""
    intent = state.get("intent") or {}
    named = [intent.get("profile_file", ""), intent.get("sweep_out", ""),
             *[d.get("path", "") for d in intent.get("data") or []]]
    request = state.get("request")
    if isinstance(request, dict):
        named += _spec_paths(request)
    return [n for n in named if isinstance(n, str) and n]


def _spec_paths(doc: Any, depth: int = 0) -> list[str]:
    """The ``path``/``out`` strings of a spec (its datasets' files, a sweep's folder)."""
    if depth > 6:
        return []
    if isinstance(doc, dict):
        found = [v for k, v in doc.items() if k in ("path", "out") and isinstance(v, str)]
        for key in ("datasets", "dataset", "fallback_dataset"):  # a dataset may be named by its path alone
            listed = doc.get(key)
            found += [v for v in (listed if isinstance(listed, list) else [listed]) if isinstance(v, str)]
        return found + [p for v in doc.values() for p in _spec_paths(v, depth + 1)]
    if isinstance(doc, list):
        return [p for v in doc[:1000] for p in _spec_paths(v, depth + 1)]
    return []


def _is_named(path: str, named: list[str]) -> bool:
    """Is ``path`` one the request named (the same file, however spelled)?"""
    real = os.path.realpath(os.path.expanduser(path))
    return any(real == os.path.realpath(os.path.expanduser(n)) for n in named)


def _diagnosis_reply(doc: dict[str, Any], items: list[dict[str, Any]]) -> tuple[str, Artifact]:
    """The model's line (the first five kernels' or programs' primary findings) and the document."""
    primaries = [f"{i.get('name', '')[:60]}: {(i.get('primary') or {}).get('id', 'none')}" for i in items[:5]]
    return "primary findings: " + ("; ".join(primaries) or "none"), _artifact("result", data=doc)


@tool(response_format="content_and_artifact")
def diagnose_file(
    path: Annotated[str, Field(description="An existing profile file inside the working directory: an "
                               "Nsight Compute report (.ncu-rep), its raw CSV export, or a perf stat CSV.")],
    runtime: ToolRuntime[Any, Any] = None,  # injected by ToolNode; not in the schema
) -> tuple[str, Artifact]:
    """Diagnose a profile the user already has: the primary bottleneck and ranked,
    evidence-backed findings per kernel (ncu) or for the program (perf stat)."""
    state = (runtime.state if runtime is not None else None) or {}
    try:
        from perfscout.analysis.diagnosis import diagnose, diagnose_perf
        from perfscout.tools.profile import load_profile_files

        roots = allowed_roots(str(state.get("run_dir") or ""))
        # resolved before the check, whatever the spelling; an absolute path the person
        # wrote is theirs unless it is a system folder or a secret
        p = check_named_path(path, "profile file", roots, absolute_is_theirs=_is_named(path, _request_named(state)))
        if not p.is_file():
            raise InputError(f"profile file {path!r} does not exist")
        loaded = load_profile_files([p])  # its kind from its name and first bytes
        if loaded.perf is not None and not loaded.kernels:
            doc = diagnose_perf(loaded.perf)
            items = doc.get("programs", [])
        else:
            doc = diagnose(loaded.kernels, loaded.platform)
            items = doc.get("kernels", [])
    except PerfscoutError as exc:
        return f"refused: {exc}", _artifact("refused", error=str(exc))
    except Exception as exc:
        return _failure(exc)
    return _diagnosis_reply(doc, items)


# ---- sweeps ----------------------------------------------------------------------

#: Where a run_sweep task writes its sweep when no ``out`` is given, inside the agent run.
SWEEPS_DIR = "sweeps"
#: Most result rows a run_sweep artifact carries (the full table stays in the sweep's store).
SWEEP_ROWS_MAX = 200


def _records(df: Any) -> list[dict[str, Any]]:
    """DataFrame rows as plain JSON values (NaN/NA -> None), for state and checkpoints."""
    import json

    return json.loads(df.to_json(orient="records")) if len(df) else []


def sweep_digest(df: Any, psnr_min: float) -> dict[str, Any]:
    """What a sweep amounted to, from its stored rows: counts, failures, violations, bests."""
    from perfscout.analysis.report import summary as S

    counts = {str(k): int(v) for k, v in df["status"].value_counts().sort_index().items()}
    return {
        "tasks": int(len(df)), "status_counts": counts, "psnr_min": float(psnr_min),
        "failures": _records(S.failures_table(df)), "violations": _records(S.violations_table(df)),
        "best_ratio": _records(S.best_cr_table(df)), "fastest": _records(S.fastest_table(df, psnr_min)),
    }


def _sweep_summary(name: str, run_dir: Path, digest: dict[str, Any], report_md: str) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in digest["status_counts"].items()) or "none"
    parts = [f"sweep {name}: {digest['tasks']} task(s) ({counts}) in {run_dir}"]
    if digest["failures"]:
        parts.append("failed: " + "; ".join(
            f"{r['codec']}@{r['device']} {r['mode']} {r['bound']:g} on {r['dataset']}: {r['status']}"
            for r in digest["failures"][:5]) + (" ..." if len(digest["failures"]) > 5 else ""))
    parts.append(f"bound violated: {len(digest['violations'])}" + (": " + "; ".join(
        f"{r['codec']}@{r['device']} {r['mode']} {r['bound']:g}" for r in digest["violations"][:5])
        if digest["violations"] else ""))
    if digest["best_ratio"]:
        parts.append("highest ratio with bound held: " + "; ".join(
            f"{r['series']} {r['ratio']:.4g} at {r['mode']} {r['bound']:g} on {r['dataset']}"
            for r in digest["best_ratio"][:4]))
    if digest["fastest"]:
        parts.append(f"fastest with PSNR >= {digest['psnr_min']:g}: " + "; ".join(
            f"{r['series']} {r['compress_MBps']:.4g} MB/s at {r['mode']} {r['bound']:g} on {r['dataset']}"
            for r in digest["fastest"][:4]))
    parts.append(f"report: {report_md}" if report_md else "report: not written")
    return "; ".join(parts)[:1900]


@tool(response_format="content_and_artifact")
def run_sweep(
    spec: Annotated[str | None, Field(description="Path to a YAML sweep spec (see examples/sweep_*.yaml), "
                                      "exactly as the user gave it; inside the working directory.")] = None,
    out: Annotated[str | None, Field(description="Directory for the sweep's results; default: a folder "
                                     "of this agent run. Inside the working directory.")] = None,
    jobs: Annotated[int | None, Field(ge=1, le=256, description="Tasks at once (default: the "
                                      "spec's jobs, else the number of cores).")] = None,
    spec_doc: Annotated[dict[str, Any] | None, Field(description="The sweep spec itself as a mapping, "
                                                     "instead of `spec` (YAML requests only).")] = None,
    runtime: ToolRuntime[Any, Any] = None,  # injected by ToolNode; not in the schema
) -> tuple[str, Artifact]:
    """Run an evaluation campaign from a sweep spec (its datasets x codecs x devices x modes
    x bounds, each task in its own process, each result stored as it lands), then write the
    sweep's report (report.md, report.html). Calling it again for the same run continues the
    sweep: finished tasks are not repeated. Returns task counts by status, failed tasks,
    violated bounds and the best setting per goal."""
    state = (runtime.state if runtime is not None else None) or {}
    agent_run_dir = str(state.get("run_dir") or "")
    try:
        from perfscout.sweep import api as api_sweep

        if (spec is None) == (spec_doc is None):
            raise InputError("run_sweep needs exactly one of `spec` (a YAML file) or `spec_doc` (a mapping)")
        roots = allowed_roots(agent_run_dir)
        allow_plugins = bool(getattr(getattr(runtime, "context", None), "allow_plugins", False))
        source: Path | dict[str, Any]
        if spec is not None:
            source = confine(spec, roots, "sweep spec")
            if source.suffix not in (".yaml", ".yml") or not source.is_file():
                raise InputError(f"sweep spec {spec!r} is not an existing .yaml/.yml file")
        else:
            source = dict(spec_doc or {})
        model = api_sweep.load_spec(source, allow_plugins=allow_plugins)
        if out:
            # an output folder the person wrote absolute is theirs, as their data is; one
            # that leads out of the working directory by ../ (or a tool's own idea) is not
            target = check_named_path(out, "sweep output directory", roots, absolute_is_theirs=_is_named(
                out, _request_named((runtime.state if runtime is not None else None) or {})))
        elif agent_run_dir:
            # named after the task, not the attempt: a retry or a resumed agent run
            # continues the same sweep instead of starting another
            key = _run_info(runtime)["task_key"] or model.name
            target = Path(agent_run_dir) / SWEEPS_DIR / re.sub(r"[^A-Za-z0-9._+-]+", "_", key)
        else:
            target = api_sweep.default_run_dir(model)
        df = api_sweep.sweep(source if isinstance(source, Path) else model, out=target, resume=True,
                             jobs=jobs, progress=False, allow_plugins=allow_plugins)
    except PerfscoutError as exc:
        interrupted = isinstance(exc, api_sweep.SweepInterrupted)  # finished tasks are kept: a retry resumes
        prefix = "failed" if interrupted else "refused"
        return f"{prefix}: {exc}", _artifact("error", error=str(exc), transient=interrupted)
    except Exception as exc:
        return _failure(exc)
    report_md, report_html, report_error = "", "", ""
    try:
        report_html = str(api_sweep.report(target))
        report_md = str(target / "report.md")
    except Exception as exc:  # the results are stored; a report that fails must not hide them
        report_error = f"{type(exc).__name__}: {exc}"
    digest = sweep_digest(df, model.report.psnr_min)
    rows = _records(df.head(SWEEP_ROWS_MAX))
    data = {"name": model.name, "run_id": str(df.attrs.get("run_id", "")), "run_dir": str(target),
            "spec": str(source) if isinstance(source, Path) else "", "store": str(target / "results.sqlite"),
            "report_md": report_md, "report_html": report_html, "report_error": report_error,
            **digest, "rows": rows, "rows_truncated": len(df) > len(rows)}
    summary = _sweep_summary(model.name, target, digest, report_md)
    if report_error:
        summary += f"; report failed: {report_error[:200]}"
    return summary, _artifact("result", data=data)
