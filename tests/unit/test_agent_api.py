"""perfscout.agent.parse_answer: the one reading of an answer, for `perfscout resume --answer` and the viewer."""

def test_parse_answer_is_one_rule_for_the_cli_and_the_viewer() -> None:
    import pytest as _pytest

    from perfscout.agent import parse_answer
    from perfscout.errors import InputError

    assert parse_answer("  rel 1e-3 ") == "rel 1e-3"
    assert parse_answer('{"shape": [512, 512], "dtype": "f32"}') == {"shape": [512, 512], "dtype": "f32"}
    with _pytest.raises(InputError, match="--answer looks like JSON but is not valid JSON"):
        parse_answer('{"shape": [512,', "--answer")
    with _pytest.raises(InputError, match="the answer is empty"):
        parse_answer("   ")
