"""What every engine must give the ledger, run on SQLite and on PostgreSQL: one writer at a time (a
claim is exclusive, however many processes claim at once), one daemon per ledger, the smaller
tables (cursors and their history, flow passes, pauses), and a copy between engines that a later
sync finds settled."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from connector.ledger import Claim, Ledger, LedgerLocked, Mapped, Outcome


def person(i: int) -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"p{i}@example.com"}))


def changed(i: int) -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"new{i}@example.com"}))


def test_concurrent_claims_from_several_ledgers_never_put_an_entry_in_two_batches(ledger_target: str | Path) -> None:
    """Four connections claim at once. A batch written ahead is offered again to whoever claims (that is
    how a run resumes one after a crash; one sender per ledger is the daemon lock's job), but a pending
    entry goes into one new batch only: no two batches, under two keys, ever hold the same person."""
    with Ledger(ledger_target) as setup:
        setup.enqueue("crm", "m", [person(i) for i in range(300)], None)
    seen: dict[int, tuple[int, ...]] = {}  # batch id -> its members, as every claimer saw it
    errors: list[BaseException] = []
    go = threading.Barrier(4)

    def claimer() -> None:
        mine: set[int] = set()
        try:
            with Ledger(ledger_target) as ledger:  # a connection each, as separate processes would have
                go.wait()
                while (batch := ledger.claim(Claim(7, skip=frozenset(mine)))) is not None:
                    mine.add(batch.id)
                    members = tuple(m.entry_id for m in batch.members)
                    assert seen.setdefault(batch.id, members) == members
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    ids = [i for members in seen.values() for i in members]
    assert len(ids) == len(set(ids)) == 300, "each entry in exactly one batch"
    with Ledger(ledger_target) as ledger:
        assert ledger.status().by_state["in_flight"] == 300


def test_one_daemon_per_ledger_and_the_lock_dies_with_its_holder(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as first, Ledger(ledger_target) as second:
        first.acquire_daemon_lock()
        with pytest.raises(LedgerLocked, match="already running"):
            second.acquire_daemon_lock()
        first.close()
        second.acquire_daemon_lock()


def test_cursors_history_flow_passes_and_pauses(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(1)], {"offset": 1})
        run = ledger.start_run("state")
        assert ledger.change_source_state("crm", {"offset": 0}, "set") == {"offset": 1}
        ledger.finish_run(run, {}, 0.0, 0)
        assert ledger.source_state("crm") == {"offset": 0}
        [change] = ledger.state_history("crm")
        assert (change.old, change.new, change.action, change.run_id) == ({"offset": 1}, {"offset": 0}, "set", run)
        assert ledger.change_source_state("crm", None, "reset") == {"offset": 0}
        assert ledger.source_state("crm") is None and [s.source for s in ledger.source_states()] == []

        assert ledger.flow_passed("http://crm/capture/") is None
        ledger.record_flow_pass("http://crm/capture/", "client-a", {"steps": 9})
        assert ledger.flow_passed("http://crm/capture", "client-a") is not None
        assert ledger.flow_passed("http://crm/capture", "client-b") is None

        since = ledger.pause("crm")
        assert ledger.pause("crm") == since and ledger.paused() == {"crm": since}
        assert ledger.resume() == ["crm"] and ledger.paused() == {}
        assert ledger.unseen_records("crm", ["1", "2", "2"]) == ["2", "2"]


def test_a_copy_to_the_other_engine_holds_everything_and_sends_nothing_again(
    tmp_path: Path,
    postgres_ledger_url: str,
) -> None:
    with Ledger(tmp_path / "a.sqlite3") as source:
        source.enqueue("crm", "m", [person(i) for i in range(20)], {"offset": 20})
        run = source.start_run("sync")
        batch = source.claim(Claim(8))
        assert batch is not None
        source.settle(batch, [Outcome(m.entry_id, "captured", person_id=f"p{m.entry_id}") for m in batch.members], [])
        open_batch = source.claim(Claim(5))  # written ahead, never answered: resent under its key after the copy
        assert open_batch is not None
        source.finish_run(run, {"sent": 8}, 0.1, 4, ["crm"])
        source.pause("crm")
        with Ledger(postgres_ledger_url) as pg:
            assert source.copy_to(pg)["entries"] == 20
            with Ledger(tmp_path / "b.sqlite3") as back:
                pg.copy_to(back)
                for ledger in (pg, back):
                    assert ledger.status().by_state == source.status().by_state
                    assert ledger.runs() == source.runs() and ledger.paused() == source.paused()
                    assert ledger.source_state("crm") == {"offset": 20}
                    again = ledger.claim(Claim(100))
                    assert again is not None and (again.key, again.body) == (open_batch.key, open_batch.body)
                    assert ledger.start_run("sync") == run + 1, "ids continue after the copied ones"
                    # the copied captures' person tags wait in `fresh_tag` (SQLite's, schema v15): found on both
                    holder = f"p{batch.members[0].entry_id}"
                    outcomes = [
                        Outcome(m.entry_id, "captured", person_id=holder if i == 0 else f"q{i}", named_person=True)
                        for i, m in enumerate(again.members)
                    ]
                    assert ledger.settle_counting(again, outcomes, [])[1] == 1, "a merge into a copied person"


def test_the_backlog_a_streaming_sync_counts_is_counted_on_both_engines(ledger_target: str | Path) -> None:
    """`backlog`: pending entries above an id and in no open or stalled batch, up to a limit
    (PostgreSQL 15 wants its subquery named). Since v10 a claimed entry stays pending: it was counted."""
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(i) for i in range(30)], None)
        assert ledger.backlog(0, 10) == 10
        assert ledger.backlog(0, 100) == 30
        assert ledger.backlog(ledger.last_entry_id(), 100) == 0
        in_hand = ledger.claim(Claim(10))  # claimed: in hand, no longer waiting to be sent
        assert in_hand is not None and ledger.backlog(0, 100) == 20
        ledger.stall(in_hand, "400 bad_request", [])  # stalled: it waits for `replay`, not for this run
        assert ledger.backlog(0, 100) == 20
        ledger.claim(Claim(10))
        assert ledger.backlog(0, 100) == 10


def test_the_backlog_counts_only_what_claim_could_take(ledger_target: str | Path) -> None:
    """A version that waits behind an older blocked or unknown one of its record is not work a
    streaming sync's delivery can take: counted, it would hold the reader back (in lock-step with
    delivery) for as long as the older one stays. One behind a version in flight counts: it goes
    once that batch settles. A newer version replaces one never sent: one counts."""

    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(i) for i in range(30)], None)
        blocked = ledger.claim(Claim(10))
        assert blocked is not None
        ledger.block(blocked, "409", [])
        in_hand = ledger.claim(Claim(10))
        assert in_hand is not None
        unknown = ledger.claim(Claim(10, skip={in_hand.id}))
        assert unknown is not None
        ledger.settle(unknown, [Outcome(m.entry_id, "unknown", error="no evidence") for m in unknown.members], [])
        last = ledger.last_entry_id()
        ledger.enqueue("crm", "m", [changed(i) for i in range(30)], None)  # each waits behind its older version
        assert ledger.backlog(last, 100) == 10  # the ten behind the batch in flight
        ledger.enqueue("crm", "m", [person(i) for i in range(30, 35)], None)
        assert ledger.backlog(last, 100) == 15
        assert ledger.backlog(last, 3) == 3

        ledger.settle(in_hand, [Outcome(m.entry_id, "captured") for m in in_hand.members], [])
        assert ledger.backlog(last, 100) == 15
        ledger.enqueue("crm", "m", [person(i) for i in range(35, 40)], None)
        ledger.enqueue("crm", "m", [changed(i) for i in range(35, 40)], None)  # replaces each (never sent)
        assert ledger.backlog(last, 100) == 20
        ledger.resolve(blocked.key, "dismiss")  # the blocked ones go: their newer versions can be sent
        assert ledger.backlog(last, 100) == 30


def test_the_backlog_leaves_out_versions_behind_a_stalled_batch(ledger_target: str | Path) -> None:
    """A stalled batch waits for `replay`, not for this run: the newer versions of its members wait
    as long, and are not counted."""
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(i) for i in range(10)], None)
        stalled = ledger.claim(Claim(5))
        assert stalled is not None
        ledger.stall(stalled, "503 not retryable", [])
        last = ledger.last_entry_id()
        ledger.enqueue("crm", "m", [changed(i) for i in range(10)], None)  # 5-9 replace versions never sent
        assert ledger.backlog(last, 100) == 5
