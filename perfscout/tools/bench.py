"""The user's benchmark commands: run one N times through the sandbox, read its figure.

A benchmark is a command (argv, no shell), optional extra environment variables and a
way to read its figure from stdout: a regular expression (its named group ``value``, or
its first group, or the whole match; the last match wins, so a program that prints
progress and then its result reads right) or a dotted field of the JSON document it
prints (``record.compress_MBps``, ``results.0.time``). Without a figure, the sandbox's
wall-clock time of the command is the figure.

Every run goes through :class:`perfscout.tools.sandbox.Sandbox`: the command's executable
is registered explicitly (it is the user's own), the working directory is declared as an
input, the environment is scrubbed and the run has a timeout. Repeats of several
benchmarks (or of several variants of one) are **interleaved** (A B A B ...), so a change
in the machine's load hits every side alike instead of masquerading as a regression.

``run_bench`` writes ``samples.json`` (the regression runner's format) and each repeat's
output under ``raw/``.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from perfscout.errors import InputError, ToolRefused
from perfscout.io import check_output_dir, load_yaml_file
from perfscout.tools.regress import SAMPLES_NAME, RunSamples, TaskSamples, write_samples
from perfscout.tools.sandbox import Sandbox, SandboxLimits, SandboxResult, run_subdir, write_run_file

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


class Figure(BaseModel):
    """How to read a benchmark's figure from its stdout."""

    model_config = {"extra": "forbid"}

    regex: str | None = None
    json_field: str | None = Field(default=None, alias="json")
    name: str = "figure"
    better: Literal["lower", "higher"] = "lower"
    unit: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> Figure:
        if self.regex is not None and self.json_field is not None:
            raise ValueError("give either a regex or a json field for the figure, not both")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"figure regex {self.regex!r} does not compile: {exc}") from None
        if not _NAME_RE.match(self.name):
            raise ValueError(f"figure name {self.name!r} must be letters, digits, '.', '_' or '-'")
        return self

    @property
    def from_wall_time(self) -> bool:
        return self.regex is None and self.json_field is None

    def describe(self) -> str:
        if self.regex is not None:
            return f"regex {self.regex!r} on stdout"
        if self.json_field is not None:
            return f"JSON field {self.json_field!r} of stdout"
        return "wall-clock time of the command"


class FigureMissing(InputError):
    """The program ran but its output does not hold the figure."""


def read_figure(figure: Figure, stdout: str) -> float:
    """The figure in ``stdout`` as a finite float, or :class:`FigureMissing` saying why."""
    if figure.regex is not None:
        matches = list(re.finditer(figure.regex, stdout, flags=re.MULTILINE))
        if not matches:
            raise FigureMissing(f"the figure regex {figure.regex!r} matches nothing in the output")
        m = matches[-1]
        text = m.group("value") if "value" in m.re.groupindex else (m.group(1) if m.re.groups else m.group(0))
        found = re.search(_NUMBER, text or "")
        if not found:
            raise FigureMissing(f"the figure regex matched {text!r}, which is not a number")
        value = float(found.group(0))
    else:
        doc = _last_json(stdout)
        value = _dig(doc, str(figure.json_field))
    if not math.isfinite(value):
        raise FigureMissing(f"the figure is {value}, not a finite number")
    return value


def _last_json(stdout: str) -> Any:
    text = stdout.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):  # a program that logs, then prints one JSON line
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise FigureMissing("the output holds no JSON document")


def _dig(doc: Any, path: str) -> float:
    cur = doc
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise FigureMissing(f"the JSON output has no field {path!r} (stopped at {part!r})")
    if isinstance(cur, bool) or not isinstance(cur, (int, float, str)):
        raise FigureMissing(f"JSON field {path!r} is {type(cur).__name__}, not a number")
    try:
        return float(cur)
    except ValueError:
        raise FigureMissing(f"JSON field {path!r} is {cur!r}, not a number") from None


class Benchmark(BaseModel):
    """One command to measure."""

    model_config = {"extra": "forbid"}

    name: str = "bench"
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    figure: Figure = Field(default_factory=Figure)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(f"benchmark name {v!r} must be letters, digits, '.', '_' or '-' (at most 64)")
        return v

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = shlex.split(v)
        if not isinstance(v, list) or not v or not all(isinstance(a, (str, int, float)) for a in v):
            raise ValueError("command must be a non-empty list of arguments (or one string, split like a shell)")
        return [str(a) for a in v]

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): str(x) for k, x in v.items()}
        return v


class Variant(BaseModel):
    """A configuration to compare: replaces the command and/or adds environment and arguments."""

    model_config = {"extra": "forbid"}

    command: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    args: list[str] = Field(default_factory=list)

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else v

    @field_validator("command", "args", mode="before")
    @classmethod
    def _argv(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = shlex.split(v)
        return [str(a) for a in v] if isinstance(v, list) else v


class BenchSpec(BaseModel):
    """A bench spec file: benchmarks, repeats, and optionally variants to compare in one go."""

    model_config = {"extra": "forbid"}

    benchmarks: list[Benchmark] = Field(min_length=1)
    repeats: int = Field(default=5, ge=1, le=1000)
    warmup: int = Field(default=1, ge=0, le=100)
    timeout_s: float = Field(default=120.0, gt=0, le=86400)
    inputs: list[str] = Field(default_factory=list)
    #: name -> variant; the first is the baseline the others are compared with
    variants: dict[str, Variant] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique(self) -> BenchSpec:
        names = [b.name for b in self.benchmarks]
        if len(set(names)) != len(names):
            raise ValueError(f"benchmark names must be unique, got {names}")
        for v in self.variants:
            if not _NAME_RE.match(v):
                raise ValueError(f"variant name {v!r} must be letters, digits, '.', '_' or '-'")
        return self


def load_bench_spec(path: str | Path) -> BenchSpec:
    # a regular file of spec size, and YAML within limits (an alias bomb expands in validation)
    return parse_bench_spec(load_yaml_file(path, "bench spec"), str(path))


def parse_bench_spec(doc: Any, where: str = "bench spec") -> BenchSpec:
    return parse_spec_mapping(doc, BenchSpec, where, "a `benchmarks` list")


_Spec = TypeVar("_Spec", bound=BaseModel)


def parse_spec_mapping(doc: Any, model: type[_Spec], where: str, holding: str) -> _Spec:
    """``doc`` (a loaded bench or tune spec) as ``model``; InputError naming ``where`` and the
    first problem's key otherwise (``holding`` says what the mapping must have)."""
    if not isinstance(doc, dict):
        raise InputError(f"{where} must be a mapping with {holding}")
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise InputError(f"{where}: {loc + ': ' if loc else ''}{err['msg']}") from None


# ----------------------------------------------------------------------------- running


class Repeat(BaseModel):
    """One run of one command."""

    index: int
    status: str  # ok | figure_missing | the sandbox status (exit_nonzero, timed_out, refused, ...)
    value: float | None = None
    wall_s: float = 0.0
    returncode: int | None = None
    reason: str = ""


#: Said in every samples file (and on stderr by the CLI) of a run made without bubblewrap.
UNCONFINED_NOTE = "ran WITHOUT the bubblewrap confinement (--unconfined): only the argv rules and limits applied"


def make_sandbox(run_dir: Path, commands: list[list[str]], *, inputs: list[str] = (),
                 cwd: Path | None = None, timeout_s: float = 120.0, unconfined: bool = False) -> Sandbox:
    """The sandbox for the user's commands: their executables registered, cwd declared.

    ``unconfined=True`` runs them without bubblewrap where it is missing (the caller says so
    in what it writes: :data:`UNCONFINED_NOTE`)."""
    cwd = (cwd or Path.cwd()).resolve()
    roots = [cwd] if cwd != Path(cwd.anchor) else []  # "/" as an input would allow everything
    box = Sandbox(run_dir, inputs=[*roots, *inputs], cwd=cwd if roots else run_dir,
                  limits=SandboxLimits(timeout_s=timeout_s), unconfined=unconfined)
    for exe in {c[0] for c in commands}:
        try:
            box.register(exe)
        except ToolRefused as exc:
            raise InputError(str(exc)) from exc
    return box


def run_once(box: Sandbox, argv: list[str], env: dict[str, str], figure: Figure, index: int,
             raw_dir: Path | None = None) -> Repeat:
    res: SandboxResult = box.run(argv, env=env)
    rep = Repeat(index=index, status=res.status, wall_s=res.wall_s, returncode=res.returncode, reason=res.reason)
    if raw_dir is not None:
        # the program ran in this folder and may have planted links: never follow them,
        # neither at the files' names nor at the folders above them
        raw_dir = run_subdir(box.run_dir, raw_dir)
        write_run_file(raw_dir / f"{index:03d}.stdout", res.stdout)
        write_run_file(raw_dir / f"{index:03d}.stderr", res.stderr)
    if res.status != "ok":
        rep.reason = res.reason or f"exit code {res.returncode}" + (f" ({res.signal})" if res.signal else "")
        tail = res.stderr.strip().splitlines()[-1:] if res.stderr.strip() else []
        if tail:
            rep.reason += f"; stderr: {tail[0][:200]}"
        return rep
    if figure.from_wall_time:
        rep.value = res.wall_s
        return rep
    try:
        rep.value = read_figure(figure, res.stdout)
    except FigureMissing as exc:
        rep.status, rep.reason = "figure_missing", str(exc)
    return rep


def task_from_repeats(name: str, bench: Benchmark, argv: list[str], env: dict[str, str],
                      repeats: list[Repeat], identity: dict[str, str] | None = None) -> TaskSamples:
    """A regression-runner task: every good repeat's figure; it 'ran' only if all did."""
    fig = bench.figure.name if not bench.figure.from_wall_time else "wall_s"
    bad = [r for r in repeats if r.status != "ok"]
    ident = {"name": name, "command": shlex.join(argv), "env": json.dumps(env, sort_keys=True),
             "figure": bench.figure.describe()} | (identity or {})
    task = TaskSamples(key=name, identity=ident, better={fig: bench.figure.better},
                       measured={fig: [r.value for r in repeats if r.status == "ok" and r.value is not None]},
                       ran=not bad, status="ok" if not bad else f"{len(bad)} of {len(repeats)} repeat(s) failed")
    if bad:
        task.error = f"repeat {bad[0].index}: {bad[0].status}: {bad[0].reason}"[:500]
    return task


def _variant_of(bench: Benchmark, variant: Variant | None) -> tuple[list[str], dict[str, str]]:
    if variant is None:
        return list(bench.command), dict(bench.env)
    argv = list(variant.command or bench.command) + list(variant.args)
    return argv, {**bench.env, **variant.env}


def run_bench(spec: BenchSpec, out: str | Path, *, cwd: Path | None = None,
              progress: Any = None, unconfined: bool = False) -> dict[str, RunSamples]:
    """Run every benchmark (x every variant) ``repeats`` times, interleaved; write samples.

    Returns variant name -> its samples (``""`` when the spec has no variants). Each
    variant's ``samples.json`` is ``OUT/samples.json`` (no variants) or
    ``OUT/<variant>/samples.json``.
    """
    out = Path(out).resolve()
    check_output_dir(out, "bench.spec.json", "bench")
    out.mkdir(parents=True, exist_ok=True)
    variants: list[tuple[str, Variant | None]] = list(spec.variants.items()) or [("", None)]
    jobs = [(vname, b, *_variant_of(b, v)) for vname, v in variants for b in spec.benchmarks]
    box = make_sandbox(out, [argv for _, _, argv, _ in jobs], inputs=spec.inputs, cwd=cwd,
                       timeout_s=spec.timeout_s, unconfined=unconfined)
    (out / "bench.spec.json").write_text(spec.model_dump_json(indent=1, by_alias=True), encoding="utf-8")
    results: dict[tuple[str, str], list[Repeat]] = {(v, b.name): [] for v, b, _, _ in jobs}
    for w in range(spec.warmup):  # untimed: first-run costs (page cache, JIT, CPU clocks)
        for vname, b, argv, env in jobs:
            run_once(box, argv, env, b.figure, -1 - w)
    for i in range(spec.repeats):
        for vname, b, argv, env in jobs:  # interleaved: A B A B ...
            rep = run_once(box, argv, env, b.figure, i, out / "raw" / (vname or ".") / b.name)
            results[(vname, b.name)].append(rep)
            if progress is not None:
                progress(vname, b.name, rep)
    runs: dict[str, RunSamples] = {}
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for vname, _ in variants:
        run = RunSamples(kind="bench", source=str(out / vname) if vname else str(out), created_at=stamp,
                         run_id=out.name + (f"/{vname}" if vname else ""),
                         notes=[UNCONFINED_NOTE] if unconfined else [])
        for v, b, argv, env in jobs:
            if v == vname:
                run.tasks.append(task_from_repeats(b.name, b, argv, env, results[(v, b.name)],
                                                   {"variant": vname} if vname else None))
        write_samples(run, (run_subdir(out, vname) if vname else out) / SAMPLES_NAME)
        runs[vname] = run
    repeats_doc = {f"{v}/{n}" if v else n: [r.model_dump() for r in reps] for (v, n), reps in results.items()}
    write_run_file(out / "repeats.json", json.dumps(repeats_doc, indent=1))  # the program may have planted a link
    return runs
