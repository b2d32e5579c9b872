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

def tuple_row(cursor: Any) -> Any:
    """psycopg's tuple rows (the saver's connection makes dicts); imported only for PostgreSQL."""
    from psycopg.rows import tuple_row as make

    return make(cursor)


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


#: What a timeline reads from every write; the rest (plans, queues, platforms: big, and
#: rewritten at every step) is loaded only for the visit or the slot that is opened.
SUMMARY = ("messages", "observations", "notes", "answers", INTERRUPT, RESUME, ERROR)
NOT_LOADED = object()


@dataclass
class Write:
    node: str  # the node whose task wrote it ("" when the saver does not say)
    channel: str
    value: Any = NOT_LOADED
    task_id: str = ""
    idx: int = 0

    @property
    def loaded(self) -> bool:
        return self.value is not NOT_LOADED


@dataclass
class Checkpoint:
    id: str
    parent: str | None
    step: int
    source: str  # input | loop | update | fork ("" where only the id was read)
    ts: float | None
    writes: list[Write] = field(default_factory=list)

    @property
    def node(self) -> str:
        """The node that ran from this checkpoint (its writes say), '' when none ran yet."""
        return next((w.node for w in self.writes if w.node), "")

    @property
    def routed_to(self) -> list[str]:
        """Where the run went after this checkpoint's node (its ``branch:to:`` writes)."""
        return [w.channel[len("branch:to:"):] for w in self.writes if w.channel.startswith("branch:to:")]


def checkpoint_step(checkpoint_id: str) -> int | None:
    """The step LangGraph puts in a checkpoint id's clock sequence (-1 for the input)."""
    try:
        seq = (uuid.UUID(checkpoint_id).int >> 48) & 0x3FFF
    except (ValueError, TypeError):
        return None
    return -1 if seq == 0x3FFF else seq


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

    def _tuples(self, sqlite_sql: str, pg_sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            return self.saver.conn.execute(sqlite_sql, args).fetchall()
        with self.saver.conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(pg_sql, args)
            return cur.fetchall()

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

    def checkpoints(self, thread_id: str, decode: tuple[str, ...] | None = SUMMARY) -> list[Checkpoint]:
        """Every checkpoint of the thread (oldest first) with the writes made from it; the
        values of the ``decode`` channels read (every channel's with None)."""
        if self.kind not in ("sqlite", "postgres"):
            return self.checkpoints_from_history(thread_id)
        # SQLite keeps metadata after the checkpoint blob in each row (reading it walks the
        # blob's overflow pages: seconds for a long run); the id carries the step instead.
        rows = self._rows(
            "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id",
            "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY checkpoint_id", (thread_id,))
        by_id: dict[str, Checkpoint] = {}
        for r in rows:
            meta = _metadata(r.get("metadata"))
            cid = str(r["checkpoint_id"])
            step = meta.get("step", checkpoint_step(cid))
            by_id[cid] = Checkpoint(id=cid, parent=r["parent_checkpoint_id"], step=int(step if step is not None else -1),
                                    source=str(meta.get("source", "")), ts=checkpoint_time(cid))
        for cid, writes in self.writes(thread_id, decode=decode).items():
            if cid in by_id:
                by_id[cid].writes = writes
        return list(by_id.values())

    def writes(self, thread_id: str, checkpoint_id: str | None = None,
               decode: tuple[str, ...] | None = None) -> dict[str, list[Write]]:
        """checkpoint id -> the writes of the tasks that ran from it, in the order written
        (the values of the ``decode`` channels only; of all with None)."""
        where, args = "thread_id = {p} AND checkpoint_ns = ''", [thread_id]
        if checkpoint_id is not None:
            where += " AND checkpoint_id = {p}"
            args.append(checkpoint_id)
        cols = "checkpoint_id, task_id, task_path, idx, channel, type"
        if decode is None:
            lite, pg, lite_args, pg_args = "value", "blob", tuple(args), tuple(args)
        else:  # the blob only where it is needed: the others stay on disk
            lite = f"CASE WHEN channel IN ({', '.join('?' * len(decode))}) THEN value END" if decode else "NULL"
            pg = "CASE WHEN channel = ANY(%s) THEN blob END" if decode else "NULL"
            lite_args = (*decode, *args)  # the SELECT's marks come first
            pg_args = (list(decode), *args) if decode else tuple(args)
        order = "ORDER BY checkpoint_id, task_id, idx"
        if self.kind == "sqlite":
            rows = self._tuples(f"SELECT {cols}, {lite} AS value FROM writes WHERE {where.format(p='?')} {order}", "",
                                lite_args)
        else:
            rows = self._tuples("", f"SELECT {cols}, {pg} AS value FROM checkpoint_writes WHERE {where.format(p='%s')} "
                                f"{order}", pg_args)
        out: dict[str, list[Write]] = {}
        nodes: dict[str, str] = {}
        for cid, task_id, task_path, idx, channel, kind, blob in rows:  # tens of thousands in a long run: kept lean
            node = nodes.get(task_path)
            if node is None:
                node = nodes[task_path] = _node_of(str(task_path or ""))
            write = Write(node, channel, task_id=task_id, idx=idx)
            if channel.startswith("branch:"):
                write.value = None  # routing: the name says where the run went
            elif decode is None or channel in decode:
                write.value = self._decode(kind, blob)
            bucket = out.get(cid)
            if bucket is None:
                bucket = out[cid] = []
            bucket.append(write)
        return out

    def load(self, thread_id: str, checkpoint_id: str, write: Write) -> Any:
        """The value of one write left on disk by a summary read."""
        if not write.loaded:
            rows = self._rows(
                "SELECT type, value FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ? "
                "AND task_id = ? AND idx = ?",
                "SELECT type, blob AS value FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = '' "
                "AND checkpoint_id = %s AND task_id = %s AND idx = %s", (thread_id, checkpoint_id, write.task_id, write.idx))
            write.value = self._decode(rows[0]["type"], rows[0]["value"]) if rows else None
        return write.value

    def _decode(self, kind: Any, blob: Any) -> Any:
        try:
            return None if kind in (None, "null") or blob is None else self.saver.serde.loads_typed((kind, bytes(blob)))
        except Exception as exc:  # noqa: BLE001 - one unreadable write must not hide the run
            return f"<unreadable write: {type(exc).__name__}: {exc}>"

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
