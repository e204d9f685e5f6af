"""PostgreSQL's plans for the claim and the settle, kept good while the ledger's statistics lag.

The claim takes the first sendable entries in id order (`_batches._SENDABLE`, `_REOFFER`): the partial
index entries_live walked in id order over its pending part, each entry checked against older live
versions of its record through the (source, record_id, content_hash) index, stopping after one batch. The settle looks up the persons a batch's
captures name among the captured entries (`_merges`). The planner picks each plan from its statistics
of `state`, which autovacuum refreshes only after a tenth of the table changed and up to a minute later.
Measured on 30,000 entries, with autovacuum off to show what a busy minute does:

- never analyzed, or analyzed while the table was small (a first sync): it expects few pending entries
  and prefers a bitmap scan and a sort, reading, checking and sorting every pending entry for each
  batch (CLAIM_PLAN, below, takes that plan away, and the next one);
- analyzed while the table was nearly all pending, and half of it settled since: it walks the primary
  key from the first entry, through every settled one;
- analyzed while nothing was live (every entry settled, between two passes of a daemon), then a
  backlog arrives: it expects entries_live to be empty and reads all of it for each pending
  entry it checks, 100 times a claim (0.7 s per claim + settle instead of 20 ms);
- analyzed before anything was captured: the settle's merge lookup reads every captured entry.

No query shape avoids the last two while an index is believed empty, so `Statistics` runs ANALYZE
when as many entries entered live states (enqueue) or settled ones (settle) as the last ANALYZE
counted there: the estimates stay within about twice the truth, which is all these plans need.
It runs on a thread of its own, never in the write that asked for it: ANALYZE takes 10-50 ms, some
ten times over a fresh ledger's first entries, which made claim and settle about 15 % slower.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from .. import logs

if TYPE_CHECKING:
    import psycopg

log = logs.get_logger("capture_sync.ledger")

# The claim's scans in id order must walk entries_live, which holds the live entries alone (schema v11;
# entries_to_send before it) and so stops after one batch. Two other plans look cheaper when the statistics lag: a bitmap
# scan and a sort of every pending entry (the table believed to hold few), and the primary key walked
# from its first id, filtering out every settled entry on the way (the table believed to be nearly all
# pending: the planner does not know the settled ones all come first, and the primary key's rows lie
# in id order on disk, which it prices as cheaper reads than the partial index's). Without bitmap
# scans, and with a random read priced as a sequential one, the partial index walk costs least at any
# estimate (measured: 1.5 ms against 41 ms for the primary key's walk on 30,000 entries, half settled
# since the last ANALYZE). For the rest of the claim's transaction only (`set_config(..., true)` is
# SET LOCAL): the claim is always the last part of its transaction, and its other statements look
# rows up by key, for which index scans are the right plan anyway.
# The versions sent and not settled (an outage leaves hundreds of thousands unknown or blocked) are
# probed per candidate in their own partial index (`_batches._NOT_STUCK`, schema v13), where v12
# hashed them all once per claim under a work_mem of 64 MB (past work_mem PostgreSQL gave the hash up
# and rescanned them per candidate, seconds per claim).
CLAIM_PLAN = (
    "SELECT set_config('enable_bitmapscan', 'off', true), "
    "set_config('random_page_cost', current_setting('seq_page_cost'), true)"
)

# Entries changed before the first ANALYZE: below this the worst plans cost a few milliseconds a batch.
ANALYZE_MIN = 1000
# ANALYZE waits this long at most for another one (autovacuum's, another daemon's) to let go of the
# table: that one refreshes the statistics as well.
LOCK_TIMEOUT_MS = 100
# close() waits this long at most for the cancel of an ANALYZE under way to be sent, and for it to end.
CANCEL_S = 5.0
# The partial indexes whose size ANALYZE estimates: the live entries, and the ones a capture named a
# person for (schema v11: the settled entries have no index of their own).
_COUNTED = "SELECT relname, reltuples FROM pg_class WHERE oid IN ('entries_live'::regclass, 'entries_person'::regclass)"


# The worker's name, for a thread dump (and the tests that look for it after `close`).
THREAD = "capture-sync-analyze"


class Statistics:
    """When to ANALYZE entries: the entries this process made live and settled since its last ANALYZE,
    against how many that ANALYZE found in each (the partial indexes' estimated sizes). ANALYZE reads a
    sample of at most 30,000 rows whatever the table's size; as each count must double first, it runs
    some twenty times over a ledger's first million entries, then when a backlog outgrows the one before.

    The write that crosses the line only asks: one daemon thread (started by the first request) runs
    ANALYZE on a pooled connection, one at a time, and requests made meanwhile become one more ANALYZE
    after it (which sees every write they followed), so a burst of writes costs at most two. A failure
    is logged and never reaches a write. `close` drops what is queued, cancels an ANALYZE under way
    (the ledger is closing: nobody plans with its statistics any more) and joins the thread before the
    pool closes."""

    def __init__(self, connection: Callable[[], AbstractContextManager[psycopg.Connection[Any]]]) -> None:
        """`connection`: the pool's own (psycopg's errors as they are, for `_analyze` to tell them apart)."""
        self._connection = connection
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._since = {"live": 0, "settled": 0}
        self._counted = {"live": 0.0, "settled": 0.0}
        self._queued = False
        self._closed = False
        self._worker: threading.Thread | None = None
        self._running: psycopg.Connection[Any] | None = None  # the ANALYZE under way's connection

    def changed(self, live: int, settled: int) -> None:
        with self._lock:
            if self._closed:
                return
            self._since["live"] += live
            self._since["settled"] += settled
            if all(self._since[k] < max(ANALYZE_MIN, self._counted[k]) for k in self._since):
                return
            self._since = {"live": 0, "settled": 0}
            self._queued = True
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name=THREAD, daemon=True)
                self._worker.start()
            self._wake.notify()

    def close(self) -> None:
        import psycopg

        with self._lock:
            self._closed = True
            self._wake.notify()
            if self._running is not None:  # under the lock: the connection cannot go back to the pool meanwhile
                with contextlib.suppress(psycopg.Error):  # the server is gone: the ANALYZE ends with the connection
                    self._running.cancel_safe(timeout=CANCEL_S)
            worker = self._worker
        if worker is not None:
            worker.join(CANCEL_S)
            if worker.is_alive():  # a server that took the cancel and never answered: the process will exit anyway
                log.warning(
                    "ledger.analyze_abandoned", reason=f"ANALYZE entries did not end within {CANCEL_S:g} s of close"
                )

    def _work(self) -> None:
        while True:
            with self._lock:
                while not (self._queued or self._closed):
                    self._wake.wait()
                if self._closed:
                    return
                self._queued = False
            counted = self._analyze()
            if counted is not None:
                with self._lock:
                    self._counted = counted

    def _analyze(self) -> dict[str, float] | None:
        """The live and settled entries ANALYZE estimated; None when it did not run. A failure is not
        the writes': they are committed, and a database gone away fails the next write anyway."""
        import psycopg

        try:
            with self._connection() as conn:
                with self._lock:
                    if self._closed:
                        return None
                    self._running = conn
                try:
                    with conn.transaction():
                        conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{LOCK_TIMEOUT_MS}ms",))
                        conn.execute("ANALYZE entries")
                        sizes = dict(conn.execute(_COUNTED).fetchall())
                finally:
                    with self._lock:
                        self._running = None
                return {"live": float(sizes["entries_live"]), "settled": float(sizes["entries_person"])}
        except psycopg.errors.LockNotAvailable:
            log.debug("ledger.analyze_skipped", reason="another ANALYZE of entries is under way")
            return None
        except Exception as exc:  # unreachable, the pool's timeout, close's cancel; no error ends the worker
            with self._lock:  # try again after the next write
                self._since = {k: max(v, ANALYZE_MIN) for k, v in self._since.items()}
                closing = self._closed
            (log.debug if closing else log.warning)(
                "ledger.analyze_failed",
                reason=(str(exc).strip() or type(exc).__name__).splitlines()[0],
                then="the planner keeps the statistics it has; the next write asks again",
            )
            return None
