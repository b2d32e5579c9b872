"""The report node's writer: ``report.md``, a self-contained ``report.html`` and
``results.json``, from the stored results only.

Every figure comes from ``results/*.json`` in the run directory (what observe stored),
never from the model or from memory. For each task only its last attempt is a result;
earlier attempts (retries, GPU fallbacks, noisy timings) appear in the notes.
Timings sit in their own last columns, so two runs of the same plan differ only there.

The report is one :class:`~perfscout.analysis.report.blocks.Document` rendered by the report
model's Markdown and HTML renderers: user and tool text goes in as plain text (escaped in
both formats), links only through :class:`~perfscout.analysis.report.blocks.Link`. With two
or more compression records the shared plots (:mod:`perfscout.analysis.report.plots`) follow
the results table; the diagnosis, regression, sweep and "use it" sections are the blocks
their own modules build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfscout.analysis.report.blocks import (
    Block,
    BulletList,
    Code,
    Details,
    Document,
    Heading,
    Inline,
    Link,
    Paragraph,
    Strong,
    Table,
    markup,
)
from perfscout.analysis.report.html import to_html
from perfscout.analysis.report.markdown import escape, to_markdown
from perfscout.graph.rundir import write_json, write_text
from perfscout.graph.toolbox import Section, find

PLANNER_LINES = {
    "deterministic": "deterministic planner (embedded, no model)",
    "llm": "LLM plan, validated: the model filled the request's intent, checked against the offline "
           "parser's reading, the codecs, the allowed folders and the tool whitelist",
    "llm-fallback": "LLM plan rejected or unavailable; deterministic planner used instead",
}


def _fmt(v: Any, spec: str = ".4g") -> str:
    if v is None or v == "":
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def final_observations(observations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last attempt of each task, in first-seen task order."""
    last: dict[str, dict[str, Any]] = {}
    for obs in observations:
        last[obs["task_key"]] = obs
    return list(last.values())


def write_agent_report(run_dir: Path, observations: list[dict[str, Any]], state: dict[str, Any]) -> Path:
    """Write report.md, report.html and results.json into ``run_dir``; return the Markdown's path."""
    from perfscout.graph.answer import answer_claims
    from perfscout.state.claims import CLAIMS_FILE, claims_doc

    plan = state.get("plan") or {}
    finals = final_observations(observations)
    parts = _partition(finals)
    language, claims, dropped = answer_claims(state, parts["records"], finals)
    write_json(run_dir / CLAIMS_FILE, claims_doc(language, claims, dropped))
    doc = Document(f"perfscout report: {plan.get('goal') or _request_text(state.get('request'))}",
                   report_blocks(run_dir, observations, state, answer=[c.text for c in claims]))
    write_json(run_dir / "results.json", {
        "run_id": state.get("run_id", ""), "planner": plan.get("planner", "deterministic"), "plan": plan,
        "records": parts["records"], "other": parts["others"], "notes": state.get("notes") or [],
        "sweeps": [{"task_key": o["task_key"], **{k: v for k, v in o["data"].items() if k != "rows"}}
                   for o in parts["sweeps"]],
        "plan_error": state.get("plan_error", ""),
    })
    md_path = write_text(run_dir / "report.md", to_markdown(doc, run_dir))
    write_text(run_dir / "report.html", to_html(doc))
    return md_path


def _partition(finals: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The final observations by the section that shows them (each tool object's
    ``report_section``; ``records`` are the records themselves; ``others`` is what no section
    of its own shows)."""
    is_record = [o["kind"] == "result" and isinstance(o.get("data"), dict) and "record" in o["data"] for o in finals]
    parts: dict[str, list[dict[str, Any]]] = {"records": [o["data"]["record"] for o, r in zip(finals, is_record) if r]}
    parts.update({s.value: [] for s in Section})
    for o in finals:  # each tool says which section shows it (and whether its failures too)
        tool = find(o["tool"])
        if (tool is not None and tool.report_section is not None and isinstance(o.get("data"), dict)
                and (o["kind"] == "result" or tool.report_failures)):
            parts[tool.report_section.value].append(o)
    shown = {id(o) for s in Section for o in parts[s.value]}
    parts["others"] = [o for o, r in zip(finals, is_record) if not r and id(o) not in shown]
    return parts


def report_blocks(run_dir: Path, observations: list[dict[str, Any]], state: dict[str, Any],
                  answer: list[str] | None = None) -> list[Block]:
    """The agent's report as blocks: the answer first (``answer``: the claims' texts, in order;
    built here when not given), then what was understood, the run, the plan, the results
    (table, plots), profiles, diagnoses, regressions, sweeps, the rest, how to use the best
    setting, and what the agent decided."""
    from perfscout.graph.answer import answer_lines

    plan = state.get("plan") or {}
    planner = plan.get("planner", "deterministic")
    finals = final_observations(observations)
    parts = _partition(finals)
    records = parts["records"]
    platform = state.get("platform") or {}
    cpu = (platform.get("cpu") or {}).get("model", "")
    gpus = ", ".join(g.get("name", "") for g in platform.get("gpus") or []) or "none"

    if answer is None:
        answer = answer_lines(state, records, finals)
    blocks: list[Block] = [Heading("Answer")] + [Paragraph(a) for a in answer]
    blocks += _understood_blocks(state)
    blocks += [Heading("Run"), BulletList([
        ["Run: ", Code(str(state.get("run_id", "")))],
        ["Planner: ", Strong(planner), f": {PLANNER_LINES.get(planner, planner)}"],
        ["Platform: ", Code(str(platform.get("platform_id", ""))), f" ({cpu}; GPUs: {gpus})"],
        f"Tool calls: {len(observations)} for {len(finals)} task(s)",
    ])]
    if state.get("refusal"):
        blocks += [Heading("Refused"), Paragraph(f"Nothing was run. {state['refusal']}.")]
    if state.get("plan_error"):
        blocks += [Heading("No plan"), Paragraph(f"The request could not be planned: {state['plan_error']}")]
    if plan.get("notes"):
        blocks += [Heading("Planning notes"), BulletList([_sentence(n) for n in plan["notes"]])]
    if plan.get("tasks"):
        blocks += [Heading("Plan"), Table([[t["key"], t["tool"], _cell(t.get("purpose", ""))] for t in plan["tasks"]],
                                          columns=["task", "tool", "purpose"])]
    if records:
        blocks += _results_blocks(records) + _equal_quality_blocks(finals, records)
        if len(records) >= 2:
            from perfscout.analysis.report import plots

            blocks += [Heading("Plots")] + plots.figure_blocks(plots.records_frame(records), run_dir / "plots")
    if parts["profiles"]:
        blocks.append(Heading("Profiles"))
        for o in parts["profiles"]:
            blocks += _profile_blocks(o)
    if parts["diagnoses"]:
        from perfscout.analysis.diagnosis.render import diagnosis_blocks

        for o in parts["diagnoses"]:  # the diagnosis's headings sit one level below the report's sections
            blocks += diagnosis_blocks(o["data"], level=2)
    if parts["regressions"]:
        blocks.append(Heading("Regression check"))
        for o in parts["regressions"]:
            blocks += _regression_blocks(o)
    if parts["sweeps"]:
        blocks.append(Heading("Sweeps"))
        for o in parts["sweeps"]:
            blocks += sweep_blocks(o, run_dir)
    if parts["others"]:
        items: list[Inline] = []
        for o in parts["others"]:
            label = "refused, not run" if o["kind"] == "refused" else o["kind"]
            items.append([f"{o['task_key']} ", Code(str(o["tool"])), f" ({label}): ",
                          str(o.get("error") or o.get("summary", ""))])
        blocks += [Heading("Other tool results"), BulletList(items)]
    blocks += _use_it_blocks(records)
    notes = state.get("notes") or []
    if notes:
        blocks += [Heading("What the agent decided"), BulletList([
            f"{n['task_key'] + ': ' if n.get('task_key') else ''}{_sentence(n['message'])} "
            f"({n['kind'].replace('_', ' ')})" for n in notes])]
    blocks.append(Paragraph(markup("Every figure above was measured in this run: raw tool replies are in `raw/`, "
                                   "parsed observations in `results/`, all records in `results.json`.")))
    return blocks


def _results_blocks(records: list[dict[str, Any]]) -> list[Block]:
    """A table that fits the page; every column of every record in the collapsible part below it."""
    main = [[_cell(r["codec"]), r["device"], _cell(r["dataset"]), r["mode"], _fmt(r["bound"]), _fmt(r["ratio"]),
             _fmt(r["psnr"]), _fmt(r["max_abs_err"], ".3g"), _fmt(r["bound_ok"]), _fmt(r["compress_MBps"], ".1f"),
             _fmt(r["decompress_MBps"], ".1f")] for r in records]
    every = [[r["task_key"], _fmt(r["bitrate"]), _fmt(r.get("max_rel_err"), ".3g"), r["status"], _cell(r.get("error"))]
             for r in records]
    return [Heading("Compression results"),
            Table(main, columns=["codec", "device", "dataset", "mode", "bound", "ratio", "PSNR dB", "max abs err",
                                 "bound ok", "compress MB/s", "decompress MB/s"]),
            Details("every column", [Table(every, columns=["task", "bitrate", "max rel err", "status", "error"])])]


def _equal_quality_blocks(finals: list[dict[str, Any]], records: list[dict[str, Any]]) -> list[Block]:
    """Ratio at the asked PSNR and PSNR at the asked ratio, codec by codec, from the records
    and their searches' trials (analysis.report.equal_quality)."""
    from perfscout.analysis.report.equal_quality import equal_quality_blocks

    searches = {str(o["data"]["record"].get("task_key", "")): o["data"]["search"] for o in finals
                if isinstance(o.get("data"), dict) and isinstance(o["data"].get("search"), dict)
                and isinstance(o["data"].get("record"), dict)}
    return equal_quality_blocks(records, searches=searches)


def _profile_blocks(o: dict[str, Any]) -> list[Block]:
    d = o["data"]
    items: list[Inline] = [
        f"Profiler: {d.get('tool')} ({d.get('reason', '')})",
        f"Program: {d.get('status')} (exit {(d.get('exit') or {}).get('returncode')})",
        ["Raw output: ", Code(str(d.get("run_dir", "")))],
    ]
    items += [f"kernel {_kernel_sentence(k)}" for k in (d.get("digest") or [])[:10]]
    items += [["finding ", Code(str(f["id"])), f": {f.get('title', '')}"] for f in d.get("findings") or []]
    if d.get("perf"):
        events = d["perf"].get("events") or {}
        items.append("perf stat: " + ", ".join(
            f"{name}={ev.get('value')}{(' ' + ev['unit']) if ev.get('unit') else ''}"
            for name, ev in list(events.items())[:12]))
    return [Heading([f"{o['task_key']}: ", Code(" ".join(map(str, d.get("command", []))))], 3), BulletList(items)]


def _regression_blocks(o: dict[str, Any]) -> list[Block]:
    from perfscout.tools.regress import RegressionResult, regression_blocks

    try:
        return regression_blocks(RegressionResult.model_validate(o["data"]), level=3)
    except Exception as exc:  # noqa: BLE001 - a section that fails must not cost the report
        return [BulletList([f"{o['task_key']}: {o.get('summary')} (table not drawn: {type(exc).__name__})"])]


def md_text(text: Any) -> str:
    """User or tool text made inert in Markdown (the report model's escaping, for callers
    that still compose Markdown by hand): no link, no HTML, no emphasis it did not mean."""
    return escape(str(text if text is not None else ""))


def _sentence(text: Any) -> str:
    """A note as a sentence: capital first letter, a full stop at the end."""
    t = " ".join(str(text).split())
    if not t:
        return t
    t = t[0].upper() + t[1:]
    return t if t[-1] in ".!?:)" else t + "."


def _kernel_sentence(k: dict[str, Any]) -> str:
    share = f", {k['share_pct']:.1f} % of the GPU time" if k.get("share_pct") is not None else ""
    mean = f", {k['mean_s'] * 1e6:.1f} µs each" if k.get("mean_s") else ""
    return f"{str(k.get('name', ''))[:80]}: {k.get('launches', 0)} launch(es){mean}{share}"


def _use_it_blocks(records: list[dict[str, Any]]) -> list[Block]:
    """How to use the best verified setting: numcodecs / Zarr / xarray / HDF5 snippets."""
    if not records:
        return []
    try:
        from perfscout.tools.export import use_it_blocks

        return use_it_blocks(records)
    except Exception as exc:  # noqa: BLE001 - the snippets must not cost the run its report
        return [Heading("Use it"), Paragraph(f"Snippets not written: {type(exc).__name__}: {exc}")]


def _understood_blocks(state: dict[str, Any]) -> list[Block]:
    """What the request was read as, what was asked, and the answers given."""
    intent = state.get("intent")
    if not intent:
        return []
    from perfscout.state.intent import Intent

    filled = "offline parser" if intent.get("filled_by") == "parser" else intent.get("filled_by")
    items: list[Inline] = [f"Request: {intent.get('text', '')}",
                           f"Read as: {Intent.model_validate(intent).summary()} (filled by the {filled})"]
    items += [f"Asked: {qa.get('question')} Answer: {qa.get('answer')}" for qa in state.get("answers") or []]
    return [Heading("What was understood"), BulletList(items)]


def _link(path: str, run_dir: Path) -> Link:
    """A link to ``path``, relative to the agent run directory when inside it (else shown, not linked)."""
    p = Path(path)
    try:
        shown = p.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        shown = str(p)
    return Link(p.name, shown)


def sweep_blocks(obs: dict[str, Any], run_dir: Path) -> list[Block]:
    """One sweep: where it is, counts by status, failed tasks, violated bounds, bests."""
    d = obs["data"]
    counts = ", ".join(f"{k}: {v}" for k, v in (d.get("status_counts") or {}).items()) or "none"
    items: list[Inline] = [
        f"Results: {d.get('tasks', 0)} task(s); by status: {counts}",
        ["Sweep directory: ", Code(str(d.get("run_dir", ""))), " (store ", Code(Path(d.get("store", "")).name),
         ", run ", Code(str(d.get("run_id", ""))), ")"],
    ]
    if d.get("spec"):
        items.append(["Spec: ", Code(str(d["spec"]))])
    if d.get("report_md"):
        items.append(["Sweep report: ", _link(d["report_md"], run_dir), ", ", _link(d["report_html"], run_dir)])
    else:
        items.append([f"Sweep report: not written ({d.get('report_error') or 'unknown reason'}); ",
                      Code(f"perfscout report {d.get('run_dir', '')}"), " writes it from the stored results"])
    out: list[Block] = [Heading([f"{obs['task_key']}: sweep ", Code(str(d.get("name", "")))], 3), BulletList(items)]
    failures = d.get("failures") or []
    out.append(Paragraph(f"Failed tasks: {len(failures)}" + (":" if failures else ".")))
    if failures:
        out.append(Table([[r["task_key"], r["dataset"], r["codec"], r["device"], r["mode"], _fmt(r["bound"]),
                           r["status"], _cell(r.get("error"))] for r in failures],
                         columns=["task", "dataset", "codec", "device", "mode", "bound", "status", "error"]))
    violations = d.get("violations") or []
    out.append(Paragraph(f"Bound violated: {len(violations)}" + (":" if violations else ".")))
    if violations:
        out.append(Table([[r["task_key"], r["dataset"], r["codec"], r["device"], r["mode"], _fmt(r["bound"]),
                           _fmt(r["max_abs_err"]), _fmt(r["max_rel_err"]), r["status"]] for r in violations],
                         columns=["task", "dataset", "codec", "device", "mode", "bound", "max abs err",
                                  "max rel err", "status"]))
    if d.get("best_ratio"):
        out += [Paragraph("Highest ratio with the bound held (per dataset and codec@device):"),
                Table([[r["dataset"], r["series"], r["mode"], _fmt(r["bound"]), _fmt(r["ratio"]), _fmt(r["psnr"]),
                        _fmt(r["compress_MBps"], ".1f"), r["task_key"]] for r in d["best_ratio"]],
                      columns=["dataset", "codec@device", "mode", "bound", "ratio", "PSNR dB", "compress MB/s",
                               "task"])]
    if d.get("fastest"):
        out += [Paragraph(f"Fastest compression with PSNR >= {_fmt(d.get('psnr_min'))} dB and the bound held:"),
                Table([[r["dataset"], r["series"], r["mode"], _fmt(r["bound"]), _fmt(r["compress_MBps"], ".1f"),
                        _fmt(r["decompress_MBps"], ".1f"), _fmt(r["psnr"]), r["task_key"]] for r in d["fastest"]],
                      columns=["dataset", "codec@device", "mode", "bound", "compress MB/s", "decompress MB/s",
                               "PSNR dB", "task"])]
    return out


def _cell(text: Any) -> str:
    """Free text for one table cell: one line, at most 300 characters ("–" when empty)."""
    return " ".join(str(text or "").split())[:300] or "–"


def _request_text(request: Any) -> str:
    if isinstance(request, dict):
        return str(request.get("goal") or request.get("intent") or "spec")
    return str(request or "")


__all__ = ["PLANNER_LINES", "final_observations", "md_text", "report_blocks", "sweep_blocks",
           "write_agent_report"]
