"""Extract's side of the ledger: each source record becomes an entry (a version), unless it is no new
work. Entries are never rewritten: a newer version is a new row, so every key the server may have
seen keeps the one body it was sent with (design 2).

One rule decides what is new work, for every way a row can come again (a lookback, `--full-refresh`,
a restored ledger, an append-only log that holds a record more than once):
- a version below the newest one read for its record, in the source's order (`Mapped.order`, its
  cursor value), is older: recorded once as superseded, never sent;
- content equal to the record's newest version, or to the newest version the CRM may hold (whatever
  happened to the versions in between: superseded, rejected, failed), is unchanged: no key is spent
  on it again;
- anything else is a new version, sent after every older live version of its record has settled.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from json.encoder import encode_basestring_ascii
from operator import attrgetter
from typing import Any

from ..keys import content_hash, person_key
from . import _counts
from ._db import Db, Dialect, rows_of
from ._types import EnqueueCounts, Mapped, Order, in_open_batch

SUPERSEDED = "superseded by a newer version of the record before it was sent"
OLDER = "read again below the record's newest version in the source's order: never sent"

# A version in one of these states may have reached the CRM (a pending one may too, once it was
# written into a batch: a requeued entry); failed, rejected, superseded and dismissed ones have not.
RECEIVED = ("captured", "duplicate", "in_flight", "unknown", "blocked")
# Once written into a batch, a version in one of these may have reached the CRM too; whether it did
# is known for a pending one (requeued: its content will be sent again), not for the others. Since
# schema v12 such a version names its batch (`batch_id`), or is a member of an open or stalled one.
_SENT_THEN_SET_ASIDE = "'pending','superseded','dismissed'"


@dataclass(slots=True)
class _Known:
    """What the ledger holds for one record, kept current through the chunk."""

    entry_id: int
    state: str
    digest: str
    batched: bool  # a pending entry that was written into a batch (requeued): the CRM may hold it
    order: Order | None  # the highest place in the source's order read for the record
    received: tuple[int, str, str] | None = None  # (entry id, state, digest) of the newest version the CRM may hold
    raw_digest: str | None = None  # of the source record the newest version was mapped from

    def may_be_received(self) -> bool:
        return self.state in RECEIVED or (self.state == "pending" and self.batched)


_record_id = attrgetter("record_id")


def stored_text(item: Mapped) -> str:
    if item.payload is not None:
        return item.payload
    return json.dumps({"record": item.raw, "reasons": list(item.reasons)}, ensure_ascii=False, sort_keys=True)


def is_older(order: Order | None, than: Order | None) -> bool:
    """Strictly below in the source's order; a number and a text (a changed `cursor_type`) and a
    missing place (no cursor, a ledger from before v6) compare with nothing, so arrival decides."""
    if order is None or than is None or isinstance(order, str) is not isinstance(than, str):
        return False
    return order < than  # type: ignore[operator]


def _highest(order: Order | None, known: Order | None) -> Order | None:
    if order is None:
        return known
    return known if is_older(order, known) else order


def _decode(text: str | None) -> Order | None:
    return None if text is None else json.loads(text)


def _encode(order: Order | None) -> str | None:
    """The text `json.dumps` writes for a place in the order (`source_order`), without its encoder's
    set-up per call (a microsecond a record, twice): a finite number is its repr, a text its escaped
    ASCII string; anything else (inf, nan, a bool) goes through `json.dumps` itself."""
    if order is None:
        return None
    kind = type(order)
    if kind is str:
        return encode_basestring_ascii(order)  # type: ignore[arg-type]
    if kind is int or (kind is float and math.isfinite(order)):  # type: ignore[arg-type]
        return kind.__repr__(order)
    return json.dumps(order)


Pointer = tuple[int, str | None, str | None]  # (entry id, place in the order as stored, raw digest)


@dataclass(slots=True)
class _Pointers:
    """Each record's pointer (its newest version, the highest place read, the raw digest) as stored:
    since schema v12 the record's newest row itself (`top`, the highest id: its `source_order` and
    `raw_digest`), unless a `records` row says otherwise (`overridden`), as it does where the pointer
    differs from that row: a version read again unchanged further on in the order or from another
    spelling, a version read below the record's place (written, never the pointer), a revert to what
    the CRM holds. A new record, and a new version of a known one, write no `records` row."""

    stored: dict[str, Pointer] = field(default_factory=dict)
    top: dict[str, Pointer] = field(default_factory=dict)
    overridden: set[str] = field(default_factory=set)

    def changes(self, source: str, now: dict[str, Pointer]) -> tuple[list[tuple[Any, ...]], list[tuple[str, str]]]:
        """The `records` rows to write (source, record id, entry id, place, raw digest) and to delete
        (source, record id) so that `now` (the pointers this chunk moved) reads as stored."""
        upserts: list[tuple[Any, ...]] = []
        deletes: list[tuple[str, str]] = []
        top, stored, overridden = self.top, self.stored, self.overridden
        unmoved = ((rid, stored[rid]) for rid in top.keys() - now.keys())
        for rid, pointer in chain(now.items(), unmoved):
            if pointer == top[rid]:
                if rid in overridden:
                    deletes.append((source, rid))
            elif rid not in overridden or pointer != stored[rid]:
                upserts.append((source, rid, *pointer))
        return upserts, deletes


def _load(
    db: Db, source: str, record_ids: list[str], contents: Iterable[tuple[str, str]] = ()
) -> tuple[dict[str, _Known], Counter[tuple[str, str]], _Pointers]:
    """The records' newest versions and what the CRM may hold of them, and how often each of
    `contents` (record id, content digest) came before (its revision): a handful of reads whatever
    the chunk's size. Only the chunk's own contents are counted, each by one seek of the (source,
    record_id, content_hash) index, where counting every version of each record cost 5 us per
    record with three versions each, most of it rows nobody asked about."""
    pointers = _Pointers()
    rows = [
        *db.execute(
            _newest("e.id, e.state, e.content_hash, e.batch_id, e.source_order, e.raw_digest", db.dialect),
            (source, db.dialect.many(record_ids)),
        ),
    ]
    for rid, eid, _, _, _, order, raw in rows:
        pointers.top[rid] = (eid, order, raw)
    if rows:
        overrides = db.execute(
            "SELECT r.record_id, e.id, e.state, e.content_hash, e.batch_id, r.source_order, r.raw_digest FROM records r "
            f"JOIN entries e ON e.id = r.entry_id WHERE r.source = ? AND r.record_id {db.dialect.any_of}",
            (source, db.dialect.many(record_ids)),
        ).fetchall()
        pointers.overridden.update(row[0] for row in overrides)
        rows += overrides  # after the newest rows: a record's exception wins
    known = {}
    for rid, eid, state, digest, batch, order, raw in rows:
        known[rid] = _Known(eid, state, digest, batch is not None, _decode(order), raw_digest=raw)
        pointers.stored[rid] = (eid, order, raw)
    seen: Counter[tuple[str, str]] = Counter()
    if not known:
        return known, seen, pointers
    # A pending entry was written into a batch if it names one (every ending of a batch writes it into
    # its members, and a requeue keeps it: schema v12) or is a member of an open or stalled batch (few).
    unnamed = [k.entry_id for k in known.values() if k.state == "pending" and not k.batched]
    if unnamed:
        batched = {  # the entries by their ids, each tested against the open batches' members read once
            row[0]
            for row in db.execute(
                f"SELECT e.id FROM entries e WHERE e.id {db.dialect.any_of} AND {in_open_batch(db.dialect, 'e')}",
                (db.dialect.many(unnamed),),
            )
        }
        for k in known.values():
            k.batched = k.batched or k.entry_id in batched
    asked = sorted({pair for pair in contents if pair[0] in known})  # a record the ledger lacks has no versions
    if asked:
        pairs, params = rows_of(db, (("record_id", "text"), ("content_hash", "text")), asked)
        for rid, digest, n in db.execute(
            # CROSS JOIN: SQLite walks the pairs and seeks each in the index (PostgreSQL plans it as any join).
            f"SELECT c.record_id, c.content_hash, count(*) FROM {pairs} AS p CROSS JOIN entries c WHERE c.source = ? "
            "AND c.record_id = p.record_id AND c.content_hash = p.content_hash GROUP BY c.record_id, c.content_hash",
            (*params, source),
        ):
            seen[(rid, digest)] = n
    for k in known.values():
        if k.may_be_received():
            k.received = (k.entry_id, k.state, k.digest)
    behind = [rid for rid, k in known.items() if k.received is None]
    if behind:  # the newest version never reached the CRM: which one did, if any (the newest such per record)
        marks = ",".join(f"'{s}'" for s in RECEIVED)
        for rid, eid, state, digest in db.execute(
            "SELECT e.record_id, e.id, e.state, e.content_hash FROM entries e WHERE e.id IN ("
            f"SELECT max(c.id) FROM entries c WHERE c.source = ? AND c.record_id {db.dialect.any_of} "
            f"AND (c.state IN ({marks}) OR (c.state IN ({_SENT_THEN_SET_ASIDE}) AND (c.batch_id IS NOT NULL "
            f"OR {in_open_batch(db.dialect, 'c')}))) GROUP BY c.record_id)",
            (source, db.dialect.many(behind)),
        ):
            # A version sent and then set aside by an operator (resolved while blocked or unknown) may
            # be what the CRM holds, or not: its content is not known to be held, so none is.
            known[rid].received = (eid, state, "" if state in ("superseded", "dismissed") else digest)
    return known, seen, pointers


def _newest(columns: str, dialect: Dialect) -> str:
    """SQL: `record_id, <columns>` of each record's newest row (its highest id, from the (source,
    record_id, content_hash) index), given the source and the record ids."""
    return (
        f"SELECT e.record_id, {columns} FROM entries e WHERE e.id IN (SELECT max(c.id) FROM entries c "
        f"WHERE c.source = ? AND c.record_id {dialect.any_of} GROUP BY c.record_id)"
    )


def raw_digests(db: Db, source: str, record_ids: list[str]) -> dict[str, str]:
    """Record id -> the digest of the source record its newest version was mapped from: the pointer's
    (see `_Pointers`), read alone, as every chunk of every read asks it before mapping."""
    params = (source, db.dialect.many(record_ids))
    digests = dict(db.execute(_newest("e.raw_digest", db.dialect), params).fetchall())
    digests.update(
        db.execute(
            f"SELECT record_id, raw_digest FROM records WHERE source = ? AND record_id {db.dialect.any_of}", params
        ).fetchall()
    )
    return {rid: raw for rid, raw in digests.items() if raw is not None}


def is_unchanged(db: Db, source: str, item: Mapped) -> bool:
    """Whether enqueueing `item` now would send nothing (unchanged or older), for --dry-run."""
    known, _, _ = _load(db, source, [item.record_id])
    k = known.get(item.record_id)
    if k is None:
        return False
    digest = content_hash(stored_text(item).encode("utf-8"))
    return is_older(item.order, k.order) or digest == k.digest or (k.received is not None and digest == k.received[2])


# A new entry with no error, notes or place in the source's order, written with those three as NULL in
# the statement rather than bound as None: Python's sqlite3 binds None only after asking its adapters
# and the protocol's `__adapt__` (an AttributeError made and dropped), some 3,300 instructions a None,
# a tenth of a record's enqueue. The same row either way (tests/ledger/test_enqueue_rows.py).
_BARE_ROWS = (
    "INSERT INTO entries (id, key, source, record_id, state, payload, content_hash, mapping_version, "
    "revision, last_error, notes, source_order, raw_digest, created_at, updated_at, run_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?, ?, ?, capture_run_in_hand())"
)
# One with a place in the source's order (a read with a cursor) but no error or notes: the two as NULL
_PLACED_ROWS = (
    "INSERT INTO entries (id, key, source, record_id, state, payload, content_hash, mapping_version, "
    "revision, last_error, notes, source_order, raw_digest, created_at, updated_at, run_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?, capture_run_in_hand())"
)
# Any other new entry, the three bound (tests/ledger/test_stamp_coverage.py reads each statement whole)
_ROWS = (
    "INSERT INTO entries (id, key, source, record_id, state, payload, content_hash, mapping_version, "
    "revision, last_error, notes, source_order, raw_digest, created_at, updated_at, run_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, capture_run_in_hand())"
)


def enqueue_chunk(
    db: Db,
    source: str,
    mapping_version: str,
    items: Sequence[Mapped],
    now: float,
    counts: EnqueueCounts,
) -> None:
    """Enqueue a chunk with a handful of statements, whatever its size: `_load`'s reads, then an
    executemany for the new entries of each row shape (`_BARE_ROWS`, `_PLACED_ROWS`, `_ROWS`), one for
    the superseded ones and one for `records` (its exceptions). The decisions are the
    ones a record-by-record enqueue makes in order, duplicates within the chunk included (the
    chunk's own new versions are tracked in memory). New entries get their ids here (the chunk holds
    the write lock), so a later record of the chunk can supersede an earlier one. Entries carry the
    run in hand as they are written (`capture_run_in_hand()`), so no trigger has anything to do.
    On the hot path: per record one digest, one key and one row tuple; its place in the order is
    encoded once, for the entry and the `records` pointer alike."""
    if not items:
        return
    bodies = [item.payload if item.payload is not None else stored_text(item) for item in items]
    digests = [content_hash(body.encode("utf-8")) for body in bodies]
    record_ids = list(dict.fromkeys(map(str, map(_record_id, items))))
    known, seen, stored = _load(
        db, source, record_ids, ((item.record_id, digest) for item, digest in zip(items, digests, strict=True))
    )
    # A record that comes once in the chunk is decided once: what it leaves is tracked only when one comes again.
    again = len(record_ids) < len(items)
    next_id = db.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]
    rows: list[tuple[Any, ...]] = []
    bare: list[tuple[Any, ...]] = []  # the new entries without an error, notes or place (`_BARE_ROWS`)
    placed: list[tuple[Any, ...]] = []  # the new entries with a place but no error or notes (`_PLACED_ROWS`)
    settled: list[str] = []  # the settled state of each row written settled (rejected, older)
    superseded: list[int] = []
    # record id -> (newest entry, highest order as stored, raw digest), where this chunk moved it
    pointers: dict[str, Pointer] = {}
    for item, body, digest in zip(items, bodies, digests, strict=True):
        rid = item.record_id
        place = None if item.order is None else _encode(item.order)  # no order, no call: a read without a cursor
        state = "pending" if item.payload is not None else "rejected"
        k = known.get(rid)
        if k is None:
            order: Order | None = item.order
        elif is_older(item.order, k.order):
            counts.older += 1
            if seen.get((rid, digest)):  # kept once, for audit: the same older row read again adds nothing
                continue
            state = "superseded"
        else:
            order = _highest(item.order, k.order)
            if order is not item.order:
                place = _encode(order)
            if k.digest == digest:
                counts.unchanged += 1
                if order != k.order or (item.raw_digest is not None and item.raw_digest != k.raw_digest):
                    # The same content further on in the source's order (a touched row), or from another spelling.
                    k.order, k.raw_digest = order, item.raw_digest
                    pointers[rid] = (k.entry_id, place, item.raw_digest)
                continue
            if k.state == "pending" and not k.batched:
                # Never written into a batch, so never seen by the server: the newer version replaces it.
                # One that was (a requeued entry) stays pending, and the newer one waits for it to settle.
                superseded.append(k.entry_id)
                counts.superseded += 1
            if k.received is not None and k.received[2] == digest:
                # What the CRM holds already (a revert past a rejected or superseded version): no new key.
                counts.unchanged += 1
                eid, held, _ = k.received
                known[rid] = _Known(eid, held, digest, True, order, k.received, item.raw_digest)
                pointers[rid] = (eid, place, item.raw_digest)
                continue
        if state == "pending":
            last_error, notes = None, ("; ".join(item.reasons) or None) if item.reasons else None
        else:
            last_error, notes = ("; ".join(item.reasons), None) if state == "rejected" else (OLDER, None)
            settled.append(state)
        content = (rid, digest)
        revision = seen.get(content, 0)  # not `seen[content]`: a Counter's __missing__ is a Python call
        seen[content] = revision + 1
        next_id += 1
        key = person_key(source, rid, digest, revision)
        # A new entry: its row written here rather than by a function per record (a call with 7 arguments); without
        # an error or notes (nearly every row), those as NULL in the statement (`_BARE_ROWS`, `_PLACED_ROWS`).
        raw = item.raw_digest
        if last_error is None and notes is None and place is None:  # one tuple made, not a head and a row
            bare.append((next_id, key, source, rid, state, body, digest, mapping_version, revision, raw, now, now))
        else:
            new = (next_id, key, source, rid, state, body, digest, mapping_version, revision)
            if last_error is None and notes is None:
                placed.append((*new, place, raw, now, now))
            else:
                rows.append((*new, last_error, notes, place, raw, now, now))
        pointer = stored.top[rid] = (next_id, place, item.raw_digest)
        if state == "superseded":  # an older version: written settled, never the record's pointer
            continue
        if again:
            received = None if k is None else k.received
            known[rid] = _Known(next_id, state, digest, False, order, received, item.raw_digest)
        pointers[rid] = pointer
    counts.rejected += settled.count("rejected")
    counts.enqueued += len(bare) + len(placed) + len(rows) - len(settled)  # the rows not written settled are pending
    if bare:
        db.executemany(_BARE_ROWS, bare)
    if placed:
        db.executemany(_PLACED_ROWS, placed)
    if rows:
        db.executemany(_ROWS, rows)
    if superseded:
        db.executemany(
            "UPDATE entries SET state = 'superseded', last_error = ?, updated_at = ?, "
            "run_id = coalesce(capture_run_in_hand(), run_id) WHERE id = ?",
            [(SUPERSEDED, now, entry_id) for entry_id in superseded],
        )
    # Rejected and older versions are written settled, and superseded ones were pending (never batched).
    _counts.add(
        db,
        _counts.moves(
            [(source, None, state) for state in settled] + [(source, "pending", "superseded") for _ in set(superseded)]
        ),
    )
    upserts, deletes = stored.changes(source, pointers)
    if upserts:
        db.executemany(
            "INSERT INTO records (source, record_id, entry_id, source_order, raw_digest) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(source, record_id) DO UPDATE SET entry_id = excluded.entry_id, "
            "source_order = excluded.source_order, raw_digest = excluded.raw_digest",
            upserts,
        )
    if deletes:
        db.executemany("DELETE FROM records WHERE source = ? AND record_id = ?", deletes)
