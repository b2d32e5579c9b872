"""Evidence-guided tuning: Optuna over a declared space, every trial measured in the sandbox.

A tune spec names a benchmark command (as for ``perfscout bench``), its figure, and a
search space of parameters. A parameter is either an environment variable of the command
(``env: true``, or ``env: NAME``), or a ``{name}`` placeholder in its arguments, so the
same spec tunes ``OMP_NUM_THREADS`` of a program, a program's flags, or a codec's options
through ``perfscout eval --option KEY={value} --json``. Types: ``int`` (low, high, step,
log), ``float`` (low, high, log) and ``categorical`` (choices).

Findings narrow the space, explicitly: ``narrow: {FINDING_ID: {PARAM: {low/high/choices}}}``
applies only when that finding is given (``--finding ID``, or a ``diagnose --json``
document whose findings are read with their evidence and expected gain). The agent
proposes, the tuner measures.

The flow, all of it recorded in the run directory:

1. the baseline configuration is measured (``repeats`` runs);
2. ``trials`` Optuna trials (TPE with a seed, or a grid when the space is small and
   discrete), each ``repeats`` runs whose median is the trial's value;
3. the best trial is **re-measured against the baseline**, interleaved, with
   ``confirm_repeats`` runs each, and judged by the regression runner: its verdict and CI,
   not the search's optimistic minimum, is what the report states;
4. every tried configuration becomes an :class:`ExperimentCard` (``cards.json``, rendered
   in ``report.md``/``report.html``); a card whose measured gain missed its prediction says so.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from perfscout.analysis import regression as R
from perfscout.errors import InputError
from perfscout.tools import bench as B
from perfscout.io import check_output_dir, load_yaml_file
from perfscout.tools.regress import (SAMPLES_NAME, RegressionResult, RunSamples, compare_runs,
                                     regression_blocks, write_samples)
from perfscout.tools.sandbox import run_subdir, write_run_file

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TASK = "tune"


class Param(BaseModel):
    """One dimension of the search space."""

    model_config = {"extra": "forbid"}

    type: Literal["int", "float", "categorical"]
    low: float | None = None
    high: float | None = None
    step: int | None = Field(default=None, ge=1)
    log: bool = False
    choices: list[str | int | float | bool] | None = None
    env: bool | str = False  # True: an environment variable of the parameter's name

    @model_validator(mode="after")
    def _shape(self) -> Param:
        if self.type == "categorical":
            if not self.choices:
                raise ValueError("a categorical parameter needs a non-empty `choices` list")
            if self.low is not None or self.high is not None:
                raise ValueError("a categorical parameter takes `choices`, not low/high")
        else:
            if self.low is None or self.high is None:
                raise ValueError(f"an {self.type} parameter needs `low` and `high`")
            if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low > self.high:
                raise ValueError(f"low {self.low} must be <= high {self.high} (finite)")
            if self.log and self.low <= 0:
                raise ValueError("a log-scaled parameter needs low > 0")
            if self.type == "int" and (self.low != int(self.low) or self.high != int(self.high)):
                raise ValueError("an int parameter needs integer low and high")
            if self.choices is not None:
                raise ValueError(f"an {self.type} parameter takes low/high, not choices")
        if isinstance(self.env, str) and not _ENV_NAME.match(self.env):
            raise ValueError(f"env name {self.env!r} is not a valid environment variable name")
        return self

    def contains(self, value: Any) -> bool:
        if self.type == "categorical":
            return value in (self.choices or [])
        try:
            v = float(value)
        except (TypeError, ValueError):
            return False
        return self.low <= v <= self.high and (self.type != "int" or v == int(v))  # type: ignore[operator]

    def grid(self) -> list[Any] | None:
        """Every value, for a discrete parameter (None for a float range)."""
        if self.type == "categorical":
            return list(self.choices or [])
        if self.type == "int":
            return list(range(int(self.low), int(self.high) + 1, self.step or 1))  # type: ignore[arg-type]
        return None


class Narrowing(BaseModel):
    """A finding's narrower range for one parameter."""

    model_config = {"extra": "forbid"}

    low: float | None = None
    high: float | None = None
    choices: list[str | int | float | bool] | None = None


class TuneSpec(BaseModel):
    model_config = {"extra": "forbid"}

    name: str = "tune"
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    figure: B.Figure = Field(default_factory=B.Figure)
    space: dict[str, Param] = Field(min_length=1)
    baseline: dict[str, str | int | float | bool] = Field(default_factory=dict)
    narrow: dict[str, dict[str, Narrowing]] = Field(default_factory=dict)
    trials: int = Field(default=10, ge=1, le=1000)
    repeats: int = Field(default=5, ge=1, le=1000)
    confirm_repeats: int = Field(default=10, ge=2, le=1000)
    warmup: int = Field(default=0, ge=0, le=100)
    timeout_s: float = Field(default=120.0, gt=0, le=86400)
    sampler: Literal["auto", "tpe", "random", "grid"] = "auto"
    seed: int = 0
    threshold: float = Field(default=0.05, ge=0, lt=1)
    inputs: list[str] = Field(default_factory=list)

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, v: Any) -> Any:
        return B.Benchmark._argv(v)

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _consistent(self) -> TuneSpec:
        used = {m for a in self.command for m in _PLACEHOLDER.findall(a)}
        for name, p in self.space.items():
            if not p.env and name not in used:
                raise ValueError(f"parameter {name!r} is neither an environment variable (env: true) "
                                 f"nor a {{{name}}} placeholder in the command")
            if p.env is True and not _ENV_NAME.match(name):
                raise ValueError(f"parameter {name!r} cannot be an environment variable name")
        unknown = used - set(self.space)
        if unknown:
            raise ValueError(f"the command has placeholder(s) {', '.join(sorted(unknown))} with no parameter")
        for name, value in self.baseline.items():
            if name not in self.space:
                raise ValueError(f"baseline names {name!r}, which is not a parameter of the space")
        missing = sorted(n for n in used if n not in self.baseline)
        if missing:
            raise ValueError(f"the baseline needs a value for the placeholder parameter(s) {', '.join(missing)}")
        for fid, rules in self.narrow.items():
            for pname in rules:
                if pname not in self.space:
                    raise ValueError(f"narrow.{fid} names {pname!r}, which is not a parameter of the space")
        return self


def load_tune_spec(path: str | Path) -> TuneSpec:
    # a regular file of spec size, and YAML within limits (an alias bomb expands in validation)
    return parse_tune_spec(load_yaml_file(path, "tune spec"), str(path))


def parse_tune_spec(doc: Any, where: str = "tune spec") -> TuneSpec:
    return B.parse_spec_mapping(doc, TuneSpec, where, "command, figure and space")


# ----------------------------------------------------------------------------- findings


class FindingRef(BaseModel):
    """A diagnosis finding as evidence for a card (from `diagnose --json` or just an id)."""

    id: str
    title: str = ""
    expected_gain: float | None = None
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    where: str = ""  # the kernel or program it was found on


def findings_from_diagnosis(doc: Any) -> list[FindingRef]:
    """Every finding of a ``perfscout diagnose --json`` document (kernels and programs)."""
    if not isinstance(doc, dict):
        raise InputError("a diagnosis document must be the JSON object `perfscout diagnose --json` prints")
    out: list[FindingRef] = []
    for item in (doc.get("kernels") or []) + (doc.get("programs") or []):
        for f in (item.get("findings") or []) if isinstance(item, dict) else []:
            if isinstance(f, dict) and f.get("id"):
                gain = f.get("expected_gain")
                out.append(FindingRef(id=str(f["id"]), title=str(f.get("title", "")),
                                      expected_gain=float(gain) if isinstance(gain, (int, float)) else None,
                                      evidence=[e for e in f.get("evidence") or [] if isinstance(e, dict)][:8],
                                      where=str(item.get("name", ""))))
    return out


def narrowed_space(spec: TuneSpec, findings: list[FindingRef]) -> tuple[dict[str, Param], list[str]]:
    """The space after the narrowings of the given findings, and what each one did."""
    space = {k: p.model_copy(deep=True) for k, p in spec.space.items()}
    notes: list[str] = []
    for fid in dict.fromkeys(f.id for f in findings):
        rules = spec.narrow.get(fid)
        if not rules:
            notes.append(f"finding {fid}: the spec has no narrowing for it; the space is unchanged")
            continue
        for pname, rule in rules.items():
            p = space[pname]
            before = _describe(p)
            if p.type == "categorical":
                if rule.choices is None:
                    raise InputError(f"narrow.{fid}.{pname}: a categorical parameter is narrowed by `choices`")
                p.choices = [c for c in p.choices or [] if c in rule.choices]
            else:
                if rule.choices is not None:
                    raise InputError(f"narrow.{fid}.{pname}: a numeric parameter is narrowed by low/high")
                p.low = max(p.low, rule.low) if rule.low is not None else p.low  # type: ignore[type-var]
                p.high = min(p.high, rule.high) if rule.high is not None else p.high  # type: ignore[type-var]
            if (p.type == "categorical" and not p.choices) or (p.type != "categorical" and p.low > p.high):  # type: ignore[operator]
                raise InputError(f"finding {fid} narrows {pname} to nothing ({before} and {rule.model_dump(exclude_none=True)})")
            notes.append(f"finding {fid}: {pname} narrowed from {before} to {_describe(p)}")
    return space, notes


def _describe(p: Param) -> str:
    if p.type == "categorical":
        return "{" + ", ".join(map(str, p.choices or [])) + "}"
    fmt = (lambda v: str(int(v))) if p.type == "int" else (lambda v: f"{v:g}")
    return f"[{fmt(p.low)}, {fmt(p.high)}]"


# ----------------------------------------------------------------------------- cards


class ExperimentCard(BaseModel):
    """One tried suggestion: what was wrong, what was tried, what it measured, what to avoid."""

    id: str
    stage: Literal["search", "confirmed"]
    problem: str
    evidence: dict[str, Any] = Field(default_factory=dict)  # findings + baseline metrics
    proposal: dict[str, Any] = Field(default_factory=dict)
    proposal_text: str = ""
    predicted_gain: float | None = None  # fraction better (time saved for a lower-is-better figure)
    prediction_source: str = ""
    measured_gain: float | None = None
    measured_ci: list[float] | None = None  # CI of the measured gain
    n_baseline: int = 0
    n_candidate: int = 0
    verdict: R.Verdict = "too_noisy"
    verdict_reason: str = ""
    prediction_met: bool | None = None
    prediction_note: str = ""
    what_not_to_do: list[str] = Field(default_factory=list)


def _gain(m: R.MetricComparison) -> tuple[float | None, list[float] | None]:
    if m.change is None:
        return None, None
    s = -1.0 if m.better == "lower" else 1.0
    ci = None if m.ci_low is None else sorted([s * m.ci_low, s * m.ci_high])  # type: ignore[operator]
    return s * m.change, ci


#: A prediction is met when the measured gain (or the top of its CI) reaches at least this
#: fraction of it: a re-measurement of the same setting lands a little lower or higher.
PREDICTION_REACHED = 0.9


def judge_prediction(predicted: float | None, measured: float | None, ci: list[float] | None) -> tuple[bool | None, str]:
    """Met when the measured gain (or its CI) reaches the predicted gain; missed otherwise."""
    if predicted is None:
        return None, "no gain was predicted for this suggestion"
    if measured is None:
        return False, f"predicted {predicted:+.1%}, but nothing could be measured"
    hi = max(ci[1], measured) if ci else measured
    need = predicted - (1 - PREDICTION_REACHED) * abs(predicted)
    if hi >= need:
        return True, f"predicted {predicted:+.1%}, measured {measured:+.1%}" + (
            f" (CI {ci[0]:+.1%} .. {ci[1]:+.1%})" if ci else "") + ": the prediction held"
    return False, (f"MISSED: predicted {predicted:+.1%}, measured only {measured:+.1%}"
                   + (f" (CI {ci[0]:+.1%} .. {ci[1]:+.1%})" if ci else "") + ": the prediction did not hold")


# ----------------------------------------------------------------------------- running


class TrialRecord(BaseModel):
    number: int
    params: dict[str, Any]
    value: float | None = None  # median figure
    status: str = "ok"
    samples: list[float] = Field(default_factory=list)
    error: str = ""


class TuneOutcome(BaseModel):
    name: str
    run_dir: str
    figure: str
    better: Literal["lower", "higher"]
    unit: str = ""
    baseline_params: dict[str, Any]
    baseline_value: float | None = None
    best_params: dict[str, Any] | None = None
    best_search_value: float | None = None
    space: dict[str, str] = Field(default_factory=dict)
    narrowing: list[str] = Field(default_factory=list)
    trials: list[TrialRecord] = Field(default_factory=list)
    confirmation: RegressionResult | None = None
    verdict: R.Verdict = "too_noisy"
    measured_gain: float | None = None
    measured_ci: list[float] | None = None
    cards: list[ExperimentCard] = Field(default_factory=list)
    sentence: str = ""
    report_md: str = ""
    report_html: str = ""


def _render(template: list[str], params: dict[str, Any]) -> list[str]:
    return [_PLACEHOLDER.sub(lambda m: _text(params[m.group(1)]), a) for a in template]


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v)  # exact: the value the trial ran is the value the card reports
    return str(v)


def configure(spec: TuneSpec, params: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of one configuration."""
    env = dict(spec.env)
    for name, p in spec.space.items():
        if p.env and name in params:
            env[p.env if isinstance(p.env, str) else name] = _text(params[name])
    return _render(spec.command, params), env


def _measure(box: Any, spec: TuneSpec, params: dict[str, Any], n: int, raw: Path) -> list[B.Repeat]:
    argv, env = configure(spec, params)
    for w in range(spec.warmup):
        B.run_once(box, argv, env, spec.figure, -1 - w)
    return [B.run_once(box, argv, env, spec.figure, i, raw) for i in range(n)]


def _median(reps: list[B.Repeat]) -> float | None:
    vals = sorted(r.value for r in reps if r.status == "ok" and r.value is not None)
    if len(vals) != len(reps) or not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else 0.5 * (vals[mid - 1] + vals[mid])


def _samples(spec: TuneSpec, label: str, params: dict[str, Any], reps: list[B.Repeat], run_dir: Path) -> RunSamples:
    argv, env = configure(spec, params)
    bench = B.Benchmark(name=TASK, command=spec.command, figure=spec.figure)
    task = B.task_from_repeats(TASK, bench, argv, env, reps, {"config": label})
    return RunSamples(kind="tune", source=str(run_dir / label), run_id=f"{run_dir.name}/{label}", tasks=[task])


def _sampler(spec: TuneSpec, space: dict[str, Param]):  # -> optuna.samplers.BaseSampler
    import optuna

    grids = {k: p.grid() for k, p in space.items()}
    discrete = all(g is not None for g in grids.values())
    size = math.prod(len(g) for g in grids.values() if g is not None) if discrete else math.inf
    kind = spec.sampler
    if kind == "auto":
        kind = "grid" if discrete and size <= spec.trials else "tpe"
    if kind == "grid":
        if not discrete:
            raise InputError("the grid sampler needs every parameter discrete (int or categorical)")
        return optuna.samplers.GridSampler(grids, seed=spec.seed), kind  # type: ignore[arg-type]
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=spec.seed), kind
    return optuna.samplers.TPESampler(seed=spec.seed), kind


def _suggest(trial: Any, name: str, p: Param) -> Any:
    if p.type == "categorical":
        return trial.suggest_categorical(name, p.choices)
    if p.type == "int":
        return trial.suggest_int(name, int(p.low), int(p.high), step=p.step or 1, log=p.log)  # type: ignore[arg-type]
    return trial.suggest_float(name, float(p.low), float(p.high), log=p.log)  # type: ignore[arg-type]


def _programs(spec: TuneSpec, space: dict[str, Param]) -> list[str]:
    """Every program a trial may start (each is registered with the sandbox up front).

    The program itself may be a parameter (``{build}/app`` over two builds) only through a
    categorical one: a numeric range of programs is not a thing one runs.
    """
    names = _PLACEHOLDER.findall(spec.command[0])
    combos: list[dict[str, Any]] = [dict(spec.baseline)]
    for name in dict.fromkeys(names):
        p = space[name]
        if p.type != "categorical":
            raise InputError(f"the program {spec.command[0]!r} depends on {name!r}, which is not categorical")
        combos = [{**c, name: v} for c in combos for v in p.choices or []]
    return sorted({_render([spec.command[0]], c)[0] for c in combos})


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_text(v)}" for k, v in params.items())


def run_tune(spec: TuneSpec, out: str | Path, *, findings: list[FindingRef] = (), cwd: Path | None = None,
             progress: Any = None, unconfined: bool = False) -> TuneOutcome:
    """Tune ``spec`` (see the module docstring); everything lands in ``out``."""
    import optuna

    out = Path(out).resolve()
    check_output_dir(out, "tune.spec.json", "tune")
    out.mkdir(parents=True, exist_ok=True)
    findings = list(findings)
    space, narrowing = narrowed_space(spec, findings)
    baseline_params = dict(spec.baseline)
    (out / "tune.spec.json").write_text(spec.model_dump_json(indent=1, by_alias=True), encoding="utf-8")
    box = B.make_sandbox(out, [[exe] for exe in _programs(spec, space)], inputs=spec.inputs, cwd=cwd,
                         timeout_s=spec.timeout_s, unconfined=unconfined)
    if unconfined:
        narrowing = [B.UNCONFINED_NOTE, *narrowing]
    fig = spec.figure
    metric = fig.name if not fig.from_wall_time else "wall_s"

    def say(msg: str) -> None:
        if progress is not None:
            progress(msg)

    # 1. the baseline
    base_reps = _measure(box, spec, baseline_params, spec.repeats, out / "raw" / "baseline")
    base_value = _median(base_reps)
    if base_value is None:
        bad = next(r for r in base_reps if r.status != "ok")
        raise InputError(f"the baseline configuration ({_params_text(baseline_params) or 'as given'}) does not "
                         f"run cleanly: repeat {bad.index}: {bad.status}: {bad.reason}")
    base_samples = _samples(spec, "baseline", baseline_params, base_reps, out)
    say(f"baseline {_params_text(baseline_params) or '(as given)'}: {metric} {base_value:.6g}")

    # 2. the search
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler, sampler_kind = _sampler(spec, space)
    study = optuna.create_study(direction="minimize" if fig.better == "lower" else "maximize", sampler=sampler)
    trials: list[TrialRecord] = []
    seen: dict[str, TrialRecord] = {}
    trial_samples: dict[int, RunSamples] = {}

    def objective(trial: Any) -> float:
        params = {**baseline_params, **{k: _suggest(trial, k, p) for k, p in space.items()}}
        key = json.dumps(params, sort_keys=True, default=str)
        if key in seen:  # a sampler may propose a configuration again: do not pay twice
            return seen[key].value if seen[key].value is not None else math.nan
        reps = _measure(box, spec, params, spec.repeats, out / "raw" / f"trial-{trial.number:03d}")
        value = _median(reps)
        rec = TrialRecord(number=trial.number, params=params, value=value,
                          samples=[r.value for r in reps if r.value is not None])
        if value is None:
            bad = next(r for r in reps if r.status != "ok")
            rec.status, rec.error = bad.status, bad.reason[:300]
        else:
            trial_samples[trial.number] = _samples(spec, f"trial-{trial.number:03d}", params, reps, out)
        trials.append(rec)
        seen[key] = rec
        say(f"trial {trial.number}: {_params_text(params)} -> "
            + (f"{metric} {value:.6g}" if value is not None else f"failed ({rec.status})"))
        return value if value is not None else math.nan  # NaN: Optuna records the trial as failed

    # the grid sampler stops the study itself once every point is measured
    study.optimize(objective, n_trials=spec.trials, catch=())
    good = [t for t in trials if t.value is not None]
    outcome = TuneOutcome(name=spec.name, run_dir=str(out), figure=metric, better=fig.better, unit=fig.unit,
                          baseline_params=baseline_params, baseline_value=base_value,
                          space={k: _describe(p) for k, p in space.items()}, narrowing=narrowing, trials=trials)
    evidence = _evidence(findings, metric, base_value, base_samples, fig)
    problem = (f"{metric} of `{' '.join(configure(spec, baseline_params)[0])}` is {base_value:.6g}{fig.unit and ' ' + fig.unit}"
               f" at the baseline ({_params_text(baseline_params) or 'as given'}); "
               f"{'lower' if fig.better == 'lower' else 'higher'} is better")
    finding_gain = max((f.expected_gain for f in findings if f.expected_gain is not None and f.id in spec.narrow),
                       default=None)

    # cards for every tried configuration, judged against the baseline's repeats
    regressed_trials: list[str] = []
    for t in trials:
        card = ExperimentCard(id=f"trial-{t.number:03d}", stage="search", problem=problem, evidence=evidence,
                              proposal=t.params, proposal_text=f"set {_params_text(t.params)}",
                              predicted_gain=finding_gain,
                              prediction_source="the narrowing finding's expected gain" if finding_gain is not None else "")
        if t.value is None:
            card.verdict, card.verdict_reason = "regressed", f"the configuration failed: {t.status}: {t.error}"
            card.what_not_to_do.append(f"do not use {_params_text(t.params)}: it failed ({t.status})")
            regressed_trials.append(card.what_not_to_do[-1])
        else:
            cmp_ = compare_runs(base_samples, trial_samples[t.number], threshold=spec.threshold)
            m = next((x for x in cmp_.tasks[0].metrics if x.metric == metric), None) if cmp_.tasks else None
            _fill(card, cmp_, m)
            if card.verdict == "regressed":
                card.what_not_to_do.append(f"do not use {_params_text(t.params)}: {metric} "
                                           f"worse by {-(card.measured_gain or 0):.1%} against the baseline")
                regressed_trials.append(card.what_not_to_do[-1])
            elif card.verdict == "too_noisy":
                card.what_not_to_do.append("do not act on this trial alone: its repeats are too noisy to tell")
        card.prediction_met, card.prediction_note = judge_prediction(card.predicted_gain, card.measured_gain,
                                                                     card.measured_ci)
        outcome.cards.append(card)

    # 3. re-measure the best against the baseline, interleaved, and judge it
    if good:
        best = min(good, key=lambda t: t.value) if fig.better == "lower" else max(good, key=lambda t: t.value)  # type: ignore[arg-type,return-value]
        outcome.best_params, outcome.best_search_value = best.params, best.value
        search_gain = (base_value - best.value) / base_value if fig.better == "lower" else (best.value - base_value) / base_value  # type: ignore[operator]
        if best.params == baseline_params:
            outcome.sentence = (f"the baseline ({_params_text(baseline_params)}) was the best configuration "
                                f"measured in {len(trials)} trial(s); nothing to change")
            outcome.verdict = "unchanged"
        else:
            say(f"confirming {_params_text(best.params)} against the baseline ({spec.confirm_repeats} repeats each, interleaved)")
            b_reps: list[B.Repeat] = []
            c_reps: list[B.Repeat] = []
            b_argv, b_env = configure(spec, baseline_params)
            c_argv, c_env = configure(spec, best.params)
            for i in range(spec.confirm_repeats):
                b_reps.append(B.run_once(box, b_argv, b_env, fig, i, out / "raw" / "confirm-baseline"))
                c_reps.append(B.run_once(box, c_argv, c_env, fig, i, out / "raw" / "confirm-best"))
            cb = _samples(spec, "confirm-baseline", baseline_params, b_reps, out)
            cc = _samples(spec, "confirm-best", best.params, c_reps, out)
            write_samples(cb, run_subdir(out, "confirm-baseline") / SAMPLES_NAME)
            write_samples(cc, run_subdir(out, "confirm-best") / SAMPLES_NAME)
            conf = compare_runs(cb, cc, threshold=spec.threshold)
            outcome.confirmation = conf
            m = next((x for x in conf.tasks[0].metrics if x.metric == metric), None) if conf.tasks else None
            # the finding's expected gain is the prediction being tested, when a finding led here;
            # otherwise the search's own measurement of this trial is
            predicted, source = ((finding_gain, "the narrowing finding's expected gain") if finding_gain is not None
                                 else (search_gain, f"trial {best.number} of the search ({spec.repeats} repeats)"))
            card = ExperimentCard(id="best", stage="confirmed", problem=problem,
                                  evidence={**evidence, "metrics": {**evidence["metrics"], "search_gain": search_gain,
                                                                    "search_trial": best.number}},
                                  proposal=best.params, proposal_text=f"set {_params_text(best.params)}",
                                  predicted_gain=predicted, prediction_source=source)
            _fill(card, conf, m)
            card.prediction_met, card.prediction_note = judge_prediction(card.predicted_gain, card.measured_gain,
                                                                         card.measured_ci)
            card.what_not_to_do += regressed_trials[:10]
            if card.verdict != "improved":
                card.what_not_to_do.append(f"do not adopt {_params_text(best.params)} on the search's numbers: "
                                           f"re-measured against the baseline it is {R.VERDICT_TEXT[card.verdict]}")
            outcome.cards.append(card)
            outcome.verdict, outcome.measured_gain, outcome.measured_ci = card.verdict, card.measured_gain, card.measured_ci
            ci = f" (CI {card.measured_ci[0]:+.1%} .. {card.measured_ci[1]:+.1%})" if card.measured_ci else ""
            gain = "?" if card.measured_gain is None else f"{card.measured_gain:+.1%}"
            outcome.sentence = (f"best of {len(trials)} trial(s): {_params_text(best.params)}; re-measured against the "
                                f"baseline ({_params_text(baseline_params) or 'as given'}) it is "
                                f"{R.VERDICT_TEXT[card.verdict]}: {metric} gain {gain}{ci}"
                                + ("" if card.prediction_met is not False else f"; {card.prediction_note}"))
    else:
        outcome.verdict = "too_noisy"
        outcome.sentence = f"none of {len(trials)} trial(s) ran cleanly; the baseline stands"
    _write_outputs(outcome, base_samples, out)
    return outcome


def _evidence(findings: list[FindingRef], metric: str, base_value: float, base: RunSamples, fig: B.Figure) -> dict[str, Any]:
    samples = base.tasks[0].measured.get(metric, [])
    spread = (max(samples) - min(samples)) / base_value if samples and base_value else None
    return {"findings": [f.model_dump() for f in findings],
            "metrics": {"figure": metric, "unit": fig.unit, "baseline_median": base_value,
                        "baseline_repeats": len(samples), "baseline_spread": spread, "figure_source": fig.describe()}}


def _fill(card: ExperimentCard, cmp_: RegressionResult, m: R.MetricComparison | None) -> None:
    if m is None:
        card.verdict = cmp_.verdict
        card.verdict_reason = cmp_.tasks[0].metrics[0].reason if cmp_.tasks and cmp_.tasks[0].metrics else cmp_.sentence
        return
    task = cmp_.tasks[0]
    card.verdict = task.verdict
    card.verdict_reason = "; ".join(x.reason for x in task.metrics if x.verdict == task.verdict) or m.reason
    card.measured_gain, card.measured_ci = _gain(m)
    card.n_baseline, card.n_candidate = m.n_baseline, m.n_candidate


def _write_outputs(outcome: TuneOutcome, base: RunSamples, out: Path) -> None:
    from perfscout.analysis.report.blocks import Document
    from perfscout.analysis.report.html import to_html
    from perfscout.analysis.report.markdown import to_markdown

    # The tuned program ran in ``out`` and may have planted links there: every write below
    # goes through the sandbox's no-follow writers (a planted cards.json -> ~/.bashrc was
    # written through before).
    write_samples(base, run_subdir(out, "baseline") / SAMPLES_NAME)
    write_run_file(out / "trials.json", json.dumps([t.model_dump() for t in outcome.trials], indent=1))
    write_run_file(out / "cards.json", json.dumps([c.model_dump() for c in outcome.cards], indent=1))
    doc = Document(f"perfscout tune: {outcome.name}", tune_blocks(outcome))
    outcome.report_md, outcome.report_html = str(out / "report.md"), str(out / "report.html")
    write_run_file(out / "report.md", to_markdown(doc, out))
    write_run_file(out / "report.html", to_html(doc))
    write_run_file(out / "tune.json", outcome.model_dump_json(indent=1))


def card_blocks(card: ExperimentCard, level: int = 3) -> list[Any]:
    """One experiment card as report blocks."""
    from perfscout.analysis.report.blocks import BulletList, Heading, markup

    ci = f" (CI {card.measured_ci[0]:+.1%} .. {card.measured_ci[1]:+.1%})" if card.measured_ci else ""
    findings = card.evidence.get("findings") or []
    metrics = card.evidence.get("metrics") or {}
    items = [
        f"**problem**: {card.problem}",
        "**evidence**: " + ("; ".join(f"finding `{f['id']}`" + (f" ({f['title']})" if f.get("title") else "")
                                      + (f" on {f['where']}" if f.get("where") else "") for f in findings)
                            or "no finding given")
        + f"; baseline {metrics.get('figure')} median {metrics.get('baseline_median'):.6g} over "
          f"{metrics.get('baseline_repeats')} repeat(s)"
        + (f", spread {metrics['baseline_spread']:.0%}" if metrics.get("baseline_spread") is not None else ""),
        f"**proposal**: {card.proposal_text}",
        "**predicted gain**: " + ("none" if card.predicted_gain is None else
                                  f"{card.predicted_gain:+.1%} ({card.prediction_source})"),
        "**measured gain**: " + ("not measured" if card.measured_gain is None else f"{card.measured_gain:+.1%}{ci}")
        + f", {card.n_baseline} vs {card.n_candidate} repeats",
        f"**verdict**: {R.VERDICT_TEXT[card.verdict]}: {card.verdict_reason}",
    ]
    if card.prediction_met is not None:
        items.append(f"**prediction**: {card.prediction_note}")
    items.append("**what not to do**: " + ("; ".join(card.what_not_to_do) or "nothing found to avoid"))
    # the items are the house's `code`/**bold** templates
    return [Heading(f"Card {card.id} ({card.stage})", level), BulletList([markup(i) for i in items])]


def tune_blocks(outcome: TuneOutcome) -> list[Any]:
    import pandas as pd

    from perfscout.analysis.report.blocks import BulletList, Code, Heading, Paragraph, Strong, Table

    blocks: list[Any] = [
        Paragraph([Strong(R.VERDICT_TEXT[outcome.verdict]), f": {outcome.sentence}."]),
        Heading("Search space"),
        BulletList([[Code(k), f": {v}"] for k, v in outcome.space.items()] + outcome.narrowing),
        Heading("Trials"),
        Table(pd.DataFrame([{"trial": t.number, "params": _params_text(t.params),
                             f"median {outcome.figure}": "" if t.value is None else f"{t.value:.6g}",
                             "repeats": len(t.samples), "status": t.status, "error": t.error}
                            for t in outcome.trials]), "no trial ran"),
    ]
    if outcome.confirmation is not None:
        blocks += regression_blocks(outcome.confirmation)
    blocks.append(Heading("Experiment cards"))
    for card in sorted(outcome.cards, key=lambda c: c.stage != "confirmed"):
        blocks += card_blocks(card)
    return blocks


def cards_markdown(cards: list[dict[str, Any]] | list[ExperimentCard], *, level: int = 3) -> str:
    """Experiment cards (as stored in cards.json or a tool artifact) as a Markdown section."""
    from perfscout.analysis.report.markdown import render_blocks

    blocks: list[Any] = []
    for c in cards:
        blocks += card_blocks(c if isinstance(c, ExperimentCard) else ExperimentCard.model_validate(c), level)
    return render_blocks(blocks)


def tune_digest(outcome: TuneOutcome) -> dict[str, Any]:
    """A compact JSON view (the agent tool's artifact, `tune --json`)."""
    doc = outcome.model_dump(mode="json", exclude={"confirmation"})
    if outcome.confirmation is not None:
        doc["confirmation"] = {"verdict": outcome.confirmation.verdict, "sentence": outcome.confirmation.sentence}
    return doc


def default_out(name: str) -> Path:
    from perfscout.home import runs_dir

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:40] or "tune"
    return runs_dir() / f"tune-{safe}-{stamp}"
