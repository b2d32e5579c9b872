"""Optional LLM explanation of a diagnosis: the model may rephrase and prioritise, never invent.

The model gets the engine's findings for one kernel and answers in KEET-style JSON
(``bottleneck_type``, ``reasoning``, ``optimization_suggestions``,
``additional_info_needed``). Each suggestion must cite an engine finding id and only
metrics present in the profile (or cited by that finding), and must pass the
architecture gate (TMA/wgmma/clusters need sm_90+, cp.async sm_80+, tensor cores
sm_70+); anything else is dropped and the reason shown. A bottleneck_type that is not
an engine finding is replaced by the engine's primary. The reasoning is kept only when every
metric it names is in the profile or the findings' evidence and every number in it is one the
model was given (an evidence value, as written or as a percentage, or a number of a finding's
title or recommendation, at the precision it is written); otherwise it is withheld and the reason
shown, so the explanation adds wording and order, never facts.

``perfscout diagnose`` calls :func:`explain_kernels` for the kernels its report details when an
endpoint is configured (``PERFSCOUT_LLM_BASE_URL``, :func:`model_from_env`) or ``--explain on``
asks; a model that cannot be reached or answers nonsense leaves the engine's diagnosis as it is
and says why in the kernel's ``explanation``.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from perfscout.analysis.diagnosis.arch import Arch, arch_for
from perfscout.analysis.report.blocks import Block, BulletList, Code, Heading, ListItem, Note, Paragraph
from perfscout.errors import InputError
from perfscout.state.llm_endpoint import LLMEndpoint, make_chat_model
from perfscout.state.profiles import KernelProfile

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """You explain GPU kernel profiling results to a performance engineer.
You receive the findings of a rule engine (ids, titles, evidence metrics, recommendations).
You may only rephrase and prioritise THOSE findings. Do not invent new bottlenecks, metrics
or numbers. Answer with one JSON object and nothing else:
{"bottleneck_type": "<one finding id>",
 "reasoning": "<why this limits the kernel, citing metric names>",
 "optimization_suggestions": [{"finding_id": "<finding id>", "suggestion": "<concrete change>",
                               "metrics": ["<metric names from the evidence>"]}],
 "additional_info_needed": ["<what to measure next, if anything>"]}"""

#: Features a suggestion may name only on chips that have them: (pattern, min cc, label).
ARCH_GATES = (
    (r"\bTMA\b|cp\.async\.bulk|tensor memory accelerator", (9, 0), "TMA needs sm_90+"),
    (r"\bwgmma\b|warpgroup", (9, 0), "wgmma needs sm_90+"),
    (r"thread[- ]block cluster|\bcluster(s)?\b|distributed shared memory", (9, 0), "clusters need sm_90+"),
    (r"cp\.async|memcpy_async|\bldgsts\b", (8, 0), "cp.async needs sm_80+"),
    (r"tensor core|\bwmma\b|\bmma\.sync\b", (7, 0), "tensor cores need sm_70+"),
)


class Suggestion(BaseModel):
    finding_id: str
    suggestion: str
    metrics: list[str] = Field(default_factory=list)


class KeetReply(BaseModel):
    bottleneck_type: str
    reasoning: str = ""
    optimization_suggestions: list[Suggestion] = Field(default_factory=list)
    additional_info_needed: list[str] = Field(default_factory=list)


class Dropped(BaseModel):
    suggestion: dict[str, Any]
    reason: str


class Explanation(BaseModel):
    kernel: str
    bottleneck_type: str
    bottleneck_replaced: str = ""  # why the model's bottleneck_type was not kept
    reasoning: str = ""
    reasoning_withheld: str = ""  # why the model's reasoning is not shown
    accepted: list[Suggestion] = Field(default_factory=list)
    dropped: list[Dropped] = Field(default_factory=list)
    additional_info_needed: list[str] = Field(default_factory=list)
    raw: str = ""


def _slim_findings(diag_kernel: dict) -> list[dict]:
    """What the model is shown of each finding (and all the facts it may repeat)."""
    return [{"id": f["id"], "title": f["title"], "expected_gain": f.get("expected_gain"),
             "evidence": [{"metric": e["metric"], "value": e["value"], "unit": e.get("unit", "")}
                          for e in f["evidence"]],
             "recommendation": f["recommendation"]} for f in diag_kernel["findings"]]


def build_messages(diag_kernel: dict) -> list[tuple[str, str]]:
    """(role, text) messages: the system rules and the engine's findings as JSON."""
    body = json.dumps({"kernel": diag_kernel["name"],
                       "primary": diag_kernel["primary"]["id"] if diag_kernel.get("primary") else None,
                       "findings": _slim_findings(diag_kernel)}, indent=1, default=str)
    return [("system", SYSTEM_PROMPT), ("human", body)]


#: A profiler metric as ncu names it: a unit, a double underscore, then the counter
#: (``dram__bytes_read.sum``, ``smsp__warp_issue_stalled_barrier_per_warp_active.pct``).
_METRIC = re.compile(r"\b[a-z][a-z0-9]*__[A-Za-z0-9_.]*[A-Za-z0-9_]")
#: Architecture names (sm_90, sm_80) and CUDA feature names carry digits that are not figures.
_NOT_A_FIGURE = re.compile(r"\bsm_\d+a?\b|\b[A-Za-z]+\d+[A-Za-z]*\b")
_FIGURE = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def _figures(values: Iterable[Any], texts: Iterable[str]) -> list[float]:
    """The numbers the model was given: evidence values (and a fraction as a percentage) and
    the numbers written in the findings' titles and recommendations."""
    out: list[float] = []
    for v in values:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out += [float(v), float(v) * 100.0]
    for t in texts:
        out += [float(m.replace(",", "")) for m in _FIGURE.findall(_NOT_A_FIGURE.sub(" ", _METRIC.sub(" ", t)))]
    return out


def _given(written: str, figures: list[float]) -> bool:
    """``written`` (as the model wrote it: "78", "0.78", "1.6e7", "16,777,216") is one of the
    figures at the precision written: 78 and 77.8 both stand for 0.777778 as a percentage."""
    text = written.replace(",", "")
    n = float(text)
    mantissa = text.lower().split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exp = int(text.lower().split("e")[1]) if "e" in text.lower() else 0
    half_ulp = 0.5 * 10.0 ** (exp - decimals)
    return any(abs(n - v) <= half_ulp + 1e-9 * abs(v) or (v and abs(n - v) <= 0.005 * abs(v)) for v in figures)


def unsupported_facts(text: str, metrics: set[str], figures: list[float]) -> str | None:
    """Why ``text`` says more than the model was given (a metric or a number), or None."""
    bad_metrics = sorted({m for m in _METRIC.findall(text) if m not in metrics})
    if bad_metrics:
        return f"names metrics absent from the profile and the evidence: {', '.join(bad_metrics)}"
    bare = _NOT_A_FIGURE.sub(" ", _METRIC.sub(" ", text))
    bad = [n for n in _FIGURE.findall(bare) if not _given(n, figures)]
    if bad:
        return f"states numbers that are in no finding: {', '.join(dict.fromkeys(bad))}"
    return None


def parse_reply(text: str) -> KeetReply:
    """The JSON object in the reply (code fences and surrounding prose tolerated)."""
    m = re.search(r"\{.*\}", text, re.S)
    if not m:
        raise InputError("the model's reply holds no JSON object")
    try:
        return KeetReply.model_validate(json.loads(m.group(0)))
    except (ValueError, ValidationError) as exc:
        raise InputError(f"the model's reply is not the expected KEET JSON: {exc}") from exc


def arch_violation(text: str, arch: Arch) -> str | None:
    for pattern, cc, label in ARCH_GATES:
        if re.search(pattern, text, re.I) and not arch.at_least(*cc):
            return f"{label}; this profile is {arch.sm}"
    return None


def validate(reply: KeetReply, diag_kernel: dict, kernel: KernelProfile,
             arch: Arch | None = None) -> Explanation:
    arch = arch or arch_for(kernel.device, kernel.compute_capability)
    findings = {f["id"]: f for f in diag_kernel["findings"]}
    evidence = [e for f in diag_kernel["findings"] for e in f["evidence"]]
    known = set(kernel.metrics) | {e["metric"] for e in evidence} | {i for e in evidence for i in e.get("inputs") or ()}
    accepted, dropped = [], []
    for s in reply.optimization_suggestions:
        reason = None
        if s.finding_id not in findings:
            reason = f"cites {s.finding_id!r}, which the engine did not find"
        else:
            cited = {e["metric"] for e in findings[s.finding_id]["evidence"]}
            bad = [m for m in s.metrics if m not in kernel.metrics and m not in cited]
            named = sorted({m for m in _METRIC.findall(s.suggestion) if m not in known})
            if bad:
                reason = f"cites metrics absent from the profile: {', '.join(bad)}"
            elif not s.metrics:
                reason = "cites no metric"
            elif named:
                reason = f"names metrics absent from the profile: {', '.join(named)}"
            else:
                reason = arch_violation(s.suggestion, arch)
        if reason:
            dropped.append(Dropped(suggestion=s.model_dump(), reason=reason))
        else:
            accepted.append(s)
    primary = diag_kernel["primary"]["id"] if diag_kernel.get("primary") else ""
    bt, replaced = reply.bottleneck_type, ""
    if bt not in findings:
        replaced = f"model said {bt!r}, not an engine finding; kept the engine's primary"
        bt = primary
    slim = _slim_findings(diag_kernel)
    figures = _figures((e["value"] for f in slim for e in f["evidence"]),
                       [t for f in slim for t in (f["title"], f["recommendation"], str(f["expected_gain"]))])
    withheld = unsupported_facts(reply.reasoning, known, figures) or ""
    return Explanation(kernel=diag_kernel["name"], bottleneck_type=bt, bottleneck_replaced=replaced,
                       reasoning="" if withheld else reply.reasoning, reasoning_withheld=withheld,
                       accepted=accepted, dropped=dropped, additional_info_needed=reply.additional_info_needed)


def explain(diag_kernel: dict, kernel: KernelProfile, model: Any) -> Explanation:
    """Ask ``model`` (a LangChain chat model) to explain one diagnosed kernel; validate it."""
    reply = model.invoke(build_messages(diag_kernel))
    text = reply.content if hasattr(reply, "content") else str(reply)
    if isinstance(text, list):  # content blocks
        text = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in text)
    out = validate(parse_reply(text), diag_kernel, kernel)
    out.raw = text
    return out


def model_from_env() -> Any | None:
    """The chat model the ``PERFSCOUT_LLM_*`` variables name, as the agent's planner builds
    it (:mod:`perfscout.state.llm_endpoint`), when PERFSCOUT_LLM_BASE_URL is set; else None."""
    endpoint = LLMEndpoint.from_env()
    return make_chat_model(endpoint) if endpoint.configured else None


def explain_kernels(pairs: Iterable[tuple[dict, KernelProfile]], model: Any, model_name: str = "") -> list[dict]:
    """One explanation (JSON-ready) per (diagnosed kernel, its profile). An endpoint that
    fails or a reply that is not the expected JSON gives ``{"kernel", "error"}`` for that
    kernel instead: the explanation is optional, the engine's diagnosis stands without it."""
    out = []
    for diag_kernel, kernel in pairs:
        try:
            doc = explain(diag_kernel, kernel, model).model_dump(mode="json")
        except Exception as exc:  # noqa: BLE001 - any client error (refused, timeout, HTTP 5xx) is said, not raised
            log.warning("no LLM explanation of %s: %s", diag_kernel["name"], exc)
            doc = {"kernel": diag_kernel["name"], "error": f"{type(exc).__name__}: {exc}"[:500]}
        out.append({"model": model_name, **doc})
    return out


def explain_from_env(pairs: Iterable[tuple[dict, KernelProfile]], required: bool = False) -> list[dict]:
    """:func:`explain_kernels` with the endpoint the environment names; [] when none is named
    (InputError instead when ``required``: ``perfscout diagnose --explain on``)."""
    try:
        model = model_from_env()
    except ImportError as exc:  # the `llm` extra (langchain-openai) is not installed
        if required:
            raise InputError(f"--explain needs langchain-openai: pip install 'perfscout[llm]' ({exc})") from None
        log.warning("PERFSCOUT_LLM_BASE_URL is set but langchain-openai is not installed: no explanation")
        return []
    if model is None:
        if required:
            raise InputError("--explain on needs an LLM endpoint: set PERFSCOUT_LLM_BASE_URL (and "
                             "PERFSCOUT_LLM_MODEL, PERFSCOUT_LLM_API_KEY; docs/AGENT.md)")
        return []
    return explain_kernels(pairs, model, LLMEndpoint.from_env().label())


def explanation_blocks(explanations: list[dict], level: int = 2) -> list[Block]:
    """The explanations as report blocks, after the engine's diagnosis: what the model said
    that passed the checks, and what it said that did not (with the reason)."""
    if not explanations:
        return []
    model = next((e["model"] for e in explanations if e.get("model")), "")
    out: list[Block] = [Heading(f"LLM explanation{f' ({model})' if model else ''}", level),
                        Note("The model may only rephrase and order the findings above; what it said beyond "
                             "them (a finding, a metric or a number the engine did not give it) is dropped "
                             "below with the reason.")]
    for e in explanations:
        out.append(Heading(["Kernel ", Code(e["kernel"])], level + 1))
        if e.get("error"):
            out.append(Paragraph(f"No explanation: {e['error']}"))
            continue
        head: list = ["Bottleneck: ", Code(e["bottleneck_type"] or "none")]
        if e.get("bottleneck_replaced"):
            head.append(f" ({e['bottleneck_replaced']})")
        out.append(Paragraph(head))
        if e.get("reasoning"):
            out.append(Paragraph(e["reasoning"]))
        elif e.get("reasoning_withheld"):
            out.append(Paragraph(f"Reasoning withheld: it {e['reasoning_withheld']}."))
        if e.get("accepted"):
            out.append(BulletList([ListItem([Code(a["finding_id"]), ": ", a["suggestion"]],
                                             [Code(m) for m in a["metrics"]]) for a in e["accepted"]]))
        if e.get("dropped"):
            out.append(BulletList([ListItem(["Dropped: ", str(d["suggestion"].get("suggestion", ""))[:200]],
                                             [d["reason"]]) for d in e["dropped"]]))
        if e.get("additional_info_needed"):
            out.append(BulletList(["To measure next: " + str(x) for x in e["additional_info_needed"]]))
    return out
