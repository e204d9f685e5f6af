"""The SQLite engine: one file, one connection, one writer at a time by `BEGIN IMMEDIATE`, one
daemon at a time by an flock beside the file. `schema.py` opens the file and migrates it."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from ._db import Dialect
from ._types import IS_LIVE, LIVE_MARKS
from .schema import LedgerError, LedgerLocked, connect, describe

# In a record with several live versions every pending one but the oldest live waits. First the records
# with more than one live version, from one pass over the partial index entries_live (which holds each
# live entry's source and record), grouped by record id first (the sort's comparisons mostly end on it)
# with nothing but a count: SQLite's grouping costs per aggregate and row. Then only those records'
# versions, by the (source, record_id) index; `min(id)` makes SQLite take the bare `state` from the
# oldest live one. A third less CPU than grouping every live entry with its states.
_WAITING = (
    "SELECT coalesce(sum(pending - (state = 'pending')), 0) FROM ("
    "SELECT min(e.id), e.state, sum(e.state = 'pending') AS pending FROM ("
    f"SELECT record_id, source FROM entries INDEXED BY entries_live WHERE {IS_LIVE} "
    "GROUP BY record_id, source HAVING count(*) > 1"
    ") m CROSS JOIN entries e ON e.source = m.source AND e.record_id = m.record_id "
    f"WHERE e.state IN ({LIVE_MARKS}) GROUP BY m.record_id, m.source)"
)


def _json_list(values: Iterable[Any]) -> str:
    return json.dumps(list(values), separators=(",", ":"))


def _row_source(columns: Sequence[tuple[str, str]]) -> str:
    names = ", ".join(f"value ->> {i} AS {name}" for i, (name, _) in enumerate(columns))
    return f"(SELECT {names} FROM json_each(?))"


def _row_params(rows: Sequence[Sequence[Any]], width: int) -> tuple[Any, ...]:
    return (json.dumps(rows),)


DIALECT = Dialect(
    engine="sqlite",
    any_of="IN (SELECT value FROM json_each(?))",
    waiting=_WAITING,
    merged="SELECT count(*) FROM entries INDEXED BY entries_merged WHERE merged = 1",
    next_id_after_copy="",  # an INTEGER PRIMARY KEY continues from the largest id by itself
    many=_json_list,
    claim_plan="",  # SQLite's planner walks the partial index entries_live in id order by itself
    row_source=_row_source,
    row_params=_row_params,
    members="json_each({batch}.members) AS {alias}",
    fresh_persons=True,
)


class SqliteDb(sqlite3.Connection):
    """A sqlite3 connection that names its dialect (`sqlite3.connect(..., factory=SqliteDb)`)."""

    dialect = DIALECT


class SqliteStore:
    """A ledger file. One connection shared under a lock: SQLite has one writer anyway."""

    def __init__(self, path: Path, *, synchronous: str, busy_timeout_s: float) -> None:
        self.path = path
        self.name = str(path)
        self._run_in_hand: int | None = None
        self._conn = cast(
            SqliteDb, connect(path, synchronous=synchronous, busy_timeout_s=busy_timeout_s, factory=SqliteDb)
        )
        # Every write that changes an entry stamps it with the run in hand (`_runs`): a function of the connection.
        self._conn.create_function("capture_run_in_hand", 0, lambda: self._run_in_hand)
        self._lock = threading.RLock()
        self._lock_fd: int | None = None

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self._conn.close()

    @contextmanager
    def write(self, run_in_hand: int | None) -> Iterator[SqliteDb]:
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise LedgerError(describe(exc, self.path)) from None
            self._run_in_hand = run_in_hand
            try:
                yield conn
            except BaseException as exc:
                # SQLite rolls back by itself on some errors (a full disk: SQLITE_FULL); a ROLLBACK
                # then would fail with "no transaction is active" and hide why.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.DatabaseError):
                    raise LedgerError(describe(exc, self.path)) from None
                raise
            finally:
                self._run_in_hand = None
            try:
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise LedgerError(describe(exc, self.path)) from None

    @contextmanager
    def read(self) -> Iterator[SqliteDb]:
        with self._lock:
            yield self._conn

    def changed(self, *, live: int = 0, settled: int = 0) -> None:
        """Nothing to refresh: SQLite's ledger keeps no statistics (no sqlite_stat1), and its planner
        walks the partial indexes by their shape."""

    def acquire_daemon_lock(self) -> None:
        """One daemon per ledger. flock dies with its process, so a SIGKILL never leaves it stale."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            if os.fstat(fd).st_mode & 0o600 != 0o600:  # created under a umask that took our own rights
                os.fchmod(fd, 0o600)  # needed so that the next start can open it again
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW: a planted link would lock (and create) another file
                raise LedgerError(f"ledger lock {lock_path} is a symbolic link: remove it") from None
            raise LedgerError(
                f"ledger lock {lock_path} cannot be written: check the file and folder permissions ({exc.strerror})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LedgerLocked(f"another capture-sync daemon is already running on ledger {self.path}") from None
        self._lock_fd = fd


@contextmanager
def side_read(path: Path) -> Iterator[SqliteDb]:
    """A read-only connection of its own, one transaction (every count from the same moment): a
    reader in another thread never takes the daemon's lock, and WAL lets it read while the daemon writes."""
    conn = cast(SqliteDb, sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2.0, factory=SqliteDb))
    try:
        conn.execute("BEGIN")
        yield conn
        conn.execute("COMMIT")
    finally:
        conn.close()


def writable(path: Path) -> str | None:
    """None when a daemon can write the ledger; else why not. Takes SQLite's write lock for an
    instant (BEGIN IMMEDIATE, ROLLBACK): a ledger busy with the daemon's own write is writable."""
    for place in (path, path.parent):
        if not os.access(place, os.W_OK):
            return f"{place} is not writable by this user"
    try:
        conn = sqlite3.connect(path, timeout=1.0, isolation_level=None)
    except sqlite3.Error as exc:
        return f"cannot open {path}: {exc}"
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            return f"{path}: {exc}"
    finally:
        conn.close()
    return None
