"""Settle's side of the ledger: what came of a batch, written in the settle's one transaction.

A settle writes each member's outcome, closes the batch and records the attempts that carried it;
the other endings (blocked, stalled, kept open, failed, split) change every member alike. Nothing
here commits: each function runs inside one `Ledger` write.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from itertools import chain
from typing import TYPE_CHECKING

from .. import failpoints
from . import _batches, _counts, _merges
from ._db import Db, rows_of, storable
from ._stamp import STAMP_SET
from ._types import BatchState, BatchWork, Claim, EntryState, Outcome

if TYPE_CHECKING:  # `status` opens a ledger without loading the HTTP client
    from ..api.client import Attempt


@dataclass(frozen=True, slots=True)
class Settlement:
    """One answered batch for `Ledger.settle_many`: its members' outcomes, the attempts that carried
    it, and what to claim next in the same transaction (`batch` None: a claim alone)."""

    batch: BatchWork | None
    outcomes: Sequence[Outcome] = ()
    attempts: Sequence[Attempt] = ()
    then: Claim | None = None


class _Both(AbstractSet[int]):
    """The batches a claim skips: the run's own in hand, and those claimed earlier in the same
    transaction (not yet the run's: they are its only once the transaction commits)."""

    def __init__(self, first: AbstractSet[int], second: AbstractSet[int]) -> None:
        self._first, self._second = first, second

    def __contains__(self, item: object) -> bool:
        return item in self._first or item in self._second

    def __iter__(self) -> Iterator[int]:
        return chain(self._first, (i for i in self._second if i not in self._first))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def settle_group(db: Db, settlements: Sequence[Settlement], now: float) -> list[tuple[BatchWork | None, int]]:
    """`Ledger.settle_many` in its transaction: every batch's `settle`, then every claim in order."""
    merges: list[int] = []
    batches = [s.batch for s in settlements if s.batch is not None]
    for s in settlements:
        merges.append(0 if s.batch is None else settle(db, s.batch, s.outcomes, s.attempts, now))
        if s.batch is not None and s.batch is not batches[-1]:
            failpoints.hit("group-settle")  # the crash tests kill here: between two batches' writes
    taken: set[int] = set()
    claimed: list[BatchWork | None] = []
    for s in settlements:
        work = None
        if s.then is not None:
            work = _batches.claim(db, s.then if not taken else replace(s.then, skip=_Both(s.then.skip, taken)))
            if work is not None:
                taken.add(work.id)
        claimed.append(work)
    return list(zip(claimed, merges, strict=True))


_OUTCOME_COLUMNS = (
    ("id", "bigint"),
    ("state", "text"),
    ("person_id", "text"),
    ("person_tag", "bigint"),
    ("fresh_tag", "bigint"),
    ("error", "text"),
    ("merged", "bigint"),
)


def settle(db: Db, batch: BatchWork, outcomes: Sequence[Outcome], attempts: Sequence[Attempt], now: float) -> int:
    """Each member's outcome; a capture answered with a person id another record holds is marked a
    merge. Returns how many were, so that delivery needs no second read to report them."""
    outcomes = list({o.entry_id: o for o in outcomes}.values())  # one each, the last as before, as counted
    members = {
        eid: (source, rid, state)
        for eid, source, rid, state in db.execute(
            f"SELECT id, source, record_id, state FROM entries WHERE id {db.dialect.any_of}",
            (db.dialect.many(o.entry_id for o in outcomes),),
        )
    }
    tags = _merges.tags_of(outcomes)  # entries_person's keys (schema v14)
    merges = _merges.merged(db, outcomes, {eid: (source, rid) for eid, (source, rid, _) in members.items()}, tags)
    # One statement for the batch (`rows_of`), where a statement per member cost PostgreSQL a round each.
    rows = []
    fresh = db.dialect.fresh_persons  # the tag into `fresh_tag`, moved into entries_person later (schema v15)
    for o in outcomes:
        person = storable(o.person_id)
        tag = None if person is None else tags[person]
        indexed, waiting = (None, tag) if fresh else (tag, None)
        rows.append(
            (o.entry_id, o.state, person, indexed, waiting, storable(o.error), 1 if o.entry_id in merges else None)
        )
    source, params = rows_of(db, _OUTCOME_COLUMNS, rows)
    # a new person id: its tag in one column, the other cleared (a stale tag there would be moved over it)
    db.execute(
        "UPDATE entries SET state = o.state, person_id = coalesce(o.person_id, entries.person_id), "
        "person_tag = CASE WHEN o.person_id IS NULL THEN entries.person_tag ELSE o.person_tag END, "
        "fresh_tag = CASE WHEN o.person_id IS NULL THEN entries.fresh_tag ELSE o.fresh_tag END, "
        f"last_error = o.error, merged = o.merged, batch_id = ?, updated_at = ?, {STAMP_SET} "
        f"FROM {source} AS o WHERE entries.id = o.id",
        (batch.id, now, *params),
    )
    _counts.add(db, _counts.moves((members[o.entry_id][0], members[o.entry_id][2], o.state) for o in outcomes))
    close(db, batch, "settled", None, attempts, now)
    return len(merges)


def set_members(
    db: Db,
    batch: BatchWork,
    entry_state: EntryState | None,
    error: str,
    batch_state: BatchState,
    attempts: Sequence[Attempt],
    now: float,
) -> None:
    """Every member alike (`entry_state` None: they keep theirs), and the batch closed as `batch_state`."""
    if entry_state is not None:
        ids = db.dialect.many(m.entry_id for m in batch.members)
        _counts.move_where(db, f"id {db.dialect.any_of}", (ids,), entry_state)
    db.execute(
        "UPDATE entries SET state = coalesce(?, state), last_error = ?, batch_id = ?, updated_at = ?, "
        f"{STAMP_SET} WHERE id {db.dialect.any_of}",
        (entry_state, storable(error), batch.id, now, db.dialect.many(m.entry_id for m in batch.members)),
    )
    close(db, batch, batch_state, error, attempts, now)


def split(db: Db, batch: BatchWork, error: str, attempts: Sequence[Attempt], now: float) -> tuple[BatchWork, BatchWork]:
    """Two new batches (new keys: new member sets) in place of `batch`, to isolate the bad persons."""
    half = len(batch.members) // 2
    close(db, batch, "split", error, attempts, now)
    return (
        _batches.new_batch(db, batch.operation, batch.members[:half]),
        _batches.new_batch(db, batch.operation, batch.members[half:]),
    )


def close(
    db: Db, batch: BatchWork, state: BatchState, error: str | None, attempts: Sequence[Attempt], now: float
) -> None:
    # The run in hand settled it (schema v11): `runs show` finds the run's entries through its batches.
    db.execute(
        "UPDATE batches SET state = ?, last_error = ?, updated_at = ?, run_id = coalesce(capture_run_in_hand(), run_id) "
        "WHERE id = ?",
        (state, storable(error), now, batch.id),
    )
    insert_attempts(db, batch, attempts)


def insert_attempts(db: Db, batch: BatchWork, attempts: Sequence[Attempt]) -> None:
    db.executemany(
        "INSERT INTO attempts (batch_id, key, operation, started_at, latency_ms, status_code, "
        "error_name, error_code, retryable, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                batch.id,
                a.idempotency_key,
                a.operation,
                a.started_at,
                round(a.latency_s * 1000, 3),
                a.status_code,
                storable(a.error.name) if a.error else None,
                storable(a.error.code) if a.error else None,
                None if a.error is None or a.error.retryable is None else int(a.error.retryable),
                type(a.error).__name__ if a.error else "ok",
            )
            for a in attempts
        ],
    )
