"""Optional LLM explanation of a diagnosis: the model may rephrase and prioritise, never invent.

The model gets the engine's findings for one kernel and answers in KEET-style JSON
(``bottleneck_type``, ``reasoning``, ``optimization_suggestions``,
``additional_info_needed``). Each suggestion must cite an engine finding id and only
metrics present in the profile (or cited by that finding), and must pass the
architecture gate (TMA/wgmma/clusters need sm_90+, cp.async sm_80+, tensor cores
sm_70+); anything else is dropped and the reason shown. A bottleneck_type that is not
an engine finding is replaced by the engine's primary.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from perfscout.analysis.diagnosis.arch import Arch, arch_for
from perfscout.errors import InputError
from perfscout.state.llm_endpoint import LLMEndpoint, make_chat_model
from perfscout.state.profiles import KernelProfile

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
    accepted: list[Suggestion] = Field(default_factory=list)
    dropped: list[Dropped] = Field(default_factory=list)
    additional_info_needed: list[str] = Field(default_factory=list)
    raw: str = ""


def build_messages(diag_kernel: dict) -> list[tuple[str, str]]:
    """(role, text) messages: the system rules and the engine's findings as JSON."""
    slim = [{"id": f["id"], "title": f["title"], "expected_gain": f.get("expected_gain"),
             "evidence": [{"metric": e["metric"], "value": e["value"], "unit": e.get("unit", "")}
                          for e in f["evidence"]],
             "recommendation": f["recommendation"]} for f in diag_kernel["findings"]]
    body = json.dumps({"kernel": diag_kernel["name"],
                       "primary": diag_kernel["primary"]["id"] if diag_kernel.get("primary") else None,
                       "findings": slim}, indent=1, default=str)
    return [("system", SYSTEM_PROMPT), ("human", body)]


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
    accepted, dropped = [], []
    for s in reply.optimization_suggestions:
        reason = None
        if s.finding_id not in findings:
            reason = f"cites {s.finding_id!r}, which the engine did not find"
        else:
            cited = {e["metric"] for e in findings[s.finding_id]["evidence"]}
            bad = [m for m in s.metrics if m not in kernel.metrics and m not in cited]
            if bad:
                reason = f"cites metrics absent from the profile: {', '.join(bad)}"
            elif not s.metrics:
                reason = "cites no metric"
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
    return Explanation(kernel=diag_kernel["name"], bottleneck_type=bt, bottleneck_replaced=replaced,
                       reasoning=reply.reasoning, accepted=accepted, dropped=dropped,
                       additional_info_needed=reply.additional_info_needed)


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
