"""`perfscout diagnose [FILE...] | --ncu-csv F | --ncu-rep F | --perf-csv F [--json [--indent N] [--all-metrics]] [--verbose]`.

Loads the profile (:func:`perfscout.tools.profile.load_profile_files`: a FILE's kind, an ncu
report, raw or details CSV or perf stat output, comes from its name and first bytes), runs the diagnosis
engine (:mod:`perfscout.analysis.diagnosis`) and prints the JSON shape of DESIGN.md
(``{"kernels": [{"name", "primary", "findings", "metrics"}], "platform": {...}}``) or its
Markdown rendering (``--format``: plain text on a terminal, where Markdown's escapes such as
``\\]`` would be printed as they are; Markdown when piped or with ``--format markdown``). Each kernel keeps its identity (id, grid, block, device, CC), under
``metrics`` the metrics its findings rest on (every parsed metric with ``--all-metrics``;
``metrics_scope`` says which), the cited subset also under ``cited_metrics``,
and Nsight Compute's own rule messages under ``ncu_says``; ``summary`` aggregates the
launches per kernel (count, total time, share), ordered by total time. The JSON is compact
unless ``--indent`` is given. The Markdown report puts the time digest first, then one
section per kernel with the primary's deciding evidence (``--verbose``: all findings in full).
With an LLM endpoint configured (``PERFSCOUT_LLM_BASE_URL``; ``--explain auto``, the default) or
``--explain on``, the kernels the report details also get a model's explanation of their
findings, checked against the findings' evidence (:mod:`perfscout.analysis.diagnosis.llm_explain`):
under ``explanations`` in the JSON, after the diagnosis in the report; ``--explain off`` never asks.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import typer

from perfscout.analysis.diagnosis import diagnose as run_diagnosis
from perfscout.analysis.diagnosis import diagnose_perf
from perfscout.analysis.diagnosis.reads import reads_metric
from perfscout.analysis.diagnosis.render import aggregate, diagnosis_blocks, summary_blocks
from perfscout.analysis.report import markdown as md
from perfscout.analysis.report import text as plain_text
from perfscout.cli.common import _json_default, stdout
from perfscout.errors import InputError
from perfscout.io import read_input_text
from perfscout.tools.ncu_parse import kernel_duration_s
from perfscout.tools.profile import kernel_json, load_profile_files


def _host_timing(path: Path | None) -> dict | None:
    """Host-side launch timings (the only evidence for launch overhead), if given."""
    if path is None:
        return None
    try:
        doc = json.loads(read_input_text(path, "host timing JSON"))
    except ValueError as exc:  # InputError (not a regular file, not UTF-8) is one too: said as is
        if isinstance(exc, InputError):
            raise
        raise InputError(f"cannot read host timing JSON {path}: {exc}") from exc
    timing = doc.get("launch_overhead", doc) if isinstance(doc, dict) else None
    if not isinstance(timing, dict):
        raise InputError(f"{path}: expected a JSON object mapping kernel name -> host timing")
    for name, entry in timing.items():
        # Each kernel's entry is an object of numbers (e.g. {"host_per_launch_us": 5.8}).
        if not isinstance(entry, dict) or not all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in entry.values()):
            raise InputError(f"{path}: the entry for {name!r} must be an object of numbers, "
                             'e.g. {"host_per_launch_us": 5.8}')
    return timing


def _explain(summary: list[dict], entries: list[dict], profiles: list, top: int, required: bool) -> list[dict]:
    """The LLM's checked explanation of each kernel the report details (its longest launch)."""
    from perfscout.state.llm_endpoint import LLMEndpoint

    if not required and not LLMEndpoint.from_env().configured:
        return []  # no endpoint: the explainer is not even imported (22 ms of every diagnose)
    from perfscout.analysis.diagnosis import llm_explain

    position = {id(e): i for i, e in enumerate(entries)}
    chosen = [e["diagnosis"] for e in (summary[:top] if top else summary) if e["diagnosis"].get("findings")]
    if not chosen:  # nothing to explain: no model is built (langchain-openai's import takes a second)
        return []
    return llm_explain.explain_from_env([(d, profiles[position[id(d)]]) for d in chosen], required=required)


def register(app: typer.Typer) -> None:
    @app.command("diagnose")
    def diagnose(
        files: list[Path] = typer.Argument(
            None, metavar="[FILE]...", show_default=False,
            help="Profile files of any kind (an .ncu-rep, ncu's raw or details CSV, perf stat output), told apart "
                 "by their content; the options below name a kind instead."),
        ncu_csv: Path = typer.Option(None, "--ncu-csv", help="ncu --csv --page raw output."),
        ncu_rep: Path = typer.Option(None, "--ncu-rep", help="An .ncu-rep report (needs ncu here)."),
        ncu_details: Path = typer.Option(None, "--ncu-details", help="ncu --csv --page details output (rule messages)."),
        perf_csv: Path = typer.Option(None, "--perf-csv", help="perf stat -x, (or -j) output."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout (compact)."),
        indent: int = typer.Option(None, "--indent", min=0, max=8, help="With --json: indent by N spaces."),
        all_metrics: bool = typer.Option(
            False, "--all-metrics", help="With --json: every parsed metric per kernel (default: the ones findings cite)."
        ),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="All findings with all their evidence."),
        top: int = typer.Option(10, "--top", min=0, help="Kernels detailed (and in the JSON digest); 0: all."),
        host_timing: Path = typer.Option(
            None, "--host-timing", help="JSON of host timings across launches (launch overhead)."
        ),
        output_format: str = typer.Option(
            "auto", "--format", help="auto | text | markdown: the report without --json (auto: text on a "
                                     "terminal, Markdown when piped)."),
        explain_mode: str = typer.Option(
            "auto", "--explain", help="auto | on | off: an LLM's explanation of the detailed kernels' findings, "
                                      "checked against their evidence (auto: when PERFSCOUT_LLM_BASE_URL is set)."),
    ) -> None:
        """Diagnose a saved profile: primary bottleneck and evidence-backed findings per kernel."""
        if output_format not in ("auto", "text", "markdown"):
            raise InputError(f"--format must be auto, text or markdown, got {output_format!r}")
        if explain_mode not in ("auto", "on", "off"):
            raise InputError(f"--explain must be auto, on or off, got {explain_mode!r}")
        # Without --all-metrics only the columns the engine reads are parsed (the report
        # carries only cited metrics); the diagnosis is the same either way (reads.py).
        loaded = load_profile_files(files or [], ncu_csv=ncu_csv, ncu_rep=ncu_rep, perf_csv=perf_csv,
                                    ncu_details=ncu_details, keep_metric=None if all_metrics else reads_metric)
        # The parsed profile lives until exit and holds no reference cycles: keep the cyclic
        # GC from re-scanning its objects at every collection the diagnosis triggers.
        gc.freeze()
        result = run_diagnosis(loaded.kernels, platform=loaded.platform, host_timing=_host_timing(host_timing))
        kernels = []
        for k, diag in zip(loaded.kernels, result["kernels"], strict=True):
            # Every metric of a 1,000-launch profile is ~2 million values (200 MB of JSON):
            # by default a kernel carries only what its findings rest on.
            entry = kernel_json(k, metrics=all_metrics)
            if not all_metrics:
                entry["metrics"] = diag["metrics"]
            entry.update(primary=diag["primary"], findings=diag["findings"], cited_metrics=diag["metrics"],
                         duration_s=kernel_duration_s(k))
            if diag.get("rule_problems"):  # plug-in rules whose findings were dropped, and why
                entry["rule_problems"] = diag["rule_problems"]
            kernels.append(entry)
        summary = aggregate(kernels)
        explanations = [] if explain_mode == "off" else _explain(summary, kernels, loaded.kernels, top,
                                                                 required=explain_mode == "on")
        doc = {
            "metrics_scope": "all" if all_metrics else "cited",
            "kernels": kernels,
            "platform": result["platform"],
            "digest": loaded.digest(top),
            "summary": [{k: v for k, v in e.items() if k != "diagnosis"} | {
                "primary": e["diagnosis"]["primary"]["id"] if e["diagnosis"].get("primary") else None,
                "diagnosed_launch": e["diagnosis"].get("id")} for e in summary],
            "sources": loaded.sources,
            "warnings": loaded.warnings,
        }
        if explanations:
            doc["explanations"] = explanations
        if loaded.perf is not None:
            perf_result = diagnose_perf(loaded.perf, platform=loaded.platform)
            doc["programs"] = perf_result["programs"]
            doc["perf"] = loaded.perf.model_dump(mode="json")
        if json_out:
            compact = indent is None
            sys.stdout.write(json.dumps(doc, indent=indent, separators=(",", ":") if compact else None,
                                        default=_json_default, allow_nan=True) + "\n")
            sys.stdout.flush()
            return
        as_text = output_format == "text" or (output_format == "auto" and stdout.is_terminal)
        render = plain_text.render_blocks if as_text else md.render_blocks
        if doc["kernels"]:
            stdout.print(render(summary_blocks(summary, doc["platform"], verbose, top)).rstrip("\n"),
                         markup=False, soft_wrap=True, highlight=False)
        if explanations:
            from perfscout.analysis.diagnosis.llm_explain import explanation_blocks

            stdout.print(render(explanation_blocks(explanations)).rstrip("\n"),
                         markup=False, soft_wrap=True, highlight=False)
        if doc.get("programs"):
            stdout.print(render(diagnosis_blocks({"programs": doc["programs"], "platform": doc["platform"]}))
                         .rstrip("\n"), markup=False, soft_wrap=True, highlight=False)
        stdout.print(f"{len(loaded.kernels)} kernel launches; devices: "
                     + ", ".join(f"{d['name']} (CC {d['compute_capability']})" for d in loaded.platform["devices"]),
                     markup=False)
        if loaded.perf is not None:
            p = loaded.perf
            stdout.print(f"perf: {len(p.events)} events counted, {len(p.unavailable)} unavailable; "
                         f"hardware counters: {p.hardware_counters}")
