"""A ledger of schema v12 (a unique index on entries' whole keys) migrates to v13 (the index on a
prefix of the key), and one of v13 (entries_person on the whole person id) to v14 (on its digest,
`person_tag`), on both engines: the same `status`, lists, `runs show`, `ledger show` and stored
states, and nothing sent again (`test_v12_migration.migrates_unseen`); every entry is still found by
its key, an entry's batches are found by entry id whatever the clock did, and an older process on
the ledger holds the migration back."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from connector.api.client import Attempt
from connector.ledger import SCHEMA_VERSION, Ledger, Outcome, _pg_schema
from connector.ledger._merges import person_tag
from connector.ledger.schema import LedgerError
from connector.ledger.views import EntryDetail

from .test_v9_migration import as_version, claimed, indexes, person_at, stored_states
from .test_v12_migration import migrates_unseen


@pytest.mark.parametrize("version", [12, 13])
def test_an_older_ledger_migrates_with_the_same_views_and_sends_nothing_again(
    ledger_target: str | Path, version: int
) -> None:
    migrates_unseen(ledger_target, version)
    assert {"entries_key_prefix", "entries_stuck", "entries_person"} <= indexes(ledger_target)
    assert "idx_entries_key" not in indexes(ledger_target)
    with Ledger(ledger_target) as ledger:  # every person id a settle stored carries its tag
        assert ledger._read("SELECT count(*) FROM entries WHERE person_id IS NOT NULL AND person_tag IS NULL") == [(0,)]
        assert ledger._read("SELECT count(*) FROM entries WHERE person_tag IS NOT NULL")[0][0] > 0


def test_a_ledger_keeps_its_identity_through_v13(ledger_target: str | Path) -> None:
    """v13 stores a ledger's identity: one with entries keeps the one v12 derived from its first
    entry (the rejects feed's positions are kept by it), and an empty one gets a new one."""
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person_at(1), person_at(2)], None)
        (key, created_at), _ = ledger._read("SELECT key, created_at FROM entries ORDER BY id")
    as_version(ledger_target, 12)
    with Ledger(ledger_target) as ledger:  # what v12's `identity()` said
        assert ledger.identity() == hashlib.sha256(f"{key} {float(created_at)!r}".encode()).hexdigest()[:16]


def test_an_empty_ledger_is_given_an_identity_of_its_own_by_v13(ledger_target: str | Path) -> None:
    with Ledger(ledger_target):
        pass
    as_version(ledger_target, 12)
    with Ledger(ledger_target) as ledger:
        identity = ledger.identity()
    with Ledger(ledger_target) as ledger:
        assert ledger.identity() == identity  # stored: the same at every open
    assert len(identity) == 16 and int(identity, 16) >= 0


def test_a_first_entry_without_a_time_does_not_stop_the_ledger_opening(tmp_path: Path) -> None:
    """A hand-edited row: v13's migration derives the identity from the first entry's time."""
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as ledger:
        ledger.enqueue("crm", "m", [person_at(1)], None)
    as_version(path, 12)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE entries SET created_at = NULL")
    with Ledger(path) as ledger:
        assert len(ledger.identity()) == 16


def test_entries_sharing_a_key_prefix_are_told_apart_by_the_whole_key(ledger_target: str | Path) -> None:
    """Two keys with the same 8 characters after "p-" (one in some 4 billion pairs by chance): each
    `ledger show` and resolve finds its own entry."""
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person_at(1), person_at(2)], None)
        ledger.fail(claimed(ledger, 2), "HTTP 422", [])
        (first,), (second,) = ledger._read("SELECT key FROM entries ORDER BY id")
        twin = first[:10] + second[10:]  # the first's prefix, the second's rest
        with ledger._write() as db:
            db.execute("UPDATE entries SET key = ? WHERE key = ?", (twin, second))
        assert ledger.show(first).entry.record_id == "1"  # type: ignore[union-attr]
        assert ledger.show(twin).entry.record_id == "2"  # type: ignore[union-attr]
        with pytest.raises(KeyError):
            ledger.show(first[:10] + "0" * 32)
        assert ledger.resolve(twin, "dismiss") == 1
        assert [e.record_id for e in ledger.list_entries("dismissed")] == ["2"]
        assert [e.record_id for e in ledger.list_entries("failed")] == ["1"]


def test_an_entrys_batches_are_found_after_the_clock_stepped_back(
    ledger_target: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ledger show` and `runs show` list every batch and request that carried an entry, also when the
    clock was set back an hour between its enqueue and its claim (v12 searched batches by time, with
    a 10-minute margin, and missed the first one)."""
    with Ledger(ledger_target) as ledger:
        run = ledger.start_run("sync")
        ledger.enqueue("crm", "m", [person_at(1), person_at(2)], None)
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() - 3600)
        ledger.keep_open(first := claimed(ledger, 2), "HTTP 503", [Attempt("bulk", "k", 1.7e9, 0.01, 503)])
        half, _ = ledger.split(first, "HTTP 400", [Attempt("bulk", first.key, 1.7e9, 0.01, 400)])
        ledger.settle(half, [Outcome(m.entry_id, "captured") for m in half.members], [])
        shown = ledger.show(half.members[0].key)
        assert isinstance(shown, EntryDetail) and shown.batches == [first.key, half.key]
        assert [a.status_code for a in shown.attempts] == [503, 400]
        assert [e.attempts for e in ledger.run_entries(run, "captured")] == [2]


@pytest.mark.parametrize("version", [12, 13])
def test_an_older_postgresql_ledger_is_not_migrated_while_an_older_daemon_leads_it(
    postgres_ledger_url: str, version: int
) -> None:
    import psycopg

    with Ledger(postgres_ledger_url) as ledger:
        ledger.enqueue("crm", "m", [person_at(1)], None)
        assert ledger.lease("old-host:41", 60).take() is not None
    as_version(postgres_ledger_url, version)
    with pytest.raises(LedgerError, match="while old-host:41, a daemon of an older capture-sync, leads"):
        Ledger(postgres_ledger_url)
    with psycopg.connect(postgres_ledger_url, autocommit=True) as pg:
        assert pg.execute("SELECT version FROM schema_version").fetchone() == (version,)  # nothing changed
        pg.execute("UPDATE capture_sync_ha.leases SET expires_at = now()")  # the old daemon stopped
    with Ledger(postgres_ledger_url) as ledger:
        assert ledger.status().by_state["pending"] == 1


def test_a_v14_postgresql_ledger_migrates_while_an_older_daemon_leads_it(postgres_ledger_url: str) -> None:
    """v15 changes nothing a v14 daemon reads or writes on PostgreSQL (its settle writes `person_tag`,
    as v15's does there): the upgrade needs no stop, unlike those before it."""
    import psycopg

    with Ledger(postgres_ledger_url) as ledger:
        ledger.enqueue("crm", "m", [person_at(1)], None)
        assert ledger.lease("old-host:41", 60).take() is not None
    as_version(postgres_ledger_url, 14)
    with Ledger(postgres_ledger_url) as ledger:
        assert ledger.status().by_state["pending"] == 1
    with psycopg.connect(postgres_ledger_url, autocommit=True) as pg:
        assert pg.execute("SELECT version FROM schema_version").fetchone() == (15,)


def a_v13_ledger_with_captures(url: str, captured: int) -> dict[int, str]:
    """A v13 PostgreSQL ledger of `captured` captured entries (each with a person id of the CRM's
    shape) and one pending: the captured entries' person ids by entry id."""
    with Ledger(url) as ledger:
        ledger.enqueue("crm", "m", [person_at(i) for i in range(1, captured + 2)], None)
        work = claimed(ledger, captured)
        people = {m.entry_id: f"{m.entry_id:08d}-4b1e-4c2a-9f3d-{m.entry_id * 7919:012d}" for m in work.members}
        ledger.settle(work, [Outcome(e, "captured", person_id=p) for e, p in people.items()], [])
    as_version(url, 13)
    return people


def test_a_postgresql_ledger_of_more_captures_than_one_chunk_is_tagged_chunk_by_chunk(
    postgres_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v14's migration reads the person ids `V14_CHUNK` at a time (not the whole table into the
    migrating process) and tags each chunk in one UPDATE: every captured entry gets its own tag,
    the one never sent none."""
    import psycopg

    people = a_v13_ledger_with_captures(postgres_ledger_url, 30)
    chunks: list[list[int]] = []
    set_tags = _pg_schema._set_person_tags

    def counted(conn: psycopg.Connection[Any], chunk: list[tuple[int, str]]) -> None:
        chunks.append([entry_id for entry_id, _ in chunk])
        set_tags(conn, chunk)

    monkeypatch.setattr(_pg_schema, "V14_CHUNK", 7)
    monkeypatch.setattr(_pg_schema, "_set_person_tags", counted)
    with Ledger(postgres_ledger_url) as ledger:
        assert [len(chunk) for chunk in chunks] == [7, 7, 7, 7, 2]
        assert sorted(e for chunk in chunks for e in chunk) == sorted(people)
        rows = ledger._read("SELECT id, person_id, person_tag FROM entries ORDER BY id")
    assert {e: (p, t) for e, p, t in rows if p is not None} == {e: (p, person_tag(p)) for e, p in people.items()}
    assert [(p, t) for _, p, t in rows if p is None] == [(None, None)]
    assert "entries_person" in indexes(postgres_ledger_url)
    with psycopg.connect(postgres_ledger_url, autocommit=True) as pg:
        assert pg.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)


def test_a_postgresql_v14_migration_failing_in_a_later_chunk_leaves_the_ledger_at_v13(
    postgres_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunks are one transaction: the ledger is migrated whole or not at all."""
    import psycopg

    a_v13_ledger_with_captures(postgres_ledger_url, 30)
    stored = stored_states(postgres_ledger_url)
    set_tags = _pg_schema._set_person_tags
    chunks = 0

    def failing(conn: psycopg.Connection[Any], chunk: list[tuple[int, str]]) -> None:
        nonlocal chunks
        chunks += 1
        if chunks == 3:
            raise RuntimeError("the migrating process stopped")
        set_tags(conn, chunk)

    monkeypatch.setattr(_pg_schema, "V14_CHUNK", 7)
    monkeypatch.setattr(_pg_schema, "_set_person_tags", failing)
    with pytest.raises(RuntimeError, match="stopped"):
        Ledger(postgres_ledger_url)
    with psycopg.connect(postgres_ledger_url, autocommit=True) as pg:
        assert pg.execute("SELECT version FROM schema_version").fetchone() == (13,)
        columns = "SELECT column_name FROM information_schema.columns WHERE table_name = 'entries'"
        assert "person_tag" not in {c for (c,) in pg.execute(columns)}
    assert stored_states(postgres_ledger_url) == stored
    monkeypatch.setattr(_pg_schema, "_set_person_tags", set_tags)
    with Ledger(postgres_ledger_url) as ledger:  # the next open migrates it
        assert ledger._read("SELECT count(*) FROM entries WHERE person_tag IS NOT NULL") == [(30,)]
