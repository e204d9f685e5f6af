"""`status` on a big ledger walks indexes (schema v5, partial since v9) and reads the settled states'
counters (v11): the counts it gives are the ones the plain per-entry definitions give, on ledgers
where versions wait behind live older ones; a v4 ledger migrates and its status is right at once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from connector.ledger import SCHEMA_VERSION, Ledger
from connector.ledger._counts import recount
from connector.ledger._types import LIVE_MARKS
from connector.ledger.schema import MIGRATIONS

# The definitions the indexed queries must agree with: a subquery per entry, as before v5.
WAITING_BY_DEFINITION = (
    "SELECT count(*) FROM entries e WHERE e.state = 'pending' AND EXISTS (SELECT 1 FROM entries o "
    f"WHERE o.source = e.source AND o.record_id = e.record_id AND o.id < e.id AND o.state IN ({LIVE_MARKS}))"
)
OLDEST_BY_DEFINITION = f"SELECT min(created_at) FROM entries WHERE state IN ({LIVE_MARKS})"


def write_versions(conn: sqlite3.Connection, versions: list[tuple[str, str, str]]) -> None:
    """(source, record_id, state) per version, oldest first, created one second apart; the settled
    states' counters (v11, kept by the ledger's own writes) rebuilt after these written by hand."""
    for i, (source, record_id, state) in enumerate(versions, start=1):
        conn.execute(
            "INSERT INTO entries (key, source, record_id, state, payload, content_hash, mapping_version, revision, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, '{}', ?, 'm', 0, ?, ?)",
            (f"k{i}", source, record_id, state, f"h{i}", 1000.0 + i, 1000.0 + i),
        )
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'settled_counts'").fetchone():
        recount(conn)


# Each case: the versions in the order they were written, and how many pending ones wait.
CASES = {
    "one version each": ([("crm", "1", "pending"), ("crm", "2", "in_flight"), ("crm", "3", "captured")], 0),
    "pending behind in flight": ([("crm", "1", "in_flight"), ("crm", "1", "pending")], 1),
    "two pending behind unknown": ([("crm", "1", "unknown"), ("crm", "1", "pending"), ("crm", "1", "pending")], 2),
    "a requeued older pending: the newer waits": ([("crm", "1", "pending"), ("crm", "1", "pending")], 1),
    "behind a settled one: nothing waits": ([("crm", "1", "captured"), ("crm", "1", "pending")], 0),
    "blocked older, settled middle": (
        [("crm", "1", "blocked"), ("crm", "1", "superseded"), ("crm", "1", "pending")],
        1,
    ),
    "an older requeued pending before a newer in flight": (
        [("crm", "1", "pending"), ("crm", "1", "in_flight"), ("crm", "1", "pending")],
        1,
    ),
    "same record id, other source: not a version": ([("crm", "1", "in_flight"), ("shop", "1", "pending")], 0),
}


@pytest.mark.parametrize("case", CASES)
def test_waiting_counts_each_pending_version_behind_an_older_live_one(tmp_path: Path, case: str) -> None:
    versions, waiting = CASES[case]
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        path = tmp_path / "ledger.sqlite3"
        with sqlite3.connect(path) as conn:
            write_versions(conn, versions)
            assert conn.execute(WAITING_BY_DEFINITION).fetchone()[0] == waiting
        assert ledger.status().attention.waiting == waiting


def test_counts_and_the_oldest_unsettled_entry_agree_with_their_definitions(tmp_path: Path) -> None:
    states = ("captured", "pending", "rejected", "in_flight", "unknown", "blocked", "duplicate", "superseded")
    versions = [(("crm", "shop", "events")[i % 3], str(i % 17), states[i * 7 % len(states)]) for i in range(300)]
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as ledger:
        with sqlite3.connect(path) as conn:
            write_versions(conn, versions)
            conn.execute("UPDATE entries SET state = 'captured' WHERE id < 5")  # the oldest live is further on
            recount(conn)
            waiting = conn.execute(WAITING_BY_DEFINITION).fetchone()[0]
            oldest = conn.execute(OLDEST_BY_DEFINITION).fetchone()[0]
            by_source = conn.execute("SELECT source, state, count(*) FROM entries GROUP BY source, state").fetchall()
        report = ledger.status()
    assert waiting > 0 and report.attention.waiting == waiting
    assert report.oldest_unsettled is not None and report.oldest_unsettled.startswith("1970-01-01T00:")
    assert report.oldest_unsettled == ledgeriso(oldest)
    assert {(s, st, n) for s, counts in report.by_source.items() for st, n in counts.items()} == set(by_source)


def ledgeriso(value: float) -> str:
    from connector.ledger._run_view import iso

    return str(iso(value))


def test_the_status_queries_read_the_partial_index_of_the_live_entries(tmp_path: Path) -> None:
    from connector.ledger import _state_counts
    from connector.ledger._sqlite import DIALECT
    from connector.ledger._types import IS_LIVE

    path = tmp_path / "ledger.sqlite3"
    Ledger(path).close()
    with sqlite3.connect(path) as conn:
        plans = {
            name: str(conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall())
            for name, sql in (
                ("by source", _state_counts._LIVE_BY_SOURCE),
                ("oldest", _state_counts._OLDEST_LIVE),
                ("waiting", DIALECT.waiting),
            )
        }
        sql = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall())
    # No query of `status` reads the table itself: each walks an index holding only the entries it counts
    # (the settled states come from their counters, v11).
    assert "COVERING INDEX entries_live" in plans["by source"]
    assert "COVERING INDEX entries_live" in plans["waiting"]
    assert plans["oldest"].count("entries_live") == 2
    # The partial indexes hold exactly the states the queries name: a change to LIVE needs a
    # migration that rebuilds them (a test compares them).
    assert sql["entries_live"].endswith(f"WHERE {IS_LIVE}")
    assert not {"entries_settled", "entries_to_send", "entries_live_record", "entries_run"} & set(sql)


def test_a_version_4_ledger_migrates_and_its_status_is_right(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:4]:
        migration(sqlite_utils.Database(conn))
    conn.execute("PRAGMA user_version = 4")
    write_versions(conn, [("crm", "1", "in_flight"), ("crm", "1", "pending"), ("crm", "2", "captured")])
    conn.close()

    with Ledger(path) as ledger:
        report = ledger.status()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 5
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"entries_live", "entries_rare", "batches_run"} <= indexes
    assert report.attention.waiting == 1
    assert report.by_source == {"crm": {"in_flight": 1, "pending": 1, "captured": 1}}
    assert report.oldest_unsettled == ledgeriso(1001.0)
