"""The one shape parser (perfscout.state.shapes), as every reader of a shape sees it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfscout.errors import InputError
from perfscout.state.shapes import MAX_DIMS, is_shape, parse_shape, shape_str


@pytest.mark.parametrize("text,dims", [
    ("41,128,128", (41, 128, 128)), ("512x512", (512, 512)), (" 64 × 64 ", (64, 64)), ("8*8*8", (8, 8, 8)),
    ("512 512", (512, 512)), ("(8, 8)", (8, 8)), ("[4,4,4,4]", (4, 4, 4, 4)), ("7", (7,)), ("16X16", (16, 16)),
])
def test_every_spelling_of_a_shape_reads_the_same(text: str, dims: tuple[int, ...]) -> None:
    assert parse_shape(text) == dims and is_shape(text)


@pytest.mark.parametrize("bad,why", [
    ("", "empty shape"), ("24,x,40", "bad shape"), ("12.5,3", "bad shape"), ("0,5", ">= 1"), ("-1,4", "bad shape|>= 1"),
    ("1,2,3,4,5", "at most 4"), ([2.5, 2], "must be integers"), ([True, 2], "must be integers"), (None, "sequence"),
])
def test_bad_shapes_say_what_is_wrong(bad: object, why: str) -> None:
    with pytest.raises(InputError, match=why):
        parse_shape(bad)  # type: ignore[arg-type]
    assert not is_shape(bad)


@given(st.lists(st.integers(1, 10**6), min_size=1, max_size=MAX_DIMS), st.sampled_from([",", "x", " x ", "×", ", ", " "]))
def test_written_shapes_round_trip(dims: list[int], sep: str) -> None:
    assert parse_shape(sep.join(map(str, dims))) == tuple(dims)
    assert parse_shape(shape_str(dims)) == tuple(dims) == parse_shape(np.array(dims))


def test_the_agent_readers_use_it() -> None:
    from perfscout.datasets.field import parse_shape as field_parse
    from perfscout.graph.reflect import validate_answer

    assert field_parse is parse_shape
    updates, problem = validate_answer({"shape": "the shape"}, '{"shape": "64 x 32"}')
    assert problem == "" and updates == {"shape": "64,32"}
    updates, problem = validate_answer({"shape": "the shape"}, '{"shape": "0,32"}')
    assert updates is None and ">= 1" in problem
