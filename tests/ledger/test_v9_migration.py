"""A ledger of schema v8 (the indexes before issue 24) migrates to v9 on both engines without
re-sending anything: every entry keeps its state, `status` gives the same answers, the batch in
flight comes back with its key and body, the stalled one only for `replay`, and the next new batch
holds only what was pending."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connector.ledger import SCHEMA_VERSION, Claim, Ledger, Mapped, Outcome
from connector.ledger.schema import V9_INDEXES

# What v9 replaced, as v1, v4 and v5 created it on SQLite and _pg_schema on PostgreSQL.
V8_CREATE = (
    "CREATE INDEX idx_entries_state_id ON entries (state, id)",
    "CREATE INDEX entries_record_state ON entries (source, record_id, state)",
    "CREATE INDEX entries_run_state ON entries (run_id, state)",
    "CREATE INDEX entries_source_state ON entries (source, state)",
)
V9_NAMES = ("entries_to_send", "entries_settled", "entries_run")


def person(i: int) -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"p{i}@example.com"}))


def undo_v9(execute: Callable[[str], Any]) -> None:
    """v8's indexes in place of v9's (SQLite's WITHOUT ROWID tables stay: v9 builds them again)."""
    for statement in [f"DROP INDEX {name}" for name in V9_NAMES] + list(V8_CREATE):
        execute(statement)


def as_version_8(target: str | Path) -> None:
    """The ledger as the release before left it, and saying v8."""
    if isinstance(target, Path):
        conn = sqlite3.connect(target, isolation_level=None)
        undo_v9(conn.execute)
        conn.execute("PRAGMA user_version = 8")
        conn.close()
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as pg:
        undo_v9(pg.execute)
        pg.execute("UPDATE schema_version SET version = 8")


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
        captured = ledger.claim(Claim(1))
        assert captured is not None
        ledger.settle(captured, [Outcome(captured.members[0].entry_id, "captured", person_id="p-1")], [])
        stalled = ledger.claim(Claim(1))
        assert stalled is not None
        ledger.stall(stalled, "HTTP 500", [])
        blocked = ledger.claim(Claim(1))
        assert blocked is not None
        ledger.block(blocked, "HTTP 409", [])
        in_flight = ledger.claim(Claim(2))
        assert in_flight is not None and len(in_flight.members) == 2
        ledger.keep_open(in_flight, "HTTP 503", [])
        before = ledger.status()
        unsettled, attention = ledger.unsettled_count(), ledger.blocked_count()
    as_version_8(ledger_target)
    assert not set(V9_NAMES) & indexes(ledger_target)

    with Ledger(ledger_target) as ledger:
        assert set(V9_NAMES) <= indexes(ledger_target) and "entries_source_state" not in indexes(ledger_target)
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
