"""Runs and what each one changed (v4). Nothing here commits: the Ledger method around each function
is the transaction.

Every write that changes an entry's state while a run is in hand stamps the entry with that run:
the statement itself sets `run_id` from `capture_run_in_hand()`, a function of this connection
(enqueue's insert, and `_stamp.STAMP_SET` in every UPDATE that sets `state`: enqueue's supersede,
claim, settle, block, stall, keep_open, fail, split, requeue and resolve). Outside a run the
function returns NULL and nothing is stamped, so an entry keeps the last run that changed it.
Two TEMP triggers used to do it; a trigger on entries, even one whose WHEN is false, cost about
20 us per row inserted (measured: 31 us per insert with them, 11 without), so they are gone, and
tests/ledger/test_stamp_coverage.py checks that every such statement carries the stamp.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .views import RUN_COUNTS, RunView, _ts

def install_stamp(conn: sqlite3.Connection, run_in_hand: Callable[[], int | None]) -> None:
    """Give this connection `capture_run_in_hand()`, which the writes that change entries stamp them with."""
    conn.create_function("capture_run_in_hand", 0, run_in_hand)


def start(db: sqlite3.Connection, kind: str, now: float, note: str | None) -> int:
    run_id = db.execute("INSERT INTO runs (kind, started_at, note) VALUES (?, ?, ?)", (kind, now, note)).lastrowid
    assert run_id is not None  # an INSERT always sets it
    return run_id


def finish(
    db: sqlite3.Connection, run_id: int, counts: dict[str, int], duration_s: float, exit_code: int,
    sources: Sequence[str] | None, now: float,
) -> None:
    db.execute(
        f"UPDATE runs SET finished_at = ?, duration_s = ?, exit_code = ?, sources = coalesce(?, sources), "
        f"{', '.join(f'{c} = ?' for c in RUN_COUNTS)} WHERE id = ?",
        (
            now, duration_s, exit_code, None if sources is None else json.dumps(list(sources)),
            *(counts.get(c, 0) for c in RUN_COUNTS), run_id,
        ),
    )


_RUN_COLS = f"id, kind, started_at, duration_s, exit_code, sources, note, {', '.join(RUN_COUNTS)}"


def _run(row: tuple[Any, ...]) -> RunView:
    run_id, kind, started, duration, exit_code, sources, note, *counts = row
    return RunView(
        run_id, kind, _ts(started), duration, exit_code, dict(zip(RUN_COUNTS, (v or 0 for v in counts))),
        sources=json.loads(sources) if sources else [], note=note,
    )


def recent(db: sqlite3.Connection, limit: int) -> list[RunView]:
    """The newest runs first."""
    return [_run(r) for r in db.execute(f"SELECT {_RUN_COLS} FROM runs ORDER BY id DESC LIMIT ?", (limit,))]


def find(db: sqlite3.Connection, ref: str) -> RunView | None:
    """A run by its id, or `last` for the newest one."""
    if ref == "last":
        row = db.execute(f"SELECT {_RUN_COLS} FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    elif ref.isdigit():
        row = db.execute(f"SELECT {_RUN_COLS} FROM runs WHERE id = ?", (int(ref),)).fetchone()
    else:
        row = None
    return None if row is None else _run(row)


@dataclass
class RunEntry:
    """One entry a run changed last, as its report lists it. `payload` is the person sent (or, for a
    rejected record, `{"record": raw fields, "reasons": [...]}`): the report masks contact data in it."""

    key: str
    source: str
    record_id: str
    state: str
    reason: str | None
    attempts: int
    updated_at: str | None
    payload: dict[str, Any] | None


def entries(db: sqlite3.Connection, run_id: int, state: str | None) -> list[RunEntry]:
    """The entries `run_id` changed last (a later run that changed one again owns it now), oldest first;
    `attempts` counts the requests that carried each entry, in any batch."""
    where, params = ("e.run_id = ? AND e.state = ?", (run_id, state)) if state else ("e.run_id = ?", (run_id,))
    rows = db.execute(
        "SELECT e.key, e.source, e.record_id, e.state, coalesce(e.last_error, e.notes), "
        "(SELECT count(*) FROM attempts a WHERE a.batch_id IN "
        "(SELECT m.batch_id FROM batch_members m WHERE m.entry_id = e.id)), e.updated_at, e.payload "
        f"FROM entries e WHERE {where} ORDER BY e.id",
        params,
    ).fetchall()
    return [
        RunEntry(key, source, record_id, state_, reason, attempts, _ts(updated), _parsed(payload))
        for key, source, record_id, state_, reason, attempts, updated, payload in rows
    ]


def _parsed(payload: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(payload) if payload else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
