"""PostgreSQL's plans for the claim and the settle, kept good while the ledger's statistics lag.

The claim takes the first sendable entries in id order (`_batches._SENDABLE`, `_REOFFER`): the partial
index entries_to_send walked in id order, each entry checked against older live versions of its record
through entries_live_record, stopping after one batch. The settle looks up the persons a batch's
captures name among the captured entries (`_merges`). The planner picks each plan from its statistics
of `state`, which autovacuum refreshes only after a tenth of the table changed and up to a minute later.
Measured on 30,000 entries, with autovacuum off to show what a busy minute does:

- never analyzed, or analyzed while the table was small (a first sync): it expects few pending entries
  and prefers a bitmap scan and a sort, reading, checking and sorting every pending entry for each
  batch (CLAIM_PLAN, below, takes that plan away, and the next one);
- analyzed while the table was nearly all pending, and half of it settled since: it walks the primary
  key from the first entry, through every settled one;
- analyzed while nothing was live (every entry settled, between two passes of a daemon), then a
  backlog arrives: it expects entries_live_record to be empty and reads all of it for each pending
  entry it checks, 100 times a claim (0.7 s per claim + settle instead of 20 ms);
- analyzed before anything was captured: the settle's merge lookup reads every captured entry.

No query shape avoids the last two while an index is believed empty, so `Statistics` runs ANALYZE
when as many entries entered live states (enqueue) or settled ones (settle) as the last ANALYZE
counted there: the estimates stay within about twice the truth, which is all these plans need.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from .schema import LedgerError

# The claim's scans in id order must walk entries_to_send, which holds the pending and unknown entries
# alone and so stops after one batch. Two other plans look cheaper when the statistics lag: a bitmap
# scan and a sort of every pending entry (the table believed to hold few), and the primary key walked
# from its first id, filtering out every settled entry on the way (the table believed to be nearly all
# pending: the planner does not know the settled ones all come first, and the primary key's rows lie
# in id order on disk, which it prices as cheaper reads than the partial index's). Without bitmap
# scans, and with a random read priced as a sequential one, the partial index walk costs least at any
# estimate (measured: 1.5 ms against 41 ms for the primary key's walk on 30,000 entries, half settled
# since the last ANALYZE). For the rest of the claim's transaction only (`set_config(..., true)` is
# SET LOCAL): the claim is always the last part of its transaction, and its other statements look
# rows up by key, for which index scans are the right plan anyway.
CLAIM_PLAN = (
    "SELECT set_config('enable_bitmapscan', 'off', true), "
    "set_config('random_page_cost', current_setting('seq_page_cost'), true)"
)

# Entries changed before the first ANALYZE: below this the worst plans cost a few milliseconds a batch.
ANALYZE_MIN = 1000
# ANALYZE waits this long at most for another one (autovacuum's, another daemon's) to let go of the
# table: that one refreshes the statistics as well.
LOCK_TIMEOUT_MS = 100
# The partial indexes whose size ANALYZE estimates: the live entries, and the ones a capture named a
# person for (schema v11: the settled entries have no index of their own).
_COUNTED = "SELECT relname, reltuples FROM pg_class WHERE oid IN ('entries_live'::regclass, 'entries_person'::regclass)"


class Statistics:
    """When to ANALYZE entries: the entries this process made live and settled since its last ANALYZE,
    against how many that ANALYZE found in each (the partial indexes' estimated sizes). ANALYZE reads a
    sample of at most 30,000 rows whatever the table's size, on a pooled connection after the write
    committed, so never under the write lock; as each count must double first, it runs some twenty
    times over a ledger's first million entries, then when a backlog outgrows the one before."""

    def __init__(self, connection: Callable[[], AbstractContextManager[Any]]) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._since = {"live": 0, "settled": 0}
        self._counted = {"live": 0.0, "settled": 0.0}

    def changed(self, live: int, settled: int) -> None:
        with self._lock:
            self._since["live"] += live
            self._since["settled"] += settled
            if all(self._since[k] < max(ANALYZE_MIN, self._counted[k]) for k in self._since):
                return
            self._since = {"live": 0, "settled": 0}
        counted = self._analyze()
        if counted is not None:
            with self._lock:
                self._counted = counted

    def _analyze(self) -> dict[str, float] | None:
        """The live and settled entries ANALYZE estimated; None when it did not run. A failure is not
        the write's: it is committed, and a database gone away fails the next write anyway."""
        import psycopg

        try:
            with self._connection() as conn, conn.transaction():
                conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{LOCK_TIMEOUT_MS}ms",))
                conn.execute("ANALYZE entries")
                sizes = dict(conn.execute(_COUNTED).fetchall())
        except psycopg.errors.LockNotAvailable:
            return None  # another ANALYZE of entries is under way
        except (psycopg.Error, LedgerError):  # unreachable, the pool's timeout: the next write says so
            with self._lock:  # try again after the next write
                self._since = {k: max(v, ANALYZE_MIN) for k, v in self._since.items()}
            return None
        return {"live": float(sizes["entries_live"]), "settled": float(sizes["entries_person"])}
