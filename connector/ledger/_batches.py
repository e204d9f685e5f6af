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
from ._types import LIVE_MARKS, BatchWork, Claim, Member, Operation, in_open_batch
from .schema import LedgerError

# Whether entry `e` has an older version that is live. A pending entry is sendable only when it has
# none: the newer one waits until the older settles, so that the newest data always lands last.
# (Schema v11: the record's versions are read by the (source, record_id, content_hash) index, which
# every version is in; most records have one, and the older ones' states are read from their rows.)
OLDER_LIVE = (
    "EXISTS (SELECT 1 FROM entries o WHERE o.source = e.source AND o.record_id = e.record_id "
    f"AND o.id < e.id AND o.state IN ({LIVE_MARKS}))"
)


@functools.cache
def _sendable(dialect: Dialect) -> str:
    """A pending entry in an open or stalled batch is in flight (schema v10: claim does not write the entry)."""
    return (
        f"SELECT e.id, e.key, e.payload FROM entries e WHERE e.state = 'pending' AND NOT {in_open_batch(dialect, 'e')} "
        f"AND NOT {OLDER_LIVE} ORDER BY e.id LIMIT ?"
    )


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
    rows = db.execute(_sendable(db.dialect), (want.batch_size,)).fetchall()
    if not rows:
        return None
    members = [Member(*r) for r in rows]
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
    """The batch row with its members (entry ids in position order), and nothing else: one row
    written per batch (schema v12), and its pending members are in flight because the batch is open
    (`in_open_batch`), so claiming writes no entry (schema v10)."""
    body = build_body(operation, members)
    now = time.time()
    key = key or batch_key()
    batch_id: int = db.execute(
        "INSERT INTO batches (key, operation, state, body_hash, size, created_at, updated_at, members) "
        "VALUES (?, ?, 'open', ?, ?, ?, ?, ?) RETURNING id",
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
