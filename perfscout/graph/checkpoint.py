"""Where checkpoints live: SQLite under PERFSCOUT_HOME, or PostgreSQL.

``PERFSCOUT_CHECKPOINT_URL`` (or ``Context.checkpoint_url``) selects the store:
empty -> ``$PERFSCOUT_HOME/checkpoints.sqlite``; ``sqlite:///PATH`` -> that file;
``postgresql://...`` -> :class:`~langgraph.checkpoint.postgres.PostgresSaver`. Runs
are invoked with ``durability="sync"``: each step's checkpoint is on disk before the
next step starts, so a tool call that finished is never repeated after a crash.

The SQLite store is opened only as a regular file: a symbolic link in its place (or in
its journal's, WAL's, shared memory's), a directory or a FIFO is refused with an error naming
it (:func:`_not_a_store_file`; a link would have SQLite lay langgraph's tables into the file
it points at), a missing store is created without following a link, and the check is made
again once SQLite has the file open.

A SQLite store that cannot be read, or that is empty while run directories exist under
``$PERFSCOUT_HOME/runs``, is **damaged** (:class:`CheckpointStoreDamaged`): it is never
opened for writing (the SQLite saver would lay fresh tables over it and forget every
run), and ``runs``/``resume``/``run`` name it with the run directories still on disk.
A thread id that already holds a run (checkpoints, or a run directory) is never reused
for a fresh run (:func:`refuse_reused_thread`): its results would merge into the new
answer and its report be replaced.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from perfscout.errors import InputError
from perfscout.graph.context import Context

DURABILITY = "sync"


class CheckpointStoreDamaged(InputError):
    """The checkpoint store cannot be used; ``run_dirs`` are the run directories on disk."""

    exit_code = 1  # the CLI's: a damaged store is a failure, not bad input

    def __init__(self, message: str, store: str, run_dirs: list[Path]) -> None:
        super().__init__(message)
        self.store = store
        self.run_dirs = run_dirs


def run_dirs_on_disk(ctx: Context) -> list[Path]:
    """The agent's run directories under ``ctx.runs_dir`` (those with a ``request.json``),
    most recently changed first."""
    base = ctx.runs_dir
    try:
        found = [d for d in base.iterdir() if d.is_dir() and (d / "request.json").is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda d: d.stat().st_mtime, reverse=True)


def _damaged(ctx: Context, why: str) -> CheckpointStoreDamaged:
    path = describe(ctx)
    dirs = run_dirs_on_disk(ctx)
    seen = (f"the run directories it can still see: {len(dirs)} under {ctx.runs_dir} "
            f"({', '.join(d.name for d in dirs[:8])}{' ...' if len(dirs) > 8 else ''}); their reports and "
            "results are intact there, but no run can be resumed from this store" if dirs
            else f"no run directory under {ctx.runs_dir}")
    return CheckpointStoreDamaged(
        f"the checkpoint store {path} is damaged ({why}); {seen}. It was not written to: move it aside "
        f"(mv {path} {path}.damaged) to start a fresh store", path, dirs)


#: What SQLite keeps beside a database: its journal, write-ahead log and shared memory. A link
#: planted as one of them would take the store's writes elsewhere just as a linked store does.
_SIDECARS = ("-journal", "-wal", "-shm")


def _kind(mode: int) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket"
            if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def _not_a_store_file(ctx: Context, path: Path) -> CheckpointStoreDamaged | None:
    """CheckpointStoreDamaged when the store (or one of its :data:`_SIDECARS`) exists as
    anything but a regular file (``lstat``: a link is not followed). A symbolic link is
    refused wherever it points: SQLite would follow it and lay langgraph's tables into the
    file it names (another program's database, say) -- nothing a store of ours may touch."""
    for p in (path, *(Path(f"{path}{x}") for x in _SIDECARS)):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return _refused(ctx, p, f"it cannot be looked at: {exc.strerror or exc}")
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(p)
            except OSError:
                target = "?"
            return _refused(ctx, p, f"it is a symbolic link (to {target}); perfscout never opens a store "
                            "through a link, which would write its tables into the file it points at")
        if not stat.S_ISREG(st.st_mode):
            return _refused(ctx, p, f"it is {_kind(st.st_mode)}, not a regular file")
    return None


def _refused(ctx: Context, p: Path, why: str) -> CheckpointStoreDamaged:
    path = describe(ctx)
    dirs = run_dirs_on_disk(ctx)
    main = str(p) == path
    which = "the checkpoint store" if main else f"the checkpoint store {path}'s SQLite file"
    then = ("to start a fresh store, or set PERFSCOUT_CHECKPOINT_URL=sqlite:///PATH to a regular file" if main
            else "and the store is used as it is (SQLite makes that file anew)")
    seen = (f"; the run directories under {ctx.runs_dir} are intact: {', '.join(d.name for d in dirs[:8])}"
            f"{' ...' if len(dirs) > 8 else ''}" if dirs else "")
    return CheckpointStoreDamaged(
        f"{which} {p} cannot be used: {why}. Nothing was written to it, nor to anything it leads to; move it "
        f"aside (mv {p} {p}.aside) {then}{seen}", path, dirs)


def _check_sqlite_store(ctx: Context, path: Path) -> None:
    """CheckpointStoreDamaged for a store that is not a regular file (a link, a directory:
    :func:`_not_a_store_file`), is not a readable SQLite database, or is empty while run
    directories exist (reading only)."""
    refused = _not_a_store_file(ctx, path)
    if refused is not None:
        raise refused
    if not path.exists():
        return
    if path.stat().st_size == 0:
        if run_dirs_on_disk(ctx):
            raise _damaged(ctx, "it is empty (0 bytes) while run directories exist")
        return
    short = _truncated(path)
    if short:
        raise _damaged(ctx, short)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise _damaged(ctx, f"{exc}") from None
    if "checkpoints" not in tables and run_dirs_on_disk(ctx):
        # the saver would create a fresh table and every run on disk would be unknown to it
        raise _damaged(ctx, "it holds no checkpoints table while run directories exist")


def _create_no_follow(ctx: Context, path: Path) -> None:
    """Create a missing store as an empty regular file (an empty file is an empty SQLite
    database), refusing to follow a link: ``sqlite3.connect`` would create the file a link
    planted since the check names. Readable by its owner only: checkpoints hold requests."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        refused = _not_a_store_file(ctx, path)  # there already (or a link put there since the check)
        if refused is not None:
            raise refused from None
        return
    except OSError as exc:
        raise _refused(ctx, path, f"it cannot be created: {exc.strerror or exc}") from None
    os.close(fd)


def _truncated(path: Path) -> str:
    """Why the file is shorter than the database its header describes, or "" (SQLite's
    in-header size counts only while the change counter matches version-valid-for)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
        size = path.stat().st_size
    except OSError:
        return ""
    if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
        return ""  # not SQLite at all: sqlite3 says so in its own words
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if pages and head[24:28] == head[92:96] and size < pages * page:
        return f"it is truncated: {size} bytes, its header says {pages} pages of {page} bytes"
    return ""


def check_checkpoint_store(ctx: Context) -> None:
    """CheckpointStoreDamaged when ``ctx``'s SQLite checkpoint store is damaged (reading only,
    creating nothing: ``export``/``regress`` ask before they say a run cannot be resumed).
    A PostgreSQL store is not probed here (a connection is not a check of its contents)."""
    url = ctx.checkpoint_url
    if url.startswith(("postgresql://", "postgres://")) or (url and not url.startswith("sqlite:///")):
        return
    _check_sqlite_store(ctx, _sqlite_path(ctx))


_LATEST_SQL = ("SELECT thread_id, MAX(checkpoint_id) AS checkpoint_id FROM checkpoints WHERE checkpoint_ns = '' "
               "GROUP BY thread_id")


def latest_per_thread(saver: BaseCheckpointSaver) -> list[tuple[str, str, str]]:
    """(thread id, checkpoint id, time) of every thread's newest checkpoint, newest first.

    One checkpoint is read per thread: the ids come from one grouped query over the
    store's index columns (SQLite and PostgreSQL: the newest is the greatest id, as the
    savers' own ``get_tuple`` orders them), then each thread's newest checkpoint alone is
    loaded for its time. ``saver.list(None)`` would deserialise every checkpoint of every
    thread, a long run's thousands of states at once. Another saver is listed in full."""
    ids = _latest_ids(saver)
    out = []
    for thread_id, checkpoint_id in ids:
        tup = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                                                "checkpoint_id": checkpoint_id}})
        if tup is not None:
            out.append((thread_id, checkpoint_id, str(tup.checkpoint.get("ts", ""))))
    return sorted(out, key=lambda t: t[2], reverse=True)


def _latest_ids(saver: BaseCheckpointSaver) -> list[tuple[str, str]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    if isinstance(saver, SqliteSaver):
        with saver.cursor(transaction=False) as cur:
            cur.execute(_LATEST_SQL)
            return [(str(r[0]), str(r[1])) for r in cur.fetchall()]
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        PostgresSaver = None  # noqa: N806 - the optional extra is not installed
    if PostgresSaver is not None and isinstance(saver, PostgresSaver):
        with saver._cursor() as cur:  # its dict rows
            cur.execute(_LATEST_SQL)
            return [(str(r["thread_id"]), str(r["checkpoint_id"])) for r in cur.fetchall()]
    latest: dict[str, str] = {}
    for tup in saver.list(None):
        conf = tup.config["configurable"]
        if conf.get("checkpoint_ns", "") == "":
            latest[conf["thread_id"]] = max(latest.get(conf["thread_id"], ""), conf["checkpoint_id"])
    return list(latest.items())


def refuse_reused_thread(saver: BaseCheckpointSaver, ctx: Context, thread_id: str) -> None:
    """InputError when ``thread_id`` already holds a run: checkpoints in the store, or a run
    directory on disk (whose report a fresh run would replace)."""
    has_checkpoint = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}) is not None
    run_dir = ctx.runs_dir / thread_id
    has_dir = (run_dir / "request.json").is_file()
    if has_checkpoint or has_dir:
        where = "checkpoints in the store" if has_checkpoint else f"its run directory {run_dir}"
        raise InputError(f"thread id {thread_id!r} already holds a run ({where}): a new request under it would mix "
                         f"its results into the new answer and replace its report. Continue it with: perfscout "
                         f"resume {thread_id}; or give another --thread-id (or none, for a fresh one)")


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
    _check_sqlite_store(ctx, path)
    _create_no_follow(ctx, path)
    # check_same_thread=False: ToolNode and the runner use worker threads; SqliteSaver locks.
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    try:
        # the file SQLite opened is still the regular file checked (not a link planted since)
        refused = _not_a_store_file(ctx, path)
        if refused is not None:
            raise refused
        saver = SqliteSaver(conn)
        try:
            saver.setup()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            raise _damaged(ctx, str(exc)) from None
        yield saver
    finally:
        conn.close()
