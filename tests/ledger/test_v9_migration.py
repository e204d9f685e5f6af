"""Ledgers of schema v8 (the indexes before issue 24), v9 (in flight stored on each entry) and v10
(the settled states counted from an index) migrate to the current schema on both engines without
re-sending anything: `status` gives the same answers, the batch in flight comes back with its key and
body, the stalled one only for `replay`, and the next new batch holds only what was pending."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from connector.ledger import SCHEMA_VERSION, BatchWork, Claim, Ledger, Mapped, Outcome
from connector.ledger._migrations import V9_INDEXES
from connector.ledger._types import SETTLED
from connector.ledger.schema import LedgerError

# What v9 replaced, as v1, v4 and v5 created it on SQLite and _pg_schema on PostgreSQL.
V8_CREATE = (
    "CREATE INDEX idx_entries_state_id ON entries (state, id)",
    "CREATE INDEX entries_record_state ON entries (source, record_id, state)",
    "CREATE INDEX entries_run_state ON entries (run_id, state)",
    "CREATE INDEX entries_source_state ON entries (source, state)",
)
V9_NAMES = ("entries_to_send", "entries_settled", "entries_run")
# What v11 replaced: v9's entries_to_send, entries_settled and entries_run, v5's entries_live_record.
V10_CREATE = (
    *(s for s in V9_INDEXES if s.startswith("CREATE")),
    "CREATE INDEX entries_live_record ON entries (source, record_id, state) "
    "WHERE state IN ('pending','in_flight','unknown','blocked')",
)
V11_NAMES = ("entries_live", "entries_rare", "batches_run")


def person(i: int) -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"p{i}@example.com"}))


def claimed(ledger: Ledger, size: int) -> BatchWork:
    work = ledger.claim(Claim(size))
    assert work is not None and len(work.members) == size
    return work


def undo_v9(execute: Callable[[str], Any]) -> None:
    """v8's indexes in place of v9's (SQLite's WITHOUT ROWID tables stay: v9 builds them again)."""
    for statement in [f"DROP INDEX {name}" for name in V9_NAMES] + list(V8_CREATE):
        execute(statement)


def undo_v11(execute: Callable[[str], Any]) -> None:
    """v10's indexes in place of v11's, no counters of the settled states, no run on a batch."""
    drop = ["DROP TABLE settled_counts", "ALTER TABLE batches DROP COLUMN run_id"]
    for statement in [f"DROP INDEX {name}" for name in V11_NAMES] + drop + list(V10_CREATE):
        execute(statement)


def undo_v10(execute: Callable[[str], Any]) -> None:
    """In flight stored on each entry, as claim wrote it before v10: the members of open and stalled batches."""
    execute(
        "UPDATE entries SET state = 'in_flight', batch_id = (SELECT max(m.batch_id) FROM batch_members m "
        "WHERE m.entry_id = entries.id) WHERE state = 'pending' AND EXISTS (SELECT 1 FROM batch_members m "
        "JOIN batches b ON b.id = m.batch_id WHERE m.entry_id = entries.id AND b.state IN ('open','stalled'))"
    )


def undo_v12(execute: Callable[[str], Any], engine: str) -> None:
    """A row per member in batch_members in place of the batches' arrays, a `records` row per record;
    a requeued or dismissed entry names no batch (v11 cleared `batch_id` there: the pending, superseded and dismissed entries
    a batch held are those, as claim writes no entry)."""
    if engine == "sqlite":
        rows = "SELECT b.id, m.key, m.value FROM batches b CROSS JOIN json_each(b.members) AS m"
        execute(
            "CREATE TABLE batch_members (batch_id INTEGER, position INTEGER, entry_id INTEGER, "
            "PRIMARY KEY (batch_id, position)) WITHOUT ROWID"
        )
    else:
        rows = "SELECT b.id, m.key - 1, m.value FROM batches b CROSS JOIN unnest(b.members) WITH ORDINALITY AS m(value, key)"
        execute(
            "CREATE TABLE batch_members (batch_id bigint, position bigint, entry_id bigint, PRIMARY KEY (batch_id, position))"
        )
    for statement in (
        f"INSERT INTO batch_members (batch_id, position, entry_id) {rows}",
        "CREATE INDEX idx_batch_members_entry_id ON batch_members (entry_id)",
        "ALTER TABLE batches DROP COLUMN members",
        "UPDATE entries SET batch_id = NULL WHERE state IN ('pending', 'superseded', 'dismissed')",
        # every record's pointer in `records`, where v12 keeps only those that differ from its newest row
        "INSERT INTO records (source, record_id, entry_id, source_order, raw_digest) "
        "SELECT e.source, e.record_id, e.id, e.source_order, e.raw_digest FROM entries e "
        "WHERE e.id IN (SELECT max(id) FROM entries GROUP BY source, record_id) "
        "AND NOT EXISTS (SELECT 1 FROM records r WHERE r.source = e.source AND r.record_id = e.record_id)",
        "ALTER TABLE entries DROP COLUMN raw_digest",
    ):
        execute(statement)


def undo_v13(execute: Callable[[str], Any]) -> None:
    """The unique index on the whole key in place of v13's on its prefix; no index of the stuck
    versions, no highest entry id on a batch, no stored identity."""
    for statement in (
        "DROP INDEX entries_key_prefix",
        "DROP INDEX entries_stuck",
        "CREATE UNIQUE INDEX idx_entries_key ON entries (key)",
        "ALTER TABLE batches DROP COLUMN top_entry",
        "DROP TABLE ledger_identity",
    ):
        execute(statement)


def undo_v14(execute: Callable[[str], Any]) -> None:
    """entries_person on the whole person id, no `person_tag`."""
    for statement in (
        "DROP INDEX entries_person",
        "ALTER TABLE entries DROP COLUMN person_tag",
        "CREATE INDEX entries_person ON entries (person_id) WHERE person_id IS NOT NULL",
    ):
        execute(statement)


def undo_v15(execute: Callable[[str], Any]) -> None:
    """Every tag in `person_tag`, no `fresh_tag`."""
    for statement in (
        "UPDATE entries SET person_tag = fresh_tag WHERE fresh_tag IS NOT NULL",
        "DROP INDEX entries_person_fresh",
        "ALTER TABLE entries DROP COLUMN fresh_tag",
    ):
        execute(statement)


def as_version(target: str | Path, version: int, *extra: str) -> None:
    """The ledger as the release of `version` left it (then the `extra` statements), and saying so."""
    older = [undo_v11] if version < 11 else []
    older += ([undo_v10] if version < 10 else []) + ([undo_v9] if version < 9 else [])
    if isinstance(target, Path):
        conn = sqlite3.connect(target, isolation_level=None)
        undo_v15(conn.execute)
        if version < 14:
            undo_v14(conn.execute)
        if version < 13:
            undo_v13(conn.execute)
        if version < 12:
            undo_v12(conn.execute, "sqlite")
        for step in older:
            step(conn.execute)
        for statement in extra:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.close()
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as pg:
        undo_v15(pg.execute)
        if version < 14:
            undo_v14(pg.execute)
        if version < 13:
            undo_v13(pg.execute)
        if version < 12:
            undo_v12(pg.execute, "postgresql")
        for step in older:
            step(pg.execute)
        for statement in extra:
            pg.execute(statement)
        pg.execute(f"UPDATE schema_version SET version = {version}")


def stored_states(target: str | Path) -> dict[str, int]:
    sql = "SELECT state, count(*) FROM entries GROUP BY state"
    if isinstance(target, Path):
        with closing(sqlite3.connect(target)) as conn:
            return dict(conn.execute(sql).fetchall())
    import psycopg

    with psycopg.connect(target, autocommit=True) as pg:
        return dict(pg.execute(sql).fetchall())


def indexes(target: str | Path) -> set[str]:
    if isinstance(target, Path):
        with sqlite3.connect(target) as conn:
            return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    import psycopg

    with psycopg.connect(target, autocommit=True) as pg:
        return {row[0] for row in pg.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")}


def test_v9_replaces_exactly_the_indexes_v8_had() -> None:
    dropped = {s.split()[-1] for s in V9_INDEXES if s.startswith("DROP")}
    created = {s.split()[2] for s in V9_INDEXES if s.startswith("CREATE")}
    assert dropped == {s.split()[2] for s in V8_CREATE} and created == set(V9_NAMES)


def test_a_version_8_ledger_migrates_without_resending_anything(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        ledger.start_run("sync")
        ledger.enqueue("crm", "m", [person(i) for i in range(1, 7)], {"offset": 6})
        captured = claimed(ledger, 1)
        ledger.settle(captured, [Outcome(captured.members[0].entry_id, "captured", person_id="p-1")], [])
        stalled = claimed(ledger, 1)
        ledger.stall(stalled, "HTTP 500", [])
        blocked = claimed(ledger, 1)
        ledger.block(blocked, "HTTP 409", [])
        in_flight = claimed(ledger, 2)
        ledger.keep_open(in_flight, "HTTP 503", [])
        before = ledger.status()
        unsettled, attention = ledger.unsettled_count(), ledger.blocked_count()
    as_version(ledger_target, 8)
    assert not set(V9_NAMES) & indexes(ledger_target)

    with Ledger(ledger_target) as ledger:
        assert set(V11_NAMES) <= indexes(ledger_target) and "entries_source_state" not in indexes(ledger_target)
        after = ledger.status()
        assert (after.by_state, after.by_source, after.attention) == (
            before.by_state,
            before.by_source,
            before.attention,
        )
        assert after.by_state["captured"] == after.by_state["blocked"] == 1 and after.by_state["pending"] == 1
        assert after.attention.stalled == 1 and after.by_state["in_flight"] == 3
        assert (ledger.unsettled_count(), ledger.blocked_count()) == (unsettled, attention)
        # The batch in flight first, with its own key and body: the server sees the same request again.
        again = ledger.claim(Claim(10))
        assert again is not None and (again.key, again.body) == (in_flight.key, in_flight.body)
        ledger.settle(again, [Outcome(m.entry_id, "captured", person_id=f"p-{m.entry_id}") for m in again.members], [])
        # Then only what was pending: nothing captured, blocked or stalled goes out again.
        fresh = ledger.claim(Claim(10, skip=frozenset()))
        assert fresh is not None and [json.loads(m.payload)["name"] for m in fresh.members] == ["Person 6"]
        replayed = ledger.claim(Claim(10, skip=frozenset({fresh.id}), include_stalled=True))
        assert replayed is not None and (replayed.key, replayed.body) == (stalled.key, stalled.body)
    if isinstance(ledger_target, Path):
        with sqlite3.connect(ledger_target) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_version_9_ledger_derives_in_flight_from_its_batches(ledger_target: str | Path) -> None:
    """v10 turns the stored in-flight members of open and stalled batches pending (in flight since
    derived from the batch); an entry stored in flight in no such batch keeps its state, never sent."""
    with Ledger(ledger_target) as ledger:
        ledger.start_run("sync")
        ledger.enqueue("crm", "m", [person(i) for i in range(1, 7)], {"offset": 6})
        stalled = claimed(ledger, 1)
        ledger.stall(stalled, "HTTP 500", [])
        open_ = claimed(ledger, 2)
        ledger.keep_open(open_, "HTTP 503", [])
    # Person 6 in flight in no batch: a state v9 could not reach, kept as it was.
    as_version(ledger_target, 9, "UPDATE entries SET state = 'in_flight' WHERE record_id = '6'")
    assert stored_states(ledger_target) == {"in_flight": 4, "pending": 2}

    with Ledger(ledger_target) as ledger:
        assert stored_states(ledger_target) == {"in_flight": 1, "pending": 5}
        report = ledger.status()
        assert {k: v for k, v in report.by_state.items() if v} == {"in_flight": 4, "pending": 2}
        assert report.attention.stalled == 1 and ledger.unsettled_count() == 6
        assert [e.state for e in ledger.list_entries("in_flight", limit=10)] == ["in_flight"] * 4
        again = ledger.claim(Claim(10))
        assert again is not None and (again.key, again.body) == (open_.key, open_.body)
        ledger.settle(again, [Outcome(m.entry_id, "captured", person_id=f"p-{m.entry_id}") for m in again.members], [])
        fresh = ledger.claim(Claim(10, skip=frozenset()))
        assert fresh is not None and [json.loads(m.payload)["name"] for m in fresh.members] == ["Person 4", "Person 5"]
        assert ledger.claim(Claim(10, skip=frozenset({fresh.id}))) is None
        replayed = ledger.claim(Claim(10, skip=frozenset({fresh.id}), include_stalled=True))
        assert replayed is not None and (replayed.key, replayed.body) == (stalled.key, stalled.body)


def test_a_version_9_postgresql_ledger_is_not_migrated_while_an_older_daemon_leads_it(postgres_ledger_url: str) -> None:
    """Its in-flight entries would turn pending under it, and its code would claim them again."""
    with Ledger(postgres_ledger_url) as ledger:
        ledger.enqueue("crm", "m", [person(1)], None)
        claimed(ledger, 1)
        assert ledger.lease("old-host:41", 60).take() is not None
    as_version(postgres_ledger_url, 9)
    with pytest.raises(LedgerError, match="while old-host:41, a daemon of an older capture-sync, leads") as refused:
        Ledger(postgres_ledger_url)
    assert "stop every daemon of that integration" in str(refused.value)
    assert stored_states(postgres_ledger_url) == {"in_flight": 1}  # nothing changed
    import psycopg

    with psycopg.connect(postgres_ledger_url, autocommit=True) as pg:  # the old daemon stopped: its lease released
        pg.execute("UPDATE capture_sync_ha.leases SET expires_at = now()")
    with Ledger(postgres_ledger_url) as ledger:
        assert ledger.status().by_state["in_flight"] == 1
    assert stored_states(postgres_ledger_url) == {"pending": 1}


def person_at(i: int, company: str = "A") -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"p{i}@example.com", "company": company}))


def rejected(i: int) -> Mapped:
    return Mapped(str(i), raw={"id": str(i)}, reasons=("no email",))


def settled_counts(ledger: Ledger) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """The settled states' counts `status` shows (v11: from their counters), and the entries' own."""
    marks = ",".join(f"'{s}'" for s in SETTLED)
    rows = ledger._read(f"SELECT source, state, count(*) FROM entries WHERE state IN ({marks}) GROUP BY source, state")
    shown = {
        (src, s): n for src, counts in ledger.status().by_source.items() for s, n in counts.items() if s in SETTLED
    }
    return shown, {(src, s): n for src, s, n in rows}


def test_a_version_10_ledger_migrates_with_the_same_counts_and_sends_nothing_again(ledger_target: str | Path) -> None:
    """Entries in every state, on both engines: the same status, lists and stored states after v11,
    and only what was never settled is sent again."""
    with Ledger(ledger_target) as ledger:
        run = ledger.start_run("sync")
        ledger.enqueue("crm", "m", [person_at(i) for i in range(1, 13)] + [rejected(20)], None)
        ledger.enqueue("crm", "m", [person_at(1, "B")], None)  # supersedes version 1, never sent
        settled = claimed(ledger, 3)
        states = ["captured", "duplicate", "captured"]
        ledger.settle(settled, [Outcome(m.entry_id, s) for m, s in zip(settled.members, states, strict=True)], [])  # type: ignore[arg-type]
        ledger.fail(claimed(ledger, 2), "HTTP 422", [])
        ledger.block(claimed(ledger, 1), "HTTP 409", [])
        ledger.stall(stalled := claimed(ledger, 1), "HTTP 500", [])
        alone = claimed(ledger, 1)  # unknown in a batch of its own: left for an operator
        ledger.settle(alone, [Outcome(alone.members[0].entry_id, "unknown", error="no evidence")], [])
        ledger.keep_open(open_ := claimed(ledger, 2), "HTTP 503", [])
        ledger.resolve(ledger.list_entries("failed", limit=1)[0].key, "dismiss")
        before = ledger.status()
        listed = {s: [e.key for e in ledger.list_entries(s, limit=50)] for s in before.by_state}
        reported = ledger.run_entries(run)
    stored = stored_states(ledger_target)
    assert set(stored) == {*SETTLED, "pending", "unknown", "blocked"}
    as_version(ledger_target, 10)

    with Ledger(ledger_target) as ledger:
        after = ledger.status()
        assert (after.by_state, after.by_source, after.attention) == (
            before.by_state,
            before.by_source,
            before.attention,
        )
        assert after.by_state["in_flight"] == 3 and after.attention.unresolved == 1
        assert {s: [e.key for e in ledger.list_entries(s, limit=50)] for s in after.by_state} == listed
        assert stored_states(ledger_target) == stored
        assert ledger.run_entries(run) == reported and len(reported) == 14
        # The open batch again under its key and bytes; then only the pending entries never sent; the
        # stalled batch only for replay: nothing settled, blocked, unknown or rejected goes out again.
        again = ledger.claim(Claim(10))
        assert again is not None and (again.key, again.body) == (open_.key, open_.body)
        ledger.settle(again, [Outcome(m.entry_id, "captured") for m in again.members], [])
        fresh = ledger.claim(Claim(10))
        assert fresh is not None
        assert [json.loads(m.payload)["name"] for m in fresh.members] == ["Person 12", "Person 1"]
        replayed = ledger.claim(Claim(10, skip=frozenset({fresh.id}), include_stalled=True))
        assert replayed is not None and (replayed.key, replayed.body) == (stalled.key, stalled.body)
        shown, defined = settled_counts(ledger)
        assert shown == defined


def test_a_version_10_postgresql_ledger_is_not_migrated_while_an_older_daemon_leads_it(
    postgres_ledger_url: str,
) -> None:
    """Its code would settle entries without adding them to the counters `status` reads."""
    with Ledger(postgres_ledger_url) as ledger:
        ledger.enqueue("crm", "m", [person_at(1), rejected(2)], None)
        assert ledger.lease("old-host:41", 60).take() is not None
    as_version(postgres_ledger_url, 10)
    with pytest.raises(LedgerError, match="while old-host:41, a daemon of an older capture-sync, leads"):
        Ledger(postgres_ledger_url)
    import psycopg

    with psycopg.connect(postgres_ledger_url, autocommit=True) as pg:
        assert pg.execute("SELECT to_regclass('settled_counts')").fetchone() == (None,)  # nothing changed
        pg.execute("UPDATE capture_sync_ha.leases SET expires_at = now()")  # the old daemon stopped
    with Ledger(postgres_ledger_url) as ledger:
        assert settled_counts(ledger) == ({("crm", "rejected"): 1},) * 2


def test_a_version_10_postgresql_ledger_is_not_migrated_while_an_older_one_shot_sync_writes_it(
    postgres_ledger_url: str,
) -> None:
    """A sync or replay takes no lease, only the integration's daemon lock: the migration waits for it too."""
    import psycopg

    from connector.ledger._pg_schema import DAEMON, lock_key

    with Ledger(postgres_ledger_url) as ledger:
        ledger.enqueue("crm", "m", [person_at(1), rejected(2)], None)
    as_version(postgres_ledger_url, 10)
    with psycopg.connect(postgres_ledger_url, autocommit=True) as old_sync:  # the older release's one-shot sync
        old_sync.execute("SELECT pg_advisory_lock(%s, %s)", lock_key(DAEMON, "public"))
        with pytest.raises(LedgerError, match=r"while a capture-sync process of an older release .* let the command"):
            Ledger(postgres_ledger_url)
        assert old_sync.execute("SELECT to_regclass('settled_counts')").fetchone() == (None,)  # nothing changed
    with Ledger(postgres_ledger_url) as ledger:  # it finished: the lock went with its session
        assert settled_counts(ledger) == ({("crm", "rejected"): 1},) * 2


def test_a_version_10_sqlite_ledger_is_not_migrated_while_an_older_daemon_runs_on_it(tmp_path: Path) -> None:
    """Its code would settle entries without adding them to the counters `status` reads."""
    import fcntl

    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as ledger:
        ledger.enqueue("crm", "m", [person_at(1), rejected(2)], None)
    as_version(path, 10)
    fd = os.open(tmp_path / "ledger.sqlite3.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the older daemon, in another process: a lock of its own
    try:
        with pytest.raises(
            LedgerError,
            match=r"while a capture-sync process of an older release \(a daemon, or a sync or replay\) runs on it",
        ):
            Ledger(path)
    finally:
        os.close(fd)  # the older daemon stopped
    with Ledger(path) as ledger:
        assert settled_counts(ledger) == ({("crm", "rejected"): 1},) * 2
