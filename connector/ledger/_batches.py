"""Load's side of the ledger: claiming work as write-ahead batches, rebuilding them byte for byte.

A bulk batch gets a fresh random key when it is written; a POST /person batch is keyed by its
person's own key, the only key of that operation that names the person. Members' (key, payload)
pairs never change afterwards, so a key the server may have seen is only ever sent again with its
first body. Keys are assumed to hold within one operation only, so a person is re-offered in the
operation it was first offered in: in bulk under its per-person key, with POST /person under the
same request key (after a 409 and a requeue, the server then answers with its earlier result).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

from ..keys import batch_key, content_hash
from ._db import Db, Dialect, members_of
from ._types import STUCK, BatchWork, Claim, Member, Operation, in_open_batch
from .schema import LedgerError

# The one-live-version rule: a pending entry is sendable only when no older version of its record is
# live (the newer one waits until the older settles, so that the newest data always lands last).
# The live versions that were sent and have not settled are few on a good day and hundreds of
# thousands after an outage (unknown or blocked, or stored in flight): `_NOT_STUCK` probes their
# partial index by record (schema v13) per candidate, and the records of an open or stalled batch's
# pending members are read once per statement (few: the batches in hand). Such a version is older
# than any pending one outside a batch: a new version gets the highest id, and `_operator` requeues
# only a record's newest. A live version never sent is pending too, before the candidate in the walk's
# id order: `claim` keeps the first of a record's versions it finds (enqueue supersedes such a version
# when a newer one comes, so that is rare).


def _record(entry: str) -> str:
    """SQL: the entry's record as one text value (its source's length first: no two records share it),
    so that an IN list of them is hashed or indexed on both engines (SQLite scans a list of row values)."""
    return f"length({entry}.source) || ':' || {entry}.source || {entry}.record_id"


# The one-live-version rule against the versions sent and not settled (unknown, blocked, in flight as
# stored before v10), by the partial index entries_stuck (schema v13) on their record: one probe per
# candidate, where reading them all per claim (hashed on PostgreSQL under work_mem: an outage leaves
# hundreds of thousands) cost the claim in proportion to them.
_NOT_STUCK = (
    "NOT EXISTS (SELECT 1 FROM entries sl WHERE sl.source = e.source AND sl.record_id = e.record_id "
    f"AND {STUCK.format(state='sl.state')})"
)


_OPEN, _STALLED = "'open','stalled'", "'stalled'"


def _members_records(dialect: Dialect, states: str) -> str:
    """SQL: the records of the pending members of the batches in `states` (read from entries_live alone)."""
    return (
        f"SELECT {_record('se')} FROM entries se WHERE se.state = 'pending' AND se.id IN (SELECT om.value FROM "
        f"batches ob CROSS JOIN {members_of(dialect, 'ob', 'om')} WHERE ob.state IN ({states}))"
    )


@functools.cache
def _sendable(dialect: Dialect) -> str:
    """A pending entry in an open or stalled batch is in flight (schema v10: claim does not write the
    entry), and so is its record."""
    return (
        "SELECT e.id, e.key, e.payload, e.source, e.record_id FROM entries e WHERE e.state = 'pending' "
        f"AND NOT {in_open_batch(dialect, 'e')} AND {_NOT_STUCK} AND NOT {_record('e')} IN "
        f"({_members_records(dialect, _OPEN)}) ORDER BY e.id LIMIT ?"
    )


@functools.cache
def _claimable(dialect: Dialect) -> str:
    return (
        "SELECT count(*) FROM (SELECT 1 FROM entries e WHERE e.state = 'pending' AND e.id > ? "
        f"AND NOT {in_open_batch(dialect, 'e')} AND {_NOT_STUCK} AND NOT {_record('e')} IN "
        f"({_members_records(dialect, _STALLED)}) LIMIT ?) AS c"
    )


def _sendable_members(db: Db, batch_size: int) -> list[Member]:
    """Up to `batch_size` sendable entries in id order, the first of each record's."""
    members, records = [], set()
    for entry_id, key, payload, source, record_id in db.execute(_sendable(db.dialect), (batch_size,)):
        if (source, record_id) not in records:
            records.add((source, record_id))
            members.append(Member(entry_id, key, payload))
    return members


def claimable(db: Db, after_id: int, limit: int) -> int:
    """How many entries above `after_id` claim could take, counted up to `limit`: pending, in no open
    or stalled batch, and not behind an older version of their record that is stuck until an operator
    or a replay acts (unknown, blocked, in a stalled batch, or in flight as stored before schema v10).
    One behind a version
    in an open batch counts: claim takes it once that batch settles, which delivery is doing (and
    reading that batch's members' records cost each of a streaming sync's backlog polls more than the
    count itself)."""
    if db.dialect.claim_plan:  # the claim's plan settings: entries_live walked in id order (`_pg_plans.CLAIM_PLAN`)
        db.execute(db.dialect.claim_plan)
    count: int = db.execute(_claimable(db.dialect), (after_id, limit)).fetchone()[0]
    return count


@functools.cache
def _reoffer(dialect: Dialect) -> str:
    """An unknown entry is re-offered alone once; one that a batch of its own could not place either is
    left for an operator (re-asking the same way cannot give a safer answer). One being re-offered is
    in flight in its open batch: not again."""
    return (
        "SELECT e.id, e.key, e.payload FROM entries e WHERE e.state = 'unknown' AND NOT EXISTS ("
        f"SELECT 1 FROM batches b WHERE b.id = e.batch_id AND b.size = 1) AND NOT {in_open_batch(dialect, 'e')} "
        "ORDER BY e.id LIMIT 1"
    )


def build_body(operation: Operation, members: Sequence[Member]) -> bytes:
    """Deterministic from the stored payloads and keys, so a rebuilt body is byte-identical."""
    if operation == "person":
        return members[0].payload.encode("utf-8")
    parts = [f'{m.payload[:-1]},"idempotency_key":"{m.key}"}}' for m in members]
    return ('{"persons":[' + ",".join(parts) + "]}").encode("utf-8")


def claim(db: Db, want: Claim) -> BatchWork | None:
    """Batches already written (their original key and body), then an unknown entry re-offered in a
    one-person POST /persons/bulk under its own per-person key (so a person the first request did
    capture comes back as a duplicate: keys are only assumed to hold within one operation), then
    sendable pending entries in a new batch."""
    if db.dialect.claim_plan:
        db.execute(db.dialect.claim_plan)
    states = ("open", "stalled") if want.include_stalled else ("open",)
    marks = ",".join("?" * len(states))
    for (batch_id,) in db.execute(f"SELECT id FROM batches WHERE state IN ({marks}) ORDER BY id", states).fetchall():
        if batch_id not in want.skip:
            return load_batch(db, batch_id)
    unknown = db.execute(_reoffer(db.dialect)).fetchone()
    if unknown is not None:
        return new_batch(db, "bulk", [Member(*unknown)])
    members = _sendable_members(db, want.batch_size)
    if not members:
        return None
    offered = _offered(db, [m.entry_id for m in members])
    first = offered.get(members[0].entry_id)
    if first == "person" or (want.batch_size == 1 and first is None):
        return _person_batch(db, members[0])
    return new_batch(db, "bulk", [m for m in members if offered.get(m.entry_id) != "person"])


def _offered(db: Db, entry_ids: Sequence[int]) -> dict[int, Operation]:
    """The operation each entry was offered in, for those offered before (requeued ones). Every batch
    that carries an entry has the operation of its first (`claim`, `split` and the re-offer keep it),
    and a sendable entry offered before names its last batch (schema v12: every ending of a batch
    writes `batch_id` into its members, and a requeue keeps it)."""
    rows = db.execute(
        f"SELECT e.id, b.operation FROM entries e JOIN batches b ON b.id = e.batch_id WHERE e.id {db.dialect.any_of}",
        (db.dialect.many(entry_ids),),
    ).fetchall()
    return dict(rows)


def _person_batch(db: Db, member: Member) -> BatchWork:
    """POST /person under the person's own key: a new batch, or its earlier one opened again."""
    existing = db.execute("SELECT id FROM batches WHERE key = ?", (member.key,)).fetchone()
    if existing is None:
        return new_batch(db, "person", [member], key=member.key)
    db.execute("UPDATE batches SET state = 'open', updated_at = ? WHERE id = ?", (time.time(), existing[0]))
    return load_batch(db, existing[0])


def new_batch(db: Db, operation: Operation, members: Sequence[Member], key: str | None = None) -> BatchWork:
    """The batch row with its members (entry ids in position order) and the highest entry id now
    (`top_entry`, schema v13: see `carriers`), and nothing else: one row written per batch (schema
    v12), and its pending members are in flight because the batch is open (`in_open_batch`), so
    claiming writes no entry (schema v10)."""
    body = build_body(operation, members)
    now = time.time()
    key = key or batch_key()
    batch_id: int = db.execute(
        "INSERT INTO batches (key, operation, state, body_hash, size, created_at, updated_at, members, top_entry) "
        "VALUES (?, ?, 'open', ?, ?, ?, ?, ?, (SELECT coalesce(max(id), 0) FROM entries)) RETURNING id",
        (key, operation, content_hash(body), len(members), now, now, db.dialect.many(m.entry_id for m in members)),
    ).fetchone()[0]
    return BatchWork(batch_id, key, operation, tuple(members), body)


def load_batch(db: Db, batch_id: int) -> BatchWork:
    key, operation, body_hash = db.execute(
        "SELECT key, operation, body_hash FROM batches WHERE id = ?", (batch_id,)
    ).fetchone()
    members = [
        Member(*row)
        for row in db.execute(
            f"SELECT e.id, e.key, e.payload FROM batches b CROSS JOIN {members_of(db.dialect)} JOIN entries e ON e.id = m.value "
            "WHERE b.id = ? ORDER BY m.key",
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


def carriers(db: Db, first_entry: int, entries: Sequence[tuple[int | None, str]]) -> tuple[int, int]:
    """The ids (first, last) between which lie the batches that may have carried entries of id
    `first_entry` or above, given as (last ended batch, `entries.batch_id`; state as users see it):
    since schema v12 a batch's members are an array on its row and no index finds an entry's batches,
    so an operator command reads the arrays of this range alone, where it read every batch's. An
    entry's batches end at its last ended one, or at the open and stalled ones for an entry that may
    be in one of them (pending, unknown or in flight: `_types.in_open_batch`); they start at the first
    batch whose `top_entry` (schema v13: the highest entry id when it was written, which grows with
    the batch id) reaches the entry, as no batch holds an entry written after it (a seek per halving
    finds it; whatever the clocks said). (1, 0) when no batch can hold them."""
    last = max((b for b, _ in entries if b is not None), default=0)
    if any(state in ("pending", "unknown", "in_flight") for _, state in entries):
        in_flight = db.execute("SELECT max(id) FROM batches WHERE state IN ('open','stalled')").fetchone()[0]
        last = max(last, in_flight or 0)
    low, high = 1, last
    while low < high:  # the first batch id whose top entry reaches `first_entry`
        middle = (low + high) // 2
        row = db.execute("SELECT id, top_entry FROM batches WHERE id >= ? ORDER BY id LIMIT 1", (middle,)).fetchone()
        if row is None or row[0] > high or row[1] is None or row[1] >= first_entry:
            high = middle
        else:
            low = row[0] + 1
    return (low, last) if last else (1, 0)
