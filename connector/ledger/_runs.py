"""Runs and what each one changed (v4). Nothing here commits: the Ledger method around each function
is the transaction.

Every write that changes an entry's state while a run is in hand stamps the entry with that run:
the statement itself sets `run_id` from `capture_run_in_hand()`, a function each engine gives its
connections (SQLite: a Python function; PostgreSQL: a SQL function over a setting of the transaction)
(enqueue's insert, and `_stamp.STAMP_SET` in every UPDATE that sets `state`: enqueue's supersede,
claim, settle, block, stall, keep_open, fail, split, requeue and resolve). Outside a run the
function returns NULL and nothing is stamped, so an entry keeps the last run that changed it.
Two TEMP triggers used to do it; a trigger on entries, even one whose WHEN is false, cost about
20 us per row inserted (measured: 31 us per insert with them, 11 without), so they are gone, and
tests/ledger/test_stamp_coverage.py checks that every such statement carries the stamp.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._batches import carriers
from ._db import Db, members_of, rows_of
from ._run_view import FOLDED, LISTED, RUN_COLS, RUN_COUNTS, RunView, iso, run_view
from ._types import BY_BATCH, LIVE, RARE, any_state, state_of


def start(db: Db, kind: str, now: float, note: str | None) -> int:
    """A new run row, its id above every id handed out before (a folded pass's row kept as the newest,
    `_fold`, goes now that it is not)."""
    run_id: int = db.execute(
        "INSERT INTO runs (kind, started_at, note) VALUES (?, ?, ?) RETURNING id", (kind, now, note)
    ).fetchone()[0]
    db.execute("DELETE FROM runs WHERE id = (SELECT max(id) FROM runs WHERE id < ?) AND kind = ?", (run_id, FOLDED))
    return run_id


def finish(
    db: Db,
    run_id: int,
    counts: dict[str, int],
    duration_s: float,
    exit_code: int,
    sources: Sequence[str] | None,
    now: float,
    reason: str | None = None,
) -> int:
    """Record how the run ended; an idle pass that repeats the run entry before it folds into that
    entry (`folds`). Returns the run id it is recorded under: its own, or the entry it folded into."""
    db.execute(
        f"UPDATE runs SET finished_at = ?, duration_s = ?, exit_code = ?, sources = coalesce(?, sources), reason = ?, "
        f"{', '.join(f'{c} = ?' for c in RUN_COUNTS)} WHERE id = ?",
        (
            now,
            duration_s,
            exit_code,
            None if sources is None else json.dumps(list(sources)),
            reason,
            *(counts.get(c, 0) for c in RUN_COUNTS),
            run_id,
        ),
    )
    return _fold(db, run_id)


@dataclass(frozen=True)
class Ending:
    """What the fold rule compares of a finished run entry."""

    kind: str
    sources: str | None  # as stored (JSON text)
    note: str | None
    exit_code: int | None
    reason: str | None
    counts: tuple[int, ...]
    finished: bool = True

    @property
    def idle(self) -> bool:
        """Finished having read, sent and settled nothing, and no operator's command (those carry a note)."""
        return self.finished and self.note is None and not any(self.counts)


def folds(earlier: Ending, this: Ending) -> bool:
    """Whether pass `this` folds into the run entry `earlier` of the same kind and sources: both idle
    and ended the same way (exit code and reason). A pass that read or sent anything, or ended
    otherwise, starts an entry of its own, so the history shows every change and every new reason."""
    return (
        earlier.idle
        and this.idle
        and (earlier.kind, earlier.sources, earlier.exit_code, earlier.reason)
        == (this.kind, this.sources, this.exit_code, this.reason)
    )


_ENDING_COLS = f"kind, sources, note, exit_code, reason, finished_at IS NOT NULL, {', '.join(RUN_COUNTS)}"


def _ending(row: tuple[Any, ...]) -> Ending:
    kind, sources, note, exit_code, reason, finished, *counts = row
    return Ending(kind, sources, note, exit_code, reason, tuple(c or 0 for c in counts), bool(finished))


def _fold(db: Db, run_id: int) -> int:
    """Fold run `run_id` into the newest entry of its kind and sources when `folds` says so and every
    entry written after that one is idle too (passes of other sources or the sweep, interleaved): the
    entry counts one more pass and ends when this one did; this row goes, and whatever it stamped
    (nothing, for an idle pass, but a claim stamps its entries) moves to the entry it joined. The row
    of the newest run stays, marked FOLDED and listed nowhere, until the next run starts: SQLite hands
    the id of a deleted newest row out again, and this pass's id was in its log lines."""
    this = _ending(db.execute(f"SELECT {_ENDING_COLS} FROM runs WHERE id = ?", (run_id,)).fetchone())
    if not this.idle:
        return run_id
    row = db.execute(
        f"SELECT id, {_ENDING_COLS} FROM runs WHERE id < ? AND kind = ? AND sources IS NOT DISTINCT FROM ? AND note IS NULL "
        "ORDER BY id DESC LIMIT 1",
        (run_id, this.kind, this.sources),
    ).fetchone()
    if row is None or not folds(_ending(row[1:]), this):
        return run_id
    target = row[0]
    busy = " OR ".join(f"coalesce({c}, 0) != 0" for c in RUN_COUNTS)
    between = db.execute(
        f"SELECT 1 FROM runs WHERE id > ? AND id < ? AND (finished_at IS NULL OR note IS NOT NULL OR {busy}) LIMIT 1",
        (target, run_id),
    ).fetchone()
    if between is not None:
        return run_id
    db.execute(
        "UPDATE runs SET passes = coalesce(passes, 1) + 1, finished_at = (SELECT finished_at FROM runs WHERE id = ?), "
        "duration_s = coalesce(duration_s, 0) + (SELECT coalesce(duration_s, 0) FROM runs WHERE id = ?) WHERE id = ?",
        (run_id, run_id, target),
    )
    db.execute("UPDATE entries SET run_id = ? WHERE run_id = ?", (target, run_id))
    db.execute("UPDATE batches SET run_id = ? WHERE run_id = ?", (target, run_id))
    db.execute("UPDATE state_history SET run_id = ? WHERE run_id = ?", (target, run_id))
    # This row goes, unless it is the newest: that one stays, marked (see above).
    db.execute("DELETE FROM runs WHERE id = ? AND id < (SELECT max(id) FROM runs)", (run_id,))
    db.execute("UPDATE runs SET kind = ? WHERE id = ?", (FOLDED, run_id))
    return target


def recent(db: Db, limit: int) -> list[RunView]:
    """The newest runs first."""
    rows = db.execute(f"SELECT {RUN_COLS} FROM runs WHERE {LISTED} ORDER BY id DESC LIMIT ?", (limit,))
    return [run_view(r) for r in rows]


def find(db: Db, ref: str) -> RunView | None:
    """A run by its id, or `last` for the newest one."""
    if ref == "last":
        row = db.execute(f"SELECT {RUN_COLS} FROM runs WHERE {LISTED} ORDER BY id DESC LIMIT 1").fetchone()
    elif ref.isdigit():
        row = db.execute(f"SELECT {RUN_COLS} FROM runs WHERE id = ? AND {LISTED}", (int(ref),)).fetchone()
    else:
        row = None
    return None if row is None else run_view(row)


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


def entries(db: Db, run_id: int, state: str | None) -> list[RunEntry]:
    """The entries `run_id` changed last (a later run that changed one again owns it now), oldest first;
    `attempts` counts the requests that carried each entry, in any batch."""
    # Three parts, each read from an index holding few entries besides the run's (schema v11): the captured
    # and duplicate ones through the batches the run settled (batches_run, then each member's row,
    # whose `batch_id` says whether that batch settled it), the other settled states from entries_rare,
    # the live ones from entries_live.
    only = f" AND {state_of(db.dialect, 'e')} = ?" if state else ""
    columns = (
        f"SELECT e.id, e.key, e.source, e.record_id, {state_of(db.dialect, 'e')}, coalesce(e.last_error, e.notes), "
        "e.updated_at, e.payload, e.created_at, e.batch_id "
    )
    parts = (
        f"{columns} FROM batches b CROSS JOIN {members_of(db.dialect)} JOIN entries e ON e.id = m.value "
        f"WHERE b.run_id = ? AND e.batch_id = b.id AND e.run_id = ? AND {any_state(BY_BATCH, 'e.state')}{only}",
        f"{columns} FROM entries e WHERE e.run_id = ? AND {any_state(RARE, 'e.state')}{only}",
        f"{columns} FROM entries e WHERE e.run_id = ? AND {any_state(LIVE, 'e.state')}{only}",
    )
    each = (state,) if state else ()
    params = (run_id, run_id, *each, run_id, *each, run_id, *each)
    rows = db.execute(f"SELECT * FROM ({' UNION ALL '.join(parts)}) AS r ORDER BY 1", params).fetchall()
    attempts = _attempts(db, rows)
    return [
        RunEntry(key, source, record_id, state_, reason, attempts.get(eid, 0), iso(updated), _parsed(payload))
        for eid, key, source, record_id, state_, reason, updated, payload, _, _ in rows
    ]


@dataclass(frozen=True)
class RejectedEntry:
    """A rejected entry as the rejects feed writes it (`delivery/rejects.py`): `entry_id` orders them,
    and `raw` is the record as read (None when the source gave none)."""

    entry_id: int
    key: str
    source: str
    record_id: str
    run_id: int | None
    created_at: float
    reason: str | None
    raw: dict[str, Any] | None


def rejected_after(db: Db, after_id: int, limit: int) -> list[RejectedEntry]:
    """Up to `limit` rejected entries newer than `after_id`, oldest first (read from entries_rare)."""
    rows = db.execute(
        "SELECT id, key, source, record_id, run_id, created_at, last_error, payload FROM entries "
        "WHERE state = 'rejected' AND id > ? ORDER BY id LIMIT ?",
        (after_id, limit),
    ).fetchall()
    return [
        RejectedEntry(eid, key, source, record_id, run_id, created, reason, (_parsed(payload) or {}).get("record"))
        for eid, key, source, record_id, run_id, created, reason, payload in rows
    ]


def _attempts(db: Db, rows: Sequence[tuple[Any, ...]]) -> dict[int, int]:
    """Entry id -> the requests that carried it, in any batch, for `entries`' rows: one pass over the
    members of the batches that may hold them (`_batches.carriers`; schema v12 keeps no index by
    entry), where a lookup per entry would read them all again each time."""
    if not rows:
        return {}
    first, last = carriers(db, min(row[0] for row in rows), [(row[9], row[4]) for row in rows])
    # The ids as a set both engines hash (a subquery): PostgreSQL's `= ANY(array)` compared each member
    # with the whole list, members x entries.
    ids, params = rows_of(db, (("id", "bigint"),), [(row[0],) for row in rows])
    return dict(
        db.execute(
            f"SELECT m.value, count(*) FROM batches b CROSS JOIN {members_of(db.dialect)} "
            f"JOIN attempts a ON a.batch_id = b.id WHERE b.id BETWEEN ? AND ? AND m.value IN (SELECT w.id FROM {ids} AS w) "
            "GROUP BY m.value",
            (first, last, *params),
        ).fetchall()
    )


def _parsed(payload: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(payload) if payload else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
