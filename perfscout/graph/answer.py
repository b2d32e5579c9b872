"""The report's first lines: claims that answer what was asked, each re-checked against the records.

Built only from the stored results of the run (the same records the tables show), for the
question the intent names: which codec compresses most, fastest or with the least error,
how one codec did, whether a target was met, what limits a program, what this machine is.
The steps, one way:

1. :mod:`~perfscout.graph.claims_facts` gathers the facts (final records, per-repeat
   timings, search trials, the field's range and stored type, skipped codecs, notes);
2. :mod:`~perfscout.graph.claims_build` turns them into typed claims
   (:class:`~perfscout.state.claims.Claim`), what could not be done first;
3. :mod:`~perfscout.graph.claims_check` re-derives each claim from the records and drops
   (and logs) any that does not follow;
4. :mod:`~perfscout.graph.answer_text` writes each claim's sentence, in English or Chinese.

The report's Answer lines are the claims' texts in order; ``claims.json`` holds the claims.
"""

from __future__ import annotations

from typing import Any

from perfscout.graph.answer_text import bound_label, render
from perfscout.graph.claims_build import build_claims
from perfscout.graph.claims_check import checked
from perfscout.graph.claims_facts import facts_from
from perfscout.state.claims import Claim, numbered


def answer_claims(state: dict[str, Any], records: list[dict[str, Any]],
                  finals: list[dict[str, Any]]) -> tuple[str, list[Claim], list[dict[str, Any]]]:
    """(language, the Answer's claims: checked, numbered, with their text, the claims the
    checker dropped with why)."""
    facts = facts_from(state, records, finals)
    dropped: list[dict[str, Any]] = []
    claims = checked(build_claims(facts), facts, dropped)
    if not claims:  # every claim was dropped: say so rather than answer nothing
        claims = [Claim(kind="nothing")]
    rendered = [c.model_copy(update={"text": render(c, facts.language)}) for c in claims]
    return facts.language, numbered(rendered), dropped


def answer_lines(state: dict[str, Any], records: list[dict[str, Any]],
                 finals: list[dict[str, Any]]) -> list[str]:
    """The Answer's sentences (the claims' texts, in order)."""
    return [c.text for c in answer_claims(state, records, finals)[1]]


__all__ = ["answer_claims", "answer_lines", "bound_label"]
