"""The ledger's promises: atomic enqueue with the cursor, stable keys, write-ahead batches, clear errors."""

from __future__ import annotations

import json
import sqlite3

import pytest

from connector.api.models import encode_bulk
from connector.ledger import SCHEMA_VERSION, Claim, Ledger, LedgerError, LedgerLocked, Mapped, Outcome


def person(i: int, **extra) -> Mapped:
    payload = {"name": f"Person {i}", "email": f"p{i}@example.com", **extra}
    return Mapped(str(i), payload=json.dumps(payload, separators=(",", ":")))


@pytest.fixture
def ledger(ledger_target):
    """On SQLite, then on PostgreSQL: every promise holds on both engines."""
    with Ledger(ledger_target) as led:
        yield led


def nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {state: n for state, n in counts.items() if n}


def keys_of(ledger: Ledger, state: str | None = None) -> dict[str, str]:
    return {e.record_id: e.key for e in ledger.list_entries(state, limit=10_000)}


def test_enqueue_commits_records_and_cursor_together(ledger):
    counts = ledger.enqueue("crm", "m1", [person(1), person(2)], {"offset": 2})
    assert (counts.enqueued, counts.unchanged, counts.rejected) == (2, 0, 0)
    assert ledger.source_state("crm") == {"offset": 2}
    assert ledger.status().by_state["pending"] == 2


def test_a_failed_enqueue_writes_neither_records_nor_cursor(ledger):
    ledger.enqueue("crm", "m1", [person(1)], {"offset": 1})

    def exploding():
        yield person(2)
        raise RuntimeError("source died mid-chunk")

    with pytest.raises(RuntimeError):
        ledger.enqueue("crm", "m1", exploding(), {"offset": 3})
    assert ledger.source_state("crm") == {"offset": 1}
    assert set(keys_of(ledger)) == {"1"}


def test_unchanged_records_are_skipped_and_changed_ones_get_new_keys(ledger):
    ledger.enqueue("crm", "m1", [person(1), person(2)], None)
    first = keys_of(ledger)
    batch = ledger.claim(Claim(100))
    ledger.settle(batch, [Outcome(m.entry_id, "captured") for m in batch.members], [])

    again = ledger.enqueue("crm", "m1", [person(1), person(2, company="Acme")], None)
    assert (again.enqueued, again.unchanged) == (1, 1)
    pending = keys_of(ledger, "pending")
    assert set(pending) == {"2"} and pending["2"] != first["2"]


def test_content_that_returns_to_an_earlier_value_is_new_work_with_a_new_key(ledger):
    keys = []
    for version in (person(1), person(1, company="Acme"), person(1)):
        ledger.enqueue("crm", "m1", [version], None)
        batch = ledger.claim(Claim(100))
        keys.append(batch.members[0].key)
        ledger.settle(batch, [Outcome(batch.members[0].entry_id, "captured")], [])
    assert len(set(keys)) == 3


def test_keys_are_deterministic_and_carry_no_record_data(tmp_path):
    with Ledger(tmp_path / "a.sqlite3") as a, Ledger(tmp_path / "b.sqlite3") as b:
        a.enqueue("crm", "m1", [person(7)], None)
        b.enqueue("crm", "m1", [person(7)], None)
        assert keys_of(a) == keys_of(b)
        key = keys_of(a)["7"]
        assert "p7@example.com" not in key and len(key) <= 512


def test_a_pending_entry_that_changes_before_sending_is_superseded_not_doubled(ledger):
    ledger.enqueue("crm", "m1", [person(1)], None)
    counts = ledger.enqueue("crm", "m1", [person(1, company="Acme")], None)
    assert counts.superseded == 1
    old, new = ledger.list_entries(limit=10)
    assert (old.state, new.state) == ("superseded", "pending") and old.key != new.key
    assert "company" not in old.payload  # kept as it was, for audit
    batch = ledger.claim(Claim(100))
    assert [m.key for m in batch.members] == [new.key]


def test_rejections_are_kept_with_reasons_and_do_not_block_neighbours(ledger):
    bad = Mapped("2", raw={"First": "Ann"}, reasons=("needs `email` or `phone`",))
    counts = ledger.enqueue("crm", "m1", [person(1), bad, person(3)], None)
    assert (counts.enqueued, counts.rejected) == (2, 1)
    [rejected] = ledger.list_entries("rejected")
    assert rejected.record_id == "2" and "email" in rejected.last_error
    assert rejected.payload["record"] == {"First": "Ann"}
    batch = ledger.claim(Claim(100))
    assert [m.key for m in batch.members] == [keys_of(ledger)["1"], keys_of(ledger)["3"]]


def test_a_written_batch_survives_a_crash_with_its_key_and_exact_bytes(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as first:
        first.enqueue("crm", "m1", [person(i) for i in range(5)], None)
        batch = first.claim(Claim(3))
    # The body is the documented bulk body for these members under their per-person keys.
    expected = encode_bulk([{**json.loads(m.payload), "idempotency_key": m.key} for m in batch.members])
    assert batch.body == expected
    with Ledger(path) as reopened:
        again = reopened.claim(Claim(3))
    assert (again.key, again.body) == (batch.key, batch.body)


def test_settle_can_claim_the_next_batch_in_the_same_commit(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as first:
        first.enqueue("crm", "m1", [person(i) for i in range(5)], None)
        batch = first.claim(Claim(2))
        outcomes = [Outcome(m.entry_id, "captured") for m in batch.members]
        following = first.settle(batch, outcomes, [], then=Claim(2, skip={batch.id}))
        assert following is not None and following.key != batch.key
        assert [m.entry_id for m in following.members] == [m.entry_id + 2 for m in batch.members]
    # Both facts are on disk: the first batch settled, the second written ahead with its key and bytes.
    with Ledger(path) as reopened:
        assert nonzero(reopened.status().by_state) == {"captured": 2, "in_flight": 2, "pending": 1}
        again = reopened.claim(Claim(2))
        assert (again.key, again.body) == (following.key, following.body)


def test_settle_claims_nothing_unless_asked_or_when_no_work_is_left(ledger):
    ledger.enqueue("crm", "m1", [person(1), person(2)], None)
    batch = ledger.claim(Claim(1))
    assert ledger.settle(batch, [Outcome(batch.members[0].entry_id, "captured")], []) is None
    assert nonzero(ledger.status().by_state) == {"captured": 1, "pending": 1}
    last = ledger.claim(Claim(1))
    assert (
        ledger.settle(last, [Outcome(last.members[0].entry_id, "captured")], [], then=Claim(1, skip={last.id})) is None
    )
    assert nonzero(ledger.status().by_state) == {"captured": 2}


def test_split_gives_halves_new_keys_and_block_parks_a_batch(ledger):
    ledger.enqueue("crm", "m1", [person(i) for i in range(4)], None)
    batch = ledger.claim(Claim(4))
    left, right = ledger.split(batch, "400 invalid", [])
    assert len(left.members) == 2 and len(right.members) == 2
    assert len({batch.key, left.key, right.key}) == 3
    ledger.block(left, "409 conflict", [])
    assert ledger.blocked_count() == 2
    # A blocked batch is never claimed again automatically.
    nxt = ledger.claim(Claim(4, include_stalled=True))
    assert nxt.key == right.key


def test_resolve_requeue_and_dismiss(ledger):
    ledger.enqueue("crm", "m1", [person(i) for i in range(4)], None)
    batch = ledger.claim(Claim(2))
    ledger.block(batch, "409", [])
    assert ledger.resolve(batch.key, "requeue") == 2
    assert ledger.status().by_state["pending"] == 4
    again = ledger.claim(Claim(4))
    assert again.key != batch.key
    ledger.block(again, "409", [])
    one = again.members[0].key
    assert ledger.resolve(one, "dismiss") == 1
    assert ledger.status().by_state["dismissed"] == 1
    with pytest.raises(KeyError):
        ledger.resolve("p-nope", "requeue")


def test_show_explains_an_entry_with_its_batches(ledger):
    ledger.enqueue("crm", "m1", [person(1)], None)
    batch = ledger.claim(Claim(10))
    ledger.settle(batch, [Outcome(batch.members[0].entry_id, "captured", person_id="abc")], [])
    detail = ledger.show(batch.members[0].key)
    assert detail.entry.state == "captured" and detail.entry.person_id == "abc"
    assert detail.batches == [batch.key]
    assert ledger.show(batch.key).members[0].record_id == "1"
    with pytest.raises(KeyError):
        ledger.show("b-unknown")


def test_show_and_runs_show_find_every_batch_that_carried_an_entry_and_no_other(ledger):
    """`ledger show` and `runs show` read the members of the batches that may hold an entry (written
    since it was, up to its last one or the batches in flight), not every batch's: an entry carried
    by a blocked batch, then requeued into another among batches of other entries, lists both."""
    from connector.api.client import Attempt

    def tried(work):
        return [Attempt(work.operation, work.key, 1.7e9, 0.01, 409)]

    run = ledger.start_run("sync")
    ledger.enqueue("crm", "m1", [person(i) for i in range(1, 4)], None)
    first = ledger.claim(Claim(2))  # persons 1 and 2, in bulk
    ledger.block(first, "409", tried(first))
    ledger.resolve(first.key, "requeue")
    others = ledger.claim(Claim(1))  # person 1 comes first again, in another batch
    assert [m.key for m in others.members] == [first.members[0].key]
    ledger.settle(others, [Outcome(others.members[0].entry_id, "captured")], tried(others))
    rest = ledger.claim(Claim(10))
    ledger.settle(rest, [Outcome(m.entry_id, "captured") for m in rest.members], [])
    ledger.enqueue("crm", "m1", [person(4)], None)
    in_flight = ledger.claim(Claim(10))  # in flight: its open batch holds it

    assert ledger.show(first.members[0].key).batches == [first.key, others.key]
    assert [m.record_id for m in ledger.show(rest.key).members] == ["2", "3"]
    assert ledger.show(rest.members[0].key).batches == [first.key, rest.key]
    assert ledger.show(rest.members[1].key).batches == [rest.key]
    assert ledger.show(in_flight.members[0].key).batches == [in_flight.key]
    attempts = {e.record_id: e.attempts for e in ledger.run_entries(run)}
    assert attempts == {"1": 2, "2": 1, "3": 0, "4": 0}


def test_corrupt_file_gives_a_clear_error(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LedgerError, match="not a valid capture-sync ledger"):
        Ledger(path)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    Ledger(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(LedgerError, match="Upgrade capture-sync"):
        Ledger(path)


def test_locked_by_another_writer_is_a_clear_error(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    Ledger(path).close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with Ledger(path, busy_timeout_s=0.2) as led, pytest.raises(LedgerError, match="locked"):
            led.enqueue("crm", "m1", [person(1)], None)
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_only_one_daemon_per_ledger(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as a, Ledger(path) as b:
        a.acquire_daemon_lock()
        with pytest.raises(LedgerLocked):
            b.acquire_daemon_lock()
    with Ledger(path) as c:
        c.acquire_daemon_lock()
