"""Opening the ledger file: pragmas, schema version, forward migrations (the steps in `_migrations`),
clear errors.

synchronous=FULL (the default) fsyncs the WAL at every commit, so a committed batch or settle
survives a power cut; NORMAL is faster but a power cut (not a process crash) may lose the last
commits, and a lost batch write is only safe because keys are re-derived. Choose FULL unless the
ledger sits on storage you trust more than the CRM's idempotency window.

The ledger holds every contact's payload, so a new one is created readable by its owner only (0600)
whatever the umask; SQLite gives its -wal and -shm files the ledger's own mode. An existing ledger's
mode is never changed (`check` warns when others may read it).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..secret_files import create_private
from . import _fresh
from ._migrations import _v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9, _v10, _v11
from ._migrations_late import _v12, _v13, _v14, _v15

if TYPE_CHECKING:  # imported by _migrate only: every command opens a ledger, few migrate an old one
    import sqlite_utils


class LedgerError(Exception):
    """The ledger cannot be used: unreadable, corrupt, read-only, locked, or from a newer version."""


class LedgerLocked(LedgerError):
    """Another daemon already runs on this ledger."""


class LedgerUnreachable(LedgerError):
    """The ledger's database server does not answer (PostgreSQL down, a network between): the work
    in hand is unsettled, as in an outage of the Capture API, and the next run carries on."""


# The SQLite forward migrations, in order (each in `_migrations`): a file at version N runs those after N;
# a new (empty) file is given what they end at, `_fresh.SCHEMA`, which a new migration updates too.
MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    _v1,
    _v2,
    _v3,
    _v4,
    _v5,
    _v6,
    _v7,
    _v8,
    _v9,
    _v10,
    _v11,
    _v12,
    _v13,
    _v14,
    _v15,
]
SCHEMA_VERSION = len(MIGRATIONS)

# The page size of a new ledger file. SQLite writes each page a transaction dirtied as one WAL frame
# (two `pwrite64` calls) and the checkpoint reads and writes it again: at 4096 bytes (SQLite's default)
# a settle of 100 members dirtied some 20 pages of `entries` alone (rows of ~800 bytes, a few per page).
# 8192 halves the frames; 16384 cut the calls further but cost more CPU than it saved (each random
# leaf written whole): docs/performance.md ("Ledger, eighth session"). SQLite sets it only on a file
# without tables, so an existing ledger keeps the size it was made with (nothing to migrate: every
# statement works on either).
PAGE_SIZE = 8192


def connect(
    path: Path, *, synchronous: str, busy_timeout_s: float, factory: type[sqlite3.Connection] = sqlite3.Connection
) -> sqlite3.Connection:
    """Open (creating if needed) and migrate; every failure becomes a LedgerError that says why."""
    if synchronous not in ("FULL", "NORMAL"):
        raise LedgerError(f"ledger synchronous must be FULL or NORMAL, got {synchronous!r}")
    if not path.parent.exists():
        raise LedgerError(f"ledger folder {path.parent} does not exist")
    problem = _unwritable(path)  # before SQLite, which would leave read-only -wal and -shm files behind
    if problem:
        raise LedgerError(problem)
    try:
        create_private(path)
    except OSError as exc:
        raise LedgerError(f"ledger {path} cannot be created: {exc.strerror}") from None
    try:
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s, factory=factory
        )
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        version = _checked_version(conn, path)  # a newer release's file or another program's: refused as it is
        if version == 0:
            _not_another_programs(conn, path)
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # a new file's only: before WAL, before any table
        if _journal_mode_wal(conn, busy_timeout_s).lower() != "wal":
            raise LedgerError(f"ledger {path}: cannot switch to WAL journal mode")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        if version != SCHEMA_VERSION:
            _migrate(conn, path)
    except sqlite3.DatabaseError as exc:
        raise LedgerError(describe(exc, path)) from None
    return conn


def _journal_mode_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> str:
    """Switch a new file to WAL, waiting for other processes as the busy timeout would. SQLite does
    not call its busy handler here: while another process holds the new file's write lock (it is
    switching too, or creating the schema), the switch is refused at once, so processes that create
    one ledger together (a cron `sync` and a daemon started at once) failed at random."""
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            mode: str = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            return mode
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    # Two processes creating or migrating a ledger at once: the second waits here (busy_timeout) for
    # the first's, then reads the version again and finds nothing left to do.
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _checked_version(conn, path)
        if version == 0:
            _fresh.create(conn)  # a new file: the schema the steps end at, without them
        elif version < SCHEMA_VERSION:
            _no_older_daemon(path)
            import sqlite_utils

            db = sqlite_utils.Database(conn)
            for migration in MIGRATIONS[version:]:
                migration(db)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _not_another_programs(conn: sqlite3.Connection, path: Path) -> None:
    """A file at version 0 with tables is no ledger: every ledger is stamped in the transaction that
    creates it. It was switched to WAL and given the ledger's tables beside its own (or failed on a
    name both share)."""
    names = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    if names:
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise LedgerError(
            f"{path} is not a capture-sync ledger: it is another SQLite database (tables {shown}); "
            "set `ledger.path` to a new file, which capture-sync creates"
        )


def _no_older_daemon(path: Path) -> None:
    """Before a migration: a process of an older release runs on the file (a daemon, or a one-shot
    sync or replay: each holds the daemon lock beside it; one of this release would have migrated the
    file already). Since v10 its code
    would claim again the entries v10 turns pending, since v11 settle without keeping the settled
    states' counters (`_counts`), since v12 write members into a table v12 dropped, and since v13
    find no entry by key without a full scan (ledger show, resolve) and no longer have its
    key uniqueness checked by an index, and since v14 settle without `person_tag` (since v15 find
    no holder whose tag is in `fresh_tag`), so that the merges of its captures would go uncounted: the migration
    waits until it is stopped. As PostgreSQL's
    `_pg_schema._no_older_leader`."""
    lock = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return  # no daemon ever ran here (or none can have locked what cannot be opened)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise LedgerError(
            f"ledger {path} needs schema version {SCHEMA_VERSION}, which cannot be brought in while a "
            "capture-sync process of an older release (a daemon, or a sync or replay) runs on it: stop that "
            "daemon or let the command finish, then run this command again (this release migrates the "
            "ledger as it opens it)"
        ) from None
    finally:
        os.close(fd)


def _checked_version(conn: sqlite3.Connection, path: Path) -> int:
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise LedgerError(
            f"ledger {path} has schema version {version}; this capture-sync knows up to "
            f"{SCHEMA_VERSION}. Upgrade capture-sync."
        )
    return version


def describe(exc: sqlite3.DatabaseError, path: Path) -> str:
    """One line for the user: what is wrong with which file, and what to do."""
    text = str(exc)
    if "disk is full" in text or ("disk I/O error" in text and _disk_full(path)):
        return (
            f"the disk holding ledger {path} is full: the last write was not recorded (nothing it covered "
            "counts as done); free space on that disk and run again"
        )
    if "locked" in text or "busy" in text:
        return f"ledger {path} is locked by another process (is another capture-sync writing to it?)"
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return _unwritable(path) or f"ledger {path} cannot be written: check the file and folder permissions ({text})"
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return f"ledger {path} is not a valid capture-sync ledger (corrupt or another file): {text}"
    return f"ledger {path}: {text}"


def _disk_full(path: Path) -> bool:
    try:
        return os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return False


def _unwritable(path: Path) -> str | None:
    """Name the ledger's pieces this process may not write: the file, a -wal or -shm left behind by a
    run under another user or a read-only ledger (SQLite gives them the ledger's mode), or the folder
    where SQLite must create them. None when every piece is writable."""
    files = [path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm"))]
    blocked = [str(f) if f != path else "the file" for f in files if f.exists() and not os.access(f, os.W_OK)]
    if not os.access(path.parent, os.W_OK | os.X_OK):
        blocked.append(f"its folder {path.parent}")
    if not blocked:
        return None
    verb = "is" if len(blocked) == 1 else "are"
    return (
        f"ledger {path} cannot be written: {', '.join(blocked)} {verb} read-only for this user; make "
        "what is named writable (chmod u+w, as its owner) or run capture-sync as the user that owns the ledger"
    )
