"""`ledger copy`: every table of one ledger into an empty other, between engines, in one write
transaction of the target (all of it or nothing). Rows keep their ids, keys, bodies and states, so a
batch rebuilds byte for byte on the target and a `sync` on it sends nothing that was settled."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._db import Db
from .schema import LedgerError

# Every table of the schema (v13) but `ledger_identity` (see `copy`), parents before the rows that name them.
TABLES = (
    "source_state",
    "runs",
    "entries",
    "records",
    "batches",
    "attempts",
    "state_history",
    "flows",
    "pauses",
    "settled_counts",
)
WITH_IDS = ("runs", "batches", "attempts", "state_history")  # ids the engine gives: continue after the copied ones
CHUNK = 5000


def _with_members(row: Sequence[Any], at: int, target: Db) -> tuple[Any, ...]:
    """A batch row with its members (JSON text from SQLite, a list from PostgreSQL) as the target keeps them."""
    value = row[at]
    ids = json.loads(value) if isinstance(value, str) else value
    return (*row[:at], target.dialect.many(ids or []), *row[at + 1 :])


def is_empty(db: Db) -> bool:
    return not any(db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in TABLES)


def copy(source: Db, target: Db, target_name: str) -> dict[str, int]:
    """Rows copied per table. Refuses a target that holds anything (a copy never merges two ledgers)."""
    if not is_empty(target):
        raise LedgerError(f"ledger {target_name} is not empty: `ledger copy` fills a new, empty ledger only")
    counts: dict[str, int] = {}
    for table in TABLES:
        cur = source.execute(f"SELECT * FROM {table} ORDER BY 1")
        columns = [d[0] for d in cur.description]
        insert = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        members = columns.index("members") if table == "batches" else None
        counts[table] = 0
        while rows := cur.fetchmany(CHUNK):
            if members is not None:
                rows = [_with_members(row, members, target) for row in rows]
            target.executemany(insert, rows)
            counts[table] += len(rows)
    for table in WITH_IDS:
        if target.dialect.next_id_after_copy:
            target.execute(target.dialect.next_id_after_copy.format(table=table))
    # The copy is the same ledger (the rejects feed goes on from its position): its identity too.
    target.execute("UPDATE ledger_identity SET id = ?", source.execute("SELECT id FROM ledger_identity").fetchone())
    return counts
