"""The results store of a run directory: SQLite in WAL mode, one transaction per result.

Only the parent process of a sweep writes. A result row is committed (``synchronous=FULL``)
before the sweep moves on, so a run killed at any instant keeps every finished task; a task
that was running when it died has no row and is re-run on ``--resume``. Besides the
DESIGN.md result columns the store keeps the task list (config JSON, experiments) and an
attempt log (which session started and finished what), which is how a resume proves that no
finished task ran twice.

The sweep engine (:mod:`perfscout.sweep`, above tools) writes it; it lives here, in tools,
because tools read stored results too (``export`` picks a setting from them, ``regress``
compares runs), and a tool must not import the layer above it.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import unicodedata
from collections.abc import Iterable
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from perfscout.io import atomic_path
from perfscout.errors import InputError
from perfscout.state.records import RESULT_COLUMNS, CompressionResult

STORE_NAME = "results.sqlite"
SCHEMA_VERSION = 1

_INT_COLUMNS = {"nbytes", "repeats", "chunks"}
_TEXT_COLUMNS = {"run_id", "task_key", "dataset", "shape", "dtype", "codec", "codec_version", "device",
                 "device_name", "mode", "status", "error", "started_at", "platform_id"}


def _sql_type(column: str) -> str:
    if column in _TEXT_COLUMNS:
        return "TEXT"
    if column in _INT_COLUMNS or column == "bound_ok":
        return "INTEGER"
    return "REAL"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class StoreError(InputError):
    """The results store cannot be opened or does not belong to this kind of run."""


def _check_is_a_store(path: Path) -> None:
    """Refuse, before SQLite opens it, a path that is not a results store perfscout made: a
    link (opening it would write perfscout's tables into whatever it names: a user's own
    database), a directory or device, or an SQLite file of another program (opening it for
    writing would switch it to WAL and add tables). A missing or empty file is a new store."""
    if path.is_symlink():
        raise StoreError(f"{path} is a symbolic link (to {os.readlink(path)}); a results store is a regular "
                         "file perfscout made: nothing was opened through the link")
    if not path.exists():
        return
    if not path.is_file():
        raise StoreError(f"{path} is not a regular file; a results store is an SQLite file perfscout made")
    if path.stat().st_size == 0:
        return
    try:  # read only, through a URI: a file that is not ours is not touched
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot open results store {path}: {exc}") from None
    if not tables:
        # An SQLite file with nothing in it: a store another process is creating (switched to
        # WAL, its tables not yet committed; a reader opening it then was refused as "another
        # program's file") or an empty database: either way nothing in it can be damaged, and
        # the tables are created as in a new store.
        return
    if "meta" in tables and "results" not in tables:  # ours, with a table lost: damaged
        raise StoreError(f"cannot open results store {path}: its results table is missing (the store is damaged)")
    if "meta" not in tables:
        raise StoreError(f"{path} is an SQLite file of another program (tables: {', '.join(sorted(tables)) or 'none'}), "
                         "not a perfscout results store: nothing was written to it")


class ResultStore:
    """Results of one run directory. Use as a context manager or call :meth:`close`."""

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        _check_is_a_store(self.path)
        if read_only:  # nothing created or migrated, not a byte written (a damaged store stays as it was)
            try:
                self.conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
                version = self.get_meta("schema_version")
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"cannot open results store {self.path}: {exc}") from None
            if version != str(SCHEMA_VERSION):
                raise StoreError(f"{self.path} has store schema {version}; this perfscout reads {SCHEMA_VERSION}")
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, one per result.
            self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self._create()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open results store {self.path}: {exc}") from None

    # -- schema ------------------------------------------------------------------
    def _create(self) -> None:
        cols = ",\n  ".join(
            f'"{c}" {_sql_type(c)}' + (" PRIMARY KEY" if c == "task_key" else "") for c in RESULT_COLUMNS
        )
        with self._tx():
            self.conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS results (\n  {cols}\n)")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS tasks (task_key TEXT PRIMARY KEY, seq INTEGER, "
                "experiments TEXT, config TEXT)"
            )
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS attempts (id INTEGER PRIMARY KEY AUTOINCREMENT, task_key TEXT, "
                "session INTEGER, started_at TEXT, finished_at TEXT, outcome TEXT)"
            )
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            # Added for distributed runs (which worker ran an attempt, and what became of it);
            # older stores gain the columns, their rows read as empty.
            have = {r[1] for r in self.conn.execute("PRAGMA table_info(attempts)")}
            for column in ("tag", "worker", "detail"):
                if column not in have:
                    self.conn.execute(f"ALTER TABLE attempts ADD COLUMN {column} TEXT")
            # Result columns added since a store was made (``chunks``): its older rows read as NULL.
            have = {r[1] for r in self.conn.execute("PRAGMA table_info(results)")}
            for column in RESULT_COLUMNS:
                if column not in have:
                    self.conn.execute(f'ALTER TABLE results ADD COLUMN "{column}" {_sql_type(column)}')
        version = self.get_meta("schema_version")
        if version != str(SCHEMA_VERSION):
            raise StoreError(f"{self.path} has store schema {version}; this perfscout writes {SCHEMA_VERSION}")

    def _tx(self) -> _Transaction:
        return _Transaction(self.conn)

    # -- meta --------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self._tx():
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def new_session(self) -> int:
        """Number this process's pass over the run (1 for the first, +1 per resume)."""
        with self._tx():
            n = int(self.get_meta("sessions", "0") or 0) + 1
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('sessions', ?)", (str(n),))
        return n

    # -- tasks -------------------------------------------------------------------
    def add_tasks(self, tasks: Iterable[Any]) -> None:
        """Remember the task list (idempotent: a resume with the same spec adds nothing)."""
        with self._tx():
            start = self.conn.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM tasks").fetchone()[0]
            for i, t in enumerate(tasks):
                self.conn.execute(
                    "INSERT OR IGNORE INTO tasks VALUES (?, ?, ?, ?)",
                    (t.task_key, start + i, json.dumps(t.experiments), t.model_dump_json()),
                )

    def task_experiments(self) -> dict[str, list[str]]:
        return {k: json.loads(e) for k, e in self.conn.execute("SELECT task_key, experiments FROM tasks")}

    def task_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]

    # -- attempts ----------------------------------------------------------------
    def start_attempt(self, task_key: str, session: int, *, worker: str = "", detail: str = "") -> int:
        """Log that an attempt began (``worker``: where, for a distributed run)."""
        with self._tx():
            cur = self.conn.execute(
                "INSERT INTO attempts (task_key, session, started_at, worker, detail) VALUES (?, ?, ?, ?, ?)",
                (task_key, session, _now(), worker, detail),
            )
        return int(cur.lastrowid)

    def set_attempt_tag(self, attempt_id: int, tag: str) -> None:
        """The name its files carry (``result.<tag>.json``) in ``raw/<task_key>/``."""
        with self._tx():
            self.conn.execute("UPDATE attempts SET tag=? WHERE id=?", (tag, attempt_id))

    def set_attempt_worker(self, attempt_id: int, worker: str, detail: str = "") -> None:
        """Where the attempt runs, once known (``forkserver`` and the server's pid, say)."""
        with self._tx():
            self.conn.execute("UPDATE attempts SET worker=?, detail=? WHERE id=?", (worker, detail, attempt_id))

    def finish_attempt(self, attempt_id: int, outcome: str, detail: str = "") -> None:
        """Close an attempt that produced no stored result (e.g. its worker was lost)."""
        with self._tx():
            self.conn.execute("UPDATE attempts SET finished_at=?, outcome=?, detail=? WHERE id=?",
                              (_now(), outcome, detail, attempt_id))

    def attempts(self) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM attempts ORDER BY id", self.conn)

    # -- results -----------------------------------------------------------------
    def put_result(self, record: CompressionResult, attempt_id: int | None = None, *, replace: bool = False) -> None:
        """Store one result and close its attempt, atomically (one transaction). ``replace``:
        the task is run again (an agent's retry): its new record takes the old one's place,
        the attempt log keeps both attempts."""
        row = record.row()
        if row["bound_ok"] is not None:
            row["bound_ok"] = int(row["bound_ok"])
        names = ", ".join(f'"{c}"' for c in RESULT_COLUMNS)
        marks = ", ".join("?" for _ in RESULT_COLUMNS)
        with self._tx():
            if replace:
                self.conn.execute("DELETE FROM results WHERE task_key=?", (record.task_key,))
            try:
                self.conn.execute(f"INSERT INTO results ({names}) VALUES ({marks})", [row[c] for c in RESULT_COLUMNS])
            except sqlite3.IntegrityError:
                raise StoreError(f"task {record.task_key} already has a result in {self.path}") from None
            if attempt_id is not None:
                self.conn.execute(
                    "UPDATE attempts SET finished_at=?, outcome=? WHERE id=?", (_now(), record.status, attempt_id)
                )

    def stored_attempt(self, task_key: str) -> tuple[int, str] | None:
        """(id, tag) of the attempt whose record the store holds for ``task_key`` (the latest
        one that finished with the stored status), or None when it has no result."""
        row = self.conn.execute(
            "SELECT a.id, COALESCE(a.tag, '') FROM attempts a JOIN results r ON r.task_key = a.task_key "
            "WHERE a.task_key=? AND a.outcome = r.status ORDER BY a.id DESC LIMIT 1", (task_key,)).fetchone()
        return (int(row[0]), str(row[1])) if row else None

    def result(self, task_key: str) -> dict[str, Any] | None:
        """The stored record of one task as a plain row (``bound_ok`` a bool), or None."""
        cur = self.conn.execute("SELECT * FROM results WHERE task_key=?", (task_key,))
        row = cur.fetchone()
        if row is None:
            return None
        out = dict(zip([d[0] for d in cur.description], row))
        out = {c: out.get(c) for c in RESULT_COLUMNS}
        out["bound_ok"] = None if out["bound_ok"] is None else bool(out["bound_ok"])
        return out

    def finished_keys(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT task_key FROM results")}

    def results(self) -> pd.DataFrame:
        """All results, typed, in the stable column order, sorted by task order then key."""
        df = pd.read_sql_query(
            "SELECT r.* FROM results r LEFT JOIN tasks t USING (task_key) ORDER BY t.seq, r.task_key", self.conn
        )
        df = df.reindex(columns=list(RESULT_COLUMNS))
        df["bound_ok"] = df["bound_ok"].astype("boolean")
        for c in RESULT_COLUMNS:
            if _sql_type(c) == "REAL":
                df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
            elif c in _INT_COLUMNS:
                df[c] = df[c].astype("Int64")
        return df

    # -- export ------------------------------------------------------------------
    def export(self, out_dir: str | Path) -> dict[str, Path]:
        """Write results.parquet and results.csv next to the store."""
        out = Path(out_dir)
        df = self.results()
        paths = {"parquet": out / "results.parquet", "csv": out / "results.csv"}
        # each file written whole beside its name, then renamed (a reader never sees half a
        # file; a full disk leaves no partial one; two exports at once do not share a temp name)
        with atomic_path(paths["parquet"]) as tmp:
            df.to_parquet(tmp, index=False)
        with atomic_path(paths["csv"]) as tmp:
            # RFC 4180's CRLF rows: the writer then quotes a cell holding a CR too (with "\n"
            # rows a bare CR in a name went out unquoted and split the row in two)
            csv_safe(df).to_csv(tmp, index=False, lineterminator="\r\n")
        return paths

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: First characters a spreadsheet reads as the start of a formula (OWASP's CSV-injection
#: list: = + - @ tab CR; LF too, which some importers treat as CR).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula, prefixed with ``'`` (shown as
    text, not evaluated); a cell that is just a number ("-42", "1e-3") is left alone. The
    first character is judged in its compatibility form (NFKC): a full-width ＝ or ＋ is
    taken as a formula start by spreadsheets in CJK locales."""
    if not isinstance(value, str) or not value:
        return value
    first = unicodedata.normalize("NFKC", value[0])[:1]
    if first in _FORMULA_START and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every text column's cells neutralised (:func:`csv_cell`); number columns
    are not text and stay as they are (a negative figure is no formula)."""
    out = df.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            out[column] = out[column].map(csv_cell)
    return out


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")


def open_results(run_dir: str | Path) -> pd.DataFrame:
    """The results table of a run directory, read only (export and regress read it: they
    must never create tables in, or migrate, a store that is damaged)."""
    path = Path(run_dir) / STORE_NAME
    if not path.is_file():
        raise StoreError(f"{run_dir} is not a sweep run directory (no {STORE_NAME})")
    with ResultStore(path, read_only=True) as store:
        try:
            return store.results()
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:  # a table lost, a page damaged
            why = str(exc.__cause__ or exc)  # pandas wraps sqlite's words in its own
            raise StoreError(f"cannot open results store {path}: {why}") from None
