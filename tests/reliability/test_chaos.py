"""Chaos: every fault the API shows at once, and SIGKILLs at random moments and at the two
moments that matter most (a batch written but not sent; a response received but not settled).

The sandbox answers retryable and non-retryable 503s, commits then drops the connection, has
latency spikes, and really rate-limits (the connector is told a window a quarter of the
sandbox's, so its limiter lets too much through and meets real 429s). The connector is run (sync
and replay in turn) and killed 8 times on 800 records: half by the test at a random moment, half
by a failpoint. Then it is run until a replay exits 0. Afterwards every valid record is in the CRM
once, none twice, and the ledger agrees with the sandbox.

`make soak` runs this with SOAK_RECORDS=20000 SOAK_KILLS=50 and prints the figures.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter

from connector.sandbox import Faults

FAILPOINTS = ("after-batch-write", "after-response")


def test_chaos_combined_faults_and_kills_lose_nothing_and_double_nothing(rel, sandbox_factory, tmp_path):
    records, kills = rel.scaled("SOAK_RECORDS", 800), rel.scaled("SOAK_KILLS", 8)
    rng = random.Random(records * 1000 + kills)
    faults = Faults(
        p_retryable_503=0.08, p_fatal_503=0.04, p_commit_drop=0.08, latency_s=0.02,
        p_latency_spike=0.05, spike_s=0.4, seed=11,
    )
    box = sandbox_factory(db_path=tmp_path / "sandbox.sqlite3", faults=faults, rate_window_s=1.0)
    env = rel.client(box.store, rate_limit=6)
    population = rel.contacts(tmp_path / "contacts.csv", records, rng)
    config = rel.config(tmp_path, box.base_url, population.path, rate_window_s=0.25)

    survived = rel.until_settled(
        config, env, rng, kills=kills, failpoints=FAILPOINTS, sandbox_db=tmp_path / "sandbox.sqlite3",
        log_level="DEBUG" if records <= 2_000 else "INFO",
    )
    result = rel.figures(box.store, population)
    print(
        f"\nchaos: kills survived {survived.kills} (test {survived.timer_kills}, failpoints "
        f"{survived.failpoint_kills}) in {survived.rounds} runs; records {result.records}, "
        f"captured once {result.captured_once}, lost {result.lost}, doubled {result.doubled}"
    )

    rel.assert_effectively_once(box.store, population, tmp_path / "ledger.sqlite3")
    assert survived.kills >= kills and survived.timer_kills >= 1
    assert all(survived.failpoint_kills.get(point, 0) >= 1 for point in FAILPOINTS), survived
    # Every kind of fault really happened (attempts of settled batches are in the ledger).
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as db:
        seen = Counter(db.execute("SELECT status_code, retryable, outcome FROM attempts").fetchall())
    db.close()
    assert any(status == 429 for status, _, _ in seen), seen
    assert any(status == 503 and retryable for status, retryable, _ in seen), seen
    assert any(status == 503 and not retryable for status, retryable, _ in seen), seen
    assert any(status is None and outcome == "OutcomeUnknown" for status, _, outcome in seen), seen  # dropped
