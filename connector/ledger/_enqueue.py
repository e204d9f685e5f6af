"""Extract's side of the ledger: each source record becomes an entry (a version), unless its content
is unchanged. Entries are never rewritten: a newer version is a new row, so every key the server may
have seen keeps the one body it was sent with (design 2)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import Any

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


def enqueue_chunk(
    db: sqlite3.Connection, source: str, mapping_version: str, items: Sequence[Mapped], now: float,
    counts: EnqueueCounts,
) -> None:
    """Enqueue a chunk with a handful of statements, whatever its size: one read each for the
    records' newest versions, whether those were ever batched and how often each content came
    before; then one executemany each for the new entries, the superseded ones and `records`.
    The decisions are the ones a record-by-record enqueue makes in order, duplicates within the
    chunk included (the chunk's own new versions are tracked in memory). New entries get their ids
    here (the chunk holds the write lock), so a later record of the chunk can supersede an earlier
    one. Entries carry the run in hand as they are written (`capture_run_in_hand()`), so the stamp
    triggers have nothing left to do for them."""
    if not items:
        return
    texts = [stored_text(item) for item in items]
    digests = [content_hash(text.encode("utf-8")) for text in texts]
    ids = [str(item.record_id) for item in items]
    wanted = json.dumps(list(dict.fromkeys(ids)))
    # record id -> [entry id, state, content hash, ever batched]
    latest: dict[str, list[Any]] = {
        rid: [eid, state, digest, None]
        for rid, eid, state, digest in db.execute(
            "SELECT r.record_id, e.id, e.state, e.content_hash FROM records r JOIN entries e ON e.id = r.entry_id "
            "WHERE r.source = ? AND r.record_id IN (SELECT value FROM json_each(?))",
            (source, wanted),
        )
    }
    seen: Counter[tuple[str, str]] = Counter()
    if latest:
        pending = [v[0] for v in latest.values() if v[1] == "pending"]
        batched = {
            row[0] for row in db.execute(
                "SELECT DISTINCT entry_id FROM batch_members WHERE entry_id IN (SELECT value FROM json_each(?))",
                (json.dumps(pending),),
            )
        } if pending else set()
        for v in latest.values():
            v[3] = v[0] in batched
        for rid, digest, n in db.execute(
            "SELECT record_id, content_hash, count(*) FROM entries WHERE source = ? "
            "AND record_id IN (SELECT value FROM json_each(?)) GROUP BY record_id, content_hash",
            (source, json.dumps(list(latest))),
        ):
            seen[(rid, digest)] = n
    next_id = db.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]
    rows: list[tuple[Any, ...]] = []
    superseded: list[int] = []
    for item, rid, body, digest in zip(items, ids, texts, digests):
        last = latest.get(rid)
        if last is not None and last[2] == digest:
            counts.unchanged += 1
            continue
        valid = item.payload is not None
        if valid:
            counts.enqueued += 1
        else:
            counts.rejected += 1
        if last is not None and last[1] == "pending" and not last[3]:
            # Never written into a batch, so never seen by the server: the newer version replaces it.
            # One that was (a requeued entry) stays pending, and the newer one waits for it to settle.
            superseded.append(last[0])
            counts.superseded += 1
        # `records` keeps a row for every record ever enqueued (nothing is deleted), so a record
        # without one has no entries and its content cannot have been enqueued before.
        revision = 0 if last is None else seen[(rid, digest)]
        seen[(rid, digest)] += 1
        next_id += 1
        reasons = "; ".join(item.reasons)
        rows.append((
            next_id, person_key(source, item.record_id, digest, revision), source, item.record_id,
            "pending" if valid else "rejected", body, digest, mapping_version, revision,
            None if valid else reasons, (reasons or None) if valid else None, now, now,
        ))
        latest[rid] = [next_id, "pending" if valid else "rejected", digest, False]
    if not rows:
        return
    db.executemany(
        "INSERT INTO entries (id, key, source, record_id, state, payload, content_hash, mapping_version, "
        "revision, last_error, notes, created_at, updated_at, run_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, capture_run_in_hand())",
        rows,
    )
    if superseded:
        db.executemany(
            "UPDATE entries SET state = 'superseded', last_error = ?, updated_at = ?, "
            "run_id = coalesce(capture_run_in_hand(), run_id) WHERE id = ?",
            [(SUPERSEDED, now, entry_id) for entry_id in superseded],
        )
    db.executemany(
        "INSERT INTO records (source, record_id, entry_id) VALUES (?, ?, ?) "
        "ON CONFLICT(source, record_id) DO UPDATE SET entry_id = excluded.entry_id",
        [(source, row[3], row[0]) for row in rows],
    )
