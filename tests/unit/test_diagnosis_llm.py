"""LLM explanation: a scripted chat model (langchain-core's fake) may only rephrase findings
(the real model and the CLI: tests/integration/test_diagnose_explain.py)."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from perfscout.analysis.diagnosis import diagnose
from perfscout.analysis.diagnosis.llm_explain import (build_messages, explain, explain_from_env, explain_kernels,
                                                      explanation_blocks, model_from_env)
from perfscout.analysis.report.markdown import render_blocks
from perfscout.errors import InputError
from tests.unit._planted import kernel


def _diag(name: str, cc: str | None = None):
    k = kernel(name)
    if cc:
        k.compute_capability = cc
    (d,) = diagnose([k])["kernels"]
    return d, k


def _reply(**kw) -> str:
    doc = {"bottleneck_type": "uncoalesced_global_access", "reasoning": "78% of sectors wasted",
           "optimization_suggestions": [], "additional_info_needed": []}
    doc.update(kw)
    return "Here is my analysis:\n```json\n" + json.dumps(doc) + "\n```"


def test_valid_suggestions_are_kept_and_invalid_ones_dropped_with_reasons():
    d, k = _diag("pk_uncoalesced_transpose")
    sugg = [
        {"finding_id": "uncoalesced_global_access", "suggestion": "transpose via a padded shared tile",
         "metrics": ["derived__memory_l2_theoretical_sectors_global_excessive"]},
        {"finding_id": "warp_divergence", "suggestion": "make branches uniform",
         "metrics": ["smsp__thread_inst_executed_per_inst_executed.ratio"]},
        {"finding_id": "uncoalesced_global_access", "suggestion": "check it",
         "metrics": ["made_up__metric.sum"]},
        {"finding_id": "uncoalesced_global_access", "suggestion": "just do better", "metrics": []},
    ]
    model = FakeListChatModel(responses=[_reply(optimization_suggestions=sugg)])
    out = explain(d, k, model)
    assert out.bottleneck_type == "uncoalesced_global_access" and not out.bottleneck_replaced
    assert [s.suggestion for s in out.accepted] == ["transpose via a padded shared tile"]
    reasons = [x.reason for x in out.dropped]
    assert "did not find" in reasons[0] and "absent from the profile: made_up__metric.sum" in reasons[1]
    assert reasons[2] == "cites no metric"


def test_architecture_gate_drops_hopper_only_advice_on_older_chips():
    sugg = [{"finding_id": "uncoalesced_global_access", "suggestion": "stage the tile with TMA bulk copies",
             "metrics": ["derived__memory_l2_theoretical_sectors_global_excessive"]},
            {"finding_id": "uncoalesced_global_access", "suggestion": "prefetch with cp.async into shared memory",
             "metrics": ["derived__memory_l2_theoretical_sectors_global_excessive"]}]
    d, k = _diag("pk_uncoalesced_transpose", cc="8.0")
    out = explain(d, k, FakeListChatModel(responses=[_reply(optimization_suggestions=sugg)]))
    assert [s.suggestion for s in out.accepted] == ["prefetch with cp.async into shared memory"]
    assert "TMA needs sm_90+" in out.dropped[0].reason and "sm_80" in out.dropped[0].reason
    d, k = _diag("pk_uncoalesced_transpose")  # the H200 (sm_90) keeps both
    out = explain(d, k, FakeListChatModel(responses=[_reply(optimization_suggestions=sugg)]))
    assert len(out.accepted) == 2 and not out.dropped


def test_invented_bottleneck_is_replaced_by_the_engine_primary():
    d, k = _diag("pk_smem_conflict")
    out = explain(d, k, FakeListChatModel(responses=[_reply(bottleneck_type="compute_bound_maybe")]))
    assert out.bottleneck_type == "shared_bank_conflicts" and "not an engine finding" in out.bottleneck_replaced


@pytest.mark.parametrize("text", ["I think it is memory bound.", '{"reasoning": "no type"}'])
def test_unusable_reply_is_a_clear_error(text):
    d, k = _diag("pk_smem_conflict")
    with pytest.raises(InputError):
        explain(d, k, FakeListChatModel(responses=[text]))


def test_prompt_carries_only_engine_findings(monkeypatch):
    d, _ = _diag("pk_local_array")
    (sys_role, sys_text), (role, body) = build_messages(d)
    assert sys_role == "system" and "only rephrase" in sys_text
    doc = json.loads(body)
    assert doc["primary"] == "local_memory" and {f["id"] for f in doc["findings"]} == {f["id"] for f in d["findings"]}
    monkeypatch.delenv("PERFSCOUT_LLM_BASE_URL", raising=False)
    assert model_from_env() is None


def test_reasoning_is_kept_only_when_every_metric_and_number_was_given():
    d, k = _diag("pk_uncoalesced_transpose")  # evidence: wasted_sector_fraction 0.777778, 16777216 sectors
    ok = ("78% of the sectors fetched are not used (l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum = 16,777,216); "
          "on sm_90 a tile[32][33] transpose fixes it")
    out = explain(d, k, FakeListChatModel(responses=[_reply(reasoning=ok)]))
    assert out.reasoning == ok and not out.reasoning_withheld
    out = explain(d, k, FakeListChatModel(responses=[_reply(reasoning="77.8% wasted, i.e. 0.78 of the sectors")]))
    assert out.reasoning  # the same figure as written at other precisions
    invented = explain(d, k, FakeListChatModel(responses=[_reply(reasoning="the kernel reaches 91% of DRAM peak")]))
    assert invented.reasoning == "" and invented.reasoning_withheld == "states numbers that are in no finding: 91"
    metric = explain(d, k, FakeListChatModel(responses=[_reply(reasoning="dram__throughput.avg is the limit")]))
    assert metric.reasoning == "" and "dram__throughput.avg" in metric.reasoning_withheld


def test_explain_kernels_says_why_a_kernel_has_no_explanation_and_renders_both():
    d, k = _diag("pk_uncoalesced_transpose")
    sugg = [{"finding_id": "uncoalesced_global_access", "suggestion": "transpose via a padded shared tile",
             "metrics": ["derived__memory_l2_theoretical_sectors_global_excessive"]},
            {"finding_id": "made_up", "suggestion": "x", "metrics": []}]
    model = FakeListChatModel(responses=[_reply(optimization_suggestions=sugg), "no JSON here"])
    good, bad = explain_kernels([(d, k), (d, k)], model, "fake at test")
    assert good["model"] == "fake at test" and good["accepted"][0]["finding_id"] == "uncoalesced_global_access"
    assert bad == {"model": "fake at test", "kernel": d["name"],
                   "error": "InputError: the model's reply holds no JSON object"}
    text = render_blocks(explanation_blocks([good, bad]))
    assert "## LLM explanation (fake at test)" in text and "transpose via a padded shared tile" in text
    assert "cites 'made_up', which the engine did not find" in text
    assert "No explanation: InputError: the model's reply holds no JSON object" in text
    assert explanation_blocks([]) == []


def test_explain_from_env_needs_an_endpoint_only_when_asked(monkeypatch):
    monkeypatch.delenv("PERFSCOUT_LLM_BASE_URL", raising=False)
    d, k = _diag("pk_smem_conflict")
    assert explain_from_env([(d, k)]) == []
    with pytest.raises(InputError, match="--explain on needs an LLM endpoint"):
        explain_from_env([(d, k)], required=True)
