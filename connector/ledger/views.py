"""Read-only views of the ledger for `status` and `ledger list/show`: plain, JSON-ready dataclasses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import _batches, _counts
from ._db import Db, members_of
from ._run_view import LISTED, RUN_COLS, RunView, iso, run_view
from ._state_counts import _OLDEST_LIVE, STATES, _in_stalled, counts, for_a_person, stalled
from ._types import IN_FLIGHT_AS, IS_LIVE, LIVE, RARE, by_key, in_open_batch, state_of


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


def status(conn: Db, runs: int = 10) -> StatusReport:
    by_state, by_source = counts(conn)
    oldest = conn.execute(_OLDEST_LIVE).fetchone()[0]
    run_rows = conn.execute(f"SELECT {RUN_COLS} FROM runs WHERE {LISTED} ORDER BY id DESC LIMIT ?", (runs,)).fetchall()
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
        f"SELECT count(*), count(DISTINCT b.id), min(b.updated_at) {_in_stalled(conn.dialect)}"
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
        f"SELECT count(*) FROM entries WHERE state = 'unknown' AND NOT {in_open_batch(conn.dialect, 'entries')}"
    ).fetchone()[0]
    return Attention(blocked, stalled_, unknown - unresolved, unresolved, waiting)


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
            clauses.append(
                f"(state IN ({IN_FLIGHT_AS}) AND {in_open_batch(conn.dialect, 'entries')} OR {IS_LIVE} AND {one})"
            )
        elif state in ("pending", "unknown"):
            clauses.append(f"{one} AND NOT {in_open_batch(conn.dialect, 'entries')}")
        else:
            clauses.append(one)
    if source:
        clauses.append("source = ?" if _by_source_index(conn, state, source, limit) else "source || '' = ?")
        params.append(source)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(
        f"SELECT {_ENTRY_COLS.format(state=state_of(conn.dialect, 'entries'))} FROM entries {where} ORDER BY id LIMIT ?",
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
        f"SELECT id, created_at, batch_id, {_ENTRY_COLS.format(state=state_of(conn.dialect, 'entries'))} "
        f"FROM entries WHERE {by_key()}",
        (key, key),
    ).fetchone()
    if row is not None:
        batch_rows = conn.execute(  # the members of the batches that may hold it (schema v12: no index by entry)
            f"SELECT b.id, b.key FROM batches b CROSS JOIN {members_of(conn.dialect)} WHERE b.id BETWEEN ? AND ? "
            "AND m.value = ? ORDER BY b.id",
            (*_batches.carriers(conn, row[0], [(row[2], row[6])]), row[0]),
        ).fetchall()
        ids = [b[0] for b in batch_rows]
        attempts = conn.execute(
            f"SELECT {_ATTEMPT_COLS} FROM attempts WHERE batch_id {conn.dialect.any_of} ORDER BY id",
            (conn.dialect.many(ids),),
        ).fetchall()
        return EntryDetail(_entry(row[3:]), [b[1] for b in batch_rows], [_attempt(a) for a in attempts])
    return batch_detail(conn, key)


def batch_detail(conn: Db, key: str) -> BatchDetail:
    """A batch by its key (a POST /person batch has its person's key, so `show` finds the entry first)."""
    batch = conn.execute("SELECT id, key, operation, state, last_error FROM batches WHERE key = ?", (key,)).fetchone()
    if batch is None:
        raise KeyError(key)
    members = conn.execute(
        f"SELECT {_ENTRY_COLS.format(state=state_of(conn.dialect, 'e')).replace('key, source', 'e.key, e.source')} "
        f"FROM (SELECT m.value AS entry_id, m.key AS place FROM batches b CROSS JOIN {members_of(conn.dialect)} "
        "WHERE b.id = ?) AS bm JOIN entries e ON e.id = bm.entry_id ORDER BY bm.place",
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
        f"SELECT e.source, e.state, count(*) FROM batches b CROSS JOIN {members_of(conn.dialect)} "
        "JOIN entries e ON e.id = m.value AND e.batch_id = b.id "
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
            f"WHERE e.state = 'unknown' AND NOT {in_open_batch(conn.dialect, 'e')} ORDER BY e.id LIMIT ?",
            (limit,),
        )
    ]
    return list(zip(list_entries(conn, "unknown", source=None, limit=limit), alone, strict=True))
