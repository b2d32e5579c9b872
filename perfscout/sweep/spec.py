"""Sweep specifications: a YAML grid, validated with line-numbered errors, expanded into tasks.

A spec names datasets, codecs, devices, modes and bounds; their cartesian product is the
grid. ``experiments`` (optional) are several grids in one spec, each inheriting what it does
not set from the top level, so one file can hold a bound scan, a codec comparison and a
CPU-vs-GPU comparison. Every task gets a stable ``task_key``: a hash of its resolved
configuration and of the *identity* of its data (file content hash, or the generator and
seed of a synthetic field), never of where the run is written or when.

Reference (every key optional unless marked; see examples/sweep_*.yaml)::

    name: quick                  # run name (run_id = name + random suffix)
    repeats: 3                   # timed repeats per task (median reported)
    timeout_s: 300               # per task wall time, else a codec_timeout record
    memory_limit_mb: 4096        # per task (address space on CPU, resident size on GPU)
    max_memory_mb: 16384         # estimated memory of all running tasks together
    jobs: 2                      # tasks at once (default: cores); CUDA tasks one per device
    cores: 2                     # cores the sweep may use (default: all); running tasks' codec
                                 #   threads (codec option `threads`) never add up to more
    task_start: fork             # fork: CPU tasks forked from a preloaded task server, CUDA
                                 #   tasks in one long-lived worker per device (fast);
                                 #   spawn: a fresh interpreter per task
    nonfinite: refuse            # or passthrough (see perfscout.tools.bounds)
    plugins: [my.module]         # imported first, in the parent and in every task
    output: runs/quick           # run directory (relative to the spec) if --out is not given
    datasets:                    # required (here or in every experiment)
      - name: vorticity.512_512  # registry name (perfscout datasets)
      - path: field.bin          # raw little-endian file, relative to the spec
        shape: [100, 500, 500]   #   C order, slowest axis first
        dtype: f32
      - path: field.npy          # a .npy file: shape and dtype from its header
      - path: era5.nc            # a netCDF/HDF5/Zarr variable, CF-decoded (shape from the file);
        var: z                   #   dtype: f32|f64 optional, fill_masked: V fills masked points
      - synthetic: "grf:64,64,64"  # generator:shape, with seed: N
        label: rough             # optional display name (the `dataset` column)
    codecs: [sz3, {id: zfp, options: {}}]   # required; {id: sz3, options: {threads: 2}}
                                 #   compresses 2 chunks in parallel (see perfscout.codecs.chunked)
    devices: [cpu, cuda:0]
    modes: [abs, rel]            # default: the keys of `bounds` when it is a mapping
    bounds: [1.0e-2, 1.0e-3]     # or per mode: {rel: [...], psnr: [60, 80]}
    experiments:                 # several grids; each inherits unset grid keys from above
      - name: bound_scan
        codecs: [sz3]
        bounds: {rel: [1.0e-1, 1.0e-2, 1.0e-3]}
    report: {psnr_min: 60}       # goal "fastest with PSNR >= X"

The same schema reads ``perfscout run --spec FILE`` (the agent): there a grid's tasks are
the agent's evaluations, answered in words. Keys only the agent reads (a sweep refuses
them, naming the line)::

    goal: "why this run"         # the question, shown as the report's title
    intent: "compare sz3 ..."    # a request in words instead of (or besides) a grid
    fallback_dataset: synthetic:grf:512,512   # replaces a named dataset absent here
    tasks: [{tool: list_codecs, args: {}}]    # explicit tool calls
    sweep: examples/sweep_quick.yaml          # or {spec, out, jobs}, or a list: run_sweep tasks

and the singular spellings ``dataset: X`` (= ``datasets: [X]``), ``bound: B`` (= ``bounds:
[B]``) and ``mode: M`` (= ``modes: [M]``) are accepted by both. A dataset entry may be a
string: ``synthetic:KIND:SHAPE``, a file path (``field.npy``, ``data/t.f32``) or a registry
name; ``codecs`` may be a group word (``cpu``: every usable CPU codec; ``all``: every usable
codec of the grid's devices); a device may be written ``gpu`` (= ``cuda``). For the agent
a raw file may leave out ``shape``/``dtype``: it asks for them when the task runs.

Grid points a codec cannot run (a mode it lacks, a device it does not run on) are not
tasks; they are listed in the run's ``spec.resolved.json`` and in the report.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import math
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from perfscout.analysis.timing import MAX_REPEATS
from perfscout.codecs.base import ALL_MODES
from perfscout.datasets import ref as data_ref
from perfscout.datasets.field import parse_shape
from perfscout.errors import InputError
from perfscout.io import YAMLLimitError, compose_yaml, construct_yaml, read_input_text

#: Bump when the meaning of a task key changes (old run directories then re-run everything).
TASK_KEY_VERSION = 1

DTYPES = {"f32": "float32", "f64": "float64", "float32": "float32", "float64": "float64"}


class SpecError(InputError):
    """A sweep spec that cannot be read or is invalid; the message names file and line."""


# ----------------------------------------------------------------------------- models


def dataset_from_string(text: str) -> dict[str, Any]:
    """A dataset named by one string, as the agent and ``perfscout eval`` name it:
    ``synthetic:KIND:SHAPE[:DTYPE][:seed=N]``, a file (a path, a data file's suffix, or a
    file of the working directory), else a registry name."""
    if text.startswith("synthetic:"):
        from perfscout.datasets.synthetic import split_synthetic

        try:
            kind, shape, dtype, seed = split_synthetic(text.split(":", 1)[1])
        except InputError as exc:
            raise ValueError(str(exc)) from None
        out: dict[str, Any] = {"synthetic": f"{kind}:{shape}", "seed": seed}
        explicit = any(part in DTYPES for part in text.split(":")[3:])  # else the field's default
        return out | ({"dtype": dtype} if dtype and explicit else {})
    if data_ref.looks_like_file(text) or _is_file(text):
        return {"path": text}
    return {"name": text}


def dataset_from_string_quiet(text: str, base_dir: str | Path = "") -> dict[str, Any]:
    """:func:`dataset_from_string`, judged from ``base_dir`` (a spec's folder), {} when malformed."""
    try:
        if not text.startswith("synthetic:") and base_dir and _is_file(str(Path(base_dir) / text)):
            return {"path": text}
        return dataset_from_string(text)
    except ValueError:
        return {}


def _is_file(name: str) -> bool:
    try:
        return Path(name).expanduser().is_file()
    except (OSError, ValueError, RuntimeError):
        return False


#: Codec group words: every usable codec of these devices (None: the grid's devices).
CODEC_GROUPS: dict[str, tuple[str, ...] | None] = {"cpu": ("cpu",), "all": None, "every": None, "installed": None}


class DatasetSpec(BaseModel):
    """One input field: a registry name, a raw file, or a synthetic generator."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None  # perfscout.datasets registry name
    path: str | None = None  # raw little-endian binary file, or a netCDF/HDF5/Zarr file with var
    var: str | None = None  # a variable of the file at path ("z", "/group/temp"), CF-decoded
    fill_masked: float | None = None  # for var: fill its masked points with this (else nonfinite decides)
    synthetic: str | None = None  # "KIND:SHAPE", e.g. "grf:64,64,64"
    shape: list[int] | None = None  # for path (C order, slowest first)
    dtype: str = "f32"  # with var: only when given (else CF's unpacked type)
    endian: Literal["<", ">"] = "<"  # for a raw path: byte order of its values
    seed: int = 0  # for synthetic
    label: str | None = None  # what the `dataset` column shows

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, v: Any) -> Any:
        """``"synthetic:grf:64,64"``, a file path or a registry name, as one string (the
        agent's spelling; :func:`dataset_from_string`)."""
        return dataset_from_string(v) if isinstance(v, str) else v

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str) -> str:
        if v not in DTYPES:
            raise ValueError(f"dtype must be one of f32, f64 (got {v!r})")
        return "f32" if DTYPES[v] == "float32" else "f64"

    @field_validator("shape", mode="before")
    @classmethod
    def _shape_text(cls, v: Any) -> Any:
        """"12,16,10" or "12x16x10" (the CLI's spelling) as a list."""
        if isinstance(v, str):
            try:
                return list(parse_shape(v))
            except InputError as exc:
                raise ValueError(str(exc)) from None
        return v

    @field_validator("shape")
    @classmethod
    def _shape(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and (not v or any(s <= 0 for s in v)):
            raise ValueError(f"shape must be a non-empty list of positive sizes (got {v})")
        return v

    @model_validator(mode="after")
    def _one_source(self, info: ValidationInfo) -> DatasetSpec:
        sources = [s for s in ("name", "path", "synthetic") if getattr(self, s)]
        if len(sources) != 1:
            raise ValueError("a dataset needs exactly one of 'name', 'path' or 'synthetic'"
                             + (f" (got {', '.join(sources)})" if sources else ""))
        if (self.var or self.fill_masked is not None) and not self.path:
            raise ValueError("'var' and 'fill_masked' name a variable of the file at 'path'; give 'path'")
        if self.var and self.shape:
            raise ValueError("a 'var' has the shape its file says: drop 'shape'")
        agent = bool((info.context or {}).get("agent"))  # the agent asks for a raw file's shape
        if self.path and not self.shape and not self.var and not self.path.endswith(".npy") and not agent:
            raise ValueError("a dataset given by 'path' needs its 'shape' (C order, slowest axis first), "
                             "or 'var' for a variable of a netCDF/HDF5/Zarr file (a .npy file has its own)")
        if self.synthetic and ":" not in self.synthetic:
            raise ValueError(f"synthetic must look like 'KIND:SHAPE', e.g. 'grf:64,64,64' (got {self.synthetic!r})")
        return self


class CodecSpec(BaseModel):
    """A codec id plus backend options (e.g. ``{id: sz3, options: {algorithm: interp}}``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    options: dict[str, Any] = Field(default_factory=dict)


def _check_device(d: str) -> str:
    if d == "gpu":  # the agent's word for the default GPU
        return "cuda"
    if d != "cpu" and d != "cuda" and not (d.startswith("cuda:") and d[5:].isdigit()):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N' (got {d!r})")
    return d


def _check_mode(m: str) -> str:
    if m not in ALL_MODES:
        raise ValueError(f"unknown mode {m!r}; modes: {', '.join(ALL_MODES)}")
    return m


def _check_bound(b: float) -> float:
    if not math.isfinite(b) or b <= 0:
        raise ValueError(f"bounds must be finite and > 0 (got {b})")
    return b


# Element-level types: a bad item is reported at its own line, not at its list's.
Device = Annotated[str, AfterValidator(_check_device)]
Mode = Annotated[str, AfterValidator(_check_mode)]
Bound = Annotated[float, AfterValidator(_check_bound)]


class GridFields(BaseModel):
    """The fields that span a grid; unset ones are inherited from the spec's top level."""

    model_config = ConfigDict(extra="forbid")

    datasets: list[DatasetSpec] | None = None
    codecs: list[CodecSpec | str] | None = None
    devices: list[Device] | None = None
    modes: list[Mode] | None = None
    bounds: list[Bound] | dict[Mode, list[Bound]] | None = None
    repeats: int | None = Field(default=None, ge=1, le=MAX_REPEATS)

    @field_validator("codecs", "devices", mode="before")
    @classmethod
    def _one_is_a_list(cls, v: Any) -> Any:
        """``codecs: cpu`` (a group word) or ``devices: cuda``: one item."""
        return [v] if isinstance(v, str) else v


class Experiment(GridFields):
    name: str


class ReportOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    psnr_min: float = 60.0  # goal "fastest with PSNR >= X"


class AgentTask(BaseModel):
    """An explicit tool call of an agent spec (``tasks: [{tool: list_codecs}]``)."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    purpose: str = ""


class SweepRefSpec(BaseModel):
    """A sweep an agent spec runs: ``{spec: FILE, out: DIR, jobs: N}``."""

    model_config = ConfigDict(extra="forbid")

    spec: str
    out: str | None = None
    jobs: int | None = Field(default=None, ge=1, le=256)


SweepRef = Annotated[str | SweepRefSpec, Field(union_mode="left_to_right")]

#: Keys only the agent reads; the singular aliases and the plural they stand for.
AGENT_KEYS = ("goal", "intent", "fallback_dataset", "tasks", "sweep")
ALIASES = {"dataset": "datasets", "bound": "bounds", "mode": "modes"}
#: Sweep settings the agent's evaluations do not use (they run one at a time, in the agent run).
SWEEP_ONLY_KEYS = ("jobs", "cores", "max_memory_mb", "task_start", "output", "report")


class SweepSpec(GridFields):
    """A whole sweep. Top-level grid fields are the defaults for every experiment."""

    name: str = "sweep"
    description: str = ""
    timeout_s: float = Field(default=300.0, gt=0)  # per task, child process wall time
    memory_limit_mb: int = Field(default=4096, ge=64)  # per task (address space / resident)
    max_memory_mb: int | None = Field(default=None, ge=64)  # all running tasks together
    jobs: int | None = Field(default=None, ge=1)
    cores: int | None = Field(default=None, ge=1)  # cores the running tasks' threads may use together
    task_start: Literal["fork", "spawn"] = "fork"  # how tasks start (sweep.forkserver, sweep.gpuworker)
    nonfinite: Literal["refuse", "passthrough"] = "refuse"  # see perfscout.tools.bounds
    plugins: list[str] = Field(default_factory=list)  # modules imported first (register codecs)
    output: str | None = None
    experiments: list[Experiment] | None = None
    report: ReportOptions = Field(default_factory=ReportOptions)
    # -- read by the agent only (perfscout run --spec); a sweep refuses them (see refuse_agent_keys)
    goal: str | None = None  # the question the run answers
    intent: str | None = None  # a request in words
    fallback_dataset: DatasetSpec | None = None  # replaces a named dataset that is absent here
    tasks: list[AgentTask] | None = None  # explicit tool calls
    sweep: SweepRef | list[SweepRef] | None = None  # sweep specs to run (run_sweep tasks)
    #: Directory the spec came from: relative dataset paths resolve against it.
    _base_dir: str = PrivateAttr(default="")

    @property
    def base_dir(self) -> str:
        return self._base_dir


# ----------------------------------------------------------------------------- loading


def _node_lines(node: yaml.Node, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    """Map each key path (('datasets', 0, 'shape')) to the 1-based line its value starts on."""
    out = {} if out is None else out
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[path + (key,)] = key_node.start_mark.line + 1
            _node_lines(value_node, path + (key,), out)
            out[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _node_lines(item, path + (i,), out)
    return out


def _line_for(loc: tuple, lines: dict[tuple, int]) -> int | None:
    """Deepest line known along a pydantic error location (union tags are skipped)."""
    path: tuple = ()
    line = lines.get(())
    for part in loc:
        if path + (part,) in lines:
            path = path + (part,)
            line = lines[path]
    return line


def _clean_loc(loc: tuple | list) -> tuple:
    """A pydantic location without union-branch tags ('list[...]', 'CodecSpec', 'str')."""
    return tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in ("str", "CodecSpec", "SweepRefSpec", "DatasetSpec"))))


def _format_errors(exc: ValidationError, source: str, lines: dict[tuple, int]) -> str:
    seen: set[tuple[int | None, str]] = set()
    msgs = []
    errors = exc.errors()

    def _is_other_branch(e: dict) -> bool:
        # A union reports "not a list" for the branch the user did not mean when the
        # other branch has a precise, deeper complaint: keep only the precise one.
        loc = _clean_loc(e["loc"])
        return e["type"].endswith("_type") and any(
            len(_clean_loc(o["loc"])) > len(loc) and _clean_loc(o["loc"])[: len(loc)] == loc
            for o in errors if o is not e
        )

    for err in [e for e in errors if not _is_other_branch(e)]:
        loc = tuple(err["loc"])
        line = _line_for(loc, lines)
        where = ".".join(str(p) for p in _clean_loc(loc))
        msg = err["msg"].removeprefix("Value error, ")
        if (line, msg) in seen:
            continue
        seen.add((line, msg))
        prefix = f"{source}:{line}" if line else source
        msgs.append(f"{prefix}: {where or '(top level)'}: {msg}")
    return "invalid sweep spec:\n  " + "\n  ".join(msgs)


def load_spec(spec: str | Path | dict | SweepSpec, *, allow_plugins: bool = False,
              for_agent: bool = False) -> SweepSpec:
    """Read and validate a spec from a YAML file, a YAML string, a dict or a model.

    Errors raise :class:`SpecError` naming file and line of each problem. YAML is read with
    limits (size, depth, aliases: :mod:`.safe_yaml`). A spec whose ``plugins:`` would import
    code is refused unless ``allow_plugins`` is true (``--allow-plugins`` on the CLI): a
    spec is data that may come from anyone, a plug-in runs with the user's rights.
    ``for_agent``: the spec is ``perfscout run --spec``'s: the agent's keys (``goal``,
    ``tasks``, ...) are allowed, a raw file may leave its shape to be asked, and plug-ins are
    neither imported nor refused here (the run_sweep tool decides, with ``--allow-plugins``).
    """
    if isinstance(spec, SweepSpec):
        _check_plugins_allowed(spec.plugins, allow_plugins or for_agent, "<spec>", {})
        return spec
    if isinstance(spec, dict):
        _check_plugins_allowed(spec.get("plugins"), allow_plugins or for_agent, "<dict>", {})
        return _validate(spec, "<dict>", {}, base_dir=os.getcwd(), for_agent=for_agent)
    text: str
    if isinstance(spec, Path) or (isinstance(spec, str) and "\n" not in spec and spec.endswith((".yaml", ".yml"))):
        path = Path(spec)
        try:  # a regular file of spec size (not a FIFO, a device, a directory), UTF-8
            text = read_input_text(path, "sweep spec")
        except InputError as exc:
            raise SpecError(str(exc)) from None
        source, base = str(path), str(path.resolve().parent)
    else:
        text, source, base = str(spec), "<spec>", os.getcwd()
    try:
        root = compose_yaml(text, source)
        data = construct_yaml(root)
    except YAMLLimitError as exc:
        raise SpecError(str(exc)) from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}:1: a sweep spec is a YAML mapping (got {type(data).__name__})")
    lines = _node_lines(root) if root is not None else {}
    _check_plugins_allowed(data.get("plugins"), allow_plugins or for_agent, source, lines)
    return _validate(data, source, lines, base_dir=base, for_agent=for_agent)


class PluginsRefused(SpecError):
    """The spec names plug-ins (code to import) and the caller did not allow them."""


def _check_plugins_allowed(plugins: Any, allowed: bool, source: str, lines: dict) -> None:
    if allowed or not plugins:
        return
    line = lines.get(("plugins",))
    names = ", ".join(map(str, plugins)) if isinstance(plugins, list) else repr(plugins)
    raise PluginsRefused(
        f"{source}:{line or 1}: plugins: this spec would import and run Python code ({names}); "
        "refused. Plug-ins run with your rights: pass --allow-plugins (perfscout sweep, perfscout run "
        "--spec) or allow_plugins=True (Python API) only for a spec you trust."
    )


def rebase_file_refs(doc: dict[str, Any], base_dir: str | Path) -> dict[str, Any]:
    """A copy of a spec mapping whose relative file references are absolute against ``base_dir``.

    :func:`load_spec` resolves a file's dataset ``path:``s, ``.py`` plug-ins and ``output``
    against the file's folder; a mapping carries no folder. Whoever reads a YAML file into
    a mapping (``perfscout run --spec``) rebases it here so that it means what the file meant.
    Entries of the wrong type are left as they are: validation reports them.
    """
    base = Path(base_dir)

    def absolute(value: Any) -> Any:
        if not isinstance(value, str) or not value or Path(value).expanduser().is_absolute():
            return value
        return str(base / value)

    def entry(e: Any) -> Any:
        if isinstance(e, dict) and "path" in e:
            return {**e, "path": absolute(e["path"])}
        if isinstance(e, str) and "path" in dataset_from_string_quiet(e, base):
            return absolute(e)  # a file named by one string ("field.npy")
        return e

    def datasets(entries: Any) -> Any:
        return [entry(e) for e in entries] if isinstance(entries, list) else entry(entries)

    out = dict(doc)
    for key in ("datasets", "dataset", "fallback_dataset"):
        if key in out:
            out[key] = datasets(out[key])
    if isinstance(out.get("experiments"), list):
        out["experiments"] = [{**e, **{k: datasets(e[k]) for k in ("datasets", "dataset") if k in e}}
                              if isinstance(e, dict) else e for e in out["experiments"]]
    if isinstance(out.get("plugins"), list):
        out["plugins"] = [absolute(p) if isinstance(p, str) and p.endswith(".py") else p
                          for p in out["plugins"]]
    if "output" in out:
        out["output"] = absolute(out["output"])
    return out


def _apply_aliases(data: dict, lines: dict, source: str) -> tuple[dict, dict]:
    """``dataset``/``bound``/``mode`` as the plurals they stand for (one item becomes a list),
    at the top level and in each experiment; their lines move with them."""
    lines = dict(lines)
    problems = []

    def rename(doc: dict, prefix: tuple) -> dict:
        doc = dict(doc)
        for alias, plural in ALIASES.items():
            if alias not in doc:
                continue
            if plural in doc:
                line = lines.get(prefix + (alias,))
                problems.append(f"{source}:{line or 1}: {'.'.join(map(str, prefix + (alias,)))}: give either "
                                f"'{alias}' or '{plural}', not both")
                continue
            value = doc.pop(alias)
            wrapped = not (isinstance(value, list) or (plural == "bounds" and isinstance(value, dict)))
            doc[plural] = [value] if wrapped else value
            for path, line in list(lines.items()):
                if path[:len(prefix) + 1] == prefix + (alias,):
                    rest = path[len(prefix) + 1:]
                    lines[prefix + (plural,) + rest] = line
                    if wrapped:  # the single value is item 0 of the list now
                        lines[prefix + (plural, 0) + rest] = line
        return doc

    out = rename(data, ())
    if isinstance(out.get("experiments"), list):
        out["experiments"] = [rename(e, ("experiments", i)) if isinstance(e, dict) else e
                              for i, e in enumerate(out["experiments"])]
    if problems:
        raise SpecError("invalid sweep spec:\n  " + "\n  ".join(problems))
    return out, lines


def _refuse_agent_keys(data: dict, source: str, lines: dict) -> None:
    """A sweep does not read the agent's keys: saying so beats ignoring them."""
    found = [k for k in AGENT_KEYS if k in data]
    if found:
        raise SpecError("invalid sweep spec:\n  " + "\n  ".join(
            f"{source}:{lines.get((k,)) or 1}: {k}: read by `perfscout run --spec` (the agent) only; a sweep "
            "runs the grid (datasets x codecs x devices x modes x bounds) and nothing else" for k in found))


def _validate(data: dict, source: str, lines: dict, base_dir: str, for_agent: bool = False) -> SweepSpec:
    data, lines = _apply_aliases(data, lines, source)
    if not for_agent:
        _refuse_agent_keys(data, source, lines)
    try:
        spec = SweepSpec.model_validate(data, context={"agent": for_agent})
    except ValidationError as exc:
        text = _format_errors(exc, source, lines)
        raise SpecError(text.replace("invalid sweep spec:", "invalid spec:", 1) if for_agent else text) from None
    spec._base_dir = base_dir
    _check_semantics(spec, source, lines, for_agent=for_agent)
    return spec


def has_grid(spec: SweepSpec) -> bool:
    """Whether a spec spans a grid of evaluations (an agent spec may hold only tasks or sweeps)."""
    return bool(spec.datasets or spec.codecs or spec.experiments) or not (spec.tasks or spec.sweep or spec.intent)


def _check_semantics(spec: SweepSpec, source: str, lines: dict, for_agent: bool = False) -> None:
    """What pydantic cannot see: unknown codecs (after plug-ins), empty grids."""
    if for_agent and spec.plugins:
        return  # its codecs exist once its plug-ins are imported: the run_sweep tool checks them
    if not has_grid(spec):
        return
    import_plugins(spec.plugins, spec.base_dir)
    from perfscout.codecs.registry import codec_ids

    known = set(codec_ids()) | set(CODEC_GROUPS)
    problems = []
    grids = spec.experiments or [None]
    for gi, exp in enumerate(grids):
        prefix = ("experiments", gi) if exp is not None else ()
        grid = resolve_grid(spec, exp)
        for field in ("datasets", "codecs"):
            if not grid[field]:
                line = _line_for(prefix, lines)
                problems.append(f"{source}:{line or 1}: {'.'.join(map(str, prefix + (field,)))}: no {field} given")
        codecs_loc = prefix + ("codecs",) if exp is not None and exp.codecs is not None else ("codecs",)
        for ci, c in enumerate(grid["codecs"]):
            if c.id not in known:
                line = _line_for(codecs_loc + (ci,), lines)
                problems.append(f"{source}:{line or 1}: unknown codec {c.id!r}; known: {', '.join(codec_ids())} "
                                f"(or a group: {', '.join(CODEC_GROUPS)})")
    if problems:
        raise SpecError("invalid sweep spec:\n  " + "\n  ".join(dict.fromkeys(problems)))


def import_plugins(plugins: list[str], base_dir: str = "") -> None:
    """Import plug-in modules (they register codecs on import): module names or .py files."""
    for plugin in plugins:
        try:
            if plugin.endswith(".py"):
                path = Path(plugin)
                if not path.is_absolute():
                    path = Path(base_dir or ".") / path
                name = "perfscout_plugin_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
                if name in sys.modules:
                    continue
                s = importlib.util.spec_from_file_location(name, path)
                if s is None or s.loader is None or not path.is_file():
                    raise FileNotFoundError(str(path))
                module = importlib.util.module_from_spec(s)
                sys.modules[name] = module
                s.loader.exec_module(module)
            else:
                importlib.import_module(plugin)
        except Exception as exc:
            raise SpecError(f"plug-in {plugin!r} could not be imported: {type(exc).__name__}: {exc}") from None


# ----------------------------------------------------------------------------- expansion


#: Bytes beyond which a field is refused as impossible (4 EiB; int64 holds its size).
MAX_FIELD_BYTES = 1 << 62


class DataRef(BaseModel):
    """A dataset resolved enough to name it, size it and hash its identity; ``ref`` is what
    :func:`perfscout.datasets.open` reads in the task (as ``eval`` and the agent read it)."""

    ref: data_ref.DataRef
    label: str
    source: Literal["name", "path", "synthetic"]
    name: str | None = None
    path: str | None = None
    var: str | None = None  # with source "path": a netCDF/HDF5/Zarr variable
    fill_masked: float | None = None
    synthetic: str | None = None
    seed: int = 0
    shape: list[int]
    dtype: str  # "f32" | "f64"
    identity: dict[str, Any]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * (4 if self.dtype == "f32" else 8)

    def check_size(self) -> DataRef:
        """Itself, or SpecError for a field no machine holds: sizes are stored as SQLite
        integers (int64) and planned against memory, so such a shape would fail later, mid-write."""
        if self.nbytes >= MAX_FIELD_BYTES:
            raise SpecError(f"dataset {self.label}: shape {self.shape} {self.dtype} is {self.nbytes:.3g} bytes; "
                            f"no machine holds a field that large (limit {MAX_FIELD_BYTES:.3g} bytes)")
        return self

    @property
    def shape_str(self) -> str:
        return ",".join(str(s) for s in self.shape)


class SweepTask(BaseModel):
    """One evaluation: everything a child process needs, and its stable key."""

    task_key: str
    experiments: list[str]
    data: DataRef
    codec: str
    options: dict[str, Any] = Field(default_factory=dict)
    device: str
    mode: str
    bound: float
    repeats: int
    nonfinite: str
    timeout_s: float
    memory_limit_mb: int
    plugins: list[str] = Field(default_factory=list)
    base_dir: str = ""
    #: the codec's run-time registration in the process that made the task (register_codec):
    #: a task process that does not inherit its memory (a forked task server) replays it
    registered: dict[str, str] = Field(default_factory=dict)

    @property
    def threads(self) -> int:
        """Cores the task's codec uses at once (its ``threads`` option; GPU tasks: one host thread)."""
        value = self.options.get("threads", 1) if self.device == "cpu" else 1
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1

    @property
    def est_memory_mb(self) -> float:
        """A budget guess: input, reconstruction, stream and codec scratch, plus the interpreter."""
        return 6 * self.data.nbytes / 2**20 + 150


class Skipped(BaseModel):
    """A grid point that is not a task (mode or device the codec cannot do)."""

    experiment: str
    codec: str
    device: str
    mode: str
    reason: str


def resolve_grid(spec: SweepSpec, exp: Experiment | None) -> dict[str, Any]:
    def pick(field: str, default: Any) -> Any:
        v = getattr(exp, field) if exp is not None else None
        if v is None:
            v = getattr(spec, field)
        return default if v is None else v

    devices = pick("devices", ["cpu"])
    codecs = expand_codec_groups([CodecSpec(id=c) if isinstance(c, str) else c for c in pick("codecs", [])],
                                 devices)
    bounds = pick("bounds", [1e-3])
    modes = pick("modes", list(bounds) if isinstance(bounds, dict) else ["abs"])
    return {
        "name": exp.name if exp is not None else "main",
        "datasets": pick("datasets", []),
        "codecs": codecs,
        "devices": devices,
        "modes": modes,
        "bounds": bounds,
        "repeats": pick("repeats", 3),
    }


def expand_codec_groups(codecs: list[CodecSpec], devices: list[str]) -> list[CodecSpec]:
    """Group words (:data:`CODEC_GROUPS`) as the usable codecs they select, in registry order
    (``cpu``: the CPU codecs; ``all``: those of the grid's devices); a codec named twice once."""
    out: dict[str, CodecSpec] = {}
    for c in codecs:
        if c.id not in CODEC_GROUPS:
            out.setdefault(c.model_dump_json(), c)
            continue
        from perfscout.codecs.registry import list_codecs

        kinds = CODEC_GROUPS[c.id] or tuple(dict.fromkeys(d.split(":")[0] for d in devices))
        for info in list_codecs():
            if info.available and info.device in kinds:
                chosen = CodecSpec(id=info.id, options=c.options)
                out.setdefault(chosen.model_dump_json(), chosen)
    return list(out.values())


@lru_cache(maxsize=64)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def file_identity(path: Path) -> str:
    st = path.stat()
    return _file_sha256(str(path.resolve()), st.st_size, st.st_mtime_ns)


def _spec_path(ds: DatasetSpec, base_dir: str) -> Path:
    path = Path(ds.path or "").expanduser()
    return path if path.is_absolute() else Path(base_dir or ".") / path


def resolve_data(ds: DatasetSpec, base_dir: str) -> DataRef:
    """Shape, dtype and identity of a dataset (:func:`perfscout.datasets.describe`: from
    metadata, without loading it when the format allows)."""
    from perfscout import datasets

    if ds.synthetic:
        kind, _, shape_txt = ds.synthetic.partition(":")
        try:  # the one shape parser (perfscout.state.shapes): the CLI's spellings and limits
            shape = list(parse_shape(shape_txt))
        except InputError as exc:
            raise SpecError(f"synthetic {ds.synthetic!r}: {exc}") from None
        ref = datasets.DataRef(source="synthetic", synthetic=kind, shape=tuple(shape), dtype=ds.dtype, seed=ds.seed)
        label = ds.label or datasets.describe(ref).label
        ident = {"source": "synthetic", "kind": kind, "shape": shape, "dtype": ds.dtype, "seed": ds.seed}
        return DataRef(ref=ref, label=label, source="synthetic", synthetic=f"{kind}:{','.join(map(str, shape))}",
                       seed=ds.seed, shape=shape, dtype=ds.dtype, identity=ident)
    if ds.path and ds.var:
        return _resolve_variable(ds, base_dir)
    if ds.path:
        path = _spec_path(ds, base_dir)
        if not path.is_file():
            raise SpecError(f"dataset file not found: {path}")
        ref = datasets.file_ref(path.resolve(), shape=ds.shape, dtype=ds.dtype if ds.shape else None,
                                endian=ds.endian)
        try:
            info = datasets.describe(ref)
        except InputError as exc:
            raise SpecError(f"dataset {exc}" if str(exc).startswith(str(path)) else f"dataset {path}: {exc}") from None
        shape, dtype = list(info.shape), info.dtype
        ident = {"source": "file", "sha256": file_identity(path), "shape": shape, "dtype": dtype}
        if ds.endian == ">" and ref.source == "raw":  # other values; little-endian keys stay as they were
            ident["endian"] = ">"
        return DataRef(ref=ref, label=ds.label or path.name, source="path", path=str(path.resolve()), shape=shape,
                       dtype=dtype, identity=ident)
    # Registry name: ask perfscout.datasets what it is.
    ref = datasets.DataRef(source="name", name=ds.name)
    try:
        field = datasets.open(ref)
    except Exception as exc:
        raise SpecError(f"dataset {ds.name!r}: {exc}") from None
    arr = getattr(field, "array", field)
    shape = list(getattr(field, "shape", None) or arr.shape)
    dtype = "f64" if str(getattr(arr, "dtype", "float32")) == "float64" else "f32"
    src_path = getattr(field, "path", None)
    if src_path and Path(src_path).is_file():
        ident: dict[str, Any] = {"source": "file", "sha256": file_identity(Path(src_path))}
    else:
        ident = {"source": "registry", "sha256": hashlib.sha256(memoryview(arr).cast("B")).hexdigest()
                 if hasattr(arr, "dtype") else ds.name}
    ident.update(shape=shape, dtype=dtype)
    return DataRef(ref=ref, label=ds.label or ds.name, source="name", name=ds.name, shape=shape, dtype=dtype,
                   identity=ident)


def _resolve_variable(ds: DatasetSpec, base_dir: str) -> DataRef:
    """A netCDF/HDF5/Zarr variable: shape and dtype from its metadata (no data read here)."""
    from perfscout import datasets

    path = _spec_path(ds, base_dir)
    asked = ds.dtype if "dtype" in ds.model_fields_set else None
    ref = datasets.DataRef(source="variable", path=str(path.resolve()), var=ds.var, dtype=asked,
                           masked="refuse" if ds.fill_masked is None else ds.fill_masked)
    try:
        info = datasets.describe_variable(path, ds.var or "")
        described = datasets.describe(ref.model_copy(update={"var": info.name}))
    except InputError as exc:
        raise SpecError(f"dataset var {ds.var!r}: {exc}") from None
    dtype = described.dtype
    digest = file_identity(path) if path.is_file() else datasets.content_digest(path)
    ident = {"source": "file", "sha256": digest, "var": info.name, "shape": info.field_shape, "dtype": dtype,
             "fill_masked": ds.fill_masked}
    return DataRef(ref=ref.model_copy(update={"var": info.name}), label=ds.label or described.label,
                   source="path", path=str(path.resolve()), var=info.name, fill_masked=ds.fill_masked,
                   shape=info.field_shape, dtype=dtype, identity=ident)


def make_task_key(data: DataRef, codec: CodecSpec, device: str, mode: str, bound: float, repeats: int,
                  nonfinite: str) -> str:
    doc = {
        "v": TASK_KEY_VERSION, "data": data.identity, "codec": codec.id, "options": codec.options,
        "device": device, "mode": mode, "bound": repr(float(bound)), "repeats": repeats, "nonfinite": nonfinite,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _codec_capabilities(codec_id: str) -> tuple[str, tuple[str, ...]] | None:
    """(device kind, evaluable modes) of a codec, or None when it cannot be loaded here."""
    from perfscout.codecs.registry import _load, evaluable_modes

    try:
        cls = _load(codec_id)
    except Exception:
        return None
    return cls.device, evaluable_modes(cls)


#: The most tasks one spec may expand to: at the measured 2-7 tasks/s of this machine that is
#: 4-14 hours; a grid beyond it is far more likely a typo (a bounds list pasted twice over
#: every dataset) than a campaign, and would be expanded, stored and scheduled before any ran.
MAX_TASKS = 100_000


class GridPoint(BaseModel):
    """One point of a spec's grid before its data is resolved: what the agent plans as an
    evaluate_codec task, and what :func:`expand` turns into a :class:`SweepTask`."""

    experiment: str
    dataset: DatasetSpec
    codec: CodecSpec
    device: str
    mode: str
    bound: float
    repeats: int


def grid_points(spec: SweepSpec) -> tuple[list[GridPoint], list[Skipped]]:
    """Every grid point of a spec in a stable order (datasets x codecs x devices x modes x
    bounds, experiment by experiment), without reading any data; the points a codec cannot
    run (a mode it lacks, a device it does not run on) are skipped and listed."""
    import_plugins(spec.plugins, spec.base_dir)
    points: list[GridPoint] = []
    skipped: list[Skipped] = []
    for exp in spec.experiments or [None]:
        grid = resolve_grid(spec, exp)
        bounds = grid["bounds"]
        for ds in grid["datasets"]:
            for codec in grid["codecs"]:
                caps = _codec_capabilities(codec.id)
                for device in grid["devices"]:
                    dev_kind = device.split(":")[0]
                    if caps is not None and caps[0] != dev_kind:
                        skipped.append(Skipped(experiment=grid["name"], codec=codec.id, device=device, mode="*",
                                               reason=f"{codec.id} runs on {caps[0]}, not {dev_kind}"))
                        continue
                    for mode in grid["modes"]:
                        if caps is not None and mode not in caps[1]:
                            skipped.append(Skipped(experiment=grid["name"], codec=codec.id, device=device,
                                                   mode=mode, reason=f"{codec.id} has no {mode!r} mode"))
                            continue
                        mode_bounds = bounds.get(mode, []) if isinstance(bounds, dict) else bounds
                        for bound in mode_bounds:
                            if len(points) >= 4 * MAX_TASKS:  # before duplicates are merged
                                _too_many()
                            # validated already (an agent's dataset may lack a shape it asks for later)
                            points.append(GridPoint.model_construct(
                                experiment=grid["name"], dataset=ds, codec=codec, device=device, mode=mode,
                                bound=float(bound), repeats=grid["repeats"]))
    # Dedupe identical skip notes (same codec/device/mode across datasets).
    uniq = list({(s.experiment, s.codec, s.device, s.mode): s for s in skipped}.values())
    return points, uniq


def _too_many() -> None:
    raise SpecError(f"the spec expands to more than {MAX_TASKS} tasks (datasets x codecs x devices x modes x "
                    "bounds); split it into several sweeps (each its own --out) or narrow its grid")


def make_task(data: DataRef, codec: CodecSpec, device: str, mode: str, bound: float, repeats: int, *,
              nonfinite: str, timeout_s: float, memory_limit_mb: int, plugins: list[str] | None = None,
              base_dir: str = "", experiments: list[str] | None = None) -> SweepTask:
    """The task of one configuration, keyed by :func:`make_task_key` (a sweep's expansion and
    the agent's evaluate_codec both build their tasks here)."""
    from perfscout.codecs.registry import registered_codecs

    registered = {k: v for k, v in registered_codecs().items() if k == codec.id}
    return SweepTask(
        registered=registered,
        task_key=make_task_key(data, codec, device, mode, bound, repeats, nonfinite),
        experiments=list(experiments or ["main"]), data=data, codec=codec.id, options=codec.options,
        device=device, mode=mode, bound=float(bound), repeats=repeats, nonfinite=nonfinite, timeout_s=timeout_s,
        memory_limit_mb=memory_limit_mb, plugins=list(plugins or []), base_dir=base_dir)


def expand(spec: SweepSpec) -> tuple[list[SweepTask], list[Skipped]]:
    """All tasks of a spec in a stable order (a task shared by two experiments runs once)."""
    points, skipped = grid_points(spec)
    tasks: dict[str, SweepTask] = {}
    data_cache: dict[str, DataRef] = {}
    for p in points:
        k = p.dataset.model_dump_json()
        if k not in data_cache:
            data_cache[k] = resolve_data(p.dataset, spec.base_dir).check_size()
        task = make_task(data_cache[k], p.codec, p.device, p.mode, p.bound, p.repeats, nonfinite=spec.nonfinite,
                         timeout_s=spec.timeout_s, memory_limit_mb=spec.memory_limit_mb, plugins=spec.plugins,
                         base_dir=spec.base_dir, experiments=[p.experiment])
        if task.task_key in tasks:
            if p.experiment not in tasks[task.task_key].experiments:
                tasks[task.task_key].experiments.append(p.experiment)
            continue
        if len(tasks) >= MAX_TASKS:
            _too_many()
        tasks[task.task_key] = task
    return list(tasks.values()), skipped
