"""`batch.settled` is a line per batch at debug when the batch went well, and at info when it did
not (a member failed or is unknown, or the request took more than one attempt): a sync's log at the
default level says what needs a look, not that each batch of a million went through."""

from __future__ import annotations

import io
import json
from pathlib import Path

from connector.api import CaptureClient, RetryPolicy
from connector.delivery import DeliverySettings, replay
from connector.ledger import Ledger, Mapped


def payload(n: int) -> str:
    return f'{{"name":"P{n}","email":"p{n}@example.org"}}'


async def test_a_clean_batch_logs_at_debug_and_one_with_a_failed_member_at_info(
    sandbox, debug_logs: io.StringIO, tmp_path: Path
) -> None:
    key, secret = sandbox.create_client(rate_limit=10_000)
    with Ledger(tmp_path / "ledger.sqlite3", synchronous="NORMAL") as ledger:
        clean = [Mapped(str(n), payload=payload(n)) for n in range(4)]
        # The second batch holds a person without email or phone: the sandbox lists it in `failed`.
        flawed = [Mapped(str(n), payload=payload(n)) for n in range(4, 7)] + [Mapped("7", payload='{"name":"P7"}')]
        ledger.enqueue("crm", "m", clean + flawed, None)
        quick = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02)
        async with CaptureClient(sandbox.base_url, key, secret, retry_policy=quick) as client:
            report = await replay(ledger, client, DeliverySettings(batch_size=4, concurrency=1))
    assert (report.captured, report.failed) == (7, 1)
    settled = [
        e for line in debug_logs.getvalue().splitlines() if (e := json.loads(line)).get("event") == "batch.settled"
    ]
    assert sorted((e["level"], e.get("captured", 0), e.get("failed", 0)) for e in settled) == [
        ("debug", 4, 0),
        ("info", 3, 1),
    ]
