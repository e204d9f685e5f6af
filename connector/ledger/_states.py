"""Cursor control (v4): a source's state changed by a person (`state set`, `state reset`) or by a full
refresh, with the value it replaced kept in `state_history`, so that any change can be put back.
Cursors that a sync moves with the records it commits are not history: they are the data's own
progress. Nothing here commits: the Ledger method around each function is the transaction."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._db import Db
from ._run_view import iso


@dataclass
class StateChange:
    """One replaced cursor: `old` is what was there before (None: no state, read from the start)."""

    id: int
    source: str
    action: str  # "set", "reset" or "full-refresh"
    run_id: int | None
    changed_at: str | None
    old: Any
    new: Any


@dataclass
class SourceState:
    """A source's cursor as `state show` prints it; `updated_at` says when a pass or an operator
    last moved it."""

    source: str
    state: Any
    updated_at: str | None


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def current(db: Db) -> list[SourceState]:
    rows = db.execute("SELECT source, state, updated_at FROM source_state ORDER BY source").fetchall()
    return [SourceState(source, _load(state), iso(updated)) for source, state, updated in rows]


def change(db: Db, source: str, new: Any, action: str, run_id: int | None, now: float) -> Any:
    """Replace `source`'s state with `new` (None removes it: the next read starts from the beginning),
    keeping the old one in the history; returns the old one."""
    row = db.execute("SELECT state FROM source_state WHERE source = ?", (source,)).fetchone()
    old_text = None if row is None else row[0]
    new_text = None if new is None else json.dumps(new)
    db.execute(
        "INSERT INTO state_history (source, old_state, new_state, action, run_id, changed_at) VALUES (?, ?, ?, ?, ?, ?)",
        (source, old_text, new_text, action, run_id, now),
    )
    if new_text is None:
        db.execute("DELETE FROM source_state WHERE source = ?", (source,))
    else:
        db.execute(
            "INSERT INTO source_state (source, state, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(source) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
            (source, new_text, now),
        )
    return _load(old_text)


def history(db: Db, source: str | None, limit: int) -> list[StateChange]:
    """The newest changes first."""
    where, params = ("WHERE source = ?", (source, limit)) if source else ("", (limit,))
    rows = db.execute(
        "SELECT id, source, action, run_id, changed_at, old_state, new_state FROM state_history "
        f"{where} ORDER BY id DESC LIMIT ?",
        params,
    ).fetchall()
    return [StateChange(i, s, a, r, iso(t), _load(old), _load(new)) for i, s, a, r, t, old, new in rows]
