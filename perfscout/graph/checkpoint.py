"""Where checkpoints live: SQLite under PERFSCOUT_HOME, or PostgreSQL.

``PERFSCOUT_CHECKPOINT_URL`` (or ``Context.checkpoint_url``) selects the store:
empty -> ``$PERFSCOUT_HOME/checkpoints.sqlite``; ``sqlite:///PATH`` -> that file;
``postgresql://...`` -> :class:`~langgraph.checkpoint.postgres.PostgresSaver`. Runs
are invoked with ``durability="sync"``: each step's checkpoint is on disk before the
next step starts, so a tool call that finished is never repeated after a crash.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from perfscout.errors import InputError
from perfscout.graph.context import Context

DURABILITY = "sync"


def describe(ctx: Context) -> str:
    """Where the checkpoints of ``ctx`` are (for messages; the password is hidden)."""
    url = ctx.checkpoint_url
    if url.startswith(("postgresql://", "postgres://")):
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port or 5432
        except ValueError:  # "postgresql://h:notaport/db": say it as written (no password there)
            return "postgresql://" + url.split("://", 1)[1].rsplit("@", 1)[-1]
        return f"postgresql://{parts.username or ''}@{host}:{port}{parts.path}"
    return str(_sqlite_path(ctx))


def _sqlite_path(ctx: Context) -> Path:
    url = ctx.checkpoint_url
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///"):]).expanduser()
    return ctx.home_path / "checkpoints.sqlite"


#: Advisory lock key for creating the checkpoint tables ("perfscout" in ASCII, truncated).
_SETUP_LOCK = 0x70657266736375


def _take_setup_lock(conn: Any, timeout_s: float = 300.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s)", (_SETUP_LOCK,))
            row = cur.fetchone()
        if row and (row[0] if not isinstance(row, dict) else next(iter(row.values()))):
            return
        if time.monotonic() > deadline:
            raise InputError(f"the checkpoint tables are being created by another process for over {timeout_s:.0f} s")
        time.sleep(0.05)


@contextmanager
def open_checkpointer(ctx: Context) -> Iterator[BaseCheckpointSaver]:
    """A ready checkpointer (tables created) for the duration of the block."""
    url = ctx.checkpoint_url
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError as exc:
            raise InputError("PERFSCOUT_CHECKPOINT_URL is a PostgreSQL URL but the PostgreSQL "
                             "checkpointer is not installed: pip install 'perfscout[postgres]'") from exc
        import psycopg

        try:
            cm = PostgresSaver.from_conn_string(url)
            saver = cm.__enter__()
        except psycopg.OperationalError as exc:
            raise InputError(f"cannot connect to the checkpoint database {describe(ctx)}: {exc}") from exc
        except (psycopg.Error, ValueError) as exc:  # "postgresql://%%%": not a connection string at all
            raise InputError(f"PERFSCOUT_CHECKPOINT_URL is not a usable PostgreSQL URL ({describe(ctx)}): "
                             f"{str(exc).strip() or type(exc).__name__}; expected postgresql://USER:PASSWORD@HOST:PORT/DB") from exc
        try:
            # first uses from many processes at once: setup() creates tables and runs its
            # migrations, so it runs under a session advisory lock (one at a time). The lock is
            # polled, not waited for: a waiting statement is an open transaction, which the
            # holder's CREATE INDEX CONCURRENTLY would wait on in turn (a deadlock).
            _take_setup_lock(saver.conn)
            try:
                saver.setup()
            finally:
                with saver.conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
            yield saver
        finally:
            cm.__exit__(None, None, None)
        return
    if url and not url.startswith("sqlite:///"):
        raise InputError(f"PERFSCOUT_CHECKPOINT_URL must be postgresql://... or sqlite:///PATH, got {url!r}")
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = _sqlite_path(ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    # check_same_thread=False: ToolNode and the runner use worker threads; SqliteSaver locks.
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()
