"""The agent's regression and tuning tools (objects of the whitelist in
:mod:`perfscout.graph.toolbox`: ``COMPARE_RUNS``, ``TUNE``).

"Is run B faster than run A?", "did this change regress the codec?" -> :func:`compare_runs`;
"tune OMP_NUM_THREADS for this command" -> :func:`tune_command`. Like every agent tool they
never raise for a failed measurement: they return ``(summary, artifact)`` with the artifact
``kind`` / ``data`` / ``error`` / ``transient`` / ``needs``. Every path they accept is
confined like the other tools' (the working directory and this agent run's directory);
a stored baseline is named, not a path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime
from pydantic import Field

from perfscout.errors import InputError, PerfscoutError

#: Where a tune_command task writes its run inside the agent run, when no `out` is given.
TUNE_DIR = "tune"


def _helpers() -> Any:
    from perfscout.graph import tool_common

    return tool_common


def _agent_run_dir(runtime: ToolRuntime | None) -> str:
    state = (runtime.state if runtime is not None else None) or {}
    return str(state.get("run_dir") or "")


def _source(value: str, roots: list[Path], what: str) -> str:
    """A stored baseline's name passes as it is; anything else is a confined path."""
    from perfscout.tools.regress import is_baseline_name

    if is_baseline_name(value):
        return value
    return str(_helpers().confine(value, roots, what))


@tool(response_format="content_and_artifact")
def compare_runs(
    baseline: Annotated[str, Field(description="The baseline: a run directory (agent run, sweep, "
                                   "bench or tune output), a results.sqlite or samples .json file, "
                                   "or the name of a stored baseline.")],
    candidate: Annotated[str, Field(description="The candidate run, in the same forms as `baseline`.")],
    threshold: Annotated[float, Field(ge=0, lt=1, description="Smallest relative timing change that "
                                      "counts, e.g. 0.05 for 5 %.")] = 0.05,
    match: Annotated[list[str] | None, Field(description="Pair tasks on these identity fields only "
                                             "(e.g. ['dataset', 'codec'] to compare two bounds).")] = None,
    runtime: ToolRuntime[Any, Any] = None,  # injected by ToolNode; not in the schema
) -> tuple[str, dict[str, Any]]:
    """Is the candidate faster, slower or unchanged against the baseline? Pairs the runs'
    tasks and judges every metric with all repeats: the median change with a bootstrap
    confidence interval, a Mann–Whitney U test and an effect size; compression ratio, max
    error and whether the bound held too. Says "too noisy to tell" instead of guessing when
    the repeats scatter more than the change."""
    h = _helpers()
    try:
        from perfscout.tools.regress import compare_runs as _compare

        roots = h.allowed_roots(_agent_run_dir(runtime))
        base = _source(baseline, roots, "baseline")
        cand = _source(candidate, roots, "candidate")
        result = _compare(base, cand, threshold=threshold, match=match or None)
    except PerfscoutError as exc:
        return f"refused: {exc}", h._artifact("error", error=str(exc))
    except Exception as exc:  # a tool reports failures; reflect decides what they mean
        return h._failure(exc)
    return result.sentence[:1900], h._artifact("result", data=result.model_dump(mode="json"))


@tool(response_format="content_and_artifact")
def tune_command(
    command: Annotated[list[str] | None, Field(description="The benchmark command and its arguments "
                                               "(no shell); a parameter that is not an environment "
                                               "variable appears in it as {name}.")] = None,
    space: Annotated[dict[str, dict[str, Any]] | None, Field(
        description="Parameters to tune: name -> {type: int|float|categorical, low, high | choices, "
                    "env: true for an environment variable such as OMP_NUM_THREADS}.")] = None,
    baseline: Annotated[dict[str, Any] | None, Field(description="The current configuration to beat, "
                                                     "e.g. {'OMP_NUM_THREADS': 1}.")] = None,
    figure_regex: Annotated[str | None, Field(description="Regex reading the figure from stdout; "
                                              "without it (and figure_json) the wall time is used.")] = None,
    figure_json: Annotated[str | None, Field(description="Dotted JSON field of stdout holding the figure.")] = None,
    better: Literal["lower", "higher"] = "lower",
    trials: Annotated[int | None, Field(ge=1, le=100, description="Optuna trials (default: the "
                                        "spec's, else 10).")] = None,
    repeats: Annotated[int | None, Field(ge=1, le=50, description="Runs per trial (default: the "
                                         "spec's, else 5).")] = None,
    findings: Annotated[list[str] | None, Field(description="Finding ids (from diagnose_profile) whose "
                                                "narrowings in the spec apply.")] = None,
    spec: Annotated[str | None, Field(description="A tune spec YAML instead of command/space/... "
                                      "(see examples/tune_*.yaml); inside the working directory.")] = None,
    out: Annotated[str | None, Field(description="Run directory for the tuning; default: a folder of "
                                     "this agent run. Inside the working directory.")] = None,
    runtime: ToolRuntime[Any, Any] = None,  # injected by ToolNode; not in the schema
) -> tuple[str, dict[str, Any]]:
    """Tune a benchmark command's parameters (environment variables such as OMP_NUM_THREADS,
    flags, codec options) with Optuna: every trial runs in the sandbox with repeats, the best
    one is re-measured against the baseline and judged by the regression runner, and every
    tried configuration becomes an experiment card (problem, evidence, proposal, predicted and
    measured gain with CI, verdict, what not to do)."""
    h = _helpers()
    agent_run_dir = _agent_run_dir(runtime)
    try:
        from perfscout.tools import tune as T

        roots = h.allowed_roots(agent_run_dir)
        if spec is not None:
            if command is not None or space is not None:
                raise InputError("tune_command takes either `spec` or `command` + `space`, not both")
            path = h.confine(spec, roots, "tune spec")
            if path.suffix not in (".yaml", ".yml") or not path.is_file():
                raise InputError(f"tune spec {spec!r} is not an existing .yaml/.yml file")
            tspec = T.load_tune_spec(path)
            overrides = {k: v for k, v in (("trials", trials), ("repeats", repeats)) if v is not None}
            tspec = tspec.model_copy(update=overrides) if overrides else tspec
        else:
            if not command or not space:
                raise InputError("tune_command needs `command` and `space` (or a `spec` file)")
            fig: dict[str, Any] = {"better": better}
            if figure_regex is not None:
                fig["regex"] = figure_regex
            if figure_json is not None:
                fig["json"] = figure_json
            tspec = T.parse_tune_spec({"name": Path(command[0]).name, "command": list(command), "figure": fig,
                                       "space": space, "baseline": baseline or {}, "trials": trials or 10,
                                       "repeats": repeats or 5}, "tune_command arguments")
        if out:
            target = h.confine(out, roots, "tune output directory")
        elif agent_run_dir:
            key = h._run_info(runtime)["task_key"] or tspec.name
            target = Path(agent_run_dir) / TUNE_DIR / re.sub(r"[^A-Za-z0-9._+-]+", "_", key)
        else:
            target = T.default_out(tspec.name)
        outcome = T.run_tune(tspec, target, findings=[T.FindingRef(id=f) for f in findings or []])
    except PerfscoutError as exc:
        return f"refused: {exc}", h._artifact("error", error=str(exc))
    except Exception as exc:
        return h._failure(exc)
    summary = (f"tuning {tspec.name}: {outcome.sentence}; {len(outcome.cards)} experiment card(s) in "
               f"{outcome.run_dir}/cards.json; report: {outcome.report_md}")
    return summary[:1900], h._artifact("result", data=T.tune_digest(outcome))

