"""Operator repairs: `replay --include-failed` and `ledger resolve`. A requeued entry keeps its
per-person key and body and travels in a new batch under a new batch key; an entry that is no longer
its record's newest version is never sent again (that would overwrite newer data): it is superseded.
Since schema v12 a resolved entry keeps (or, resolved with its batch, gets) the `batch_id` of the
batch that carried it: that it was sent is read from there (`_enqueue`, `_batches._offered`)."""

from __future__ import annotations

from typing import Literal

from . import _counts
from ._db import Db, members_of
from ._stamp import STAMP_SET
from ._types import EntryState, by_key, state_of

# The record's newest version (schema v12): its `records` row where it has one, else its highest id.
_NEWEST = (
    "id = coalesce((SELECT r.entry_id FROM records r WHERE r.source = entries.source AND r.record_id = entries.record_id), "
    "(SELECT max(n.id) FROM entries n WHERE n.source = entries.source AND n.record_id = entries.record_id))"
)
# `in_flight` as a ledger from before v10 may still hold it; since, a batch's in-flight members are pending.
RESOLVABLE: tuple[EntryState, ...] = ("blocked", "failed", "unknown", "in_flight")


def _open_batch_of(db: Db, entry_id: int) -> tuple[str, str] | None:
    """The key and state of the open or stalled batch the entry is a member of, if any."""
    row = db.execute(
        f"SELECT b.key, b.state FROM batches b CROSS JOIN {members_of(db.dialect)} "
        "WHERE b.state IN ('open','stalled') AND m.value = ? ORDER BY b.id DESC LIMIT 1",
        (entry_id,),
    ).fetchone()
    return (row[0], row[1]) if row else None


def requeue_failed(db: Db, before: float, now: float) -> int:
    """Failed entries from before `before` that are still their record's newest version (the partial
    index entries_rare holds the failed ones)."""
    where = f"state = 'failed' AND updated_at < ? AND {_NEWEST}"
    _counts.move_where(db, where, (before,), "pending")
    return db.execute(  # `batch_id` stays: the entry was sent (schema v12, `_batches._offered`)
        f"UPDATE entries SET state = 'pending', updated_at = ?, {STAMP_SET} WHERE {where}",
        (now, before),
    ).rowcount


def resolve(db: Db, key: str, action: Literal["requeue", "dismiss"], now: float) -> int:
    """Requeue or dismiss a batch's unsettled members (by batch key) or one entry (by its key).
    Raises KeyError for an unknown key and ValueError when nothing there needs resolving."""
    batch = db.execute("SELECT id, state FROM batches WHERE key = ?", (key,)).fetchone()
    params: tuple[object, ...]
    sent: int | None  # the batch resolved, when a batch is
    if batch is not None:
        if batch[1] in ("settled", "split", "requeued", "dismissed"):
            raise ValueError(f"batch {key} is {batch[1]}: nothing in it needs resolving")
        # An open or stalled batch's pending members are in flight in it (schema v10).
        states = (*RESOLVABLE, "pending") if batch[1] in ("open", "stalled") else RESOLVABLE
        where, params = (
            f"id IN (SELECT m.value FROM batches b CROSS JOIN {members_of(db.dialect)} WHERE b.id = ?) "
            f"AND state IN ({','.join('?' * len(states))})",
            (batch[0], *states),
        )
        sent = batch[0]
        db.execute(
            "UPDATE batches SET state = ?, updated_at = ? WHERE id = ?",
            ("requeued" if action == "requeue" else "dismissed", now, batch[0]),
        )
    else:
        # As users see it: an unknown entry re-offered alone is in flight in that batch (schema v10),
        # which may still be sent, and its settle would overwrite what was decided here.
        entry = db.execute(
            f"SELECT id, {state_of(db.dialect, 'entries')} FROM entries WHERE {by_key()}", (key, key)
        ).fetchone()
        if entry is None:
            raise KeyError(key)
        if entry[1] == "in_flight" and (holder := _open_batch_of(db, entry[0])) is not None:
            raise ValueError(
                f"entry {key} is in flight in batch {holder[0]} ({holder[1]}): resolve that batch "
                f"(`ledger resolve {holder[0]} --requeue` or `--dismiss`) or send it again with `replay`"
            )
        if entry[1] not in ("blocked", "failed", "unknown"):
            raise ValueError(f"entry {key} is {entry[1]}: only blocked, failed or unknown entries are resolved by hand")
        where, params = by_key(), (key, key)
        sent = None
    if action == "dismiss":
        _counts.move_where(db, where, params, "dismissed")
        return db.execute(
            f"UPDATE entries SET state = 'dismissed', batch_id = coalesce(?, batch_id), updated_at = ?, {STAMP_SET} "
            f"WHERE {where}",
            (sent, now, *params),
        ).rowcount
    _counts.move_where(db, f"{where} AND {_NEWEST}", params, "pending")
    requeued = db.execute(
        f"UPDATE entries SET state = 'pending', batch_id = coalesce(?, batch_id), updated_at = ?, {STAMP_SET} "
        f"WHERE {where} AND {_NEWEST}",
        (sent, now, *params),
    ).rowcount
    _counts.move_where(db, f"{where} AND NOT {_NEWEST}", params, "superseded")
    superseded = db.execute(
        f"UPDATE entries SET state = 'superseded', batch_id = coalesce(?, batch_id), last_error = ?, updated_at = ?, "
        f"{STAMP_SET} WHERE {where} AND NOT {_NEWEST}",
        (sent, "superseded: a newer version of the record is sent instead", now, *params),
    ).rowcount
    return requeued + superseded
