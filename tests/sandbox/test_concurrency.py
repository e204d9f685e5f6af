"""20 clients at once, each sending bulk requests of 100 persons, over loopback.

Five requests per client keep the suite quick on a shared machine; the full 20 x 20 x 100 with the
same checks runs in benchmarks/sandbox_throughput.py.
"""

from __future__ import annotations

import sqlite3

from connector.sandbox.loadgen import integrity_problems, run_bulk_load

CLIENTS, REQUESTS, PERSONS = 20, 5, 100


async def test_concurrent_bulk_load_loses_nobody_and_creates_nobody_twice(sandbox):
    credentials = [sandbox.create_client(name=f"load-{n}", rate_limit=1000) for n in range(CLIENTS)]
    result = await run_bulk_load(sandbox.base_url, credentials, REQUESTS, PERSONS)

    assert result.statuses == {200: CLIENTS * REQUESTS}
    # Half of each batch is shared by all clients, so they raced to create the same persons.
    assert len(result.identities) == REQUESTS * PERSONS // 2 * (1 + CLIENTS)
    assert integrity_problems(sandbox.store, result, CLIENTS, REQUESTS, PERSONS) == []


async def test_the_integrity_check_sees_a_lost_person_and_a_bad_status(sandbox):
    credentials = [sandbox.create_client(name=f"load-{n}") for n in range(2)]
    result = await run_bulk_load(sandbox.base_url, credentials, 1, 10)
    assert integrity_problems(sandbox.store, result, 2, 1, 10) == []
    with sqlite3.connect(sandbox.store.db_path) as db:
        db.execute("DELETE FROM persons WHERE rowid = (SELECT MIN(rowid) FROM persons)")
    result.statuses[500] += 1
    problems = integrity_problems(sandbox.store, result, 2, 1, 10)
    assert any("statuses" in p for p in problems) and any("1 missing" in p for p in problems)
