"""What the ledger says, read for /metrics, /readyz and the status page.

Read on a connection of its own, opened read-only in a worker thread: a scrape never takes the
daemon's ledger lock, so it never holds up a claim or a settle on the event loop, and SQLite's WAL
lets it read while the daemon writes. A read counts every entry by source and state (60-200 ms on a
100,000-entry ledger: no index covers (source, state)), so one snapshot serves every scrape until a
pass ends or it is 5 s old.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..ledger import BatchDetail, EntryView, StatusReport
from ..ledger.views import batch_detail, list_entries, status

SHOWN = 20  # blocked batches and unknown entries listed by the status page
SETTLED = ("captured", "duplicate", "failed")


@dataclass(frozen=True)
class Unknown:
    entry: EntryView
    asked_alone: bool  # its own one-person request could not place it either: a person resolves it


@dataclass(frozen=True)
class Snapshot:
    taken_at: float
    report: StatusReport
    blocked: list[BatchDetail]       # the first SHOWN batches holding blocked entries
    blocked_batches: int             # how many batches hold blocked entries
    unknown: list[Unknown]           # the first SHOWN unknown entries
    oldest_unsettled_at: float | None

    @property
    def oldest_unsettled_age_s(self) -> float:
        return max(self.taken_at - self.oldest_unsettled_at, 0.0) if self.oldest_unsettled_at else 0.0


@dataclass
class SettledTally:
    """Persons that reached captured, duplicate or failed, by source, since `counted_until`.

    The ledger has no event log, so the counter is read from the entries a finished pass changed:
    each window (counted_until, end of the latest pass] is counted once, when a pass has ended since
    (passes run one at a time, and an entry's updated_at is the time of its last change)."""

    counted_until: float
    totals: Counter[tuple[str, str]] = field(default_factory=Counter)

    def advance(self, conn: sqlite3.Connection, until: float) -> None:
        if until <= self.counted_until:
            return
        marks = ",".join("?" * len(SETTLED))
        for source, state, n in conn.execute(
            f"SELECT source, state, count(*) FROM entries WHERE state IN ({marks}) AND updated_at > ? "
            "AND updated_at <= ? GROUP BY source, state",
            (*SETTLED, self.counted_until, until),
        ):
            self.totals[(source, state)] += n
        for source, n in conn.execute(  # merges are captures too: counted apart as well (partial index entries_merged)
            "SELECT source, count(*) FROM entries WHERE merged = 1 AND updated_at > ? AND updated_at <= ? GROUP BY source",
            (self.counted_until, until),
        ):
            self.totals[(source, "merged")] += n
        self.counted_until = until


class LedgerReader:
    """Opens the ledger read-only for each read; call its methods in a worker thread."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=2.0)

    def snapshot(self, tally: SettledTally, passes_until: float | None) -> Snapshot:
        conn = self._connect()
        try:
            conn.execute("BEGIN")  # one read transaction: every count from the same moment
            if passes_until is not None:
                tally.advance(conn, passes_until)
            report = status(conn, runs=10)
            batch_keys = conn.execute(
                "SELECT DISTINCT b.id, b.key FROM entries e JOIN batches b ON b.id = e.batch_id "
                "WHERE e.state = 'blocked' ORDER BY b.id"
            ).fetchall()
            unknown = [
                Unknown(entry, bool(alone)) for entry, alone in zip(
                    list_entries(conn, "unknown", source=None, limit=SHOWN),
                    [r[0] for r in conn.execute(
                        "SELECT coalesce(b.size = 1, 0) FROM entries e LEFT JOIN batches b ON b.id = e.batch_id "
                        "WHERE e.state = 'unknown' ORDER BY e.id LIMIT ?", (SHOWN,),
                    )],
                    strict=True,
                )
            ]
            blocked = [batch_detail(conn, key) for _, key in batch_keys[:SHOWN]]
            conn.execute("COMMIT")
        finally:
            conn.close()
        oldest = datetime.fromisoformat(report.oldest_unsettled).timestamp() if report.oldest_unsettled else None
        return Snapshot(time.time(), report, blocked, len(batch_keys), unknown, oldest)

    def writable(self) -> str | None:
        """None when the daemon can write the ledger; else why not. Takes SQLite's write lock for an
        instant (BEGIN IMMEDIATE, ROLLBACK): a ledger busy with the daemon's own write is writable."""
        for path in (self.path, self.path.parent):
            if not os.access(path, os.W_OK):
                return f"{path} is not writable by this user"
        try:
            conn = sqlite3.connect(self.path, timeout=1.0, isolation_level=None)
        except sqlite3.Error as exc:
            return f"cannot open {self.path}: {exc}"
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                return f"{self.path}: {exc}"
        finally:
            conn.close()
        return None
