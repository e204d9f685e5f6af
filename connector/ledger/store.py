"""The ledger's write path: enqueue, write-ahead batches, settle.

Every method is one `BEGIN IMMEDIATE` transaction, so each fact the delivery relies on (a record is
in, a cursor moved, a batch with this key and these members exists, a member settled) is either
wholly on disk or not at all.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..api.client import Attempt
from ..keys import batch_key, content_hash, person_key
from . import views
from .schema import LedgerError, connect, describe

UNSETTLED = ("pending", "in_flight", "unknown")


class LedgerLocked(LedgerError):
    """Another daemon already runs on this ledger."""


@dataclass(frozen=True, slots=True)
class Mapped:
    """One source record after mapping: a valid payload, or the reasons it was rejected."""

    record_id: str
    payload: str | None = None        # JSON text of the PersonInput
    raw: dict[str, str] | None = None  # the source record, kept with a rejection for diagnosis
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Member:
    entry_id: int
    key: str
    payload: str


@dataclass(frozen=True, slots=True)
class BatchWork:
    """A batch as written before sending: resending it means the same key and these same bytes."""

    id: int
    key: str
    operation: Literal["bulk", "person"]
    members: tuple[Member, ...]
    body: bytes


@dataclass(frozen=True, slots=True)
class Claim:
    """What to claim next: `skip` holds the batches this run already has in hand or gave up on."""

    batch_size: int
    skip: AbstractSet[int] = frozenset()
    include_stalled: bool = False  # also batches parked by a non-retryable error (replay)


@dataclass(frozen=True, slots=True)
class Outcome:
    entry_id: int
    state: Literal["captured", "duplicate", "failed", "unknown"]
    person_id: str | None = None
    error: str | None = None


@dataclass
class EnqueueCounts:
    enqueued: int = 0
    unchanged: int = 0
    rejected: int = 0


def _stored_text(item: Mapped) -> str:
    if item.payload is not None:
        return item.payload
    return json.dumps({"record": item.raw, "reasons": list(item.reasons)}, ensure_ascii=False, sort_keys=True)


def build_body(operation: str, members: Sequence[Member]) -> bytes:
    """Deterministic from the stored payloads and keys, so a rebuilt body is byte-identical."""
    if operation == "person":
        return members[0].payload.encode("utf-8")
    parts = [f'{m.payload[:-1]},"idempotency_key":"{m.key}"}}' for m in members]
    return ('{"persons":[' + ",".join(parts) + "]}").encode("utf-8")


class Ledger:
    """The SQLite ledger: every idempotency key, batch, attempt and result of this installation."""

    def __init__(
        self, path: str | Path, *, synchronous: str = "FULL", busy_timeout_s: float = 5.0
    ) -> None:
        self.path = Path(path)
        self._conn = connect(self.path, synchronous=synchronous, busy_timeout_s=busy_timeout_s)
        self._lock = threading.RLock()
        self._lock_fd: int | None = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self._conn.close()

    def acquire_daemon_lock(self) -> None:
        """One daemon per ledger. flock dies with its process, so a SIGKILL never leaves it stale."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise LedgerError(
                f"ledger lock {lock_path} cannot be written: check the file and folder permissions ({exc.strerror})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LedgerLocked(
                f"another capture-sync daemon is already running on ledger {self.path}"
            ) from None
        self._lock_fd = fd

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise LedgerError(describe(exc, self.path)) from None
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                self._conn.execute("ROLLBACK")
                raise LedgerError(describe(exc, self.path)) from None

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            cur = self._conn.execute(sql, params)
            return cur.fetchall()

    # --- extract: records and cursors --------------------------------------------------------

    def source_state(self, source: str) -> Any:
        rows = self._read("SELECT state FROM source_state WHERE source = ?", (source,))
        return json.loads(rows[0][0]) if rows else None

    def enqueue(
        self, source: str, mapping_version: str, items: Iterable[Mapped], new_state: Any
    ) -> EnqueueCounts:
        """Write a chunk of mapped records and the cursor after them in one transaction."""
        counts = EnqueueCounts()
        now = time.time()
        state_json = json.dumps(new_state)
        with self._write() as db:
            for item in items:
                self._enqueue_one(db, source, mapping_version, item, now, counts)
            db.execute(
                "INSERT INTO source_state (source, state, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT(source) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                (source, state_json, now),
            )
        return counts

    def _enqueue_one(
        self, db: sqlite3.Connection, source: str, mv: str, item: Mapped, now: float, counts: EnqueueCounts
    ) -> None:
        valid = item.payload is not None
        body = _stored_text(item)
        digest = content_hash((body or "").encode("utf-8"))
        latest = db.execute(
            "SELECT e.id, e.state, e.content_hash, e.mapping_version FROM records r "
            "JOIN entries e ON e.id = r.entry_id WHERE r.source = ? AND r.record_id = ?",
            (source, item.record_id),
        ).fetchone()
        if latest is not None and latest[2] == digest and latest[3] == mv:
            counts.unchanged += 1
            return
        state = "pending" if valid else "rejected"
        error = None if valid else "; ".join(item.reasons)
        if valid:
            counts.enqueued += 1
        else:
            counts.rejected += 1
        if latest is not None and latest[1] == "pending":
            # Never sent, so its key was never used: the newer content simply takes its place.
            revision = self._revision(db, source, item.record_id, digest, mv, exclude=latest[0])
            key = person_key(source, item.record_id, digest, mv, revision)
            db.execute(
                "UPDATE entries SET key = ?, state = ?, payload = ?, content_hash = ?, "
                "mapping_version = ?, revision = ?, last_error = ?, updated_at = ? WHERE id = ?",
                (key, state, body, digest, mv, revision, error, now, latest[0]),
            )
            return
        # `records` keeps a row for every record ever enqueued (nothing is deleted), so a record
        # without one has no entries and its content cannot have been enqueued before.
        revision = 0 if latest is None else self._revision(db, source, item.record_id, digest, mv)
        key = person_key(source, item.record_id, digest, mv, revision)
        cur = db.execute(
            "INSERT INTO entries (key, source, record_id, state, payload, content_hash, "
            "mapping_version, revision, last_error, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, source, item.record_id, state, body, digest, mv, revision, error, now, now),
        )
        db.execute(
            "INSERT INTO records (source, record_id, entry_id) VALUES (?, ?, ?) "
            "ON CONFLICT(source, record_id) DO UPDATE SET entry_id = excluded.entry_id",
            (source, item.record_id, cur.lastrowid),
        )

    @staticmethod
    def _revision(
        db: sqlite3.Connection, source: str, rid: str, digest: str, mv: str, exclude: int | None = None
    ) -> int:
        """How often this exact content was enqueued before: content that returns gets a fresh key."""
        return db.execute(
            "SELECT count(*) FROM entries WHERE source = ? AND record_id = ? AND content_hash = ? "
            "AND mapping_version = ? AND id IS NOT ?",
            (source, rid, digest, mv, exclude),
        ).fetchone()[0]

    def is_unchanged(self, source: str, mapping_version: str, item: Mapped) -> bool:
        """Read-only change detection, for --dry-run."""
        body = _stored_text(item)
        rows = self._read(
            "SELECT e.content_hash, e.mapping_version FROM records r JOIN entries e ON e.id = r.entry_id "
            "WHERE r.source = ? AND r.record_id = ?",
            (source, item.record_id),
        )
        return bool(rows) and rows[0][0] == content_hash(body.encode("utf-8")) and rows[0][1] == mapping_version

    # --- load: write-ahead batches --------------------------------------------------------------

    def claim(self, want: Claim) -> BatchWork | None:
        """The next unit of work, written to disk before it is returned.

        Order: batches already written (their original key and body), then `unknown` entries
        (each alone under its own key), then pending entries in a new batch.
        """
        with self._write() as db:
            return self._claim(db, want)

    def _claim(self, db: sqlite3.Connection, want: Claim) -> BatchWork | None:
        states = ("open", "stalled") if want.include_stalled else ("open",)
        marks = ",".join("?" * len(states))
        for (batch_id,) in db.execute(
            f"SELECT id FROM batches WHERE state IN ({marks}) ORDER BY id", states
        ).fetchall():
            if batch_id not in want.skip:
                return self._load_batch(db, batch_id)
        unknown = db.execute(
            "SELECT id, key, payload FROM entries WHERE state = 'unknown' ORDER BY id LIMIT 1"
        ).fetchone()
        if unknown is not None:
            return self._resolve_unknown(db, Member(*unknown))
        rows = db.execute(
            "SELECT id, key, payload FROM entries WHERE state = 'pending' ORDER BY id LIMIT ?",
            (want.batch_size,),
        ).fetchall()
        if not rows:
            return None
        members = [Member(*r) for r in rows]
        if want.batch_size == 1:
            return self._new_batch(db, "person", members, key=members[0].key)
        return self._new_batch(db, "bulk", members)

    def _new_batch(self, db: sqlite3.Connection, operation: str, members: Sequence[Member], key: str | None = None) -> BatchWork:
        body = build_body(operation, members)
        now = time.time()
        key = key or batch_key()
        cur = db.execute(
            "INSERT INTO batches (key, operation, state, body_hash, size, created_at, updated_at) "
            "VALUES (?, ?, 'open', ?, ?, ?, ?)",
            (key, operation, content_hash(body), len(members), now, now),
        )
        batch_id = cur.lastrowid
        db.executemany(
            "INSERT INTO batch_members (batch_id, position, entry_id) VALUES (?, ?, ?)",
            [(batch_id, i, m.entry_id) for i, m in enumerate(members)],
        )
        db.executemany(
            "UPDATE entries SET state = 'in_flight', batch_id = ?, updated_at = ? WHERE id = ?",
            [(batch_id, now, m.entry_id) for m in members],
        )
        return BatchWork(batch_id, key, operation, tuple(members), body)  # type: ignore[arg-type]

    def _resolve_unknown(self, db: sqlite3.Connection, member: Member) -> BatchWork:
        """An unmatched member is re-sent alone with POST /person, keyed by its own stable key."""
        existing = db.execute("SELECT id FROM batches WHERE key = ?", (member.key,)).fetchone()
        if existing is None:
            return self._new_batch(db, "person", [member], key=member.key)
        now = time.time()
        db.execute("UPDATE batches SET state = 'open', updated_at = ? WHERE id = ?", (now, existing[0]))
        db.execute(
            "UPDATE entries SET state = 'in_flight', batch_id = ?, updated_at = ? WHERE id = ?",
            (existing[0], now, member.entry_id),
        )
        return self._load_batch(db, existing[0])

    def _load_batch(self, db: sqlite3.Connection, batch_id: int) -> BatchWork:
        key, operation, body_hash = db.execute(
            "SELECT key, operation, body_hash FROM batches WHERE id = ?", (batch_id,)
        ).fetchone()
        members = [
            Member(*row)
            for row in db.execute(
                "SELECT e.id, e.key, e.payload FROM batch_members m JOIN entries e ON e.id = m.entry_id "
                "WHERE m.batch_id = ? ORDER BY m.position",
                (batch_id,),
            )
        ]
        body = build_body(operation, members)
        if content_hash(body) != body_hash:
            raise LedgerError(
                f"batch {key} cannot be rebuilt byte-identically (ledger damaged?); "
                "refusing to resend its key with another body"
            )
        return BatchWork(batch_id, key, operation, tuple(members), body)

    # --- settle ----------------------------------------------------------------------------

    def settle(
        self, batch: BatchWork, outcomes: Sequence[Outcome], attempts: Sequence[Attempt], *,
        then: Claim | None = None,
    ) -> BatchWork | None:
        """Record a batch's results; with `then`, also claim the next unit of work in the same
        transaction (one commit, so one fsync under synchronous=FULL, per batch instead of two)."""
        now = time.time()
        with self._write() as db:
            db.executemany(
                "UPDATE entries SET state = ?, person_id = coalesce(?, person_id), last_error = ?, "
                "updated_at = ? WHERE id = ?",
                [(o.state, o.person_id, o.error, now, o.entry_id) for o in outcomes],
            )
            self._close_batch(db, batch, "settled", None, attempts, now)
            return None if then is None else self._claim(db, then)

    def block(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> None:
        """409: the key needs manual recovery; never retried automatically (spec 4.4 rule 3)."""
        self._set_members(batch, "blocked", error, "blocked", attempts)

    def stall(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> None:
        """A non-retryable server error: members stay in_flight, the batch waits for `replay`."""
        self._set_members(batch, None, error, "stalled", attempts)

    def keep_open(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> None:
        """Retries ran out on a transient error: the batch stays open for the next run."""
        self._set_members(batch, None, error, "open", attempts)

    def fail(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> None:
        self._set_members(batch, "failed", error, "failed", attempts)

    def _set_members(
        self, batch: BatchWork, entry_state: str | None, error: str, batch_state: str, attempts: Sequence[Attempt]
    ) -> None:
        now = time.time()
        with self._write() as db:
            db.executemany(
                "UPDATE entries SET state = coalesce(?, state), last_error = ?, updated_at = ? WHERE id = ?",
                [(entry_state, error, now, m.entry_id) for m in batch.members],
            )
            self._close_batch(db, batch, batch_state, error, attempts, now)

    def split(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> tuple[BatchWork, BatchWork]:
        """400 on a batch: two new batches (new keys: new member sets) to isolate the bad persons."""
        now = time.time()
        half = len(batch.members) // 2
        with self._write() as db:
            self._close_batch(db, batch, "split", error, attempts, now)
            return (
                self._new_batch(db, batch.operation, batch.members[:half]),
                self._new_batch(db, batch.operation, batch.members[half:]),
            )

    def record_attempts(self, batch: BatchWork, attempts: Sequence[Attempt]) -> None:
        with self._write() as db:
            self._insert_attempts(db, batch, attempts)

    def _close_batch(
        self, db: sqlite3.Connection, batch: BatchWork, state: str, error: str | None,
        attempts: Sequence[Attempt], now: float,
    ) -> None:
        db.execute(
            "UPDATE batches SET state = ?, last_error = ?, updated_at = ? WHERE id = ?",
            (state, error, now, batch.id),
        )
        self._insert_attempts(db, batch, attempts)

    @staticmethod
    def _insert_attempts(db: sqlite3.Connection, batch: BatchWork, attempts: Sequence[Attempt]) -> None:
        db.executemany(
            "INSERT INTO attempts (batch_id, key, operation, started_at, latency_ms, status_code, "
            "error_name, error_code, retryable, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    batch.id, a.idempotency_key, a.operation, a.started_at,
                    round(a.latency_s * 1000, 3), a.status_code,
                    a.error.name if a.error else None, a.error.code if a.error else None,
                    None if a.error is None or a.error.retryable is None else int(a.error.retryable),
                    type(a.error).__name__ if a.error else "ok",
                )
                for a in attempts
            ],
        )

    # --- operator commands -------------------------------------------------------------------

    def requeue_failed(self, before: float) -> int:
        """For `replay --include-failed`: entries that failed before `before` go back to pending
        with their same per-person keys (they will travel in new batches, under new batch keys)."""
        with self._write() as db:
            return db.execute(
                "UPDATE entries SET state = 'pending', batch_id = NULL, updated_at = ? "
                "WHERE state = 'failed' AND updated_at < ?",
                (time.time(), before),
            ).rowcount

    def resolve(self, key: str, action: Literal["requeue", "dismiss"]) -> int:
        """Manual recovery of a blocked (or failed, or stalled) batch or entry."""
        if action not in ("requeue", "dismiss"):
            raise ValueError("action is requeue or dismiss")
        now = time.time()
        with self._write() as db:
            batch = db.execute("SELECT id, state FROM batches WHERE key = ?", (key,)).fetchone()
            if batch is not None and batch[1] != "settled":
                where, params = (
                    "id IN (SELECT entry_id FROM batch_members WHERE batch_id = ?) "
                    "AND state IN ('blocked', 'failed', 'in_flight')",
                    (batch[0],),
                )
                db.execute(
                    "UPDATE batches SET state = ?, updated_at = ? WHERE id = ?",
                    ("requeued" if action == "requeue" else "dismissed", now, batch[0]),
                )
            else:
                where, params = "key = ? AND state IN ('blocked', 'failed')", (key,)
            new_state = "pending" if action == "requeue" else "dismissed"
            changed = db.execute(
                f"UPDATE entries SET state = ?, batch_id = NULL, updated_at = ? WHERE {where}",
                (new_state, now, *params),
            ).rowcount
            if changed == 0 and batch is None and not db.execute(
                "SELECT 1 FROM entries WHERE key = ?", (key,)
            ).fetchone():
                raise KeyError(key)
            return changed

    # --- runs and views ----------------------------------------------------------------------

    def start_run(self, kind: str) -> int:
        with self._write() as db:
            return db.execute(
                "INSERT INTO runs (kind, started_at) VALUES (?, ?)", (kind, time.time())
            ).lastrowid

    def finish_run(self, run_id: int, counts: dict[str, int], duration_s: float, exit_code: int) -> None:
        cols = ("read", "enqueued", "unchanged", "rejected", "sent", "captured", "duplicate", "failed", "blocked")
        with self._write() as db:
            db.execute(
                f"UPDATE runs SET finished_at = ?, duration_s = ?, exit_code = ?, "
                f"{', '.join(f'{c} = ?' for c in cols)} WHERE id = ?",
                (time.time(), duration_s, exit_code, *(counts.get(c, 0) for c in cols), run_id),
            )

    def unsettled_count(self) -> int:
        marks = ",".join("?" * len(UNSETTLED))
        return self._read(f"SELECT count(*) FROM entries WHERE state IN ({marks})", UNSETTLED)[0][0]

    def blocked_count(self) -> int:
        return self._read("SELECT count(*) FROM entries WHERE state = 'blocked'")[0][0]

    def status(self) -> views.StatusReport:
        with self._lock:
            return views.status(self._conn)

    def list_entries(
        self, state: str | None = None, *, source: str | None = None, limit: int = 100
    ) -> list[views.EntryView]:
        with self._lock:
            return views.list_entries(self._conn, state, source=source, limit=limit)

    def show(self, key: str) -> views.EntryDetail | views.BatchDetail:
        with self._lock:
            return views.show(self._conn, key)
