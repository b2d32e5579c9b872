"""The one way perfscout reaches a chat model: an OpenAI-compatible endpoint and its settings.

Both users of a model build it here: the agent's planner (:mod:`perfscout.graph.llm`,
from its ``Context``) and the diagnosis explainer
(:mod:`perfscout.analysis.diagnosis.llm_explain`, from the environment). So the same
``PERFSCOUT_LLM_*`` variables mean the same model, key, timeout and token limit for
both. It sits in ``state`` because both layers need it; it imports ``langchain_openai``
(the ``llm`` extra) only when a model is actually built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: What an unset setting means (the agent's documented ``Context`` defaults).
DEFAULT_MODEL = "gpt-4o-mini"  # the model name api.openai.com serves when no endpoint is named
DEFAULT_API_KEY = "not-needed"  # local servers (vLLM, llama.cpp, Ollama) accept any key
DEFAULT_TIMEOUT_S = 120.0  # per request: a local 7B model on CPU can take a minute
DEFAULT_MAX_TOKENS = 1024  # a plan or an explanation is a few hundred tokens

#: setting -> the environment variable it is read from
ENV = {
    "base_url": "PERFSCOUT_LLM_BASE_URL",
    "model": "PERFSCOUT_LLM_MODEL",
    "api_key": "PERFSCOUT_LLM_API_KEY",
    "timeout_s": "PERFSCOUT_LLM_TIMEOUT_S",
    "max_tokens": "PERFSCOUT_LLM_MAX_TOKENS",
}


@dataclass(frozen=True)
class LLMEndpoint:
    """An OpenAI-compatible endpoint; empty strings mean the defaults above."""

    base_url: str = ""  # empty: api.openai.com
    model: str = ""
    api_key: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_tokens: int = DEFAULT_MAX_TOKENS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMEndpoint:
        """The endpoint the ``PERFSCOUT_LLM_*`` variables name (bad numbers: ValueError)."""
        env = os.environ if environ is None else environ
        timeout = env.get(ENV["timeout_s"]) or DEFAULT_TIMEOUT_S
        tokens = env.get(ENV["max_tokens"]) or DEFAULT_MAX_TOKENS
        return cls(base_url=env.get(ENV["base_url"], ""), model=env.get(ENV["model"], ""),
                   api_key=env.get(ENV["api_key"], ""), timeout_s=float(timeout), max_tokens=int(tokens))

    @property
    def configured(self) -> bool:
        """Whether an endpoint was named (without one, perfscout works without a model)."""
        return bool(self.base_url)

    @property
    def model_name(self) -> str:
        return self.model or DEFAULT_MODEL

    def label(self) -> str:
        return f"{self.model_name} at {self.base_url or 'api.openai.com'}"


def make_chat_model(endpoint: LLMEndpoint) -> Any:
    """A LangChain ``ChatOpenAI`` for ``endpoint``: deterministic (temperature 0), and no
    retries of its own: the callers decide what a failed request means (the planner falls
    back to the offline parser, the explainer to the rule text)."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=endpoint.base_url or None, model=endpoint.model_name,
                      api_key=endpoint.api_key or DEFAULT_API_KEY, temperature=0,
                      timeout=endpoint.timeout_s, max_retries=0, max_tokens=endpoint.max_tokens)
