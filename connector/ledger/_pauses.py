"""What an operator paused (`capture-sync pause`), kept in the ledger (v8) so that a daemon started
again on it stays paused: a source's name, or "*" for all, and since when. Nothing here commits:
the Ledger method around each function is the transaction."""

from __future__ import annotations

from ._db import Db

ALL = "*"


def pause(db: Db, source: str, now: float) -> float:
    """Pause `source` (or ALL) from `now`; one already paused keeps its first time. Returns since when."""
    db.execute("INSERT INTO pauses (source, since) VALUES (?, ?) ON CONFLICT(source) DO NOTHING", (source, now))
    return float(db.execute("SELECT since FROM pauses WHERE source = ?", (source,)).fetchone()[0])


def resume(db: Db, source: str | None) -> list[str]:
    """Lift the pause of `source`, or every pause when None; returns the names that were paused."""
    where, params = ("", ()) if source is None else (" WHERE source = ?", (source,))
    names = [row[0] for row in db.execute(f"SELECT source FROM pauses{where}", params)]
    db.execute(f"DELETE FROM pauses{where}", params)
    return names


def paused(db: Db) -> dict[str, float]:
    return {source: float(since) for source, since in db.execute("SELECT source, since FROM pauses ORDER BY source")}
