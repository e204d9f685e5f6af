"""Issue 13's situations, each against the real sandbox over loopback: whatever shape the server answers
in, and however the records change while older versions are unsettled, nothing is lost, nothing is
captured twice, and the CRM ends with the newest version of every record.

The ledger is filled directly and drained with the engine's `sync`/`replay`; the oracle is what the
sandbox holds (its captures, in order, with the fields each wrote)."""

from __future__ import annotations

import json
import random
from collections import Counter

import httpx
import pytest

from connector.api import CaptureClient, RetryPolicy
from connector.delivery import DeliverySettings, replay, sync
from connector.ledger import Claim, Ledger, Mapped
from connector.sandbox import Behaviour, Faults

SHAPES = ("echo", "nested", "index1", "array_index", "bare")
FAST_RETRY = RetryPolicy(max_attempts=6, max_elapsed_s=20, initial_backoff_s=0.01, max_backoff_s=0.05)


def person(i: int, company: str = "Acme", email: str | None = None) -> Mapped:
    data = {"name": f"Person {i}", "email": email or f"person{i}@example.com", "company": company}
    return Mapped(f"r{i}", payload=json.dumps(data, separators=(",", ":")))


@pytest.fixture
def ledger(ledger_target):
    """Each integrity promise on SQLite, then on PostgreSQL."""
    with Ledger(ledger_target, synchronous="NORMAL") as led:
        yield led


def first_draws(seed: int, n: int, p: float) -> list[bool]:
    rng = random.Random(seed)
    return [rng.random() < p for _ in range(n)]


def client_for(box, key, secret) -> CaptureClient:
    return CaptureClient(box.base_url, key, secret, retry_policy=FAST_RETRY)


def captures_by_key(box) -> Counter[str]:
    return Counter(c["person_key"] or c["request_key"] for c in box.store.captures())


def last_written(box) -> dict[str, dict]:
    """identity -> the fields of the last capture of it: what the CRM ends up holding from us."""
    out: dict[str, dict] = {}
    for c in box.store.captures():  # in capture order
        out[c["identity"]] = c["data"]
    return out


@pytest.mark.parametrize("shape", SHAPES)
async def test_every_result_shape_settles_each_member_truthfully_and_captures_none_twice(
    sandbox_factory, ledger, shape
):
    """Points 1 and 7: mixed outcomes (new, already captured, refused) in every shape. A member the
    matcher cannot place is asked again alone in a bulk request under its own per-person key, never
    with POST /person (whose keys need not be the bulk's), and never settled by a guess."""
    box = sandbox_factory(behaviour=Behaviour(bulk_result_shape=shape))
    key, secret = box.create_client(rate_limit=10_000)
    bad = [Mapped(f"bad{i}", payload=json.dumps({"name": "Bad", "email": f"not-an-email-{i}"})) for i in range(3)]
    ledger.enqueue("src", "v1", [person(i) for i in range(12)] + bad + [person(i) for i in range(12, 24)], None)
    batch = ledger.claim(Claim(27))
    async with client_for(box, key, secret) as client:
        # An earlier request (crashed before we settled it, say) already captured some of them.
        early = {"persons": [json.loads(m.payload) | {"idempotency_key": m.key} for m in batch.members[:5]]}
        await client.capture_bulk(json.dumps(early).encode(), "b-earlier-request")
        report = await replay(ledger, client, DeliverySettings(batch_size=27))
    assert report.exit_code == 0

    captured = captures_by_key(box)
    assert all(n == 1 for n in captured.values()), "a person was captured twice"
    assert not [c for c in box.store.captures() if c["operation"] == "person"], "re-sent with POST /person"
    states = {e.key: e.state for e in ledger.list_entries(limit=100)}
    for member in batch.members:
        if "not-an-email" in member.payload:
            assert states[member.key] == "failed" and member.key not in captured
        else:
            assert states[member.key] in ("captured", "duplicate") and member.key in captured
    assert all(states[m.key] == "duplicate" for m in batch.members[:5])


async def test_an_ambiguous_member_is_never_sent_with_post_person_even_when_keys_are_shared(sandbox_factory, tmp_path):
    """Under a server that shares keys between operations the old re-send happened to be harmless;
    under one that does not (the default) it captured every such person twice. Now neither sees it."""
    for scope in ("operation", "shared"):
        box = sandbox_factory(behaviour=Behaviour(bulk_result_shape="bare", idempotency_scope=scope))
        key, secret = box.create_client(rate_limit=10_000)
        with Ledger(tmp_path / f"{scope}.sqlite3") as led:
            bad = Mapped("bad", payload=json.dumps({"name": "Bad", "email": "nope"}))
            led.enqueue("src", "v1", [person(1), bad, person(2)], None)
            async with client_for(box, key, secret) as client:
                assert (await replay(led, client, DeliverySettings())).exit_code == 0
            # Asked alone, the two the batch did capture come back as duplicates of themselves.
            assert sorted(e.state for e in led.list_entries(limit=10)) == ["duplicate", "duplicate", "failed"]
        assert sorted(captures_by_key(box).values()) == [1, 1]


async def test_an_edit_while_the_older_version_is_stalled_lands_after_it(sandbox_factory, ledger, tmp_path):
    """Point 2: the older version's batch is stopped by a non-retryable 503; the record is edited. The
    newer version waits for the older one, so the CRM ends with the newer data."""
    db = tmp_path / "box.sqlite3"
    failing = sandbox_factory(db_path=db, faults=Faults(p_fatal_503=1.0))
    key, secret = failing.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(i, "Old") for i in range(6)], None)
    batch = ledger.claim(Claim(6))
    async with httpx.AsyncClient() as raw:  # the batch meets the outage
        response = await raw.post(
            failing.base_url + "/persons/bulk",
            content=batch.body,
            headers={**failing.headers(key, secret), "Idempotency-Key": batch.key, "Content-Type": "application/json"},
        )
    assert response.status_code == 503
    ledger.stall(batch, "503 not retryable", [])
    failing.server.stop()

    healthy = sandbox_factory(db_path=db)
    ledger.enqueue("src", "v1", [person(i, "New") for i in range(6)], None)
    async with client_for(healthy, key, secret) as client:
        first = await sync(ledger, client, [], DeliverySettings(batch_size=3, concurrency=4))
        assert first.exit_code == 4 and not healthy.store.captures(), "the newer version waits for the older"
        assert (await replay(ledger, client, DeliverySettings(batch_size=3, concurrency=4))).exit_code == 0
    assert {fields["company"] for fields in last_written(healthy).values()} == {"New"}
    assert len(healthy.store.captures()) == 12 and all(n == 1 for n in captures_by_key(healthy).values())


async def test_an_edit_after_a_kill_between_batch_write_and_send_lands_last(sandbox_factory, ledger):
    """Point 2, the kill: a batch was written (so it may have left) when the process died; the records
    are edited; the next sync, 4 requests in flight, sends the written batch first and the newer
    versions only after it settled, even when the server is slow to answer the written batch."""
    # Draws: GET /info, then the written batch (slow), then every later request (fast).
    seed = next(s for s in range(10_000) if first_draws(s, 12, 0.5) == [False, True] + [False] * 10)
    sandbox = sandbox_factory(faults=Faults(p_latency_spike=0.5, spike_s=0.5, seed=seed))
    key, secret = sandbox.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(i, "Old") for i in range(40)], None)
    ledger.claim(Claim(40))  # written ahead, never settled: the process was killed here
    ledger.enqueue("src", "v1", [person(i, "New") for i in range(40)], None)
    async with client_for(sandbox, key, secret) as client:
        report = await sync(ledger, client, [], DeliverySettings(batch_size=5, concurrency=4))
    assert report.exit_code == 0
    assert {fields["company"] for fields in last_written(sandbox).values()} == {"New"}
    assert Counter(e.state for e in ledger.list_entries(limit=200)) == {"captured": 80}


async def test_requeues_and_returning_content_never_send_a_key_with_a_second_body(sandbox, ledger):
    """Point 8: requeue, edit, return to an earlier content, requeue again: every claim still
    rebuilds its batch byte for byte, no key meets a 409 for another body, the newest data lands."""
    key, secret = sandbox.create_client(rate_limit=10_000)
    ledger.enqueue("src", "v1", [person(1, "A"), person(2, "A")], None)
    first = ledger.claim(Claim(1))  # POST /person
    ledger.block(first, "409", [])
    ledger.resolve(first.key, "requeue")
    ledger.enqueue("src", "v1", [person(1, "B")], None)
    ledger.enqueue("src", "v1", [person(1, "A")], None)
    async with client_for(sandbox, key, secret) as client:
        assert (await sync(ledger, client, [], DeliverySettings(batch_size=1, concurrency=2))).exit_code == 0
        ledger.enqueue("src", "v1", [person(2, "C")], None)
        assert (await sync(ledger, client, [], DeliverySettings(batch_size=10))).exit_code == 0
    statuses = [a.status_code for e in ledger.list_entries(limit=20) for a in ledger.show(e.key).attempts]
    assert 409 not in statuses
    assert {f["name"]: f["company"] for f in last_written(sandbox).values()} == {"Person 1": "A", "Person 2": "C"}
    keys = [e.key for e in ledger.list_entries(limit=20)]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("shape", ["echo", "bare"])
async def test_a_server_that_refuses_whole_requests_for_one_invalid_person_loses_no_one(sandbox_factory, ledger, shape):
    """How an invalid person is reported is not shown (spec 4.3 and 7): this server answers the whole
    bulk request 400. The batch is split under new keys until the refused persons stand alone."""
    box = sandbox_factory(behaviour=Behaviour(bulk_result_shape=shape, invalid_person="reject-request"))
    key, secret = box.create_client(rate_limit=10_000)
    bad = [Mapped(f"bad{i}", payload=json.dumps({"name": "Bad", "email": f"not-an-email-{i}"})) for i in range(2)]
    ledger.enqueue(
        "src", "v1", [person(i) for i in range(9)] + [bad[0]] + [person(i) for i in range(9, 18)] + [bad[1]], None
    )
    async with client_for(box, key, secret) as client:
        report = await replay(ledger, client, DeliverySettings(batch_size=20))
    assert report.exit_code == 0
    states = Counter(e.state for e in ledger.list_entries(limit=100))
    assert states == {"captured": 18, "failed": 2}
    assert sorted(e.record_id for e in ledger.list_entries("failed")) == ["bad0", "bad1"]
    assert sorted(captures_by_key(box).values()) == [1] * 18
