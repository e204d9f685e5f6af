"""Extract's side of the ledger: each source record becomes an entry (a version), unless its content
is unchanged. Entries are never rewritten: a newer version is a new row, so every key the server may
have seen keeps the one body it was sent with (design 2)."""

from __future__ import annotations

import json
import sqlite3

from ..keys import content_hash, person_key
from ._types import EnqueueCounts, Mapped

SUPERSEDED = "superseded by a newer version of the record before it was sent"


def stored_text(item: Mapped) -> str:
    if item.payload is not None:
        return item.payload
    return json.dumps({"record": item.raw, "reasons": list(item.reasons)}, ensure_ascii=False, sort_keys=True)


def latest_version(db: sqlite3.Connection, source: str, record_id: str) -> tuple[int, str, str] | None:
    """(entry id, state, content hash) of the record's newest version."""
    return db.execute(
        "SELECT e.id, e.state, e.content_hash FROM records r JOIN entries e ON e.id = r.entry_id "
        "WHERE r.source = ? AND r.record_id = ?",
        (source, record_id),
    ).fetchone()


def is_unchanged(db: sqlite3.Connection, source: str, item: Mapped) -> bool:
    """Change detection compares content only: a mapping edit that yields the same payload is no new work."""
    latest = latest_version(db, source, item.record_id)
    return latest is not None and latest[2] == content_hash(stored_text(item).encode("utf-8"))


def enqueue_one(
    db: sqlite3.Connection, source: str, mapping_version: str, item: Mapped, now: float, counts: EnqueueCounts
) -> None:
    body = stored_text(item)
    digest = content_hash(body.encode("utf-8"))
    latest = latest_version(db, source, item.record_id)
    if latest is not None and latest[2] == digest:
        counts.unchanged += 1
        return
    valid = item.payload is not None
    if valid:
        counts.enqueued += 1
    else:
        counts.rejected += 1
    if latest is not None and latest[1] == "pending" and not _ever_batched(db, latest[0]):
        # Never written into a batch, so never seen by the server: the newer version replaces it.
        # One that was (a requeued entry) stays pending, and the newer one waits for it to settle.
        db.execute(
            "UPDATE entries SET state = 'superseded', last_error = ?, updated_at = ? WHERE id = ?",
            (SUPERSEDED, now, latest[0]),
        )
        counts.superseded += 1
    # `records` keeps a row for every record ever enqueued (nothing is deleted), so a record
    # without one has no entries and its content cannot have been enqueued before.
    revision = 0 if latest is None else _revision(db, source, item.record_id, digest)
    cur = db.execute(
        "INSERT INTO entries (key, source, record_id, state, payload, content_hash, "
        "mapping_version, revision, last_error, notes, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            person_key(source, item.record_id, digest, revision), source, item.record_id,
            "pending" if valid else "rejected", body, digest, mapping_version, revision,
            None if valid else "; ".join(item.reasons), ("; ".join(item.reasons) or None) if valid else None,
            now, now,
        ),
    )
    db.execute(
        "INSERT INTO records (source, record_id, entry_id) VALUES (?, ?, ?) "
        "ON CONFLICT(source, record_id) DO UPDATE SET entry_id = excluded.entry_id",
        (source, item.record_id, cur.lastrowid),
    )


def _ever_batched(db: sqlite3.Connection, entry_id: int) -> bool:
    return db.execute("SELECT 1 FROM batch_members WHERE entry_id = ? LIMIT 1", (entry_id,)).fetchone() is not None


def _revision(db: sqlite3.Connection, source: str, record_id: str, digest: str) -> int:
    """How often this exact content was enqueued before: content that returns gets a fresh key, and
    since no entry is ever deleted or rewritten, no key is ever derived twice."""
    return db.execute(
        "SELECT count(*) FROM entries WHERE source = ? AND record_id = ? AND content_hash = ?",
        (source, record_id, digest),
    ).fetchone()[0]
