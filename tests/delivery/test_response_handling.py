"""Each row of design 4 (response handling) against the real sandbox over loopback.

The ledger is filled directly (the sources and mapper have their own tests) and drained with
`replay`, which is the delivery half of a sync.
"""

from __future__ import annotations

import json
import random

import httpx
import pytest
import respx

from connector.api import CaptureClient, RetryPolicy
from connector.delivery import DeliverySettings, replay, sync
from connector.ledger import Claim, Ledger, Mapped
from connector.sandbox import Faults

FAST_RETRY = RetryPolicy(max_attempts=8, max_elapsed_s=30, initial_backoff_s=0.01, max_backoff_s=0.05)
SETTINGS = DeliverySettings(batch_size=20, concurrency=3)


def person(i: int, **fields) -> Mapped:
    data = {"name": f"Person {i}", "email": f"person{i}@example.com", **fields}
    return Mapped(f"r{i}", payload=json.dumps(data, separators=(",", ":")))


def first_draws(seed: int, n: int, p: float) -> list[bool]:
    rng = random.Random(seed)
    return [rng.random() < p for _ in range(n)]


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "ledger.sqlite3", synchronous="NORMAL") as led:
        yield led


def client_for(box, key, secret, **kw) -> CaptureClient:
    return CaptureClient(box.base_url, key, secret, retry_policy=kw.pop("retry_policy", FAST_RETRY), **kw)


def assert_each_key_captured_once(box, ledger, n):
    """Every entry captured, the sandbox captured each per-person key exactly once, ids agree."""
    entries = ledger.list_entries("captured", limit=100_000)
    assert len(entries) == n
    counts = box.store.capture_counts_by_person_key()
    assert sorted(counts.values()) == [1] * n
    persons = {p["id"] for p in box.store.persons()}
    assert {e.person_id for e in entries} <= persons
    assert all(v == 1 for v in box.store.creations_by_identity().values())


async def test_2xx_settles_every_member_and_a_second_run_sends_nothing(sandbox, ledger):
    key, secret = sandbox.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(i) for i in range(95)], None)
    async with client_for(sandbox, key, secret) as client:
        report = await sync(ledger, client, [], SETTINGS)
        assert (report.sent, report.captured, report.exit_code) == (95, 95, 0)
        again = await replay(ledger, client, SETTINGS)
    assert again.sent == 0 and again.exit_code == 0
    assert_each_key_captured_once(sandbox, ledger, 95)


async def test_a_batch_sent_before_a_crash_is_resent_with_its_key_and_replayed(sandbox, ledger):
    key, secret = sandbox.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(i) for i in range(30)], None)
    batch = ledger.claim(Claim(30))
    async with client_for(sandbox, key, secret) as client:
        await client.capture_bulk(batch.body, batch.key)  # the server commits; we "crash" before settling
        report = await replay(ledger, client, SETTINGS)
    assert report.captured == 30 and report.exit_code == 0
    assert_each_key_captured_once(sandbox, ledger, 30)
    detail = ledger.show(batch.key)
    assert [a.key for a in detail.attempts] == [batch.key]


async def test_a_person_the_server_fails_is_failed_with_its_reason_and_neighbours_land(sandbox, ledger):
    key, secret = sandbox.create_client(rate_limit=10_000)
    # A payload the server refuses (written by a laxer mapper, say): bypasses local validation.
    bad = Mapped("bad", payload=json.dumps({"name": "Bad", "email": "not-an-email"}))
    ledger.enqueue("src", "v1", [person(1), bad, person(2)], None)
    async with client_for(sandbox, key, secret) as client:
        report = await replay(ledger, client, SETTINGS)
    assert (report.captured, report.failed, report.exit_code) == (2, 1, 0)
    [failed] = ledger.list_entries("failed")
    assert failed.record_id == "bad" and "email" in failed.last_error


async def test_400_splits_the_batch_until_the_bad_person_is_isolated(ledger):
    """No sandbox fault produces a whole-batch 400 for a well-formed body, so this row uses respx."""
    ledger.enqueue("src", "v1", [person(i) for i in range(8)], None)
    sent_keys = []

    def bulk(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent_keys.append(request.headers["Idempotency-Key"])
        if any(p["email"] == "person5@example.com" for p in body["persons"]):
            return httpx.Response(
                400,
                json={
                    "success": False,
                    "statusCode": 400,
                    "timestamp": "2026-01-01T00:00:00Z",
                    "error": {
                        "name": "BadRequest",
                        "message": "person invalid",
                        "statusCode": 400,
                        "code": "invalid_person",
                    },
                },
            )
        ok = [{"index": i, "person_id": f"00000000-0000-4000-8000-{i:012d}"} for i in range(len(body["persons"]))]
        return httpx.Response(
            200,
            json={
                "success": True,
                "statusCode": 200,
                "timestamp": "2026-01-01T00:00:00Z",
                "data": {"successful": ok, "duplicates": [], "failed": []},
            },
        )

    with respx.mock(base_url="http://127.0.0.1:9/api/v1/capture") as mock:
        mock.get("/info").respond(
            200,
            json={
                "success": True,
                "statusCode": 200,
                "timestamp": "2026-01-01T00:00:00Z",
                "data": {"client_name": "x", "rate_limit": 10_000, "has_custom_field_mapping": False},
            },
        )
        mock.post("/persons/bulk").mock(side_effect=bulk)
        async with CaptureClient("http://127.0.0.1:9/api/v1/capture", "k", "s", retry_policy=FAST_RETRY) as client:
            report = await replay(ledger, client, DeliverySettings(batch_size=8, concurrency=1))
    assert (report.captured, report.failed) == (7, 1)
    [failed] = ledger.list_entries("failed")
    assert failed.record_id == "r5" and "person invalid" in failed.last_error
    assert len(sent_keys) == len(set(sent_keys)), "each split half is a new logical request with a new key"


async def test_401_stops_the_run_marks_nothing_failed_and_a_fixed_secret_delivers(sandbox, ledger):
    key, secret = sandbox.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(i) for i in range(10)], None)
    async with client_for(sandbox, key, "wrong-secret-value") as client:
        report = await replay(ledger, client, SETTINGS)
    assert report.exit_code == 3 and report.sent == 0
    states = ledger.status().by_state
    assert states["failed"] == 0 and states["pending"] == 10
    async with client_for(sandbox, key, secret) as client:
        assert (await replay(ledger, client, SETTINGS)).exit_code == 0
    assert_each_key_captured_once(sandbox, ledger, 10)


async def test_409_blocks_that_batch_only_and_the_others_are_delivered(sandbox, ledger):
    key, secret = sandbox.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(i) for i in range(60)], None)
    poisoned = ledger.claim(Claim(20))
    async with client_for(sandbox, key, secret) as client:
        # Somebody used this batch's key with another body: the server must refuse ours.
        await client.capture_bulk([{"name": "Other", "email": "other@example.com"}], poisoned.key)
        report = await replay(ledger, client, SETTINGS)
        assert report.exit_code == 5
        assert ledger.status().by_state["blocked"] == 20
        assert ledger.status().by_state["captured"] == 40
        again = await replay(ledger, client, SETTINGS)
        assert again.sent == 0, "a blocked batch is never retried automatically"
        # Manual recovery: requeue under a new batch key.
        ledger.resolve(poisoned.key, "requeue")
        assert (await replay(ledger, client, SETTINGS)).exit_code == 0
    assert ledger.status().by_state["captured"] == 60


async def test_429_waits_and_retries_with_the_same_key(sandbox_factory, ledger):
    box = sandbox_factory(rate_window_s=1.0)
    key, secret = box.create_client(rate_limit=4)
    ledger.enqueue("src", "v1", [person(i) for i in range(40)], None)
    # The connector believes the window is far shorter than the server's: it will meet 429s.
    async with client_for(box, key, secret) as client:
        report = await replay(ledger, client, DeliverySettings(batch_size=5, concurrency=3, rate_window_s=0.05))
    assert report.exit_code == 0
    assert_each_key_captured_once(box, ledger, 40)
    limited = [
        a
        for e in ledger.list_entries("captured", limit=100)
        for a in ledger.show(e.key).attempts
        if a.status_code == 429
    ]
    assert limited, "the scenario must actually have met a 429"
    for attempt in limited:
        assert any(b.status_code == 200 for b in ledger.show(attempt.key).attempts), "retried under the same key"


async def test_retryable_503_is_retried_with_the_same_key(sandbox_factory, ledger):
    box = sandbox_factory(faults=Faults(p_retryable_503=0.4, seed=3))
    key, secret = box.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(i) for i in range(100)], None)
    async with client_for(box, key, secret) as client:
        report = await replay(ledger, client, SETTINGS)
    assert report.exit_code == 0
    assert_each_key_captured_once(box, ledger, 100)
    batches = {ledger.show(e.key).batches[0] for e in ledger.list_entries("captured", limit=100)}
    codes = [[a.status_code for a in ledger.show(b).attempts] for b in batches]
    assert any(503 in c for c in codes) and all(c[-1] == 200 for c in codes)


async def test_non_retryable_503_stops_retries_and_replay_delivers_later(sandbox_factory, ledger, tmp_path):
    db = tmp_path / "box.sqlite3"
    # A seed whose first draw lets GET /info through and whose second fails the one bulk request.
    seed = next(s for s in range(1000) if first_draws(s, 2, 0.5) == [False, True])
    failing = sandbox_factory(db_path=db, faults=Faults(p_fatal_503=0.5, seed=seed))
    key, secret = failing.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(i) for i in range(10)], None)
    async with client_for(failing, key, secret) as client:
        first = await sync(ledger, client, [], SETTINGS)
    assert first.exit_code == 4
    assert ledger.status().by_state["in_flight"] == 10
    [stalled] = {ledger.show(e.key).batches[0] for e in ledger.list_entries("in_flight")}
    assert [a.status_code for a in ledger.show(stalled).attempts] == [503], "not retried"
    failing.server.stop()

    healthy = sandbox_factory(db_path=db)
    async with client_for(healthy, key, secret) as client:
        assert (await sync(ledger, client, [], SETTINGS)).exit_code == 4, "sync leaves it to replay"
        assert (await replay(ledger, client, SETTINGS)).exit_code == 0
    assert ledger.show(stalled).key == stalled
    assert_each_key_captured_once(healthy, ledger, 10)


async def test_lost_responses_are_retried_with_the_same_key_and_nothing_doubles(sandbox_factory, ledger):
    seed = next(s for s in range(1000) if sum(first_draws(s, 5, 0.4)) >= 2)  # drops among the first sends
    box = sandbox_factory(faults=Faults(p_commit_drop=0.4, seed=seed))
    key, secret = box.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(i) for i in range(100)], None)
    async with client_for(box, key, secret) as client:
        report = await replay(ledger, client, SETTINGS)
    assert report.exit_code == 0
    assert_each_key_captured_once(box, ledger, 100)
    outcomes = [a.outcome for e in ledger.list_entries("captured", limit=100) for a in ledger.show(e.key).attempts]
    assert "OutcomeUnknown" in outcomes


async def test_an_outage_ends_sync_with_4_and_replay_finishes_the_work(sandbox_factory, ledger, tmp_path):
    db = tmp_path / "box.sqlite3"
    box = sandbox_factory(db_path=db)
    key, secret = box.create_client(rate_limit=10_000)
    port = int(box.base_url.split(":")[2].split("/")[0])
    box.server.stop()
    ledger.enqueue("src", "v1", [person(i) for i in range(10)], None)
    quick = RetryPolicy(max_attempts=3, max_elapsed_s=2, initial_backoff_s=0.01, max_backoff_s=0.02)
    async with CaptureClient(box.base_url, key, secret, retry_policy=quick) as client:
        assert (await sync(ledger, client, [], SETTINGS)).exit_code == 4
    from connector.sandbox import SandboxServer

    with SandboxServer(db, port=port) as back:
        async with client_for(back, key, secret) as client:
            assert (await replay(ledger, client, SETTINGS)).exit_code == 0
        assert sorted(back.store.capture_counts_by_person_key().values()) == [1] * 10
