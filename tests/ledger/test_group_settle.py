"""Group commit (`Ledger.settle_many`): several answered batches settled in one transaction, each as
it would be alone, the claims riding along never taking one batch twice, and all of it or none of it
on disk after a kill inside the group, on both engines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from connector.failpoints import ENV as FAILPOINTS_ENV
from connector.ledger import Claim, Ledger, Mapped, Outcome, Settlement


def person(i: int) -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"p{i}@example.com"}))


@pytest.fixture
def ledger(ledger_target):
    with Ledger(ledger_target) as led:
        yield led


def entries(ledger: Ledger) -> dict[str, tuple[str, str | None, str | None]]:
    return {e.record_id: (e.state, e.person_id, e.last_error) for e in ledger.list_entries(limit=100)}


def test_a_group_settles_each_batch_as_alone_and_its_claims_take_distinct_batches(ledger):
    ledger.enqueue("crm", "m1", [person(i) for i in range(10)], None)
    first = ledger.claim(Claim(2))
    second = ledger.claim(Claim(2, skip={first.id}))
    in_hand = {first.id, second.id}
    one, two = first.members, second.members
    answers = ledger.settle_many(
        [
            Settlement(
                first,
                [Outcome(one[0].entry_id, "captured", person_id="p-0"), Outcome(one[1].entry_id, "duplicate")],
                [],
                then=Claim(2, skip=in_hand),
            ),
            Settlement(
                second,
                [Outcome(two[0].entry_id, "failed", error="bad email"), Outcome(two[1].entry_id, "unknown", error="?")],
                [],
                then=Claim(2, skip=in_hand),
            ),
            Settlement(None, then=Claim(2, skip=in_hand)),
        ]
    )
    claimed = [work for work, _ in answers]
    assert all(work is not None for work in claimed)
    members = [m.entry_id for work in claimed for m in work.members]  # type: ignore[union-attr]
    assert len(set(members)) == len(members) == 5  # the unknown one is re-offered alone, then the pending ones
    assert len({work.id for work in claimed}) == 3  # type: ignore[union-attr]
    assert [merged for _, merged in answers] == [0, 0, 0]
    got = entries(ledger)
    assert got["0"] == ("captured", "p-0", None) and got["1"][0] == "duplicate"
    assert got["2"] == ("failed", None, "bad email") and got["3"][0] == "in_flight"  # the unknown, re-offered


def test_claims_in_one_group_never_take_the_same_written_batch_twice(ledger_target):
    with Ledger(ledger_target) as before:
        before.enqueue("crm", "m1", [person(i) for i in range(6)], None)
        written: list = []
        for _ in range(3):
            written.append(before.claim(Claim(2, skip={w.id for w in written})))
    with Ledger(ledger_target) as after:  # a restarted run: its `claimed` is empty, the batches open
        answers = after.settle_many([Settlement(None, then=Claim(2)) for _ in range(4)])
    assert [w.key if w else None for w, _ in answers] == [w.key for w in written] + [None]
    assert [w.body if w else None for w, _ in answers[:3]] == [w.body for w in written]


KILLED_IN_GROUP = textwrap.dedent(
    """
    import json, sys
    from connector.ledger import Claim, Ledger, Mapped, Outcome, Settlement
    with Ledger(sys.argv[1]) as ledger:
        ledger.enqueue("crm", "m1", [Mapped(str(i), payload=json.dumps({"email": f"p{i}@example.com"})) for i in range(4)], None)
        a = ledger.claim(Claim(2))
        b = ledger.claim(Claim(2, skip={a.id}))
        print(json.dumps([a.key, b.key]), flush=True)
        ledger.settle_many([Settlement(w, [Outcome(m.entry_id, "captured") for m in w.members], []) for w in (a, b)])
        print("settled", flush=True)
    """
)


def test_a_kill_inside_a_group_settle_leaves_every_batch_of_it_open_with_its_key(ledger_target, tmp_path):
    """The failpoint between two batches' writes, before the COMMIT: neither batch is settled, and
    both are claimed again first, with their keys, for a replay to resend them."""
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_IN_GROUP, str(ledger_target)],
        capture_output=True,
        text=True,
        env={**os.environ, FAILPOINTS_ENV: "group-settle=1"},
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    keys = json.loads(proc.stdout.splitlines()[0])
    with Ledger(ledger_target) as ledger:
        assert {state: n for state, n in ledger.status().by_state.items() if n} == {"in_flight": 4}
        again = ledger.settle_many([Settlement(None, then=Claim(2)), Settlement(None, then=Claim(2))])
        assert [w.key for w, _ in again if w is not None] == keys
