"""Typed claims: what the report's Answer says, one statement at a time.

The Answer of an agent run is a list of :class:`Claim` objects, built from the run's
records, re-derived from those records before any is rendered, and rendered in the run's
language. Each claim names what it is about (``subjects``), the record column it speaks
of (``figure``), the figures it states (``values``, with ``spread`` where a statistic
was used), its verdict and the records it rests on (``records``: their ``task_key``).

Every agent run directory holds ``claims.json`` beside ``report.md``::

    {"language": "en" | "zh", "claims": [Claim.model_dump(), ...], "dropped": [{"claim", "why"}, ...]}

and the report's Answer lines are exactly the claims' ``text`` in order. This shape is a
contract between the answer builder, the viewer and the tests that compare two runs by
their claims (never by their sentences): add fields with care, never rename one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: The file beside report.md that holds the run's claims.
CLAIMS_FILE = "claims.json"

#: Kinds of claim the answer builder makes, in the order an Answer usually shows them.
#: ``kind`` is a plain string so that a new kind does not break older readers; these are
#: the ones perfscout writes today.
CLAIM_KINDS: tuple[str, ...] = (
    "refused", "no_plan", "nothing",
    "could_not_run", "cpu_instead",
    "ranking", "too_close", "single", "bounds", "target",
    "violation", "failure", "warning",
    "profile", "machine", "codecs", "sweep", "regression", "tool_error", "ignored", "note",
)

#: Verdicts a claim may carry (None where the claim states figures only).
VERDICTS: tuple[str, ...] = (
    "met", "met_within_tolerance", "missed",  # targets
    "held", "violated",  # error bounds
    "higher", "lower", "tie",  # ratio / error rankings (the first subject is the better one)
    "faster", "too_close_to_call",  # speed rankings
    "not_run", "failed", "flagged",  # could_not_run / failure / warning
)

ClaimValue = float | int | str | bool | None


class Claim(BaseModel):
    """One statement of the Answer, with the figures and records it rests on."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default="", description='"c1", "c2", ... in answer order.')
    kind: str = Field(description="What sort of statement (see CLAIM_KINDS).")
    subjects: list[str] = Field(default_factory=list, description='Codec names, with " (GPU)" where it ran on a GPU '
                                "(or the dataset, program or machine the claim is about).")
    figure: str | None = Field(default=None, description="The record column the claim speaks of (ratio, psnr, "
                               "compress_MBps, ...), or None.")
    values: dict[str, ClaimValue] = Field(default_factory=dict, description="{subject: value} of ``figure``.")
    spread: dict[str, list[float]] = Field(default_factory=dict, description="{subject: [lo, hi]} where a "
                                           "statistic was used (a confidence interval), else {}.")
    verdict: str | None = Field(default=None, description="met, met_within_tolerance, missed, held, violated, "
                                "faster, too_close_to_call, ... (see VERDICTS), or None.")
    records: list[str] = Field(default_factory=list, description="task_key of every record the claim rests on.")
    text: str = Field(default="", description="The rendered sentence, in the run's language.")
    # Fields beyond the shared contract: what the checker and the renderers need.
    where: dict[str, Any] = Field(default_factory=dict, description="The setting the claim is about: dataset, mode, "
                                  "bound (one group of records).")
    detail: dict[str, Any] = Field(default_factory=dict, description="Other numbers the claim rests on (a target, "
                                   "a tolerance, a margin, a threshold, a p-value), by name.")


class ClaimsFile(BaseModel):
    """The content of ``claims.json``."""

    model_config = ConfigDict(extra="forbid")

    language: Literal["en", "zh"] = "en"
    claims: list[Claim] = Field(default_factory=list)
    #: Claims the checker dropped because they did not re-derive from the records: each
    #: ``{"claim": Claim as JSON (no text), "why": ...}``. Never rendered; kept for audit.
    dropped: list[dict[str, Any]] = Field(default_factory=list)


def numbered(claims: list[Claim]) -> list[Claim]:
    """The claims with ids ``c1``, ``c2``, ... in their order (copies; the input is untouched)."""
    return [c.model_copy(update={"id": f"c{i}"}) for i, c in enumerate(claims, 1)]


def claims_doc(language: str, claims: list[Claim], dropped: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON document of ``claims.json`` (validated: a bad language is an error, not a file)."""
    return ClaimsFile(language=language, claims=claims,  # type: ignore[arg-type]
                      dropped=list(dropped or [])).model_dump(mode="json")


def read_claims(path: str | Path) -> ClaimsFile:
    """Load ``claims.json`` (or the run directory that holds it)."""
    p = Path(path)
    if p.is_dir():
        p = p / CLAIMS_FILE
    return ClaimsFile.model_validate(json.loads(p.read_text(encoding="utf-8")))


def is_speed(c: Claim) -> bool:
    """A claim about throughput (its figures are timings: they differ between two runs)."""
    return bool(c.figure and c.figure.endswith("_MBps"))


def answer_differences(a: list[Claim], b: list[Claim]) -> list[str]:
    """How two runs' Answers differ, claim by claim ([] when they say the same).

    Everything but the sentence must agree (kind, subjects, figure, values, verdict, records),
    except on speed: timings differ from run to run, so their values are not compared, and one
    run may name a winner where the other finds the speeds too close to call. Two runs that
    name *different* winners differ.
    """
    out: list[str] = []
    if len(a) != len(b):
        out.append(f"{len(a)} claims against {len(b)}: {[c.kind for c in a]} vs {[c.kind for c in b]}")
    for x, y in zip(a, b):
        where = f"{x.id or '?'} ({x.kind})"
        if is_speed(x) and is_speed(y):
            if sorted(x.subjects) != sorted(y.subjects) or x.figure != y.figure or x.where != y.where:
                out.append(f"{where}: speed of {x.subjects} at {x.where} vs {y.subjects} at {y.where}")
            elif x.verdict == y.verdict == "faster" and x.subjects[0] != y.subjects[0]:
                out.append(f"{where}: {x.subjects[0]} is named faster in one run, {y.subjects[0]} in the other")
            continue
        for name in ("kind", "subjects", "figure", "values", "verdict", "records", "where"):
            if getattr(x, name) != getattr(y, name):
                out.append(f"{where}: {name} {getattr(x, name)!r} vs {getattr(y, name)!r}")
    return out


__all__ = ["CLAIMS_FILE", "CLAIM_KINDS", "VERDICTS", "Claim", "ClaimsFile", "answer_differences", "claims_doc",
           "is_speed", "numbered", "read_claims"]
