"""How many entries are in each state, as `status` and `ledger list` tell them: the settled states from
their counters, the live ones from the live index, in flight derived from the open and stalled batches."""

from __future__ import annotations

import functools
from typing import get_args

from . import _counts
from ._db import Db, Dialect, members_of
from ._types import IN_FLIGHT_AS, IS_LIVE, LIVE, SETTLED, EntryState, in_open_batch

STATES: tuple[str, ...] = get_args(EntryState)  # in the order `status` lists them


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
@functools.cache
def _in_flight(dialect: Dialect) -> str:
    return (
        f"SELECT e.source, e.state, count(*) FROM batches b CROSS JOIN {members_of(dialect)} JOIN entries e "
        f"ON e.id = m.value WHERE b.state IN ('open','stalled') AND e.state IN ({IN_FLIGHT_AS}) GROUP BY e.source, e.state"
    )


@functools.cache
def _in_stalled(dialect: Dialect) -> str:
    return (
        f"FROM batches b CROSS JOIN {members_of(dialect)} JOIN entries e ON e.id = m.value "
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
    for source, state, n in conn.execute(_in_flight(conn.dialect)).fetchall():
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


def stalled(conn: Db) -> int:
    """Entries of batches stopped by a non-retryable answer: they wait for an operator's `replay`."""
    return conn.execute(f"SELECT count(*) {_in_stalled(conn.dialect)}").fetchone()[0]


def for_a_person(conn: Db) -> tuple[int, int]:
    """The entries that wait for a person's decision: (unknown ones a batch of their own could not
    place either, blocked ones). Apart from `attention`, whose count of waiting versions groups every
    live entry by record: a pass that reports these two needs no more."""
    unresolved = conn.execute(  # not while its batch alone is open or stalled: then it is in flight
        "SELECT count(*) FROM entries e JOIN batches b ON b.id = e.batch_id "
        f"WHERE e.state = 'unknown' AND b.size = 1 AND NOT {in_open_batch(conn.dialect, 'e')}"
    ).fetchone()[0]
    blocked = conn.execute("SELECT count(*) FROM entries WHERE state = 'blocked'").fetchone()[0]
    return unresolved, blocked
