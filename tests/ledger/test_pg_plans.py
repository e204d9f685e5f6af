"""On PostgreSQL the claim walks the partial indexes whatever the planner's statistics say: a table
that grew and was never analyzed, or half settled since it was analyzed, still claims along
entries_live (no bitmap scan reading every pending entry and a sort, no walk of the primary key
through the settled ones), and a backlog arriving on a ledger analyzed while nothing was live is
analyzed again by the enqueue, so the check for older live versions looks each record up in
the (source, record_id, content_hash) index (schema v11) instead of reading a whole index for every entry (`connector/ledger/_pg_plans.py`).
Autovacuum is off for the table in these tests: it is what would otherwise refresh the statistics
at a moment of its choosing.

The ANALYZE runs on a thread of its own: writes return without waiting for it, a burst of them asks for
at most two, a failed one fails no write, and `close` leaves neither the thread nor its connection."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
import pytest

from connector.ledger import Claim, Ledger, Mapped, Outcome, _pg_plans
from connector.ledger._batches import _sendable
from connector.ledger._merges import holders_sql, person_tag
from connector.ledger._pg_plans import ANALYZE_MIN, THREAD
from connector.ledger._postgres import CLAIM_PLAN, DIALECT, _translate

T = TypeVar("T")


def versions(n: int, tag: str) -> list[Mapped]:
    return [Mapped(str(i), payload=json.dumps({"email": f"p{i}.{tag}@example.com"})) for i in range(n)]


def claim_plan(conn: psycopg.Connection[Any]) -> str:
    """The claim's plan for its next batch of 100, as the claim runs it (after CLAIM_PLAN), with the
    rows each step read."""
    with conn.transaction():
        conn.execute(CLAIM_PLAN)
        rows = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + _translate(_sendable(DIALECT)), (100,)
        ).fetchall()
    return "\n".join(r[0] for r in rows)


def walks_one_batch(plan: str) -> bool:
    """The claim's plan walked entries_live's pending entries in id order and stopped after one batch
    of 100, each checked against the records of the open batches' members read once (hashed) and
    the versions in flight, unknown or blocked of its record (entries_stuck): no sort of every
    pending entry, no settled entry read on the way, no look-up per entry of all its record's versions."""
    walk = "Index Scan using entries_live on entries e (actual rows=100 loops=1)"
    return walk in plan and "hashed SubPlan" in plan and "Rows Removed" not in plan and "Sort" not in plan


def settle_all(ledger: Ledger) -> int:
    settled, work = 0, ledger.claim(Claim(100))
    while work is not None:
        outcomes = [Outcome(m.entry_id, "captured", person_id=f"person-{m.entry_id}") for m in work.members]
        work = ledger.settle(work, outcomes, [], then=Claim(100))
        settled += len(outcomes)
    return settled


def poll(check: Callable[[], T], what: str, deadline_s: float = 60) -> T:
    deadline = time.monotonic() + deadline_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"not within {deadline_s} s: {what}"
        time.sleep(0.02)
    return value


def live_estimate(conn: psycopg.Connection[Any]) -> float:
    """The live entries the planner believes there are (-1: never analyzed)."""
    return conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'entries_live'").fetchone()[0]  # type: ignore[index]


def analyzed(conn: psycopg.Connection[Any]) -> int:
    """ANALYZEs of entries run to the end (autovacuum's apart)."""
    return conn.execute("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'entries'").fetchone()[0]  # type: ignore[index]


def waiting_analyze(conn: psycopg.Connection[Any]) -> int | None:
    """The server process of an ANALYZE of entries waiting for a lock, if there is one."""
    row = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'ANALYZE entries' "
        "AND state = 'active' AND wait_event_type = 'Lock'"
    ).fetchone()
    return None if row is None else row[0]


@contextmanager
def analyze_locked_out(url: str) -> Iterator[None]:
    """The lock ANALYZE takes, held by another session meanwhile (writes take a lock it lets by)."""
    with psycopg.connect(url) as holder, holder.transaction():
        holder.execute("LOCK TABLE entries IN SHARE UPDATE EXCLUSIVE MODE")
        yield


def events(logs: io.StringIO, name: str) -> list[dict[str, Any]]:
    return [e for line in logs.getvalue().splitlines() if (e := json.loads(line)).get("event") == name]


@pytest.fixture
def watch(postgres_ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[psycopg.Connection[Any]]:
    """A ledger's database with its ANALYZE left to the ledger alone (autovacuum off for entries), which
    waits for a lock as long as it is held, and a session to watch it from."""
    monkeypatch.setattr(_pg_plans, "LOCK_TIMEOUT_MS", 600_000)
    Ledger(postgres_ledger_url).close()  # its tables
    with psycopg.connect(postgres_ledger_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE entries SET (autovacuum_enabled = false)")
        yield conn


# Statements run behind the ledger's back after 20,000 pending entries were written (so that nothing
# analyzes them but the test): what the planner then knows, and what is true.
STALE = {
    "never analyzed": [],
    "analyzed all pending, half settled since": [
        "ANALYZE entries",
        "UPDATE entries SET state = 'captured' WHERE id <= 10000",
    ],
}


@pytest.mark.parametrize("stale", STALE)
def test_the_claim_walks_entries_to_send_whatever_the_statistics_say(postgres_ledger_url: str, stale: str) -> None:
    with Ledger(postgres_ledger_url), psycopg.connect(postgres_ledger_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE entries SET (autovacuum_enabled = false)")
        conn.execute(
            "INSERT INTO entries (id, key, source, record_id, state, payload, content_hash, mapping_version, revision) "
            "SELECT i, 'k' || i, 'crm', i::text, 'pending', '{}', 'h' || i, 'm', 0 FROM generate_series(1, 20000) i"
        )
        for statement in STALE[stale]:
            conn.execute(statement)
        plan = claim_plan(conn)
    assert walks_one_batch(plan), plan
    assert "Bitmap" not in plan, plan


def test_an_outage_s_many_stuck_entries_are_probed_per_candidate_not_read_per_claim(
    postgres_ledger_url: str,
) -> None:
    """300,000 entries left unknown or blocked (an outage) and a backlog behind them: each of the 100
    candidates probes their index (entries_stuck, schema v13) for its record. v12 hashed them all per
    claim (64 MB of work_mem); past work_mem the hash was given up, and each candidate rescanned all
    of them (3.9 s a claim at 200,000)."""
    with Ledger(postgres_ledger_url), psycopg.connect(postgres_ledger_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO entries (id, key, source, record_id, state, payload, content_hash, mapping_version, revision) "
            "SELECT i, 'k' || i, 'crm', i::text, CASE WHEN i <= 300000 THEN (CASE WHEN i % 2 = 0 THEN 'unknown' "
            "ELSE 'blocked' END) ELSE 'pending' END, '{}', 'h' || i, 'm', 0 FROM generate_series(1, 301000) i"
        )
        conn.execute("ANALYZE entries")
        plan = claim_plan(conn)
    probe = "Index Only Scan using entries_stuck on entries sl (actual rows=0 loops=100)"
    assert probe in plan and "Seq Scan" not in plan and "Materialize" not in plan, plan
    assert walks_one_batch(plan), plan


def test_a_backlog_on_a_ledger_analyzed_while_nothing_was_live_is_claimed_without_a_lookup_per_entry(
    postgres_ledger_url: str,
) -> None:
    with Ledger(postgres_ledger_url) as ledger, psycopg.connect(postgres_ledger_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE entries SET (autovacuum_enabled = false)")
        ledger.enqueue("crm", "m", versions(3000, "old"), None)
        assert settle_all(ledger) == 3000
        conn.execute("ANALYZE entries")  # as autovacuum would between two passes: nothing live
        for start in range(0, 3000, 1000):  # the next pass: a new version of every record, a chunk at a time
            ledger.enqueue("crm", "m", versions(3000, "new")[start : start + 1000], None)
        poll(lambda: live_estimate(conn) > 0, "the enqueue's ANALYZE, on its own thread, counted the backlog")
        plan = claim_plan(conn)
        assert settle_all(ledger) == 3000
    # entries_live is believed empty: the one-live-version rule is decided without a look-up per entry all the same
    assert walks_one_batch(plan), plan


def test_writes_return_while_their_analyze_waits_and_a_burst_of_them_analyzes_twice(
    postgres_ledger_url: str, watch: psycopg.Connection[Any]
) -> None:
    with Ledger(postgres_ledger_url) as ledger:
        with analyze_locked_out(postgres_ledger_url):
            ledger.enqueue("crm", "m", versions(ANALYZE_MIN, "a"), None)  # enough to ask for an ANALYZE
            poll(lambda: waiting_analyze(watch), "the enqueue's ANALYZE waits for the lock")
            for source in ("b", "c"):  # each asks for one more meanwhile, as do the settles
                ledger.enqueue(source, "m", versions(ANALYZE_MIN, "a"), None)
            assert settle_all(ledger) == 3 * ANALYZE_MIN
            assert waiting_analyze(watch) and analyzed(watch) == 0  # every write returned before it ran
        poll(lambda: analyzed(watch) == 2, "the waiting ANALYZE, then one for all the requests made meanwhile")
    assert analyzed(watch) == 2
    assert live_estimate(watch) == 0  # the second ran after the last settle


def test_close_cancels_the_analyze_under_way_and_leaves_no_thread_or_connection(
    postgres_ledger_url: str, watch: psycopg.Connection[Any]
) -> None:
    ledger = Ledger(postgres_ledger_url)
    with analyze_locked_out(postgres_ledger_url):
        ledger.enqueue("crm", "m", versions(ANALYZE_MIN, "a"), None)
        poll(lambda: waiting_analyze(watch), "the enqueue's ANALYZE waits for the lock")
        ledger.close()
        assert THREAD not in {t.name for t in threading.enumerate()}
    poll(
        lambda: (
            not watch.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'capture-sync'"
            ).fetchall()
        ),
        "the ledger's connections are gone",
    )
    assert analyzed(watch) == 0  # cancelled, not run once the lock was let go


def test_a_failed_analyze_is_logged_and_fails_no_write(
    postgres_ledger_url: str, watch: psycopg.Connection[Any], debug_logs: io.StringIO
) -> None:
    with Ledger(postgres_ledger_url) as ledger:
        with analyze_locked_out(postgres_ledger_url):
            ledger.enqueue("crm", "m", versions(ANALYZE_MIN, "a"), None)
            pid = poll(lambda: waiting_analyze(watch), "the enqueue's ANALYZE waits for the lock")
            watch.execute("SELECT pg_terminate_backend(%s)", (pid,))  # its connection dies under it
            poll(lambda: events(debug_logs, "ledger.analyze_failed"), "the failure is logged")
            ledger.enqueue("b", "m", versions(ANALYZE_MIN, "a"), None)  # the next write asks again
            assert settle_all(ledger) == 2 * ANALYZE_MIN
        poll(lambda: analyzed(watch), "the next write's ANALYZE ran once the lock was let go")
    # (close may cancel one more, queued by the settles: that one at debug)
    [failed] = [e for e in events(debug_logs, "ledger.analyze_failed") if e["level"] == "warning"]
    assert "terminating connection" in failed["reason"], failed


def test_an_unexpected_error_in_the_analyze_is_logged_and_the_next_write_still_analyzes(
    postgres_ledger_url: str, watch: psycopg.Connection[Any], debug_logs: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only the database's errors: whatever the worker meets is logged and leaves it working."""
    counted = _pg_plans._COUNTED
    monkeypatch.setattr(_pg_plans, "_COUNTED", "SELECT 'no such index', 0.0")  # a KeyError after ANALYZE
    with Ledger(postgres_ledger_url) as ledger:
        ledger.enqueue("crm", "m", versions(ANALYZE_MIN, "a"), None)
        [failed] = poll(lambda: events(debug_logs, "ledger.analyze_failed"), "the failure is logged")
        assert failed["level"] == "warning" and "entries_live" in failed["reason"], failed
        monkeypatch.setattr(_pg_plans, "_COUNTED", counted)
        ran = analyzed(watch)
        ledger.enqueue("b", "m", versions(ANALYZE_MIN, "a"), None)  # the worker is still there for it
        poll(lambda: analyzed(watch) > ran, "the next write's ANALYZE ran")
        assert any(t.name == THREAD for t in threading.enumerate())


def test_an_analyze_that_finds_another_one_under_way_gives_way(
    postgres_ledger_url: str, watch: psycopg.Connection[Any], debug_logs: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pg_plans, "LOCK_TIMEOUT_MS", 100)  # as shipped
    # the lock held as by an ANALYZE of autovacuum's or another process's
    with Ledger(postgres_ledger_url) as ledger, analyze_locked_out(postgres_ledger_url):
        ledger.enqueue("crm", "m", versions(ANALYZE_MIN, "a"), None)
        poll(lambda: events(debug_logs, "ledger.analyze_skipped"), "the ANALYZE gives way")
    # nothing to warn about, and nothing run again until the next write asks for it
    assert not events(debug_logs, "ledger.analyze_failed") and analyzed(watch) == 0


def test_the_holders_of_a_person_are_found_through_entries_person(postgres_ledger_url: str) -> None:
    """A settle's merge check seeks each person's tag in entries_person (schema v14), analyzed or not:
    no scan of the settled entries per settle."""
    with Ledger(postgres_ledger_url) as ledger, psycopg.connect(postgres_ledger_url, autocommit=True) as conn:
        ledger.enqueue("crm", "m", versions(3000, "old"), None)
        assert settle_all(ledger) == 3000
        for analyze in (False, True):
            if analyze:
                conn.execute("ANALYZE entries")
            person = "person-1500"
            rows = conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + _translate(holders_sql(DIALECT)),
                ([person_tag(person)], [person]) * 2,  # entries_person's seek, then entries_person_fresh's
            ).fetchall()
            plan = "\n".join(r[0] for r in rows)
            assert "entries_person " in plan and "entries_person_fresh" in plan and "Seq Scan" not in plan, plan
