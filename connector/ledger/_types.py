"""The values that cross the ledger's boundary: what goes in (Mapped), what comes out (BatchWork) and
what is recorded of a response (Outcome). Frozen dataclasses, and named tuples for the two made per
member (Member, Outcome): the ledger is on the hot path."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

from ._db import Dialect, members_of

EntryState = Literal[
    "pending",
    "in_flight",
    "captured",
    "duplicate",
    "failed",
    "rejected",
    "blocked",
    "unknown",
    "superseded",
    "dismissed",
]
BatchState = Literal["open", "stalled", "settled", "blocked", "failed", "split", "requeued", "dismissed"]
Operation = Literal["bulk", "person"]
SettledState = Literal["captured", "duplicate", "failed", "unknown"]
Order = float | str  # a version's place in its source's order: values of one type compare, others do not

# A version in one of these states may still be sent (again): a newer version of the same record
# waits until it leaves them, so the newest data always lands last (design 2, one live version).
LIVE: tuple[EntryState, ...] = ("pending", "in_flight", "unknown", "blocked")
LIVE_MARKS = ",".join(f"'{s}'" for s in LIVE)  # as SQL: `state IN ({LIVE_MARKS})`
# As SQL, exactly as the partial index entries_live (schema v11) is written: a query that carries it as
# a term (or names one state with `state = 'x'`) may read that index on SQLite.
IS_LIVE = "(" + " OR ".join(f"state = '{s}'" for s in LIVE) + ")"  # as `any_state(LIVE)`
# The live states of a version that was sent and has not settled (`in_flight` as stored before v10),
# as SQL over `{state}`, exactly as the partial index entries_stuck (schema v13) is written.
STUCK = "({state} = 'in_flight' OR {state} = 'unknown' OR {state} = 'blocked')"
# Every other state: the version left the hot path. Since schema v11 `status` counts them from
# `settled_counts` (`_counts`), and no index holds them all.
SETTLED: tuple[EntryState, ...] = tuple(s for s in get_args(EntryState) if s not in LIVE)
IS_SETTLED = "(" + " OR ".join(f"state = '{s}'" for s in SETTLED) + ")"
# The settled states an entry reaches outside a settle's common outcomes (a failure, enqueue's
# rejected and superseded versions, an operator's dismissal), held by the partial index entries_rare
# (schema v11); captured and duplicate, which most entries reach, are found through their batch.
RARE: tuple[EntryState, ...] = ("failed", "rejected", "superseded", "dismissed")
BY_BATCH: tuple[EntryState, ...] = tuple(s for s in SETTLED if s not in RARE)


# The index on entries' keys (schema v13, `entries_key_prefix`) holds 8 characters of a key's digest:
# a key is "p-" and 40 hex digits of a SHA-256 (`keys.person_key`), so the prefix spreads as the digest
# does. SQL over `{key}`, a key column or a parameter; both engines read an expression index for a
# query that writes the indexed expression the same way (`by_key`).
KEY_PREFIX = "substr({key}, 3, 8)"


def by_key(column: str = "key") -> str:
    """SQL: the entry's key is the parameter given twice (`(key, key)`): a seek of the key's prefix in
    entries_key_prefix, the full key compared on each row found (a prefix may be shared). The full key
    is compared as `key || ''`: SQLite propagates a `key = ?` into the prefix's term, which then no
    longer names the indexed expression, and scans the table."""
    return f"{KEY_PREFIX.format(key=column)} = {KEY_PREFIX.format(key='?')} AND {column} || '' = ?"


def any_state(states: tuple[EntryState, ...], column: str = "state") -> str:
    """SQL: `column` is one of `states`, written as an OR of equalities, as the partial indexes are:
    SQLite reads a partial index for a query that carries its WHERE as a term, or names one state
    with `state = 'x'`, and never for an IN list."""
    return "(" + " OR ".join(f"{column} = '{s}'" for s in states) + ")"


# The stored states of an entry in flight (schema v10), as SQL: claimed pending, or re-offered unknown.
IN_FLIGHT_AS = "'pending','unknown'"


def in_open_batch(dialect: Dialect, entry: str) -> str:
    """SQL: the entry (a table name or alias) is a member of a batch that is open or stalled. Since
    schema v10 claim writes a batch, never the entry: a pending member of such a batch is in flight,
    and so is an unknown one (re-offered alone); stored `in_flight` is left only on entries v10 found
    in no such batch. Since v12 a batch holds its members in an array (`batches.members`): the open
    and stalled batches, few, are read once per statement (the subquery names no outer column, so
    both engines evaluate it once: SQLite into an ephemeral index, PostgreSQL a hashed subplan)."""
    return (
        f"{entry}.id IN (SELECT om.value FROM batches ob CROSS JOIN {members_of(dialect, 'ob', 'om')} "
        "WHERE ob.state IN ('open','stalled'))"
    )


def state_of(dialect: Dialect, entry: str) -> str:
    """SQL: the entry's state as users see it, in flight derived from its batch (`in_open_batch`)."""
    return (
        f"CASE WHEN {entry}.state IN ({IN_FLIGHT_AS}) AND {in_open_batch(dialect, entry)} "
        f"THEN 'in_flight' ELSE {entry}.state END"
    )


@dataclass(frozen=True, slots=True)
class Mapped:
    """One source record after mapping: a valid payload, or the reasons it was rejected. With a
    payload, `reasons` are notes kept beside it (a bad field dropped by `on_error = "drop"`)."""

    record_id: str
    payload: str | None = None  # JSON text of the PersonInput
    raw: dict[str, str] | None = None  # the source record, kept with a rejection for diagnosis
    reasons: tuple[str, ...] = ()
    order: Order | None = None  # where this version stands in the source's order (None: order of arrival)
    raw_digest: str | None = None  # of the source record it was mapped from (see Ledger.raw_digests)


class Member(NamedTuple):
    """An entry as sent: its (key, payload) pair never changes once written, so a batch that holds
    it can always be rebuilt byte for byte. A named tuple, immutable as a frozen dataclass and made in
    half its time: a claim makes one per member, a settle an `Outcome` per member (some 1 us each
    as frozen dataclasses: about 1 % of a sync's CPU)."""

    entry_id: int
    key: str
    payload: str


@dataclass(frozen=True, slots=True)
class BatchWork:
    """A batch as written before sending: resending it means the same key and these same bytes."""

    id: int
    key: str
    operation: Operation
    members: tuple[Member, ...]
    body: bytes


@dataclass(frozen=True, slots=True)
class Claim:
    """What to claim next: `skip` holds the batches this run already has in hand or gave up on."""

    batch_size: int
    skip: AbstractSet[int] = frozenset()
    include_stalled: bool = False  # also batches parked by a non-retryable error (replay)


class Outcome(NamedTuple):
    """What one member's result says; for `unknown`, `error` says why it could not be placed. A named
    tuple for the cost of making one per member (see `Member`)."""

    entry_id: int
    state: SettledState
    person_id: str | None = None
    error: str | None = None
    # `person_id` came from a field the spec names so (`person_id`: spec 2.5), not a bare `id` whose
    # meaning a bulk object (spec 2.6, undocumented) does not say: only such an id can tell a merge
    named_person: bool = False


@dataclass
class EnqueueCounts:
    enqueued: int = 0
    unchanged: int = 0
    rejected: int = 0
    superseded: int = 0  # older versions never sent, replaced by the newer one in this chunk
    older: int = 0  # read again below the newest version's place in the source's order: never sent
