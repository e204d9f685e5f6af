"""A ledger of schema v11 (a row per batch member in `batch_members`, `batch_id` cleared by a requeue
or a dismissal) migrates to v12 (a batch's members as an array on its row) on both engines: the same
`status`, lists, `runs show`, `ledger show` and stored states, and nothing sent again. Built through
the current code, then taken back to v11 (`as_version`), as the other migration tests do."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from connector.api.client import Attempt
from connector.ledger import BatchWork, Claim, Ledger, Mapped, Outcome
from connector.ledger._types import SETTLED, SettledState
from connector.ledger.schema import LedgerError

from .test_v9_migration import as_version, claimed, person_at, rejected, settled_counts, stored_states


def tried(work: BatchWork, times: int = 1) -> list[Attempt]:
    return [Attempt(work.operation, work.key, 1.7e9 + n, 0.01, 503) for n in range(times)]


def everything(ledger: Ledger, run: int) -> dict[str, object]:
    """What an operator sees: status, every list, the run's report, and `ledger show` of every entry and batch."""
    report = ledger.status()
    keys = [row[0] for row in ledger._read("SELECT key FROM entries ORDER BY id")]
    batches = [row[0] for row in ledger._read("SELECT key FROM batches ORDER BY id")]
    return {
        "status": (report.by_state, report.by_source, report.attention, report.batches_by_state),
        "lists": {s: [e.key for e in ledger.list_entries(s, limit=50)] for s in report.by_state},
        "run": ledger.run_entries(run),
        "shown": [ledger.show(key) for key in keys + batches],
    }


@dataclass(frozen=True)
class EveryState:
    """A ledger holding an entry in every stored state, and the batches an older release left in hand."""

    run: int
    open_: BatchWork  # kept open after a 503
    halves: tuple[BatchWork, BatchWork]  # the open halves of a split
    requeued: BatchWork  # blocked, then requeued by an operator
    stalled: BatchWork


def every_state(ledger: Ledger) -> EveryState:
    """Enqueue, claim and settle so that the ledger holds every stored state, open, stalled, split,
    requeued and settled batches, an operator's dismissal and a run."""
    run = ledger.start_run("sync")
    ledger.enqueue("crm", "m", [person_at(i) for i in range(1, 15)] + [rejected(20)], None)
    ledger.enqueue("crm", "m", [person_at(1, "B")], None)  # supersedes version 1, never sent
    settled = claimed(ledger, 3)  # persons 2, 3, 4
    states: list[SettledState] = ["captured", "duplicate", "captured"]
    outcomes = [
        Outcome(m.entry_id, st, person_id=f"p-{m.entry_id}") for m, st in zip(settled.members, states, strict=True)
    ]
    ledger.settle(settled, outcomes, tried(settled, 2))
    ledger.fail(failed := claimed(ledger, 2), "HTTP 422", tried(failed))  # 5, 6
    ledger.block(blocked := claimed(ledger, 1), "HTTP 409", tried(blocked))  # 7
    ledger.block(requeued := claimed(ledger, 1), "HTTP 409", tried(requeued))  # 8: requeued below
    ledger.stall(stalled := claimed(ledger, 1), "HTTP 500", tried(stalled))  # 9
    alone = claimed(ledger, 1)  # 10: unknown in a batch of its own, left for an operator
    ledger.settle(alone, [Outcome(alone.members[0].entry_id, "unknown", error="no evidence")], tried(alone))
    ledger.keep_open(open_ := claimed(ledger, 2), "HTTP 503", tried(open_))  # 11, 12
    to_split = ledger.claim(Claim(2, skip=frozenset({open_.id})))  # 13, 14
    assert to_split is not None
    first, second = ledger.split(to_split, "HTTP 400", tried(to_split))  # two open batches of one
    ledger.resolve(failed.members[0].key, "dismiss")
    ledger.resolve(requeued.key, "requeue")
    return EveryState(run, open_, (first, second), requeued, stalled)


def migrates_unseen(target: str | Path, version: int) -> None:
    """Build a ledger in every state, take it back to `version`, open it (migrating it): the same
    views and stored states, the settled counts as the entries say, and nothing sent again: a newer
    version of the requeued entry waits for it (it was sent: the CRM may hold it), one of never-sent
    Person 1 replaces it; the open batches come back under their keys and bytes, in order, then the
    requeued entry in the POST /person batch it was first offered in, then the one pending entry
    never sent; the stalled batch only for replay."""
    with Ledger(target) as ledger:
        st = every_state(ledger)
        before = everything(ledger, st.run)
    stored = stored_states(target)
    assert set(stored) == {*SETTLED, "pending", "unknown", "blocked"}
    as_version(target, version)
    assert stored_states(target) == stored

    with Ledger(target) as ledger:
        assert everything(ledger, st.run) == before
        assert stored_states(target) == stored
        shown, defined = settled_counts(ledger)
        assert shown == defined
        counts = ledger.enqueue("crm", "m", [person_at(8, "C"), person_at(1, "C")], None)
        assert (counts.enqueued, counts.superseded) == (2, 1)
        for again_of in (st.open_, *st.halves):
            again = ledger.claim(Claim(10))
            assert again is not None and (again.key, again.body) == (again_of.key, again_of.body)
            ledger.settle(again, [Outcome(m.entry_id, "captured") for m in again.members], [])
        again = ledger.claim(Claim(10))
        assert again is not None and (again.key, again.body) == (st.requeued.key, st.requeued.body)
        fresh = ledger.claim(Claim(10, skip=frozenset({again.id})))
        assert fresh is not None and fresh.operation == "bulk"
        sent = [(json.loads(m.payload)["name"], json.loads(m.payload)["company"]) for m in fresh.members]
        assert sent == [("Person 1", "C")]
        assert ledger.claim(Claim(10, skip=frozenset({again.id, fresh.id}))) is None
        replayed = ledger.claim(Claim(10, skip=frozenset({again.id, fresh.id}), include_stalled=True))
        assert replayed is not None and (replayed.key, replayed.body) == (st.stalled.key, st.stalled.body)


def test_a_version_11_ledger_migrates_with_the_same_views_and_sends_nothing_again(ledger_target: str | Path) -> None:
    migrates_unseen(ledger_target, 11)


def test_a_version_11_postgresql_ledger_is_not_migrated_while_an_older_daemon_leads_it(
    postgres_ledger_url: str,
) -> None:
    """Its claim would write members into `batch_members`, which v12 drops."""
    with Ledger(postgres_ledger_url) as ledger:
        ledger.enqueue("crm", "m", [person_at(1)], None)
        claimed(ledger, 1)
        assert ledger.lease("old-host:41", 60).take() is not None
    as_version(postgres_ledger_url, 11)
    with pytest.raises(LedgerError, match="while old-host:41, a daemon of an older capture-sync, leads"):
        Ledger(postgres_ledger_url)
    import psycopg

    with psycopg.connect(postgres_ledger_url, autocommit=True) as pg:
        assert pg.execute("SELECT to_regclass('batch_members') IS NOT NULL").fetchone() == (True,)  # nothing changed
        pg.execute("UPDATE capture_sync_ha.leases SET expires_at = now()")  # the old daemon stopped
    with Ledger(postgres_ledger_url) as ledger:
        assert ledger.status().by_state["in_flight"] == 1


def test_a_version_11_postgresql_ledger_is_not_migrated_while_an_older_one_shot_sync_writes_it(
    postgres_ledger_url: str,
) -> None:
    import psycopg

    from connector.ledger._pg_schema import DAEMON, lock_key

    with Ledger(postgres_ledger_url) as ledger:
        ledger.enqueue("crm", "m", [person_at(1)], None)
        claimed(ledger, 1)
    as_version(postgres_ledger_url, 11)
    with psycopg.connect(postgres_ledger_url, autocommit=True) as old_sync:
        old_sync.execute("SELECT pg_advisory_lock(%s, %s)", lock_key(DAEMON, "public"))
        with pytest.raises(LedgerError, match=r"while a capture-sync process of an older release .* let the command"):
            Ledger(postgres_ledger_url)
        assert old_sync.execute("SELECT to_regclass('batch_members') IS NOT NULL").fetchone() == (True,)
    with Ledger(postgres_ledger_url) as ledger:
        assert ledger.status().by_state["in_flight"] == 1


# An older daemon on a v11 ledger would write members into the table v12 drops; on a v12 one its
# `ledger show` and resolve would read the whole table, which v13 no longer indexes by key; on a v13
# one its settle would write no `person_tag`, by which v14 finds merges.
@pytest.mark.parametrize("version", [11, 12, 13])
def test_an_older_sqlite_ledger_is_not_migrated_while_an_older_daemon_runs_on_it(tmp_path: Path, version: int) -> None:
    import fcntl
    import sqlite3

    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as ledger:
        ledger.enqueue("crm", "m", [person_at(1)], None)
        claimed(ledger, 1)
    as_version(path, version)
    fd = os.open(tmp_path / "ledger.sqlite3.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the older daemon, in another process
    try:
        with pytest.raises(LedgerError, match=r"while a capture-sync process of an older release"):
            Ledger(path)
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA user_version").fetchone() == (version,)  # nothing changed
    finally:
        os.close(fd)
    with Ledger(path) as ledger:
        assert ledger.status().by_state["in_flight"] == 1


def ordered(i: int, order: int, company: str = "A", raw: str | None = None) -> Mapped:
    """A version at `order` in the source's order, mapped from a source record of digest `raw`."""
    return replace(person_at(i, company), order=order, raw_digest=raw or f"raw-{i}-{company}")


def test_records_pointers_read_the_same_after_v12_as_before(ledger_target: str | Path, tmp_path: Path) -> None:
    """v11 kept every record's pointer (newest version, highest place read, raw digest) in `records`;
    v12 keeps only those that differ from the record's newest row. A migrated ledger and one that was
    never migrated decide the same of every later read: unchanged, older, a new version, a revert."""
    history = [
        [ordered(1, 10), ordered(2, 10), ordered(3, 10), ordered(4, 10)],
        # 1 read again further on, 2 read below its place, 3 rejected
        [ordered(1, 20), ordered(2, 5, "B"), replace(rejected(3), order=20, raw_digest="raw-3-bad")],
        [ordered(3, 30, "A", raw="raw-3-A")],  # 3 back to what the CRM holds: no new key
    ]
    later = [
        ordered(1, 15, "B"),  # below 1's place (20): older
        ordered(1, 25),  # unchanged, further on
        ordered(2, 11, "B"),  # a new version (2's place is 10)
        ordered(3, 31, "A", raw="raw-3-A"),  # unchanged (as the revert left it)
        ordered(4, 10, "A", raw="another-spelling"),  # unchanged, another raw digest
    ]

    def play(target: str | Path, migrate: bool) -> tuple[object, ...]:
        with Ledger(target) as ledger:
            for chunk in history:
                ledger.enqueue("crm", "m", chunk, None)
                work = ledger.claim(Claim(10))
                if work is not None:
                    ledger.settle(work, [Outcome(m.entry_id, "captured") for m in work.members], [])
            if not migrate:  # the exceptions alone: 1 read further on, 2 read below its place, 3 reverted
                assert ledger._read("SELECT record_id FROM records ORDER BY 1") == [("1",), ("2",), ("3",)]
        if migrate:
            as_version(target, 11)
        with Ledger(target) as ledger:
            ids = [str(i) for i in range(1, 6)]
            before = (ledger.raw_digests("crm", ids), ledger.unseen_records("crm", ids))
            unchanged = [ledger.is_unchanged("crm", item) for item in later]
            counts = ledger.enqueue("crm", "m", later, None)
            work = ledger.claim(Claim(10))
            sent = [] if work is None else [json.loads(m.payload) for m in work.members]
            return (
                before,
                unchanged,
                (counts.enqueued, counts.unchanged, counts.older),
                sent,
                ledger.raw_digests("crm", ids),
            )

    control = play(tmp_path / "never-migrated.sqlite3", migrate=False)
    assert play(ledger_target, migrate=True) == control
    assert control[2] == (1, 3, 1)
