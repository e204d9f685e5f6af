"""Delivery's group commit (`GroupCommit`): an answer starts a settle at once when the ledger is free;
answers that come while one is under way are settled together in the next transaction, each with its
own answer; a batch whose settle fails fails alone."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence

import pytest
import structlog

from connector.delivery._group import GroupCommit
from connector.ledger import BatchWork, Claim, Ledger, LedgerError, LedgerUnreachable, Mapped, Outcome, Settlement


class WatchedLedger(Ledger):
    """A real SQLite ledger whose `settle_many` can be held inside its transaction, and which records each group."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.groups: list[list[int | None]] = []
        self.inside = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.refuse: int | None = None  # a batch id whose settle fails
        self.lost_answer_of: int | None = None  # the group (its number) whose COMMIT is made and its answer lost
        self.log_fields: list[dict[str, object]] = []  # the log fields bound where each group is taken

    def settle_many(self, settlements):  # type: ignore[no-untyped-def]
        def take() -> Sequence[Settlement]:
            group = settlements() if callable(settlements) else settlements
            self.groups.append([s.batch.id if s.batch else None for s in group])
            self.log_fields.append(structlog.contextvars.get_contextvars())
            self.inside.set()  # taken, inside the transaction: held there as by a slow fsync
            assert self.release.wait(10)
            if any(s.batch is not None and s.batch.id == self.refuse for s in group):
                raise LedgerError("disk full")
            return group

        done = super().settle_many(take)
        if len(self.groups) == self.lost_answer_of:
            raise LedgerUnreachable("PostgreSQL test cannot be reached: server closed the connection unexpectedly")
        return done


@pytest.fixture
def ledger(tmp_path):
    with WatchedLedger(tmp_path / "ledger.sqlite3") as led:
        led.enqueue(
            "crm", "m1", [Mapped(str(i), payload=json.dumps({"email": f"p{i}@example.com"})) for i in range(10)], None
        )
        yield led


def batches(ledger: Ledger, n: int) -> list[BatchWork]:
    taken: list[BatchWork] = []
    for _ in range(n):
        work = ledger.claim(Claim(2, skip={w.id for w in taken}))
        assert work is not None
        taken.append(work)
    return taken


async def handed_in(steps: GroupCommit, n: int) -> None:
    """Until `n` steps wait for the ledger (their threads handed them in), within a deadline."""
    deadline = time.monotonic() + 10
    while len(steps._waiting) < n:
        assert time.monotonic() < deadline, "the steps were never handed in"
        await asyncio.sleep(0.01)


def captured(work: BatchWork, then: Claim | None = None) -> Settlement:
    return Settlement(work, [Outcome(m.entry_id, "captured") for m in work.members], [], then)


def test_answers_that_come_while_a_settle_is_under_way_go_together_in_the_next(ledger):
    first, second, third = batches(ledger, 3)
    claimed: set[int] = {first.id, second.id, third.id}

    async def scenario() -> list[tuple[BatchWork | None, int]]:
        steps = GroupCommit(ledger, claimed, threading.Lock())
        ledger.release.clear()
        alone = asyncio.ensure_future(steps(captured(first)))
        assert await asyncio.to_thread(ledger.inside.wait, 10)  # the first settle started without waiting for others
        later = [asyncio.ensure_future(steps(captured(w, then=Claim(2, skip=claimed)))) for w in (second, third)]
        await handed_in(steps, 2)  # both while the first transaction is under way
        ledger.release.set()
        return await asyncio.gather(alone, *later)

    answers = asyncio.run(scenario())
    assert ledger.groups == [[first.id], [second.id, third.id]]
    assert answers[0] == (None, 0)
    following = [work for work, _ in answers[1:]]
    assert all(work is not None for work in following)
    assert {w.id for w in following if w is not None} <= claimed  # the run holds what its claims took
    assert len({w.id for w in following if w is not None}) == 2
    assert ledger.status().by_state["captured"] == 6


async def held_then_two(ledger: WatchedLedger, first: BatchWork, second: BatchWork, third: BatchWork) -> list[object]:
    """`first` settled alone and held in its transaction while `second` and `third` are handed in, so
    they go together in the next group; each step's answer or error."""
    steps = GroupCommit(ledger, set(), threading.Lock())
    ledger.release.clear()
    held = asyncio.ensure_future(steps(captured(first)))
    assert await asyncio.to_thread(ledger.inside.wait, 10)
    group = [asyncio.ensure_future(steps(captured(w))) for w in (second, third)]
    await handed_in(steps, 2)
    ledger.release.set()
    return await asyncio.gather(held, *group, return_exceptions=True)


def test_a_settle_that_fails_in_a_group_fails_alone(ledger):
    first, second, third = batches(ledger, 3)
    ledger.refuse = second.id

    answers = asyncio.run(held_then_two(ledger, first, second, third))
    assert answers[0] == (None, 0) and answers[2] == (None, 0)
    assert isinstance(answers[1], LedgerError)
    assert ledger.groups == [[first.id], [second.id, third.id], [second.id], [third.id]]
    by_state = ledger.status().by_state
    assert (by_state["captured"], by_state["in_flight"], by_state["pending"]) == (
        4,
        2,
        4,
    )  # the refused batch stays open, to be resent


def test_a_group_whose_commit_may_have_happened_is_not_settled_again(ledger):
    """A lost answer to COMMIT (PostgreSQL's connection gone) leaves it unknown whether the group was
    written: no step is written again alone (its attempts twice, its merges counted twice); each
    worker meets the error, as a settle alone would have."""
    first, second, third = batches(ledger, 3)
    ledger.lost_answer_of = 2  # the group of `second` and `third`

    answers = asyncio.run(held_then_two(ledger, first, second, third))
    assert answers[0] == (None, 0)
    assert all(isinstance(answer, LedgerUnreachable) for answer in answers[1:])
    assert ledger.groups == [[first.id], [second.id, third.id]]  # the group was not tried again batch by batch
    assert ledger.status().by_state["captured"] == 6  # this time the COMMIT had happened


def test_a_step_whose_worker_gave_up_is_committed_before_close_returns(ledger):
    """A worker cancelled while its claim or settle is under way (a stop's grace ran out) drops only the
    answer: the step commits, and `close` (the run's end, before the ledger closes) waits for it."""
    (first,) = batches(ledger, 1)

    before = set(threading.enumerate())

    async def scenario() -> None:
        steps = GroupCommit(ledger, set(), threading.Lock())
        ledger.release.clear()
        answer = steps(captured(first))
        assert await asyncio.to_thread(ledger.inside.wait, 10)
        answer.cancel()
        closing = asyncio.ensure_future(steps.close())
        ledger.release.set()
        await closing

    asyncio.run(scenario())
    assert [t for t in threading.enumerate() if t not in before] == [], "no thread of the group is left writing"
    assert ledger.status().by_state["captured"] == 2


def test_a_step_runs_with_the_log_fields_bound_where_it_was_handed_in(ledger):
    """The daemon binds each integration's name to its logs: what the ledger logs on a step's thread carries it."""
    (first,) = batches(ledger, 1)

    async def scenario() -> None:
        structlog.contextvars.bind_contextvars(integration="crm-eu")
        steps = GroupCommit(ledger, set(), threading.Lock())
        await steps(captured(first))
        await steps.close()

    asyncio.run(scenario())
    assert ledger.log_fields == [{"integration": "crm-eu"}]


def test_a_step_whose_ledger_call_raises_stop_iteration_answers_its_worker(ledger, monkeypatch):
    """A future cannot carry StopIteration (asyncio refuses it with a TypeError in the loop's callback):
    the worker gets a RuntimeError naming it instead of waiting for ever."""
    (first,) = batches(ledger, 1)

    def exhausted(settlements):  # type: ignore[no-untyped-def]
        raise StopIteration("an exhausted iterator")

    monkeypatch.setattr(ledger, "settle_many", exhausted)

    async def scenario() -> None:
        steps = GroupCommit(ledger, set(), threading.Lock())
        try:
            with pytest.raises(RuntimeError, match="StopIteration"):
                await asyncio.wait_for(steps(captured(first)), 10)
        finally:
            await steps.close()

    asyncio.run(scenario())
