"""The claim model's contract: ids in order, the claims.json shape, bad input refused."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from perfscout.state.claims import CLAIMS_FILE, Claim, answer_differences, claims_doc, numbered, read_claims


def test_numbered_gives_ids_in_answer_order_without_touching_the_input():
    cs = [Claim(kind="ranking", text="a"), Claim(kind="warning", text="b")]
    out = numbered(cs)
    assert [c.id for c in out] == ["c1", "c2"]
    assert [c.id for c in cs] == ["", ""]


def test_claims_doc_round_trips_through_claims_json(tmp_path):
    c = Claim(id="c1", kind="ranking", subjects=["sz3", "zfp"], figure="ratio", values={"sz3": 12.5, "zfp": 7.0},
              spread={"sz3": [12.0, 13.0]}, verdict="higher", records=["t01", "t02"], text="sz3 wins")
    doc = claims_doc("zh", [c])
    assert set(doc) == {"language", "claims", "dropped"}
    assert set(doc["claims"][0]) >= {"id", "kind", "subjects", "figure", "values", "spread", "verdict", "records",
                                     "text"}
    (tmp_path / CLAIMS_FILE).write_text(json.dumps(doc), encoding="utf-8")
    back = read_claims(tmp_path)
    assert back.language == "zh" and back.claims[0] == c


def test_bad_language_and_unknown_fields_are_refused():
    with pytest.raises(ValidationError):
        claims_doc("fr", [])
    with pytest.raises(ValidationError):
        Claim(kind="x", colour="red")


def _speed(winner, verdict, mbps):
    pair = [winner, "b" if winner == "a" else "a"]
    return Claim(id="c1", kind="ranking" if verdict == "faster" else "too_close", subjects=pair,
                 figure="compress_MBps", values={winner: mbps}, verdict=verdict, records=["t1", "t2"])


def test_two_answers_may_differ_on_speed_only_as_winner_against_too_close():
    same = [Claim(id="c2", kind="ranking", subjects=["sz3", "zfp"], figure="ratio", values={"sz3": 9.0, "zfp": 4.0},
                  verdict="higher", records=["t1", "t2"], text="one wording")]
    other_text = [same[0].model_copy(update={"text": "another wording"})]
    assert answer_differences(same, other_text) == []
    assert answer_differences([_speed("a", "faster", 10.0)] + same, [_speed("a", "faster", 99.0)] + same) == []
    assert answer_differences([_speed("a", "faster", 10.0)], [_speed("a", "too_close_to_call", 11.0)]) == []
    flipped = answer_differences([_speed("a", "faster", 10.0)], [_speed("b", "faster", 10.0)])
    assert flipped and "named faster" in flipped[0]
    changed = [same[0].model_copy(update={"values": {"sz3": 9.5, "zfp": 4.0}})]
    assert answer_differences(same, changed) and answer_differences(same, []) != []
