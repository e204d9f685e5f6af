"""An outage in the middle of a sync: the API process dies while batches are on the wire and stays
down; `sync` gives up within its retry budget with exit 4, and once the API is back on the same port
`replay` exits 0 with nothing lost and nothing doubled.

In the suite the API stays down until `sync` has given up; `make soak` keeps it down for
SOAK_OUTAGE_S=30 seconds (the retry budget here is 3 s, so sync exits 4 well within either).
(tests/cli/test_outage.py covers an API that is down from the start.)
"""

from __future__ import annotations

import random
import subprocess
import time

from connector.sandbox import SandboxStore


def test_the_api_dying_mid_sync_exits_4_and_replay_settles_without_loss_or_doubles(rel, sandbox_process, tmp_path):
    outage_s = rel.scaled("SOAK_OUTAGE_S", 0)
    box = sandbox_process(latency_ms=50)
    with SandboxStore(box.db) as store:
        env = rel.client(store, rate_limit=100_000)
    population = rel.contacts(tmp_path / "contacts.csv", 600, random.Random(4))
    config = rel.config(
        tmp_path,
        box.base_url,
        population.path,
        batch_size=10,
        concurrency=2,
        timeout_s=2,
        max_attempts=100,
        max_elapsed_s=3,
    )
    ledger = tmp_path / "ledger.sqlite3"

    with (tmp_path / "sync.log").open("w") as log:
        sync = subprocess.Popen(rel.command("sync", "-c", str(config)), env=env, stdout=log, stderr=log, cwd=tmp_path)
        # Well into the delivery, with most of it still to come.
        while rel.count(ledger, "SELECT count(*) FROM entries WHERE state = 'captured'") < 100:
            assert sync.poll() is None, (tmp_path / "sync.log").read_text()
            time.sleep(0.01)
        box.kill()
        down_at = time.monotonic()
        assert sync.wait(timeout=120) == 4
    assert "replay" in (tmp_path / "sync.log").read_text()
    states = rel.states(ledger)
    assert states["captured"] < population.valid and sum(states.get(s, 0) for s in ("pending", "in_flight", "unknown"))

    time.sleep(max(0.0, outage_s - (time.monotonic() - down_at)))  # the outage's length is the scenario
    again = sandbox_process(db=box.db, port=box.port, latency_ms=50)
    replayed = rel.run("replay", "-c", str(config), env=env)
    assert replayed.code == 0, replayed.stderr
    with SandboxStore(again.db) as store:
        result = rel.assert_effectively_once(store, population, ledger)
    print(f"\noutage: {outage_s} s; records {result.records}, lost {result.lost}, doubled {result.doubled}")
