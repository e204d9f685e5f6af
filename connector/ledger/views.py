"""Read-only views of the ledger for `status` and `ledger list/show`: plain, JSON-ready dataclasses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, get_args

from . import _counts
from ._db import Db
from ._run_view import RUN_COLS, RunView, iso, run_view
from ._types import IN_FLIGHT_AS, IS_LIVE, LIVE, RARE, SETTLED, EntryState, in_open_batch, state_of

STATES: tuple[str, ...] = get_args(EntryState)  # in the order `status` lists them


@dataclass
class EntryView:
    key: str
    source: str
    record_id: str
    state: str
    person_id: str | None
    last_error: str | None
    updated_at: str | None
    payload: dict[str, Any] | None
    notes: str | None = None  # what the mapping noted beside a valid payload (a dropped field)


@dataclass
class AttemptView:
    key: str
    operation: str
    started_at: str | None
    latency_ms: float | None
    status_code: int | None
    error_name: str | None
    error_code: str | None
    retryable: bool | None
    outcome: str


@dataclass
class Attention:
    """What keeps the ledger from being settled beyond plain pending work, each needing its own step."""

    blocked: int = 0  # entries of batches answered 409: `ledger resolve`
    stalled: int = 0  # entries of batches stopped by a non-retryable error: `replay`
    unknown: int = 0  # entries whose result could not be placed, to be re-offered alone
    unresolved: int = 0  # unknown entries that a batch of their own could not place either: `ledger resolve`
    waiting: int = 0  # pending versions waiting for an older version of their record to settle

    @property
    def any(self) -> bool:
        return any((self.blocked, self.stalled, self.unknown, self.unresolved, self.waiting))


@dataclass
class StatusReport:
    by_state: dict[str, int]
    by_source: dict[str, dict[str, int]]
    runs: list[RunView]
    oldest_unsettled: str | None
    batches_by_state: dict[str, int] = field(default_factory=dict)
    attention: Attention = field(default_factory=Attention)
    merged: int = 0  # captured entries the CRM merged into a person the ledger holds for another record (v7)

    @property
    def settled(self) -> bool:
        """Nothing pending, in flight, unknown, stalled, waiting or blocked."""
        return self.oldest_unsettled is None and not self.attention.any


@dataclass
class EntryDetail:
    entry: EntryView
    batches: list[str]
    attempts: list[AttemptView]


@dataclass
class BatchDetail:
    key: str
    operation: str
    state: str
    last_error: str | None
    members: list[EntryView]
    attempts: list[AttemptView]


_ENTRY_COLS = "key, source, record_id, {state}, person_id, last_error, updated_at, payload, notes"
_ATTEMPT_COLS = "key, operation, started_at, latency_ms, status_code, error_name, error_code, retryable, outcome"


def _entry(row: tuple) -> EntryView:
    key, source, record_id, state, person_id, last_error, updated_at, payload, notes = row
    try:
        parsed = json.loads(payload) if payload else None
    except ValueError:
        parsed = None
    return EntryView(
        key,
        source,
        record_id,
        state,
        person_id,
        last_error,
        updated_at=iso(updated_at),
        payload=parsed,
        notes=notes,
    )


def _attempt(row: tuple) -> AttemptView:
    key, op, started, latency, status, name, code, retryable, outcome = row
    return AttemptView(
        key,
        op,
        iso(started),
        latency,
        status,
        name,
        code,
        None if retryable is None else bool(retryable),
        outcome,
    )


# `status` reads a ledger of a million entries in well under a second because each query walks an index
# or a small table (schema v11), never a subquery per entry:
# - counts by source and state: the settled states from `settled_counts` (a row per source and state,
#   `_counts`), the live ones from the partial index entries_live (the live entries only), walked in its
#   own (state, id) order with a count per source (`_live_by_source`: no sort; the sources are found by
#   skipping through the (source, record_id, content_hash) index, a seek each);
# - the oldest unsettled entry: the first pending id and the first other live id (entries_live, a seek
#   and a walk of its non-pending part) (ids grow with created_at: entries are only ever appended);
# - waiting versions: one pass over entries_live, grouped by record (the engine's `Dialect.waiting`; on
#   SQLite a count per record, then the versions of the records with more than one live).
# A query of live entries carries `IS_LIVE`, the partial index's own WHERE, or names one state with
# `state = 'x'`, so that SQLite may read it.
# In flight is derived (schema v10): a pending (or re-offered unknown) entry that is a member of an open
# or stalled batch, counted from those batches' members (few), and taken from its stored state's count.
_IN_FLIGHT = (
    "SELECT e.source, e.state, count(*) FROM batches b JOIN batch_members m ON m.batch_id = b.id JOIN entries e "
    f"ON e.id = m.entry_id WHERE b.state IN ('open','stalled') AND e.state IN ({IN_FLIGHT_AS}) GROUP BY e.source, e.state"
)
_IN_STALLED = (
    "FROM batch_members m JOIN batches b ON b.id = m.batch_id JOIN entries e ON e.id = m.entry_id "
    f"WHERE b.state = 'stalled' AND e.state IN ({IN_FLIGHT_AS})"
)
# The other live states by name (as an IN list beside IS_LIVE): `state <> 'pending'` would walk the pending part too.
_LIVE_NOT_PENDING = ",".join(f"'{s}'" for s in LIVE if s != "pending")
_OLDEST_LIVE = (
    "SELECT min(created_at) FROM entries WHERE id IN (SELECT min(id) FROM entries WHERE state = 'pending' "
    f"UNION ALL SELECT min(id + 0) FROM entries WHERE {IS_LIVE} AND state IN ({_LIVE_NOT_PENDING}))"
)
_LIVE_BY_SOURCE = f"SELECT source, state, count(*) FROM entries WHERE {IS_LIVE} GROUP BY source, state"
# The sources, each found by one seek into the (source, record_id, content_hash) index (a skip scan).
_SOURCES = (
    "WITH RECURSIVE s(source) AS (SELECT min(source) FROM entries UNION ALL "
    "SELECT (SELECT min(source) FROM entries WHERE source > s.source) FROM s WHERE s.source IS NOT NULL) "
    "SELECT source FROM s WHERE source IS NOT NULL"
)
# Up to this many sources the live entries are counted in one walk of entries_live in its own order, a
# count per source (each a comparison per entry); beyond, grouped by (source, state) with a sort.
_SOURCES_IN_ONE_WALK = 8


def _live_by_source(conn: Db) -> list[tuple[str, str, int]]:
    """(source, state, count) of the live entries, by their stored state. Grouping by (source, state)
    sorts every live entry (a pending-heavy ledger holds most of them); grouping by state alone follows
    entries_live's own order, and a sum per source needs the sources, which a skip scan finds."""
    sources = [source for (source,) in conn.execute(_SOURCES).fetchall()]
    if len(sources) > _SOURCES_IN_ONE_WALK:
        return [tuple(row) for row in conn.execute(_LIVE_BY_SOURCE).fetchall()]  # type: ignore[misc]
    if not sources:
        return []
    per_source = ", ".join("sum(CASE WHEN source = ? THEN 1 ELSE 0 END)" for _ in sources)
    rows = conn.execute(f"SELECT state, {per_source} FROM entries WHERE {IS_LIVE} GROUP BY state", sources)
    return [(source, row[0], n) for row in rows.fetchall() for source, n in zip(sources, row[1:], strict=True) if n]


def counts(conn: Db) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """How many entries are in each state, in all and by source, as users see the states (in flight
    derived from the open and stalled batches)."""
    by_state = dict.fromkeys(STATES, 0)
    by_source: dict[str, dict[str, int]] = {}
    counted = [*_counts.by_source(conn), *_live_by_source(conn)]
    for source, state, n in sorted(counted, key=lambda row: (row[0], STATES.index(row[1]))):
        by_state[state] = by_state.get(state, 0) + n
        by_source.setdefault(source, {})[state] = n
    for source, state, n in conn.execute(_IN_FLIGHT).fetchall():
        counts = by_source[source]
        counts[state] -= n
        counts["in_flight"] = counts.get("in_flight", 0) + n
        by_state[state] -= n
        by_state["in_flight"] += n
        by_source[source] = {k: counts[k] for k in STATES if counts.get(k)}
    return by_state, by_source


def count_entries(conn: Db, state: str, *, source: str | None) -> int:
    """How many entries are in `state` (as users see it), of `source` or of all: a settled state's from
    its counters alone (in flight, derived, moves none of them), a live one's from `counts`."""
    if state in SETTLED:
        return sum(n for src, st, n in _counts.by_source(conn) if st == state and source in (None, src))
    by_state, by_source = counts(conn)
    return by_source.get(source, {}).get(state, 0) if source else by_state.get(state, 0)


def status(conn: Db, runs: int = 10) -> StatusReport:
    by_state, by_source = counts(conn)
    oldest = conn.execute(_OLDEST_LIVE).fetchone()[0]
    run_rows = conn.execute(f"SELECT {RUN_COLS} FROM runs ORDER BY id DESC LIMIT ?", (runs,)).fetchall()
    batches = dict(conn.execute("SELECT state, count(*) FROM batches GROUP BY state").fetchall())
    return StatusReport(
        by_state=by_state,
        by_source=by_source,
        runs=[run_view(r) for r in run_rows],
        oldest_unsettled=iso(oldest),
        batches_by_state=batches,
        attention=attention(conn),
        merged=conn.execute(conn.dialect.merged).fetchone()[0],
    )


def stalled(conn: Db) -> int:
    """Entries of batches stopped by a non-retryable answer: they wait for an operator's `replay`."""
    return conn.execute(f"SELECT count(*) {_IN_STALLED}").fetchone()[0]


@dataclass(frozen=True)
class Stalls:
    """Batches a non-retryable answer stopped, whose entries wait for `replay` (spec 4.4 rule 4)."""

    entries: int = 0
    batches: int = 0
    since: float | None = None  # when the first of them stalled
    reason: str | None = None  # the last answer's status and error name/code: never its message


def answer_reason(status_code: int | None, name: str | None, code: str | None) -> str:
    """`HTTP 503 ServiceUnavailable/capture_failed`: what an answer was, without its message, which
    may quote the request."""
    what = "/".join(p for p in (name, code) if p)
    return f"HTTP {status_code}" + (f" {what}" if what else "") if status_code else "no response"


def stalls(conn: Db) -> Stalls:
    entries, batches, since = conn.execute(
        f"SELECT count(*), count(DISTINCT b.id), min(b.updated_at) {_IN_STALLED}"
    ).fetchone()
    if not entries:
        return Stalls()
    last = conn.execute(
        "SELECT a.status_code, a.error_name, a.error_code FROM attempts a JOIN batches b ON b.id = a.batch_id "
        "WHERE b.state = 'stalled' ORDER BY a.id DESC LIMIT 1"
    ).fetchone()
    return Stalls(entries, batches, since, answer_reason(*last) if last else None)


def attention(conn: Db) -> Attention:
    stalled_ = stalled(conn)
    unresolved, blocked = for_a_person(conn)
    waiting = conn.execute(conn.dialect.waiting).fetchone()[0]
    unknown = conn.execute(  # entries_live; those re-offered alone right now are in flight
        f"SELECT count(*) FROM entries WHERE state = 'unknown' AND NOT {in_open_batch('entries')}"
    ).fetchone()[0]
    return Attention(blocked, stalled_, unknown - unresolved, unresolved, waiting)


def for_a_person(conn: Db) -> tuple[int, int]:
    """The entries that wait for a person's decision: (unknown ones a batch of their own could not
    place either, blocked ones). Apart from `attention`, whose count of waiting versions groups every
    live entry by record: a pass that reports these two needs no more."""
    unresolved = conn.execute(  # not while its batch alone is open or stalled: then it is in flight
        "SELECT count(*) FROM entries e JOIN batches b ON b.id = e.batch_id "
        f"WHERE e.state = 'unknown' AND b.size = 1 AND NOT {in_open_batch('e')}"
    ).fetchone()[0]
    blocked = conn.execute("SELECT count(*) FROM entries WHERE state = 'blocked'").fetchone()[0]
    return unresolved, blocked


def list_entries(conn: Db, state: str | None, *, source: str | None, limit: int) -> list[EntryView]:
    """The first `limit` entries in `state` (None: any), of `source` (None: any), oldest first."""
    clauses, params = [], []
    if state:
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}; one of: {', '.join(STATES)}")
        # The state as a literal (one of STATES): SQLite reads the partial index holding it only for a
        # query that names it so (entries_live, entries_rare), in id order, with LIMIT.
        one = f"state = '{state}'"
        if state == "in_flight":  # derived, or stored by a ledger from before v10
            clauses.append(f"(state IN ({IN_FLIGHT_AS}) AND {in_open_batch('entries')} OR {IS_LIVE} AND {one})")
        elif state in ("pending", "unknown"):
            clauses.append(f"{one} AND NOT {in_open_batch('entries')}")
        else:
            clauses.append(one)
    if source:
        clauses.append("source = ?" if _by_source_index(conn, state, source, limit) else "source || '' = ?")
        params.append(source)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(
        f"SELECT {_ENTRY_COLS.format(state=state_of('entries'))} FROM entries {where} ORDER BY id LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [_entry(r) for r in rows]


def _by_source_index(conn: Db, state: str | None, source: str, limit: int) -> bool:
    """Whether to read a source's entries through the (source, ...) index, and sort them by id, rather
    than walk the entries in id order and keep the source's (`source || ''` keeps the planner off that
    index). The index reads every entry of the source; the walk about `limit` divided by the share of
    the entries that match, which the counters give for a settled state (v11): the walk wins for any
    source that holds a fair share, the index for a rare one (a source of few entries, a state it
    seldom reaches). A state held by a partial index (the live ones, the rare settled ones) is walked
    in that index, whose entries are few or carry the source."""
    if state in LIVE or state in RARE:
        return False
    held = {st: n for src, st, n in _counts.by_source(conn) if src == source}
    matching = held.get(state, 0) if state else sum(held.values())
    if not matching:
        return True  # no such entry settled: the index finds what there is without walking the whole table
    total = conn.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]
    return limit * total / matching > sum(held.values())


def versions(conn: Db, source: str, record_id: str) -> list[EntryDetail]:
    """Every version of one record, oldest first."""
    keys = conn.execute(
        "SELECT key FROM entries WHERE source = ? AND record_id = ? ORDER BY id", (source, record_id)
    ).fetchall()
    return [detail for (key,) in keys if isinstance(detail := show(conn, key), EntryDetail)]


def show(conn: Db, key: str) -> EntryDetail | BatchDetail:
    """A per-person key gives the entry and every batch and attempt it was part of; a batch key the batch."""
    row = conn.execute(
        f"SELECT id, {_ENTRY_COLS.format(state=state_of('entries'))} FROM entries WHERE key = ?", (key,)
    ).fetchone()
    if row is not None:
        batch_rows = conn.execute(
            "SELECT b.id, b.key FROM batch_members m JOIN batches b ON b.id = m.batch_id "
            "WHERE m.entry_id = ? ORDER BY b.id",
            (row[0],),
        ).fetchall()
        ids = [b[0] for b in batch_rows]
        attempts = conn.execute(
            f"SELECT {_ATTEMPT_COLS} FROM attempts WHERE batch_id {conn.dialect.any_of} ORDER BY id",
            (conn.dialect.many(ids),),
        ).fetchall()
        return EntryDetail(_entry(row[1:]), [b[1] for b in batch_rows], [_attempt(a) for a in attempts])
    return batch_detail(conn, key)


def batch_detail(conn: Db, key: str) -> BatchDetail:
    """A batch by its key (a POST /person batch has its person's key, so `show` finds the entry first)."""
    batch = conn.execute("SELECT id, key, operation, state, last_error FROM batches WHERE key = ?", (key,)).fetchone()
    if batch is None:
        raise KeyError(key)
    members = conn.execute(
        f"SELECT {_ENTRY_COLS.format(state=state_of('e')).replace('key, source', 'e.key, e.source')} FROM batch_members m "
        "JOIN entries e ON e.id = m.entry_id WHERE m.batch_id = ? ORDER BY m.position",
        (batch[0],),
    ).fetchall()
    attempts = conn.execute(
        f"SELECT {_ATTEMPT_COLS} FROM attempts WHERE batch_id = ? ORDER BY id", (batch[0],)
    ).fetchall()
    return BatchDetail(
        batch[1], batch[2], batch[3], batch[4], [_entry(m) for m in members], [_attempt(a) for a in attempts]
    )


def settled_between(conn: Db, states: tuple[str, ...], after: float, until: float) -> list[tuple[str, str, int]]:
    """(source, state, count) of the entries that reached one of `states` (captured, duplicate, failed) in
    (after, until], and (source, "merged", count) of the merges among them (partial index entries_merged).
    An entry reaches those states only as its batch closes (`_settle`): the same write gives the entry
    its `batch_id` and `updated_at`, and the batch the same `updated_at` (a later change of the batch
    only moves it on), so they are found through the batches changed since `after`, few, and their members."""
    marks = ",".join("?" * len(states))
    rows = conn.execute(
        "SELECT e.source, e.state, count(*) FROM batches b JOIN batch_members m ON m.batch_id = b.id "
        "JOIN entries e ON e.id = m.entry_id AND e.batch_id = b.id "
        f"WHERE b.updated_at > ? AND e.state IN ({marks}) AND e.updated_at > ? AND e.updated_at <= ? "
        "GROUP BY e.source, e.state",
        (after, *states, after, until),
    ).fetchall()
    merged = conn.execute(
        "SELECT source, 'merged', count(*) FROM entries WHERE merged = 1 AND updated_at > ? AND updated_at <= ? GROUP BY source",
        (after, until),
    ).fetchall()
    return [tuple(r) for r in (*rows, *merged)]  # type: ignore[misc]


def blocked_batch_keys(conn: Db) -> list[str]:
    """The keys of the batches holding blocked entries, oldest first."""
    return [
        key
        for _, key in conn.execute(
            "SELECT DISTINCT b.id, b.key FROM entries e JOIN batches b ON b.id = e.batch_id "
            "WHERE e.state = 'blocked' ORDER BY b.id"
        )
    ]


def unknown_entries(conn: Db, limit: int) -> list[tuple[EntryView, bool]]:
    """The first unknown entries, each with whether its own one-person request could not place it either."""
    alone = [
        bool(r[0])
        for r in conn.execute(
            "SELECT CASE WHEN b.size = 1 THEN 1 ELSE 0 END FROM entries e LEFT JOIN batches b ON b.id = e.batch_id "
            f"WHERE e.state = 'unknown' AND NOT {in_open_batch('e')} ORDER BY e.id LIMIT ?",
            (limit,),
        )
    ]
    return list(zip(list_entries(conn, "unknown", source=None, limit=limit), alone, strict=True))
