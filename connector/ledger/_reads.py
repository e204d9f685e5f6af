"""The ledger's read-only questions (`status`, lists, runs, cursors' history), each one read
transaction: what `Ledger` answers without writing, apart from its write path (`store.py`). The
views (`views`: status, lists, details) load at the first such question: a sync asks only counts."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from . import _runs, _state_counts, _states
from ._db import Db, Store
from ._types import IS_LIVE

if TYPE_CHECKING:
    from . import views

UNSETTLED = ("pending", "in_flight", "unknown")


def _unsettled(db: Db) -> int:
    """Counted from the live entries alone (the partial index entries_live, whose WHERE the query
    carries so that SQLite may read it): every unsettled state is live."""
    marks = ",".join("?" * len(UNSETTLED))
    sql = f"SELECT count(*) FROM entries WHERE {IS_LIVE} AND state IN ({marks})"
    count: int = db.execute(sql, UNSETTLED).fetchone()[0]
    return count


class LedgerReads:
    """`Ledger`'s read side: every method one read transaction of the store `Ledger` opened."""

    _store: Store

    def _reading(self) -> AbstractContextManager[Db]:
        return self._store.read()

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._store.read() as db:
            return db.execute(sql, params).fetchall()

    def runs(self, limit: int = 20) -> list[views.RunView]:
        with self._reading() as db:
            return _runs.recent(db, limit)

    def find_run(self, ref: str) -> views.RunView | None:
        """A run by id, or `last`."""
        with self._reading() as db:
            return _runs.find(db, ref)

    def run_entries(self, run_id: int, state: str | None = None) -> list[_runs.RunEntry]:
        with self._reading() as db:
            return _runs.entries(db, run_id, state)

    def rejected_after(self, after_id: int, limit: int) -> list[_runs.RejectedEntry]:
        """The rejected entries newer than `after_id`, oldest first: what the rejects feed has not
        written yet."""
        with self._reading() as db:
            return _runs.rejected_after(db, after_id, limit)

    def source_states(self) -> list[_states.SourceState]:
        with self._reading() as db:
            return _states.current(db)

    def state_history(self, source: str | None = None, limit: int = 20) -> list[_states.StateChange]:
        with self._reading() as db:
            return _states.history(db, source, limit)

    def unsettled_count(self) -> int:
        with self._reading() as db:
            return _unsettled(db)

    def sweepable_count(self) -> int:
        """Unsettled entries the daemon's retry sweep may send: all but the members of stalled batches,
        which a non-retryable answer left for an operator's `replay`."""
        with self._reading() as db:
            return _unsettled(db) - _state_counts.stalled(db)

    def blocked_count(self) -> int:
        """Entries that wait for a person's decision: blocked by a 409, or unknown after being asked alone."""
        with self._reading() as db:
            return sum(_state_counts.for_a_person(db))

    def stalls(self) -> views.Stalls:
        """The stalled batches in one figure: entries, batches, since when, the last answer."""
        from . import views

        with self._reading() as db:
            return views.stalls(db)

    def status(self) -> views.StatusReport:
        from . import views

        with self._reading() as db:
            return views.status(db)

    def count_entries(self, state: str, *, source: str | None = None) -> int:
        """How many entries `list_entries` finds without a limit: one counter for a settled state."""
        with self._reading() as db:
            return _state_counts.count_entries(db, state, source=source)

    def list_entries(
        self, state: str | None = None, *, source: str | None = None, limit: int = 100
    ) -> list[views.EntryView]:
        from . import views

        with self._reading() as db:
            return views.list_entries(db, state, source=source, limit=limit)

    def show(self, key: str) -> views.EntryDetail | views.BatchDetail:
        from . import views

        with self._reading() as db:
            return views.show(db, key)

    def batch(self, key: str) -> views.BatchDetail:
        from . import views

        with self._reading() as db:
            return views.batch_detail(db, key)

    def versions(self, source: str, record_id: str) -> list[views.EntryDetail]:
        from . import views

        with self._reading() as db:
            return views.versions(db, source, record_id)
