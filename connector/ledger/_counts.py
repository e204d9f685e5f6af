"""How many entries each source holds in each settled state (schema v11): `settled_counts`, a row per
(source, state), written by the statement that moves entries into or out of those states, in its
transaction.

Until v10 `status` counted the settled entries from a partial index on (state, source) that every
settle wrote into, one B-tree write per record. Now a settle adds its batch's figures to a few
counter rows: a constant number of writes per batch (one per source and state the batch reached).
Every write that changes an entry's state calls `add` with what it moved: enqueue (rejected and
superseded versions), settle and the batch endings (`_settle`), the operator's repairs
(`_operator`). `recount` rebuilds the table from the entries (the migration, and whoever writes
entries by hand: a test's or a benchmark's fixture).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ._db import Db
from ._types import IS_SETTLED, SETTLED

Moves = Counter[tuple[str, str]]  # (source, state) -> entries added (negative: taken out)

CREATE = "CREATE TABLE settled_counts (source TEXT NOT NULL, state TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (source, state))"
RECOUNT = (
    "DELETE FROM settled_counts",
    f"INSERT INTO settled_counts (source, state, n) SELECT source, state, count(*) FROM entries WHERE {IS_SETTLED} "
    "GROUP BY source, state",
)


def moves(changes: Iterable[tuple[str, str | None, str]], n: int = 1) -> Moves:
    """The counts' changes for entries moved, `n` for each (source, old state or None for a new entry,
    new state). The moves are tallied first (a batch's members mostly move alike), then weighed once per kind."""
    moved: Moves = Counter()
    for (source, old, new), times in Counter(changes).items():
        if old == new:
            continue
        if old in SETTLED:
            moved[(source, old)] -= n * times
        if new in SETTLED:
            moved[(source, new)] += n * times
    return moved


def add(db: Db, moved: Moves) -> None:
    """Apply `moved` to the counters: one row written per (source, state) that changed."""
    rows = [(source, state, n) for (source, state), n in sorted(moved.items()) if n]
    if rows:
        db.executemany(
            "INSERT INTO settled_counts (source, state, n) VALUES (?, ?, ?) "
            "ON CONFLICT (source, state) DO UPDATE SET n = settled_counts.n + excluded.n",
            rows,
        )


def move_where(db: Db, where: str, params: Sequence[Any], new_state: str) -> None:
    """Before an update that sets `new_state` on the entries matching `where`, in the same transaction (one writer:
    the same rows): count what it moves out of settled states and into `new_state`."""
    rows = db.execute(f"SELECT source, state, count(*) FROM entries WHERE {where} GROUP BY source, state", params)
    moved: Moves = Counter()
    for source, state, n in rows.fetchall():
        moved.update(moves([(source, state, new_state)], n))
    add(db, moved)


def recount(db: Any) -> None:
    """Rebuild the counters from the entries (a sqlite3 or a psycopg connection, or a `Db`)."""
    for statement in RECOUNT:
        db.execute(statement)


def by_source(db: Db) -> list[tuple[str, str, int]]:
    """(source, state, count) of every settled state held."""
    return db.execute("SELECT source, state, n FROM settled_counts WHERE n <> 0").fetchall()
