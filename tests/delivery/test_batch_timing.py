"""`batch.settled` tells a slow API from a held-back client: `latency_ms` is the HTTP exchange that
brought the answer, alone (the very figure the ledger's attempts table keeps for it), and `wait_ms` the
time the request waited beside it, here the client-side rate limiter's hold (issue 26: a batch's
33 s `latency_ms` that was the limiter's wait read as a slow API).

Setup: the sandbox allows 2 requests a second, the client knows the window, six one-person batches
(POST /person) go one at a time, a 429 retried. Oracle: the attempts table; the limiter's spacing (about 0.5 s a request) is a lower
bound on the waits, never an upper one."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

from connector.api import CaptureClient, RetryPolicy
from connector.delivery import DeliverySettings, replay
from connector.ledger import Ledger, Mapped

BATCHES = 6


async def test_latency_ms_is_the_exchange_and_wait_ms_the_limiters_hold(
    sandbox_factory, debug_logs: io.StringIO, tmp_path: Path
) -> None:
    box = sandbox_factory(rate_window_s=1.0)
    key, secret = box.create_client(rate_limit=2)
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path, synchronous="NORMAL") as ledger:
        ledger.enqueue(
            "crm",
            "m",
            [Mapped(str(n), payload=f'{{"name":"P{n}","email":"p{n}@example.org"}}') for n in range(BATCHES)],
            None,
        )
        quick = RetryPolicy(max_attempts=6, initial_backoff_s=0.05, max_backoff_s=0.2)
        async with CaptureClient(box.base_url, key, secret, retry_policy=quick) as client:
            report = await replay(ledger, client, DeliverySettings(batch_size=1, concurrency=1, rate_window_s=1.0))
    assert report.captured == BATCHES and report.exit_code == 0

    settled = [
        e for line in debug_logs.getvalue().splitlines() if (e := json.loads(line)).get("event") == "batch.settled"
    ]
    with sqlite3.connect(path) as db:
        exchanges = {
            key[:14]: ms
            for key, ms in db.execute(  # a batch's last attempt is the one answered
                "SELECT key, latency_ms FROM attempts WHERE key IS NOT NULL ORDER BY id"
            )
        }
    db.close()
    assert len(settled) == BATCHES
    for event in settled:
        # the event rounds the exchange to 0.1 ms, the ledger to 0.001 ms: rounded again, 1.6504 reads 1.6 and 1.7
        assert abs(event["latency_ms"] - exchanges[event["key_prefix"]]) <= 0.05 + 1e-9
        assert event["wait_ms"] >= 0
    assert sum(e["wait_ms"] for e in settled) >= 400 * (BATCHES - 2)  # the limiter held them apart
