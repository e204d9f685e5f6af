"""Settlement under every result shape: one state per member, never a wrong one, never a resend."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from connector.api import BulkCaptureResult
from connector.delivery import match_bulk
from connector.ledger import Claim, Ledger, Mapped, Member

TRUTHS = ("captured", "duplicate", "failed", "omitted")
SHAPES = ("index", "key", "echo", "bare")
ARRAY = {"captured": "successful", "duplicate": "duplicates", "failed": "failed"}


def _members(n: int, shared_email: bool) -> list[Member]:
    out = []
    for i in range(n):
        email = "same@example.com" if shared_email and i < 2 else f"person{i}@example.com"
        payload = json.dumps({"name": f"P {i}", "email": email}, separators=(",", ":"))
        out.append(Member(entry_id=100 + i, key=f"p-{i:040d}", payload=payload))
    return out


def _object(member: Member, pos: int, shape: str, truth: str) -> dict:
    obj: dict = {"person_id": f"00000000-0000-4000-8000-{pos:012d}"} if truth != "failed" else {}
    if truth == "failed":
        obj["error"] = {"code": "rejected", "message": f"bad person {pos}"}
    if shape == "index":
        obj["index"] = pos
    elif shape == "key":
        obj["idempotency_key"] = member.key
    elif shape == "echo":
        obj["email"] = json.loads(member.payload)["email"].upper()
    return obj


cases = st.integers(min_value=1, max_value=25).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from(TRUTHS), min_size=n, max_size=n),
        st.lists(st.sampled_from(SHAPES), min_size=n, max_size=n),
        st.booleans(),
        st.randoms(use_true_random=False),
    )
)


def _result(members, truths, shapes, rnd) -> BulkCaptureResult:
    arrays: dict[str, list] = {"successful": [], "duplicates": [], "failed": []}
    for pos, (m, truth, shape) in enumerate(zip(members, truths, shapes)):
        if truth != "omitted":
            arrays[ARRAY[truth]].append(_object(m, pos, shape, truth))
    for objs in arrays.values():
        rnd.shuffle(objs)
    return BulkCaptureResult(**arrays)


@settings(max_examples=300, deadline=None)
@given(cases)
def test_every_member_gets_exactly_one_state_and_never_a_wrong_one(case):
    truths, shapes, shared_email, rnd = case
    members = _members(len(truths), shared_email)
    outcomes = match_bulk(members, _result(members, truths, shapes, rnd))

    assert [o.entry_id for o in outcomes] == [m.entry_id for m in members]
    for outcome, truth, shape in zip(outcomes, truths, shapes):
        assert outcome.state in ("captured", "duplicate", "failed", "unknown")
        if truth == "omitted":
            # The server said nothing about it: it can only be unknown, unless the count rule
            # could not tell it apart, which it never assigns wrongly below.
            assert outcome.state == "unknown"
        elif outcome.state != "unknown":
            assert outcome.state == truth
        if truth != "omitted" and shape in ("index", "key"):
            assert outcome.state == truth, "strong evidence must settle the member"
        if outcome.state == "failed":
            assert outcome.error


@settings(max_examples=60, deadline=None)
@given(cases)
def test_captured_and_duplicate_entries_are_never_sent_again(case):
    truths, shapes, shared_email, rnd = case
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "ledger.sqlite3", synchronous="NORMAL")
        n = len(truths)
        ledger.enqueue(
            "src", "v1",
            [Mapped(str(i), payload=json.dumps({"name": f"P {i}", "email": f"p{i}@example.com"}, separators=(",", ":"))) for i in range(n)],
            {"offset": n},
        )
        batch = ledger.claim(Claim(100))
        assert batch is not None and len(batch.members) == n
        outcomes = match_bulk(batch.members, _result(list(batch.members), truths, shapes, rnd))
        ledger.settle(batch, outcomes, [])
        final = {o.entry_id: o.state for o in outcomes}

        # Drain everything the ledger would still send, including failed ones requeued by replay.
        ledger.requeue_failed(before=float("inf"))
        resent: set[int] = set()
        while (work := ledger.claim(Claim(100, include_stalled=True))) is not None:
            resent.update(m.entry_id for m in work.members)
            ledger.settle(work, [type(outcomes[0])(m.entry_id, "captured") for m in work.members], [])
        ledger.close()

    settled_for_good = {eid for eid, state in final.items() if state in ("captured", "duplicate")}
    assert not (resent & settled_for_good)
    assert resent == {eid for eid, state in final.items() if state in ("failed", "unknown")}
