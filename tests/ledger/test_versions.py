"""The ledger's promises about versions of one record (design 2 and 3): one live version at a time,
the newest data sent last, keys from content alone, and no key ever sent with a second body."""

from __future__ import annotations

import json
import sqlite3

import pytest

from connector.keys import content_hash
from connector.ledger import SCHEMA_VERSION, BatchWork, Claim, Ledger, Mapped, Member, Outcome
from connector.ledger.schema import MIGRATIONS


def version(rid: int, company: str | None = None) -> Mapped:
    payload = {"name": f"Person {rid}", "email": f"p{rid}@example.com"}
    if company is not None:
        payload["company"] = company
    return Mapped(str(rid), payload=json.dumps(payload, separators=(",", ":")))


@pytest.fixture
def ledger(ledger_target):
    """On SQLite, then on PostgreSQL: every promise holds on both engines."""
    with Ledger(ledger_target) as led:
        yield led


def states(ledger: Ledger) -> list[tuple[str, str | None]]:
    return [(e.state, (e.payload or {}).get("company")) for e in ledger.list_entries(limit=100)]


def settle_all(ledger: Ledger, batch, state: str = "captured") -> None:
    ledger.settle(batch, [Outcome(m.entry_id, state) for m in batch.members], [])  # type: ignore[arg-type]


@pytest.mark.parametrize("park", ["in_flight", "stalled", "blocked", "unknown"])
def test_a_newer_version_waits_while_an_older_one_may_still_be_sent(ledger, park):
    ledger.enqueue("crm", "m", [version(1, "Old"), version(2)], None)
    batch = ledger.claim(Claim(10))
    if park == "stalled":
        ledger.stall(batch, "503 not retryable", [])
    elif park == "blocked":
        ledger.block(batch, "409", [])
    elif park == "unknown":
        old, neighbour = batch.members
        ledger.settle(
            batch, [Outcome(old.entry_id, "unknown", error="no evidence"), Outcome(neighbour.entry_id, "captured")], []
        )
    ledger.enqueue("crm", "m", [version(1, "New")], None)

    report = ledger.status()
    assert report.attention.waiting == 1 and not report.settled
    # The older version is the only thing that can be sent now; the newer one is not claimable.
    claimed = ledger.claim(Claim(10, skip={batch.id}, include_stalled=True))
    if park == "unknown":
        assert [json.loads(m.payload)["company"] for m in claimed.members] == ["Old"]  # re-offered alone
        settle_all(ledger, claimed, "duplicate")
    elif park == "blocked":
        assert claimed is None
        ledger.resolve(batch.key, "requeue")  # an older version is not sent over a newer one
        assert states(ledger) == [("superseded", "Old"), ("pending", None), ("pending", "New")]
    else:
        assert claimed is None
        settle_all(ledger, ledger.claim(Claim(10, include_stalled=True)))
    following = ledger.claim(Claim(10))
    assert [json.loads(m.payload).get("company") for m in following.members][-1] == "New"


def test_only_the_newest_failed_version_is_requeued(ledger):
    ledger.enqueue("crm", "m", [version(1, "Old"), version(2, "Only")], None)
    batch = ledger.claim(Claim(10))
    ledger.settle(batch, [Outcome(m.entry_id, "failed", error="refused") for m in batch.members], [])
    ledger.enqueue("crm", "m", [version(1, "New")], None)
    settle_all(ledger, ledger.claim(Claim(10)))
    assert ledger.requeue_failed(before=float("inf")) == 1
    again = ledger.claim(Claim(10))
    assert [json.loads(m.payload)["company"] for m in again.members] == ["Only"]
    assert again.members[0].key == batch.members[1].key  # same person, same per-person key


def test_a_mapping_edit_that_yields_the_same_payload_is_no_new_work(ledger):
    ledger.enqueue("crm", "mapping-v1", [version(1), version(2)], None)
    settle_all(ledger, ledger.claim(Claim(10)))
    counts = ledger.enqueue("crm", "mapping-v2", [version(1), version(2)], None)
    assert (counts.enqueued, counts.unchanged) == (0, 2)
    assert ledger.claim(Claim(10)) is None


def test_a_requeued_entry_keeps_its_key_and_body_and_every_old_batch_still_rebuilds(tmp_path):
    """The old defect: a requeued entry was rewritten in place when its record changed, so its old
    batch could no longer be rebuilt and every later claim failed."""
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as ledger:
        ledger.enqueue("crm", "m", [version(1, "A"), version(2, "A")], None)
        first = ledger.claim(Claim(10))
        ledger.stall(first, "503", [])
        ledger.resolve(first.key, "requeue")  # back to pending, same per-person keys
        ledger.enqueue("crm", "m", [version(1, "B")], None)  # waits for the requeued "A"
        counts = ledger.enqueue("crm", "m", [version(1, "A")], None)  # back to "A", which the CRM may hold
        assert (counts.enqueued, counts.unchanged, counts.superseded) == (0, 1, 1)  # "B" never goes
        second = ledger.claim(Claim(10))
        ledger.stall(second, "503", [])
    with Ledger(path) as reopened:
        rebuilt = reopened.claim(Claim(10, include_stalled=True))
        assert (rebuilt.key, rebuilt.body) == (second.key, second.body)
        keys = [e.key for e in reopened.list_entries(limit=100)]
        assert len(keys) == len(set(keys)) == 3
        bodies = {m.key: m.payload for m in first.members + second.members}
        for entry in reopened.list_entries(limit=100):
            if entry.key in bodies:
                assert json.loads(bodies[entry.key]) == entry.payload


def test_an_unknown_member_is_reoffered_once_alone_under_a_new_batch_key(ledger):
    ledger.enqueue("crm", "m", [version(1), version(2)], None)
    batch = ledger.claim(Claim(10))
    ledger.settle(batch, [Outcome(m.entry_id, "unknown", error="no evidence") for m in batch.members], [])
    alone = ledger.claim(Claim(10))
    assert alone.operation == "bulk" and len(alone.members) == 1 and alone.key != batch.key
    assert alone.members[0].key == batch.members[0].key
    assert json.loads(alone.body)["persons"][0]["idempotency_key"] == alone.members[0].key
    # While in hand, it is in flight: neither offered again nor listed unknown.
    second = ledger.claim(Claim(10, skip=frozenset({alone.id})))
    assert [m.key for m in second.members] == [batch.members[1].key]
    assert ledger.claim(Claim(10, skip=frozenset({alone.id, second.id}))) is None
    assert ledger.status().by_state["in_flight"] == 2 and not ledger.list_entries("unknown")
    ledger.settle(alone, [Outcome(alone.members[0].entry_id, "unknown", error="still no evidence")], [])
    other = ledger.claim(Claim(10))
    assert other.members[0].key == batch.members[1].key
    settle_all(ledger, other, "duplicate")
    # Asked alone and still unplaceable: left for a person, never re-sent blindly.
    assert ledger.claim(Claim(10)) is None
    report = ledger.status()
    assert report.attention.unresolved == 1 and not report.settled
    assert ledger.blocked_count() == 1
    [unknown] = ledger.list_entries("unknown")
    assert unknown.last_error == "still no evidence"


def test_a_person_once_offered_in_bulk_is_never_re_offered_with_post_person(ledger):
    ledger.enqueue("crm", "m", [version(1), version(2)], None)
    bulk = ledger.claim(Claim(10))
    ledger.block(bulk, "409", [])
    ledger.resolve(bulk.key, "requeue")
    ledger.enqueue("crm", "m", [version(3)], None)
    sends: list = []
    for _ in range(3):  # batch_size is now 1
        sends.append(ledger.claim(Claim(1, skip={b.id for b in sends})))
    assert [(b.operation, b.members[0].key) for b in sends] == [
        ("bulk", bulk.members[0].key),
        ("bulk", bulk.members[1].key),
        ("person", sends[2].members[0].key),
    ]


def test_status_is_not_settled_while_anything_is_blocked_stalled_or_unknown(ledger):
    ledger.enqueue("crm", "m", [version(1), version(2), version(3)], None)
    assert not ledger.status().settled
    batch = ledger.claim(Claim(1))
    ledger.block(batch, "409 in progress", [])
    report = ledger.status()
    assert report.attention.blocked == 1 and not report.settled
    settle_all(ledger, ledger.claim(Claim(1)))
    stalled = ledger.claim(Claim(1))
    ledger.stall(stalled, "503", [])
    assert ledger.status().attention.stalled == 1
    ledger.resolve(batch.key, "dismiss")
    settle_all(ledger, ledger.claim(Claim(1, include_stalled=True)))
    assert ledger.status().settled


def test_resolve_refuses_what_needs_no_resolving(ledger):
    ledger.enqueue("crm", "m", [version(1)], None)
    batch = ledger.claim(Claim(10))
    settle_all(ledger, batch)
    with pytest.raises(ValueError, match="settled"):
        ledger.resolve(batch.key, "dismiss")
    with pytest.raises(ValueError, match="captured"):
        ledger.resolve(batch.members[0].key, "requeue")


def _v1_key(source: str, rid: str, digest: str, mapping_version: str, revision: int) -> str:
    import hashlib

    material = "\x1f".join((source, rid, digest, mapping_version, str(revision)))
    return "p-" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:40]


def test_a_version_1_ledger_migrates_without_resending_what_was_captured(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    import sqlite_utils

    conn = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](sqlite_utils.Database(conn))
    conn.execute("PRAGMA user_version = 1")
    payload = version(1).payload
    digest = content_hash(payload.encode())
    conn.execute(
        "INSERT INTO entries (id, key, source, record_id, state, payload, content_hash, mapping_version, "
        "revision, created_at, updated_at) VALUES (1, ?, 'crm', '1', 'captured', ?, ?, 'old-mapping', 0, 0, 0)",
        (_v1_key("crm", "1", digest, "old-mapping", 0), payload, digest),
    )
    conn.execute("INSERT INTO records VALUES ('crm', '1', 1)")
    conn.close()
    with Ledger(path) as ledger:
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        counts = ledger.enqueue("crm", "new-mapping", [version(1)], None)
        assert counts.unchanged == 1 and ledger.claim(Claim(10)) is None
        ledger.enqueue("crm", "new-mapping", [version(1, "Acme")], None)
        assert [json.loads(m.payload).get("company") for m in ledger.claim(Claim(10)).members] == ["Acme"]


def test_notes_beside_a_valid_payload_are_kept_after_capture_and_change_nothing(ledger):
    noted = Mapped("1", payload=version(1).payload, reasons=("phone (from `Phone`): dropped: not a valid number",))
    ledger.enqueue("crm", "m", [noted], None)
    settle_all(ledger, ledger.claim(Claim(10)))
    [entry] = ledger.list_entries("captured")
    assert entry.notes == noted.reasons[0] and entry.last_error is None
    assert ledger.show(entry.key).entry.notes == noted.reasons[0]
    assert ledger.enqueue("crm", "m", [version(1)], None).unchanged == 1


def _unknown_reoffered_alone(ledger) -> tuple[BatchWork, Member]:
    """Two versions in a batch, the first settled unknown and claimed again in a batch of its own."""
    ledger.enqueue("crm", "m", [version(1), version(2)], None)
    batch = ledger.claim(Claim(10))
    first, second = batch.members
    ledger.settle(
        batch, [Outcome(first.entry_id, "unknown", error="no evidence"), Outcome(second.entry_id, "captured")], []
    )
    alone = ledger.claim(Claim(10))
    return alone, first


def test_an_unknown_entry_whose_batch_alone_stalled_is_stalled_and_in_flight_not_unresolved(ledger):
    alone, first = _unknown_reoffered_alone(ledger)
    assert [m.key for m in alone.members] == [first.key]
    ledger.stall(alone, "503", [])
    report = ledger.status()
    # It waits for `replay` like any stalled batch: not for a person's decision, and counted once.
    assert report.attention.stalled == 1
    assert (report.attention.unknown, report.attention.unresolved) == (0, 0)
    assert report.by_state.get("in_flight") == 1 and not report.by_state.get("unknown")
    assert ledger.blocked_count() == 0


def test_an_unknown_entry_in_flight_alone_is_resolved_by_its_batch_not_by_its_own_key(ledger):
    alone, first = _unknown_reoffered_alone(ledger)
    for stall in (False, True):
        if stall:
            ledger.stall(alone, "503", [])
        # Dismissed while its batch may still be sent, a later settle would overwrite the decision.
        with pytest.raises(ValueError, match=f"in flight in batch {alone.key}"):
            ledger.resolve(first.key, "dismiss")
        assert ledger.status().by_state.get("in_flight") == 1
    assert ledger.resolve(alone.key, "dismiss") == 1
    assert ledger.status().by_state.get("dismissed") == 1


def test_claim_walks_past_every_waiting_version_to_the_next_sendable_one(ledger):
    """Claim checks each pending version against the records of the versions in flight: a record
    whose older version is in flight waits however many such records lead the queue, and the first
    record with nothing live before it is still found."""
    ledger.enqueue("crm", "m", [version(rid, "Old") for rid in range(1, 51)], None)
    in_flight = ledger.claim(Claim(50))
    ledger.enqueue("crm", "m", [version(rid, "New") for rid in range(1, 51)], None)  # 50 wait behind it
    ledger.enqueue("crm", "m", [version(51)], None)

    claimed = ledger.claim(Claim(5, skip={in_flight.id}))
    assert [json.loads(m.payload)["name"] for m in claimed.members] == ["Person 51"]
    assert ledger.claim(Claim(5, skip={in_flight.id, claimed.id})) is None

    settle_all(ledger, in_flight)  # the older versions settle: the newer ones go, in id order
    settle_all(ledger, claimed)
    newer = ledger.claim(Claim(100))
    assert [json.loads(m.payload)["company"] for m in newer.members] == ["New"] * 50
    assert [m.entry_id for m in newer.members] == sorted(m.entry_id for m in newer.members)


def test_a_version_waits_behind_an_older_blocked_one_among_many_settled_versions(ledger):
    """A record changed at every poll keeps its settled versions forever; the newest waits for an
    older blocked one however many settled versions lie between them."""
    ledger.enqueue("crm", "m", [version(1, "Blocked")], None)
    blocked = ledger.claim(Claim(10))
    ledger.block(blocked, "409", [])
    for n in range(30):  # each new version replaces the one before (never sent): superseded
        ledger.enqueue("crm", "m", [version(1, f"Company {n}")], None)
    ledger.enqueue("crm", "m", [version(2)], None)

    claimed = ledger.claim(Claim(10))
    assert [json.loads(m.payload)["name"] for m in claimed.members] == ["Person 2"]
    assert ledger.claim(Claim(10, skip={claimed.id})) is None
