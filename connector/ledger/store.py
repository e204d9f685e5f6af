"""The ledger's write path: enqueue, write-ahead batches, settle.

Every method is one `BEGIN IMMEDIATE` transaction, so each fact the delivery relies on (a record is
in, a cursor moved, a batch with this key and these members exists, a member settled) is either
wholly on disk or not at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import (
    _batches,
    _enqueue,
    _flows,
    _merges,
    _pauses,
    _runs,
    _settle,
    _states,
)
from ._db import Db, Store, is_url
from ._lease import Lease
from ._reads import LedgerReads
from ._settle import Settlement
from ._sqlite import SqliteStore
from ._types import BatchState, BatchWork, Claim, EnqueueCounts, EntryState, Mapped, Outcome
from .schema import LedgerError

if TYPE_CHECKING:  # `status` opens a ledger without loading the HTTP client
    from ..api.client import Attempt


def pg_name(url: str) -> str:
    """A PostgreSQL ledger's URL as messages print it: postgresql://USER@HOST:PORT/DB."""
    from ._postgres import PgTarget

    return PgTarget.parse(url).name


class Ledger(LedgerReads):
    """Every idempotency key, batch, attempt and result of this installation, in SQLite (a file) or
    PostgreSQL (a `postgresql://` URL): `target` picks the engine (`_db.Store`); the methods are the
    same on both."""

    def __init__(
        self,
        target: str | Path,
        *,
        synchronous: str = "FULL",
        busy_timeout_s: float = 5.0,
        password_file: Path | None = None,
        integration: str | None = None,
    ) -> None:
        """`integration` names the PostgreSQL schema holding this integration's tables (created on
        first open; `public` when None); a SQLite file holds one integration and ignores it."""
        self._store: Store
        if is_url(target):  # the PostgreSQL engine loads only for a PostgreSQL ledger
            from ._postgres import PgStore, PgTarget

            self._store = PgStore(PgTarget.parse(str(target), password_file, integration))
            self.path: Path | None = None
        else:
            self.path = Path(target)
            self._store = SqliteStore(self.path, synchronous=synchronous, busy_timeout_s=busy_timeout_s)
        self.name = self._store.name  # for messages: the file, or postgresql://USER@HOST:PORT/DB
        self._run_id: int | None = None  # the run in hand: every entry a write changes is stamped with it
        self._fresh: int | None = None  # tags waiting in `fresh_tag` (`_merges.keep_fresh_small`), about

    @property
    def engine(self) -> str:
        return "sqlite" if self.path is not None else "postgresql"

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._store.close()

    def lease(self, holder: str, lease_s: float) -> Lease:
        """The integration's lease, for `holder` (a daemon's id) to lead it while held: PostgreSQL
        only (a SQLite file has one daemon, by its lock). From here on, this ledger's writes are
        refused (LedgerFenced) unless the lease is held and unexpired."""
        if self.path is not None:  # a SQLite file: refused without loading the PostgreSQL engine
            raise LedgerError(
                f"ledger {self.name} is a SQLite file: leases and standby daemons need a PostgreSQL ledger"
            )
        from ._postgres import PgStore  # loaded already: the ledger is a PostgreSQL one

        assert isinstance(self._store, PgStore)
        return self._store.lease(holder, lease_s)

    def ask_leader(self, command: str, args: dict[str, Any], take_within_s: float) -> dict[str, Any]:
        """A control command run by the daemon leading this integration, wherever it runs (PostgreSQL:
        `_requests`); its answer. Raises `_requests.NotTaken` / `Unanswered` (LedgerError)."""
        from . import _requests

        return _requests.ask_leader(self._store, command, args, take_within_s)

    def acquire_daemon_lock(self) -> None:
        """One daemon per ledger (raises LedgerLocked); held until `close`, and dies with the process."""
        self._store.acquire_daemon_lock()

    def _write(self) -> AbstractContextManager[Db]:
        return self._store.write(self._run_id)

    # --- extract: records and cursors --------------------------------------------------------

    def source_state(self, source: str) -> Any:
        rows = self._read("SELECT state FROM source_state WHERE source = ?", (source,))
        return json.loads(rows[0][0]) if rows else None

    def enqueue(self, source: str, mapping_version: str, items: Iterable[Mapped], new_state: Any) -> EnqueueCounts:
        """Write a chunk of mapped records and the cursor after them in one transaction.
        `mapping_version` is kept with each entry for audit; it plays no part in keys or change detection."""
        counts = EnqueueCounts()
        now = time.time()
        state_json = json.dumps(new_state)
        with self._write() as db:
            _enqueue.enqueue_chunk(db, source, mapping_version, list(items), now, counts)
            db.execute(
                "INSERT INTO source_state (source, state, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT(source) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                (source, state_json, now),
            )
        self._store.changed(live=counts.enqueued)  # after the commit: off the write lock
        return counts

    def last_entry_id(self) -> int:
        """The newest entry's id (0 for none): a streaming sync counts its backlog above it."""
        return self._read("SELECT coalesce(max(id), 0) FROM entries")[0][0]

    def identity(self) -> str:
        """What tells this ledger from another one (a file deleted and made again, another PostgreSQL
        schema): its stored id (schema v13, `_migrations.stored_identity`), which nothing changes and
        `ledger copy` carries to the copy."""
        identity: str = self._read("SELECT id FROM ledger_identity")[0][0]
        return identity

    def backlog(self, after_id: int, limit: int) -> int:
        """Entries newer than `after_id` that claim could take now (`_batches.claimable`: not what is
        in hand, waits for `replay`, or waits behind an older blocked or unknown version of its
        record), counted up to `limit`, from the live entries alone (the partial index entries_live)."""
        with self._store.read() as db:
            return _batches.claimable(db, after_id, limit)

    def raw_digests(self, source: str, record_ids: list[str]) -> dict[str, str]:
        """For the records among `record_ids` the ledger holds: the digest of the source record
        (`Mapped.raw_digest`) their newest version was mapped from. A record read again with that
        digest is unchanged without being mapped."""
        with self._reading() as db:
            return _enqueue.raw_digests(db, source, record_ids)

    def unseen_records(self, source: str, record_ids: list[str]) -> list[str]:
        """The ids among `record_ids` the ledger holds no version of, in their order."""
        with self._reading() as db:
            held = {
                row[0]
                for row in db.execute(
                    f"SELECT DISTINCT record_id FROM entries WHERE source = ? AND record_id {db.dialect.any_of}",
                    (source, db.dialect.many(record_ids)),
                )
            }
        return [rid for rid in record_ids if rid not in held]

    def is_unchanged(self, source: str, item: Mapped) -> bool:
        """Read-only change detection, for --dry-run."""
        with self._reading() as db:
            return _enqueue.is_unchanged(db, source, item)

    # --- load: write-ahead batches --------------------------------------------------------------

    def claim(self, want: Claim) -> BatchWork | None:
        """The next unit of work, written to disk before it is returned (see `_batches.claim`)."""
        with self._write() as db:
            return _batches.claim(db, want)

    # --- settle ----------------------------------------------------------------------------

    def settle(
        self,
        batch: BatchWork,
        outcomes: Sequence[Outcome],
        attempts: Sequence[Attempt],
        *,
        then: Claim | None = None,
    ) -> BatchWork | None:
        """Record a batch's results; with `then`, also claim the next unit of work in the same
        transaction (one commit, so one fsync under synchronous=FULL, per batch instead of two).
        A capture answered with a person id another record holds is marked a merge."""
        return self.settle_counting(batch, outcomes, attempts, then=then)[0]

    def settle_counting(
        self,
        batch: BatchWork,
        outcomes: Sequence[Outcome],
        attempts: Sequence[Attempt],
        *,
        then: Claim | None = None,
    ) -> tuple[BatchWork | None, int]:
        """`settle`, and how many members it counted as merges (no second read to report them)."""
        return self.settle_many([Settlement(batch, outcomes, attempts, then)])[0]

    def settle_many(
        self, settlements: Sequence[Settlement] | Callable[[], Sequence[Settlement]]
    ) -> list[tuple[BatchWork | None, int]]:
        """Group commit: several batches' `settle_counting` (and claims: a `Settlement` without a
        batch only claims) in one transaction, so one fsync under synchronous=FULL for the answers
        delivery holds at once. Given a function, it is called once the transaction holds the write
        lock: what came while it waited for the lock joins. Each batch is settled exactly as alone;
        then the claims are made in the settlements' order, after every settle (so each sees all of
        them), none taking a batch an earlier one of the same transaction took. One answer per
        settlement: (claimed work, merges). All or nothing: a kill or an error anywhere before the
        COMMIT leaves every one of them unsettled."""
        with self._write() as db:
            group = settlements() if callable(settlements) else settlements
            done = _settle.settle_group(db, group, time.time())
            if db.dialect.fresh_persons:  # in the settle's transaction: no fsync of its own
                self._fresh = _merges.keep_fresh_small(db, self._fresh, (o for s in group for o in s.outcomes))
        self._store.changed(settled=sum(len(s.outcomes) for s in group))  # after the commit: off the write lock
        return done

    def block(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> None:
        """409: the key needs manual recovery; never retried automatically (spec 4.4 rule 3)."""
        self._set_members(batch, "blocked", error, "blocked", attempts)

    def stall(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> None:
        """A non-retryable server error: members stay in_flight, the batch waits for `replay`."""
        self._set_members(batch, None, error, "stalled", attempts)

    def keep_open(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> None:
        """Retries ran out on a transient error: the batch stays open for the next run."""
        self._set_members(batch, None, error, "open", attempts)

    def fail(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> None:
        self._set_members(batch, "failed", error, "failed", attempts)

    def _set_members(
        self,
        batch: BatchWork,
        entry_state: EntryState | None,
        error: str,
        batch_state: BatchState,
        attempts: Sequence[Attempt],
    ) -> None:
        with self._write() as db:
            _settle.set_members(db, batch, entry_state, error, batch_state, attempts, time.time())

    def split(self, batch: BatchWork, error: str, attempts: Sequence[Attempt]) -> tuple[BatchWork, BatchWork]:
        """400 on a batch: two new batches (new keys: new member sets) to isolate the bad persons."""
        with self._write() as db:
            return _settle.split(db, batch, error, attempts, time.time())

    def record_attempts(self, batch: BatchWork, attempts: Sequence[Attempt]) -> None:
        with self._write() as db:
            _settle.insert_attempts(db, batch, attempts)

    # --- operator commands: their modules load when one is run, not with every ledger -------------

    def requeue_failed(self, before: float) -> int:
        """For `replay --include-failed`: entries that failed before `before` go back to pending
        with their same per-person keys (they travel in new batches, under new batch keys)."""
        from . import _operator

        with self._write() as db:
            return _operator.requeue_failed(db, before, time.time())

    def resolve(self, key: str, action: Literal["requeue", "dismiss"]) -> int:
        """Manual recovery of a blocked, failed, unknown or stalled batch or entry."""
        if action not in ("requeue", "dismiss"):
            raise ValueError("action is requeue or dismiss")
        from . import _operator

        with self._write() as db:
            return _operator.resolve(db, key, action, time.time())

    def is_empty(self) -> bool:
        """Nothing recorded yet: no entry, run, cursor, flow pass or pause."""
        from . import _copy

        with self._reading() as db:
            return _copy.is_empty(db)

    def copy_to(self, target: Ledger) -> dict[str, int]:
        """Every row of this ledger into `target`, which must be empty (`ledger copy`): one read of this
        one, one write transaction of the target. Returns the rows copied per table."""
        from . import _copy

        with self._reading() as source, target._write() as db:
            return _copy.copy(source, db, target.name)

    # --- the synthetic test flow ---------------------------------------------------------------

    def record_flow_pass(self, base_url: str, client_name: str, summary: dict[str, Any]) -> None:
        """`check --flow` passed every step against `base_url` as `client_name`; only a pass is kept."""
        with self._write() as db:
            _flows.record_pass(db, base_url, client_name, summary, time.time())

    def flow_passed(self, base_url: str, client_name: str | None = None) -> float | None:
        """When the flow last passed against this base URL as this client (any client: None), or None."""
        with self._reading() as db:
            return _flows.passed_at(db, base_url, client_name)

    # --- an operator's pauses (`capture-sync pause` / `resume`) ------------------------------

    def pause(self, source: str) -> float:
        """Pause a source's reading ("*": all reading and sending) until `resume`; returns since when."""
        with self._write() as db:
            return _pauses.pause(db, source, time.time())

    def resume(self, source: str | None = None) -> list[str]:
        """Lift the pause of `source` (None: every pause); returns the names that were paused."""
        with self._write() as db:
            return _pauses.resume(db, source)

    def paused(self) -> dict[str, float]:
        """Each paused source ("*": all) and since when (epoch seconds)."""
        with self._reading() as db:
            return _pauses.paused(db)

    # --- runs and views ----------------------------------------------------------------------

    def start_run(self, kind: str, note: str | None = None) -> int:
        """A new run row; until `finish_run`, every entry this ledger changes belongs to it. `note`
        says what an operator's run did (`ledger resolve KEY --requeue`)."""
        with self._write() as db:
            self._run_id = _runs.start(db, kind, time.time(), note)
        return self._run_id

    def finish_run(
        self,
        run_id: int,
        counts: dict[str, int],
        duration_s: float,
        exit_code: int,
        sources: Sequence[str] | None = None,
        reason: str | None = None,
    ) -> int:
        """Record how the run ended and why (`reason`, when it did not settle everything). An idle
        pass like the entry before it folds into that entry: the id returned is the one it is under."""
        if self._run_id == run_id:
            self._run_id = None
        with self._write() as db:
            return _runs.finish(db, run_id, counts, duration_s, exit_code, sources, time.time(), reason)

    # --- cursor control ----------------------------------------------------------------------

    def change_source_state(self, source: str, state: Any, action: str) -> Any:
        """Replace a source's cursor (None: read from the start next time), keeping the old one in the
        history with the run in hand; returns the old one."""
        with self._write() as db:
            return _states.change(db, source, state, action, self._run_id, time.time())
