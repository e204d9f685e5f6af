"""On PostgreSQL the claim walks the partial indexes whatever the planner's statistics say: a table
that grew and was never analyzed, or half settled since it was analyzed, still claims along
entries_live (no bitmap scan reading every pending entry and a sort, no walk of the primary key
through the settled ones), and a backlog arriving on a ledger analyzed while nothing was live is
analyzed again by the enqueue, so the check for older live versions looks each record up in
the (source, record_id, content_hash) index (schema v11) instead of reading a whole index for every entry (`connector/ledger/_pg_plans.py`).
Autovacuum is off for the table in these tests: it is what would otherwise refresh the statistics
at a moment of its choosing."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from connector.ledger import Claim, Ledger, Mapped, Outcome
from connector.ledger._batches import _SENDABLE
from connector.ledger._postgres import CLAIM_PLAN, _translate


def versions(n: int, tag: str) -> list[Mapped]:
    return [Mapped(str(i), payload=json.dumps({"email": f"p{i}.{tag}@example.com"})) for i in range(n)]


def claim_plan(conn: psycopg.Connection[Any]) -> str:
    """The claim's plan for its next batch of 100, as the claim runs it (after CLAIM_PLAN), with the
    rows each step read."""
    with conn.transaction():
        conn.execute(CLAIM_PLAN)
        rows = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + _translate(_SENDABLE), (100,)).fetchall()
    return "\n".join(r[0] for r in rows)


def settle_all(ledger: Ledger) -> int:
    settled, work = 0, ledger.claim(Claim(100))
    while work is not None:
        outcomes = [Outcome(m.entry_id, "captured", person_id=f"person-{m.entry_id}") for m in work.members]
        work = ledger.settle(work, outcomes, [], then=Claim(100))
        settled += len(outcomes)
    return settled


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
    # the walk stops after one batch: no sort of every pending entry, no settled entry read on the way
    # (a sort of the open batches' members, the in-flight entries the walk skips, is bounded by them)
    assert "Index Scan using entries_live on entries e (actual rows=100 loops=1)" in plan, plan
    assert "Bitmap" not in plan and "Sort Key: e." not in plan, plan
    assert "Rows Removed" not in plan.split("entries o")[0], plan


def test_a_backlog_on_a_ledger_analyzed_while_nothing_was_live_is_checked_record_by_record(
    postgres_ledger_url: str,
) -> None:
    with Ledger(postgres_ledger_url) as ledger, psycopg.connect(postgres_ledger_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE entries SET (autovacuum_enabled = false)")
        ledger.enqueue("crm", "m", versions(3000, "old"), None)
        assert settle_all(ledger) == 3000
        conn.execute("ANALYZE entries")  # as autovacuum would between two passes: nothing live
        for start in range(0, 3000, 1000):  # the next pass: a new version of every record, a chunk at a time
            ledger.enqueue("crm", "m", versions(3000, "new")[start : start + 1000], None)
        plan = claim_plan(conn)
        assert settle_all(ledger) == 3000
    inner = plan.split("Index Scan using idx_entries_source_record_id_content_hash on entries o", 1)[1]
    assert "Index Cond: ((source = e.source) AND (record_id = e.record_id))" in inner, plan
    assert "Rows Removed by Join Filter" not in plan, plan
