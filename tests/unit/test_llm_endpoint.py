"""One chat-model factory: the planner and the diagnosis explainer read PERFSCOUT_LLM_* alike."""

from __future__ import annotations

import pytest

from perfscout.state.llm_endpoint import DEFAULT_API_KEY, DEFAULT_MODEL, LLMEndpoint, make_chat_model

pytest.importorskip("langchain_openai", reason="the llm extra (langchain-openai) is not installed")

ENV = ("PERFSCOUT_LLM_BASE_URL", "PERFSCOUT_LLM_MODEL", "PERFSCOUT_LLM_API_KEY",
       "PERFSCOUT_LLM_TIMEOUT_S", "PERFSCOUT_LLM_MAX_TOKENS")


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _settings(model) -> tuple:
    return (str(model.openai_api_base), model.model_name, model.openai_api_key.get_secret_value(),
            model.request_timeout, model.max_tokens, model.max_retries, model.temperature)


def test_planner_and_explainer_build_the_same_model_from_one_environment(clean_env) -> None:
    from perfscout.analysis.diagnosis.llm_explain import model_from_env
    from perfscout.graph.context import Context
    from perfscout.graph.llm import make_chat_model as planner_model

    clean_env.setenv("PERFSCOUT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    clean_env.setenv("PERFSCOUT_LLM_MODEL", "qwen2.5:7b")
    clean_env.setenv("PERFSCOUT_LLM_TIMEOUT_S", "7.5")
    explainer, planner = model_from_env(), planner_model(Context())
    assert _settings(explainer) == _settings(planner)
    assert _settings(planner) == ("http://127.0.0.1:9/v1", "qwen2.5:7b", DEFAULT_API_KEY, 7.5, 1024, 0, 0)


def test_defaults_are_the_documented_ones_and_no_endpoint_means_no_model(clean_env) -> None:
    from perfscout.analysis.diagnosis.llm_explain import model_from_env
    from perfscout.graph.context import Context
    from perfscout.graph.llm import model_label

    assert model_from_env() is None
    endpoint = LLMEndpoint.from_env()
    assert not endpoint.configured and endpoint.model_name == DEFAULT_MODEL == "gpt-4o-mini"
    assert model_label(Context()) == "gpt-4o-mini at api.openai.com"
    assert make_chat_model(endpoint).model_name == "gpt-4o-mini"
    with pytest.raises(ValueError):
        LLMEndpoint.from_env({"PERFSCOUT_LLM_MAX_TOKENS": "many"})
