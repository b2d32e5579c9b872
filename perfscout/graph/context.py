"""Run-time settings of the agent (LangGraph ``context_schema``).

Each field that has an environment variable falls back to it when not passed
explicitly, so the CLI, the Python API and ``langgraph dev`` all read the same
``PERFSCOUT_*`` settings. Context is not checkpointed: a resumed run reads it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from perfscout.state.llm_endpoint import DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT_S

#: field name -> environment variable it falls back to
ENV_FALLBACKS = {
    "home": "PERFSCOUT_HOME",
    "llm_base_url": "PERFSCOUT_LLM_BASE_URL",
    "llm_model": "PERFSCOUT_LLM_MODEL",
    "llm_api_key": "PERFSCOUT_LLM_API_KEY",
    "checkpoint_url": "PERFSCOUT_CHECKPOINT_URL",
    "planner": "PERFSCOUT_PLANNER",
}


@dataclass(kw_only=True)
class Context:
    """Settings for one agent run."""

    home: str = field(
        default="",
        metadata={"description": "Where runs and checkpoints live (PERFSCOUT_HOME; empty: the "
                  "per-user data directory, see perfscout.home)."},
    )
    planner: str = field(
        default="auto",
        metadata={
            "description": "auto (LLM when PERFSCOUT_LLM_BASE_URL is set, else deterministic), "
            "llm, or deterministic (PERFSCOUT_PLANNER)."
        },
    )
    llm_base_url: str = field(
        default="",
        metadata={"description": "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."},
    )
    llm_model: str = field(default="", metadata={"description": "Model name the endpoint serves."})
    llm_api_key: str = field(
        default="",
        metadata={"description": "API key for the endpoint (local servers accept any)."},
    )
    llm_timeout_s: float = field(
        default=DEFAULT_TIMEOUT_S, metadata={"description": "Per-request timeout for the LLM endpoint."}
    )
    llm_max_tokens: int = field(
        default=DEFAULT_MAX_TOKENS, metadata={"description": "Most tokens the model may generate per reply."}
    )
    llm_review: bool = field(
        default=True,
        metadata={"description": "After an LLM plan has run, let the model propose follow-ups once."},
    )
    checkpoint_url: str = field(
        default="",
        metadata={"description": "postgresql://... switches checkpoints to PostgreSQL."},
    )
    max_steps: int = field(default=64, metadata={"description": "Most tool calls one run may make."})
    time_budget_s: float = field(
        default=3600.0, metadata={"description": "Wall-clock budget; tasks left over are reported."}
    )
    max_retries: int = field(
        default=2, metadata={"description": "Retries of a task whose tool failed transiently."}
    )
    max_repeats: int = field(
        default=15, metadata={"description": "Cap on timing repeats when timings are noisy."}
    )
    noise_threshold: float = field(
        default=0.25,
        metadata={"description": "Relative spread of timing samples above which timing is noisy."},
    )
    allow_plugins: bool = field(
        default=False,
        metadata={"description": "Let a sweep spec's `plugins:` import code (only for specs you trust; "
                  "`perfscout run --allow-plugins`)."},
    )
    chat_model: Any = field(
        default=None,
        metadata={"description": "A LangChain chat model object (Python API only; overrides the URL)."},
    )

    def __post_init__(self) -> None:
        # Every setting left at its default falls back to PERFSCOUT_<NAME> (e.g.
        # PERFSCOUT_MAX_STEPS); the documented names above take precedence.
        for f in fields(self):
            if f.name == "chat_model" or getattr(self, f.name) != f.default:
                continue
            env = ENV_FALLBACKS.get(f.name, f"PERFSCOUT_{f.name.upper()}")
            raw = os.environ.get(env)
            if raw:
                kind = type(f.default)
                try:
                    if kind is bool:
                        value: Any = raw.strip().lower() in ("1", "true", "yes", "on")
                    else:
                        value = kind(raw) if kind in (int, float) else raw
                    setattr(self, f.name, value)
                except ValueError as exc:
                    from perfscout.errors import InputError

                    raise InputError(f"{env}={raw!r} is not a valid {kind.__name__}") from exc

    @property
    def home_path(self) -> Path:
        if not self.home:  # one home for every run, wherever it was started (perfscout.home)
            from perfscout.home import perfscout_home

            return perfscout_home()
        return Path(self.home).expanduser()

    @property
    def runs_dir(self) -> Path:
        return self.home_path / "runs"

    def wants_llm(self) -> bool:
        """Whether the planner should try an LLM first."""
        if self.planner == "deterministic":
            return False
        if self.planner == "llm":
            return True
        return bool(self.chat_model is not None or self.llm_base_url)


def context_from(value: Context | dict[str, Any] | None) -> Context:
    """A Context from a Context, a dict of fields (server runs), or nothing (env only)."""
    if isinstance(value, Context):
        return value
    if value is None:
        return Context()
    known = {f.name for f in fields(Context)}
    return Context(**{k: v for k, v in value.items() if k in known})
