"""The checkpoint store, read the way a viewer needs it: node by node, cheaply.

``graph.get_state_history`` loads every checkpoint whole; the agent's checkpoints carry the
full state (messages, observations), so a run of 1,000 tool calls holds ~3,000 checkpoints
of up to megabytes each and that call takes minutes. What a timeline needs is smaller: each
checkpoint's id, parent and step, and the writes of the node that ran from it (its update,
its question, the answer it got). The SQLite and PostgreSQL savers keep exactly those in
two tables, read here with one query each; the writes are decoded with the saver's own
serializer. Any other saver, or tables of another shape, fall back to
``get_state_history`` (the same rows, slower). A whole state is loaded for one checkpoint
at a time (:meth:`Store.snapshot`).

Reading never writes: the SQLite file is not created when missing and its tables are not
set up (a damaged file stays as it is and the error says which file).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfscout.errors import InputError
from perfscout.graph.checkpoint import describe, open_checkpointer
from perfscout.graph.context import Context

#: Channels LangGraph writes besides the state's own keys.
INTERRUPT, RESUME, ERROR = "__interrupt__", "__resume__", "__error__"

_UUID_EPOCH = 0x01B21DD213814000  # 1582-10-15 to 1970-01-01 in 100 ns ticks (RFC 9562)


class StoreUnreadable(InputError):
    """The checkpoint store exists but cannot be read (damaged, locked, unreachable)."""


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def checkpoint_time(checkpoint_id: str) -> float | None:
    """Epoch seconds of a checkpoint id (LangGraph's ids are UUIDv6: time-ordered)."""
    try:
        u = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError):
        return None
    if u.version != 6:
        return None
    n = u.int
    ticks = ((n >> 96) << 28) | (((n >> 80) & 0xFFFF) << 12) | ((n >> 64) & 0x0FFF)
    return (ticks - _UUID_EPOCH) / 1e7


@dataclass
class Write:
    node: str  # the node whose task wrote it ("" when the saver does not say)
    channel: str
    value: Any


@dataclass
class Checkpoint:
    id: str
    parent: str | None
    step: int
    source: str  # input | loop | update | fork
    ts: float | None
    writes: list[Write] = field(default_factory=list)

    @property
    def node(self) -> str:
        """The node that ran from this checkpoint (its writes say), '' when none ran yet."""
        return next((w.node for w in self.writes if w.node), "")


def _node_of(task_path: str) -> str:
    # "~__pregel_pull, act" -> "act"
    return task_path.rsplit(",", 1)[-1].strip() if task_path else ""


def _metadata(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        doc = json.loads(raw) if raw else {}
    except (ValueError, TypeError):
        return {}
    return doc if isinstance(doc, dict) else {}


class Store:
    """One open checkpointer, for the duration of a request."""

    def __init__(self, saver: Any, kind: str, where: str) -> None:
        self.saver, self.kind, self.where = saver, kind, where
        self._graph: Any = None

    @property
    def graph(self) -> Any:
        if self._graph is None:
            from perfscout.graph.graph import compile_graph

            self._graph = compile_graph(self.saver)
        return self._graph

    # -- SQL over the savers' own tables ---------------------------------------------
    def _rows(self, sqlite_sql: str, pg_sql: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        if self.kind == "sqlite":
            cur = self.saver.conn.execute(sqlite_sql, args)
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]
        with self.saver.conn.cursor() as cur:
            cur.execute(pg_sql, args)
            rows = cur.fetchall()
            names = [d[0] for d in cur.description]
        return [row if isinstance(row, dict) else dict(zip(names, row)) for row in rows]

    def threads(self) -> list[tuple[str, str]]:
        """(thread id, latest checkpoint id), the most recently written first."""
        if self.kind in ("sqlite", "postgres"):
            table = "checkpoints"
            rows = self._rows(
                f"SELECT thread_id, MAX(checkpoint_id) AS latest FROM {table} WHERE checkpoint_ns = '' "
                "GROUP BY thread_id",
                f"SELECT thread_id, MAX(checkpoint_id) AS latest FROM {table} WHERE checkpoint_ns = '' "
                "GROUP BY thread_id", ())
            out = [(str(r["thread_id"]), str(r["latest"])) for r in rows]
        else:
            latest: dict[str, str] = {}
            for tup in self.saver.list(None):
                conf = tup.config["configurable"]
                if conf.get("checkpoint_ns", "") == "":
                    tid, cid = conf["thread_id"], conf["checkpoint_id"]
                    latest[tid] = max(latest.get(tid, ""), cid)
            out = list(latest.items())
        return sorted(out, key=lambda t: t[1], reverse=True)

    def checkpoints(self, thread_id: str) -> list[Checkpoint]:
        """Every checkpoint of the thread (oldest first) with the writes made from it."""
        if self.kind not in ("sqlite", "postgres"):
            return self.checkpoints_from_history(thread_id)
        rows = self._rows(
            "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id",
            "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY checkpoint_id", (thread_id,))
        by_id: dict[str, Checkpoint] = {}
        for r in rows:
            meta = _metadata(r["metadata"])
            cid = str(r["checkpoint_id"])
            by_id[cid] = Checkpoint(id=cid, parent=r["parent_checkpoint_id"], step=int(meta.get("step", -1)),
                                    source=str(meta.get("source", "")), ts=checkpoint_time(cid))
        for cid, writes in self.writes(thread_id).items():
            if cid in by_id:
                by_id[cid].writes = writes
        return list(by_id.values())

    def writes(self, thread_id: str, checkpoint_id: str | None = None) -> dict[str, list[Write]]:
        """checkpoint id -> the writes of the tasks that ran from it, in the order written."""
        where, args = "thread_id = {p} AND checkpoint_ns = ''", [thread_id]
        if checkpoint_id is not None:
            where += " AND checkpoint_id = {p}"
            args.append(checkpoint_id)
        cols = "checkpoint_id, task_id, task_path, idx, channel, type"
        rows = self._rows(
            f"SELECT {cols}, value FROM writes WHERE {where.format(p='?')} ORDER BY checkpoint_id, task_id, idx",
            f"SELECT {cols}, blob AS value FROM checkpoint_writes WHERE {where.format(p='%s')} "
            "ORDER BY checkpoint_id, task_id, idx", tuple(args))
        out: dict[str, list[Write]] = {}
        serde = self.saver.serde
        for r in rows:
            channel = str(r["channel"])
            if channel.startswith("branch:"):
                continue  # routing bookkeeping; the next visit says where the run went
            kind, blob = r["type"], r["value"]
            try:
                value = None if kind in (None, "null") else serde.loads_typed((kind, bytes(blob)))
            except Exception as exc:  # noqa: BLE001 - one unreadable write must not hide the run
                value = f"<unreadable write: {type(exc).__name__}: {exc}>"
            node = _node_of(str(r.get("task_path") or ""))  # "" for the resume map LangGraph keeps per run
            out.setdefault(str(r["checkpoint_id"]), []).append(Write(node, channel, value))
        return out

    # -- the reference path ------------------------------------------------------------
    def checkpoints_from_history(self, thread_id: str) -> list[Checkpoint]:
        """The same rows from ``graph.get_state_history`` (every checkpoint loaded whole)."""
        out = []
        for snap in self.graph.get_state_history({"configurable": {"thread_id": thread_id}}):
            conf = snap.config["configurable"]
            parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            meta = snap.metadata or {}
            writes: list[Write] = []
            for task in snap.tasks:
                for irq in task.interrupts:
                    writes.append(Write(task.name, INTERRUPT, [irq]))
                if task.error is not None:
                    writes.append(Write(task.name, ERROR, task.error))
                for channel, value in (task.result or {}).items():
                    writes.append(Write(task.name, channel, value))
            out.append(Checkpoint(id=conf["checkpoint_id"], parent=parent, step=int(meta.get("step", -1)),
                                  source=str(meta.get("source", "")), ts=checkpoint_time(conf["checkpoint_id"]),
                                  writes=writes))
        return sorted(out, key=lambda c: c.id)

    def snapshot(self, thread_id: str, checkpoint_id: str | None = None) -> Any:
        """The ``StateSnapshot`` at a checkpoint (the latest when none is named)."""
        conf: dict[str, Any] = {"thread_id": thread_id}
        if checkpoint_id:
            conf.update(checkpoint_id=checkpoint_id, checkpoint_ns="")
        return self.graph.get_state({"configurable": conf})


def lineage(checkpoints: list[Checkpoint]) -> tuple[list[Checkpoint], int]:
    """The branch that ends at the newest checkpoint, oldest first, and how many
    checkpoints lie on other branches (left by a fork on the same thread)."""
    if not checkpoints:
        return [], 0
    by_id = {c.id: c for c in checkpoints}
    path = []
    cur: Checkpoint | None = max(checkpoints, key=lambda c: c.id)
    while cur is not None and len(path) <= len(checkpoints):
        path.append(cur)
        cur = by_id.get(cur.parent) if cur.parent else None
    path.reverse()
    return path, len(checkpoints) - len(path)


@contextmanager
def open_store(ctx: Context) -> Iterator[Store | None]:
    """The home's checkpoint store for reading; None when no SQLite file is there yet."""
    url = ctx.checkpoint_url
    if is_postgres(url):
        with open_checkpointer(ctx) as saver:
            yield Store(saver, "postgres", describe(ctx))
        return
    if url and not url.startswith("sqlite:///"):
        raise InputError(f"PERFSCOUT_CHECKPOINT_URL must be postgresql://... or sqlite:///PATH, got {url!r}")
    path = Path(describe(ctx))
    if not path.is_file():
        yield None
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    try:
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    except sqlite3.Error as exc:
        raise StoreUnreadable(f"cannot open the checkpoint store {path}: {exc}") from exc
    try:
        saver = SqliteSaver(conn)
        saver.is_setup = True  # reading only: no CREATE TABLE, no journal change on the user's file
        yield Store(saver, "sqlite", str(path))
    finally:
        conn.close()


def unreadable_reason(exc: BaseException) -> str | None:
    """A one-line reason when ``exc`` says the store itself cannot be read; None otherwise."""
    if isinstance(exc, StoreUnreadable):
        return str(exc)
    if isinstance(exc, sqlite3.Error):
        return f"{type(exc).__name__}: {exc}"
    if type(exc).__module__.startswith("psycopg"):
        return f"{type(exc).__name__}: {str(exc).strip()}"
    return None
