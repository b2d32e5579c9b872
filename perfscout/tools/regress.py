"""The regression runner: pair the tasks of two runs and judge every metric of every pair.

Sources it reads (:func:`load_run`), all normalised to :class:`RunSamples`:

- an **agent run directory** (``$PERFSCOUT_HOME/runs/<id>/results/*.json``): every
  ``evaluate_codec`` observation; the timed repeats come from its ``timing.samples_s``
  and every attempt of a task with the same configuration is pooled (a re-run for noise
  adds repeats, a GPU->CPU fallback is a different configuration and starts afresh);
- a **sweep directory** or its ``results.sqlite``: one row per task. The store keeps the
  median of each task's repeats, not the repeats, so its timings count as one sample
  (and are never decided on); its quality columns are compared exactly;
- a **samples file** (``samples.json``, written by ``perfscout bench``, ``perfscout tune``
  and stored baselines);
- a **stored baseline** by name (``$PERFSCOUT_HOME/baselines/NAME.json``, written by
  :func:`save_baseline`: a copy of the normalised samples, so the source run may go).

Tasks are paired by ``task_key``, then, for the ones left, by their identity (dataset,
codec, mode, bound, device, ... or a benchmark's name) when it is unique on both sides,
or by the identity fields the caller names (``match``, e.g. to compare two bounds).
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, Field, ValidationError

from perfscout.analysis import regression as R
from perfscout.analysis.timing import MIN_TIMABLE_S
from perfscout.errors import InputError
from perfscout.io import read_input_text, write_atomic

SAMPLES_NAME = "samples.json"
SAMPLES_FORMAT = "perfscout-samples"
BASELINES_DIR = "baselines"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

#: Statuses of a codec record that mean "it ran as asked" (the bound verdict is separate).
RAN_STATUSES = ("ok", "bound_violated", "bound_overshoot")
#: Identity fields of a codec task (what makes two tasks "the same configuration").
CODEC_IDENTITY = ("dataset", "shape", "dtype", "codec", "mode", "bound", "device")
#: Timed metrics of a codec record; quality metrics compared value against value.
CODEC_MEASURED = ("compress_s", "decompress_s")
CODEC_QUALITY: dict[str, Literal["lower", "higher"]] = {"ratio": "higher", "max_abs_err": "lower"}


class TaskSamples(BaseModel):
    """Everything measured for one task of one run, normalised."""

    key: str
    identity: dict[str, str] = Field(default_factory=dict)
    measured: dict[str, list[float]] = Field(default_factory=dict)  # noisy: every repeat
    values: dict[str, list[float]] = Field(default_factory=dict)  # deterministic: CR, max error
    better: dict[str, Literal["lower", "higher"]] = Field(default_factory=dict)
    ran: bool = True  # it ran and produced its measurements
    status: str = "ok"
    bound_ok: bool | None = None
    error: str = ""
    notes: list[str] = Field(default_factory=list)


class RunSamples(BaseModel):
    """The normalised content of one run (what ``samples.json`` and baselines hold)."""

    format: str = SAMPLES_FORMAT
    version: int = 1
    kind: str = "samples"  # agent | sweep | bench | tune | samples
    source: str = ""
    name: str = ""  # the stored baseline's name, if it is one
    run_id: str = ""
    platform_id: str = ""
    created_at: str = ""
    tasks: list[TaskSamples] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class TaskComparison(BaseModel):
    key: str
    candidate_key: str
    paired_by: str
    identity: dict[str, str] = Field(default_factory=dict)
    identity_changes: dict[str, list[str]] = Field(default_factory=dict)
    verdict: R.Verdict
    metrics: list[R.MetricComparison] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class SourceInfo(BaseModel):
    source: str
    kind: str
    name: str = ""
    run_id: str = ""
    platform_id: str = ""
    tasks: int = 0


class RegressionResult(BaseModel):
    baseline: SourceInfo
    candidate: SourceInfo
    threshold: float
    quality_threshold: float
    alpha: float
    min_repeats: int
    confidence: float
    verdict: R.Verdict
    counts: dict[str, int] = Field(default_factory=dict)
    tasks: list[TaskComparison] = Field(default_factory=list)
    baseline_only: list[str] = Field(default_factory=list)
    candidate_only: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    sentence: str = ""

    @property
    def regressed(self) -> bool:
        return self.verdict == "regressed"


# ----------------------------------------------------------------------------- loading


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None  # NaN -> None


def _codec_task(key: str, record: dict[str, Any]) -> TaskSamples:
    ident = {f: ("" if record.get(f) is None else repr(float(record[f])) if f == "bound" else str(record[f]))
             for f in CODEC_IDENTITY}
    status = str(record.get("status") or "")
    bound_ok = record.get("bound_ok")
    task = TaskSamples(key=key, identity=ident, status=status, ran=status in RAN_STATUSES,
                       bound_ok=None if bound_ok is None or bound_ok is pd.NA else bool(bound_ok),
                       error=str(record.get("error") or "")[:500])
    for name, better in CODEC_QUALITY.items():
        v = _num(record.get(name))
        if v is not None:
            task.values[name], task.better[name] = [v], better
    for name in CODEC_MEASURED:
        task.better[name] = "lower"
    return task


def task_from_evaluation(ev: Any, key: str = "") -> TaskSamples:
    """A task from :func:`perfscout.tools.evaluate.evaluate_full`'s result, every repeat kept."""
    record = ev.result.row()
    task = _codec_task(key or record.get("task_key") or f"{record['codec']}-{record['mode']}-{record['bound']:g}",
                       record)
    for name in CODEC_MEASURED:
        stats = getattr(ev, f"{name.removesuffix('_s')}_timing", None)
        samples = list(stats.samples_s) if stats is not None else (
            [record[name]] if _num(record.get(name)) is not None else [])
        if samples:
            task.measured[name] = [float(s) for s in samples]
        if stats is None and samples:
            task.notes.append(f"{name}: only the median of {record.get('repeats')} repeat(s) (the codec timed itself)")
    return task


def _from_agent(run_dir: Path) -> RunSamples:
    run = RunSamples(kind="agent", source=str(run_dir))
    by_key: dict[str, TaskSamples] = {}
    files = sorted((run_dir / "results").glob("*.json"))
    for path in files:
        try:
            obs = json.loads(read_input_text(path, "observation", max_bytes=None))
        except InputError:
            raise
        except ValueError as exc:
            raise InputError(f"cannot read observation {path}: {exc}") from None
        if not isinstance(obs, dict):
            raise InputError(f"observation {path} is not a JSON object (a damaged agent run directory?)")
        data = obs.get("data")
        if obs.get("tool") != "evaluate_codec" or obs.get("kind") != "result" or not isinstance(data, dict):
            continue
        record = data.get("record") or {}
        key = str(obs.get("task_key") or record.get("task_key") or path.stem)
        run.run_id = run.run_id or str(record.get("run_id") or "")
        run.platform_id = run.platform_id or str(record.get("platform_id") or "")
        fresh = _codec_task(key, record)
        old = by_key.get(key)
        if old is not None and old.identity == fresh.identity:
            fresh.measured = old.measured  # pool the repeats of every attempt of this configuration
            fresh.notes = old.notes + [f"attempt {obs.get('call_id', '')} pooled with the earlier one(s)"]
        elif old is not None:
            fresh.notes.append("the last attempt ran another configuration ("
                               + ", ".join(f"{f} {old.identity.get(f)} -> {v}" for f, v in fresh.identity.items()
                                           if old.identity.get(f) != v) + "); earlier repeats not pooled")
        timing = data.get("timing") or {}
        for name in CODEC_MEASURED:
            stage = timing.get(name.removesuffix("_s")) if isinstance(timing, dict) else None
            samples = [s for s in ((stage or {}).get("samples_s") or []) if _num(s) is not None]
            if not samples and _num(record.get(name)) is not None:
                samples = [float(record[name])]
                note = f"{name}: only the median of {record.get('repeats')} repeat(s) is stored (the codec timed itself)"
                if note not in fresh.notes:
                    fresh.notes.append(note)
            if samples:
                fresh.measured.setdefault(name, []).extend(float(s) for s in samples)
        by_key[key] = fresh
    run.tasks = list(by_key.values())
    if not files:
        run.notes.append(f"{run_dir / 'results'} holds no observation")
    elif not run.tasks:
        run.notes.append("no evaluate_codec result among the run's observations")
    return run


def _from_sweep(store_path: Path) -> RunSamples:
    from perfscout.tools.results_store import open_results

    df = open_results(store_path.parent)
    run = RunSamples(kind="sweep", source=str(store_path.parent))
    run.notes.append("a sweep's store keeps each task's median timing, not its repeats: its timings count "
                     "as one sample each (too few to decide); its quality columns are compared exactly")
    for rec in json.loads(df.to_json(orient="records")) if len(df) else []:
        run.run_id = run.run_id or str(rec.get("run_id") or "")
        run.platform_id = run.platform_id or str(rec.get("platform_id") or "")
        task = _codec_task(str(rec["task_key"]), rec)
        for name in CODEC_MEASURED:
            v = _num(rec.get(name))
            if v is not None:
                task.measured[name] = [v]
        run.tasks.append(task)
    return run


def _from_samples(path: Path) -> RunSamples:
    try:
        doc = json.loads(read_input_text(path, "samples file", max_bytes=None))
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(f"cannot read samples file {path}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != SAMPLES_FORMAT:
        raise InputError(f"{path} is not a perfscout samples file (no \"format\": \"{SAMPLES_FORMAT}\")")
    try:
        return RunSamples.model_validate(doc)
    except ValidationError as exc:
        raise InputError(f"{path} is a malformed samples file: {exc.errors()[0]['msg']} "
                         f"at {'.'.join(str(p) for p in exc.errors()[0]['loc'])}") from None


def baselines_dir() -> Path:
    from perfscout.home import perfscout_home

    return perfscout_home() / BASELINES_DIR


def _baseline_path(name: str) -> Path:
    if not _NAME_RE.match(name):
        raise InputError(f"baseline name {name!r} must be letters, digits, '.', '_' or '-' (at most 100)")
    return baselines_dir() / f"{name}.json"


def is_baseline_name(value: str) -> bool:
    """``value`` names a stored baseline (and is not also a path that exists)."""
    return bool(_NAME_RE.match(value)) and not Path(value).exists() and _baseline_path(value).is_file()


def list_baselines() -> list[str]:
    folder = baselines_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def load_run(source: str | os.PathLike[str]) -> RunSamples:
    """Read a run directory, a results store, a samples file, or a stored baseline by name."""
    text = str(source)
    path = Path(text).expanduser()
    if path.is_dir():
        if (path / SAMPLES_NAME).is_file():
            run = _from_samples(path / SAMPLES_NAME)
        elif (path / "results").is_dir():  # an agent run (it holds a sweep store too, since its
            run = _from_agent(path)         # evaluations are sweep tasks: its answer is read first)
        elif (path / "results.sqlite").is_file():
            run = _from_sweep(path / "results.sqlite")
        else:
            raise InputError(f"{text} is not a run directory: it has no {SAMPLES_NAME} (bench/tune), "
                             "results.sqlite (sweep) or results/ (agent run)")
    elif path.is_file():
        if path.name == "results.sqlite":
            run = _from_sweep(path)
        elif path.suffix == ".json":
            run = _from_samples(path)
        else:
            raise InputError(f"{text}: expected a run directory, a results.sqlite or a samples .json file")
    elif _NAME_RE.match(text) and _baseline_path(text).is_file():
        run = _from_samples(_baseline_path(text))
        run.name = text
    else:
        known = list_baselines()
        raise InputError(f"{text!r} is neither a run directory, a result store nor a stored baseline "
                         f"(stored baselines: {', '.join(known) if known else 'none'}; "
                         "save one with `perfscout regress --save-baseline NAME RUN`)")
    run.source = run.source or str(path)
    return run


def _atomic_write(path: Path, text: str) -> Path:
    return write_atomic(path, text, fsync=True, mkdir=True)


def write_samples(run: RunSamples, path: str | os.PathLike[str]) -> Path:
    """Write ``run`` as a samples file (atomically)."""
    run.created_at = run.created_at or _now()
    return _atomic_write(Path(path), run.model_dump_json(indent=1) + "\n")


def save_baseline(name: str, source: str | os.PathLike[str], *, overwrite: bool = True) -> Path:
    """Store what ``source`` measured under ``name`` (a copy: the run itself may be deleted)."""
    target = _baseline_path(name)
    if target.exists() and not overwrite:
        raise InputError(f"baseline {name!r} exists ({target}); pass overwrite to replace it")
    run = load_run(source)
    if not run.tasks:
        raise InputError(f"{source} holds no task to use as a baseline")
    run.name, run.created_at = name, _now()
    return write_samples(run, target)


# ----------------------------------------------------------------------------- pairing


def _ident(task: TaskSamples, fields: list[str] | None) -> tuple[tuple[str, str], ...]:
    items = task.identity.items() if fields is None else ((f, task.identity.get(f, "")) for f in fields)
    return tuple(sorted(items))


def pair_tasks(base: RunSamples, cand: RunSamples, match: list[str] | None = None
               ) -> tuple[list[tuple[TaskSamples, TaskSamples, str]], list[str], list[str], list[str]]:
    """(pairs with how they were paired, baseline-only keys, candidate-only keys, notes)."""
    notes: list[str] = []
    pairs: list[tuple[TaskSamples, TaskSamples, str]] = []
    left_b, left_c = list(base.tasks), list(cand.tasks)
    if match is None:
        cand_by_key = {t.key: t for t in left_c}
        for t in list(left_b):
            if t.key in cand_by_key:
                c = cand_by_key.pop(t.key)
                pairs.append((t, c, "task_key"))
                left_b.remove(t)
                left_c.remove(c)
    else:
        known = set().union(*(t.identity for t in base.tasks + cand.tasks)) if base.tasks or cand.tasks else set()
        unknown = [f for f in match if f not in known]
        if unknown:
            raise InputError(f"cannot match on {', '.join(unknown)}: the tasks' identity fields are "
                             f"{', '.join(sorted(known)) or 'none'}")
    how = "identity" if match is None else "match:" + ",".join(match)
    groups_b: dict[Any, list[TaskSamples]] = {}
    groups_c: dict[Any, list[TaskSamples]] = {}
    for t in left_b:
        groups_b.setdefault(_ident(t, match), []).append(t)
    for t in left_c:
        groups_c.setdefault(_ident(t, match), []).append(t)
    for ident, bs in groups_b.items():
        cs = groups_c.get(ident, [])
        if len(bs) == 1 and len(cs) == 1:
            pairs.append((bs[0], cs[0], how))
            left_b.remove(bs[0])
            left_c.remove(cs[0])
        elif bs and cs:
            notes.append(f"{len(bs)} baseline and {len(cs)} candidate task(s) share the identity "
                         f"{dict(ident)}: not paired (ambiguous); name the fields to match with `match`")
    return pairs, [t.key for t in left_b], [t.key for t in left_c], notes


# ----------------------------------------------------------------------------- comparing


def compare_tasks(b: TaskSamples, c: TaskSamples, *, threshold: float, quality_threshold: float,
                  alpha: float, min_repeats: int, confidence: float,
                  metrics: list[str] | None = None) -> tuple[R.Verdict, list[R.MetricComparison], list[str]]:
    """Every metric both sides have, plus whether each ran and held its bound."""
    out: list[R.MetricComparison] = []
    notes = [f"baseline: {n}" for n in b.notes] + [f"candidate: {n}" for n in c.notes]
    want = (lambda name: True) if metrics is None else (lambda name: name in metrics)
    # "ran" is good/bad per side, whatever the status words are (codec or command statuses)
    ran = R.compare_category("ran", "yes" if b.ran else "no", "yes" if c.ran else "no", good=["yes"], bad=["no"])
    ran.reason += f" (status {b.status or '?'} -> {c.status or '?'})"
    if not c.ran and c.error:
        ran.reason += f": {c.error[:200]}"
    out.append(ran)
    if b.bound_ok is not None or c.bound_ok is not None:
        out.append(R.compare_category("bound_ok", b.bound_ok, c.bound_ok, good=[True], bad=[False]))
    if b.ran and c.ran:
        for name in [n for n in b.measured if n in c.measured and want(n)]:
            out.append(R.compare_measured(name, b.measured[name], c.measured[name],
                                          better=b.better.get(name, "lower"), threshold=threshold,
                                          alpha=alpha, min_repeats=min_repeats, confidence=confidence,
                                          floor=MIN_TIMABLE_S if name in CODEC_MEASURED else 0.0))
        for name in [n for n in b.values if n in c.values and want(n)]:
            out.append(R.compare_deterministic(name, b.values[name], c.values[name],
                                               better=b.better.get(name, "higher"), threshold=quality_threshold,
                                               alpha=alpha, min_repeats=min_repeats, confidence=confidence))
        if metrics is not None:
            missing = [m for m in metrics if not any(x.metric == m for x in out)]
            if missing:
                notes.append(f"metric(s) {', '.join(missing)} not measured on both sides")
    return R.combine(m.verdict for m in out), out, notes


def compare_runs(baseline: RunSamples | str | os.PathLike[str], candidate: RunSamples | str | os.PathLike[str], *,
                 threshold: float = 0.05, quality_threshold: float = 0.01, alpha: float = R.ALPHA,
                 min_repeats: int = R.MIN_REPEATS, confidence: float = R.CONFIDENCE,
                 match: list[str] | None = None, metrics: list[str] | None = None) -> RegressionResult:
    """Judge ``candidate`` against ``baseline`` (runs, stores, samples files or baseline names)."""
    R.check_threshold(threshold)
    R.check_threshold(quality_threshold)
    if not (0 < alpha < 0.5):
        raise InputError(f"alpha must be in (0, 0.5), got {alpha!r}")
    if isinstance(min_repeats, bool) or not isinstance(min_repeats, int) or min_repeats < 2:
        raise InputError(f"min_repeats must be an integer >= 2, got {min_repeats!r}")
    if not (0.5 <= confidence < 1):
        raise InputError(f"confidence must be in [0.5, 1), got {confidence!r}")
    base = baseline if isinstance(baseline, RunSamples) else load_run(baseline)
    cand = candidate if isinstance(candidate, RunSamples) else load_run(candidate)
    if metrics:
        known = {n for t in base.tasks + cand.tasks for n in [*t.measured, *t.values]}
        unknown = [m for m in metrics if m not in known]
        if unknown:
            raise InputError(f"no task measured {', '.join(unknown)}; the runs have "
                             f"{', '.join(sorted(known)) or 'no metric'}")
    pairs, only_b, only_c, notes = pair_tasks(base, cand, match)
    notes = [f"baseline: {n}" for n in base.notes] + [f"candidate: {n}" for n in cand.notes] + notes
    if base.platform_id and cand.platform_id and base.platform_id != cand.platform_id:
        notes.append(f"the runs were measured on different platforms ({base.platform_id} vs "
                     f"{cand.platform_id}): timing changes include the machine")
    tasks: list[TaskComparison] = []
    for b, c, how in pairs:
        verdict, mets, tnotes = compare_tasks(b, c, threshold=threshold, quality_threshold=quality_threshold,
                                              alpha=alpha, min_repeats=min_repeats, confidence=confidence,
                                              metrics=metrics)
        changes = {f: [b.identity.get(f, ""), v] for f, v in c.identity.items() if b.identity.get(f, "") != v}
        tasks.append(TaskComparison(key=b.key, candidate_key=c.key, paired_by=how, identity=b.identity,
                                    identity_changes=changes, verdict=verdict, metrics=mets, notes=tnotes))
    if not pairs:
        notes.append("no task of the candidate pairs with one of the baseline: nothing was compared")
    summ = R.summarize([t.verdict for t in tasks])
    result = RegressionResult(
        baseline=_info(base), candidate=_info(cand), threshold=threshold, quality_threshold=quality_threshold,
        alpha=alpha, min_repeats=min_repeats, confidence=confidence, verdict=summ.verdict, counts=summ.counts,
        tasks=tasks, baseline_only=only_b, candidate_only=only_c, notes=notes)
    result.sentence = sentence(result)
    return result


def _info(run: RunSamples) -> SourceInfo:
    return SourceInfo(source=run.source, kind=run.kind, name=run.name, run_id=run.run_id,
                      platform_id=run.platform_id, tasks=len(run.tasks))


def _label(info: SourceInfo, side: str = "baseline") -> str:
    return f"baseline {info.name!r}" if info.name else (info.source or f"the {side}")


def _metric_phrase(m: R.MetricComparison) -> str:
    if m.kind == "categorical":
        return f"{m.metric} {m.reason}"
    if m.change is None:
        return f"{m.metric} {m.reason}"
    ci = "" if m.ci_low is None else f" (CI {m.ci_low:+.1%} .. {m.ci_high:+.1%})"
    return f"{m.metric} {m.change:+.1%}{ci}"


def sentence(result: RegressionResult) -> str:
    """The answer in one sentence (what the agent's report and the CLI print first)."""
    n = len(result.tasks)
    head = (f"{_label(result.candidate, 'candidate')} against {_label(result.baseline)} at a {result.threshold:.0%} "
            f"threshold: ")
    if n == 0:
        return head + "no task could be paired, nothing was compared."
    parts = [f"{result.counts.get(v, 0)} {R.VERDICT_TEXT[v]}" for v in ("regressed", "improved", "unchanged",
                                                                         "too_noisy") if result.counts.get(v)]
    text = head + f"{n} task(s) compared: " + ", ".join(parts)
    worst = [t for t in result.tasks if t.verdict == "regressed"][:3]
    if worst:
        text += "; regressed: " + "; ".join(
            f"{t.key} (" + ", ".join(_metric_phrase(m) for m in t.metrics if m.verdict == "regressed") + ")"
            for t in worst)
    better = [t for t in result.tasks if t.verdict == "improved"][:3]
    if better:
        text += "; improved: " + "; ".join(
            f"{t.key} (" + ", ".join(_metric_phrase(m) for m in t.metrics if m.verdict == "improved") + ")"
            for t in better)
    if result.counts.get("too_noisy"):
        text += (f"; too noisy to tell means the repeats scatter more than the change or are too few "
                 f"(at least {result.min_repeats} per side)")
    if result.baseline_only or result.candidate_only:
        text += (f"; unpaired: {len(result.baseline_only)} baseline-only, "
                 f"{len(result.candidate_only)} candidate-only task(s)")
    return text + "."


# ----------------------------------------------------------------------------- output


def _fmt(v: float | str | None, pct: bool = False) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    return f"{v:+.1%}" if pct else f"{v:.4g}"


def metrics_table(result: RegressionResult) -> pd.DataFrame:
    """One row per task and metric (what the CLI, Markdown and HTML tables show)."""
    rows = []
    for t in result.tasks:
        for m in t.metrics:
            rows.append({
                "task": t.key, "task verdict": R.VERDICT_TEXT[t.verdict], "metric": m.metric,
                "baseline": _fmt(m.baseline), "candidate": _fmt(m.candidate), "change": _fmt(m.change, True),
                "CI": "" if m.ci_low is None else f"{m.ci_low:+.1%} .. {m.ci_high:+.1%}",
                "p (MWU)": "" if m.p_value is None else f"{m.p_value:.2g}",
                "Cliff's δ": "" if m.effect_size is None else f"{m.effect_size:+.2f}",
                "n": f"{m.n_baseline}/{m.n_candidate}" if m.kind != "categorical" else "",
                "spread": "" if m.range_baseline is None else f"{m.range_baseline:.0%}/{m.range_candidate:.0%}",
                "verdict": R.VERDICT_TEXT[m.verdict], "why": m.reason,
            })
    return pd.DataFrame(rows, columns=["task", "task verdict", "metric", "baseline", "candidate", "change", "CI",
                                       "p (MWU)", "Cliff's δ", "n", "spread", "verdict", "why"])


def regression_blocks(result: RegressionResult, *, level: int = 2) -> list[Any]:
    """The comparison as report blocks (the sweep report's block model), to embed anywhere."""
    from perfscout.analysis.report.blocks import BulletList, Code, Heading, Paragraph, Strong, Table, markup

    blocks: list[Any] = [
        Heading("Regression check", level),
        Paragraph([Strong(R.VERDICT_TEXT[result.verdict]), ": ", result.sentence]),
        BulletList([
            ["baseline: ", Code(result.baseline.source), f" ({result.baseline.kind}",
             [", stored as ", Code(result.baseline.name)] if result.baseline.name else "",
             f", {result.baseline.tasks} task(s))"],
            ["candidate: ", Code(result.candidate.source),
             f" ({result.candidate.kind}, {result.candidate.tasks} task(s))"],
            f"rules: a timing is decided only with ≥ {result.min_repeats} repeats per side, a change beyond "
            f"{result.threshold:.0%} and beyond the repeats' spread, a {result.confidence:.0%} bootstrap CI "
            f"clear of zero and Mann–Whitney p < {result.alpha:g}; quality (CR, max error) beyond "
            f"{result.quality_threshold:.0%}; a candidate that fails or breaks its bound is a regression",
        ]),
        Table(metrics_table(result), "no task was paired"),
    ]
    extra = list(result.notes)
    for t in result.tasks:
        if t.identity_changes:
            extra.append(f"task `{t.key}` paired by {t.paired_by} although its configuration differs: "
                         + ", ".join(f"{f} {a} -> {b}" for f, (a, b) in t.identity_changes.items()))
        extra += [f"task `{t.key}`: {n}" for n in t.notes]
    if result.baseline_only:
        extra.append("only in the baseline: " + ", ".join(f"`{k}`" for k in result.baseline_only))
    if result.candidate_only:
        extra.append("only in the candidate: " + ", ".join(f"`{k}`" for k in result.candidate_only))
    if extra:
        # the notes are written with `code` marks around task keys (values from the runs)
        blocks += [Heading("Notes", level + 1), BulletList([markup(n) for n in extra])]
    return blocks


def regression_markdown(result: RegressionResult, *, level: int = 2) -> str:
    """The comparison as a Markdown section (no page title), to paste into another report."""
    from perfscout.analysis.report.markdown import render_blocks

    return render_blocks(regression_blocks(result, level=level))


def write_regression_report(result: RegressionResult, *, md: str | os.PathLike[str] | None = None,
                 html: str | os.PathLike[str] | None = None) -> list[Path]:
    """Write the regression section as a Markdown and/or a self-contained HTML page."""
    from perfscout.analysis.report.blocks import Document
    from perfscout.analysis.report.html import to_html
    from perfscout.analysis.report.markdown import to_markdown

    doc = Document("perfscout regression check", regression_blocks(result))
    written = []
    if md is not None:
        p = Path(md)
        written.append(_atomic_write(p, to_markdown(doc, p.parent)))
    if html is not None:
        written.append(_atomic_write(Path(html), to_html(doc)))
    return written
