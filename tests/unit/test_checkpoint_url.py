"""A checkpoint URL that cannot be used is a clear error, whatever is wrong with it (no
database needed: these fail before any connection is made, or at the connection)."""

from __future__ import annotations

import pytest

from perfscout.errors import InputError
from perfscout.graph.checkpoint import describe, open_checkpointer
from perfscout.graph.context import Context

pytest.importorskip("langgraph.checkpoint.postgres")


@pytest.mark.parametrize(("url", "message"), [
    ("postgresql://%%%", "not a usable PostgreSQL URL"),
    ("postgresql://u:secret@127.0.0.1:1/db", "cannot connect to the checkpoint database"),  # nothing listens on 1
    ("mysql://u@h/db", "must be postgresql://"),
])
def test_unusable_checkpoint_urls_are_input_errors_that_hide_the_password(tmp_path, url, message) -> None:
    ctx = Context(home=str(tmp_path), checkpoint_url=url)
    with pytest.raises(InputError, match=message) as err:
        with open_checkpointer(ctx):
            pass
    assert "secret" not in str(err.value)


def test_describe_survives_a_port_that_is_not_a_number(tmp_path) -> None:
    ctx = Context(home=str(tmp_path), checkpoint_url="postgresql://u:pw@h:notaport/db")
    assert describe(ctx) == "postgresql://h:notaport/db"
