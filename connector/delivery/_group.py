"""Group commit of delivery's ledger steps: the answers in hand when a settle can start are settled
together, in one transaction on a worker thread (one fsync under synchronous = FULL), and the next
group starts on the same thread as soon as the last commits (one thread hop per busy spell).

A worker hands its step (a batch's outcomes and the claim riding along, or a claim alone) to
`GroupCommit` and awaits its own answer. When no thread is committing, the step starts one at once;
steps handed in while a transaction is under way, or waits for the ledger's write lock, are taken
by the next transaction the moment it holds the lock, all together. No timer: nothing waits for an
answer still to come, only for the connection to be free.
Each step is settled as it would be alone (`Ledger.settle_many`); its answer comes back only after
the COMMIT, so whatever depends on an outcome (the report, the next claim, `run.finished`) comes after
it is durable. A kill before the COMMIT loses the whole group's writes, each batch left open as before
its answer: resent under its key and body, the server answers it again from its idempotency store.
"""

from __future__ import annotations

import asyncio
import threading

from ..ledger import BatchWork, Ledger, Settlement

Answer = tuple[BatchWork | None, int]  # the batch claimed next (or None), and the members counted as merges


Waiting = tuple[Settlement, "asyncio.Future[Answer]"]


class GroupCommit:
    """Delivery's settles and claims, grouped while the ledger is busy. `claimed` (the run's batches in
    hand) gains each batch claimed, under `taking`, the lock that makes a claim and that entry one step."""

    def __init__(self, ledger: Ledger, claimed: set[int], taking: threading.Lock) -> None:
        self._ledger, self._claimed, self._taking = ledger, claimed, taking
        self._waiting: list[Waiting] = []  # handed in on the loop, taken on the transaction's thread
        self._queue = threading.Lock()  # guards `_waiting` and `_busy`
        self._busy = False  # a thread is committing groups

    async def __call__(self, step: Settlement) -> Answer:
        """`step` settled (and its claim made) in a transaction with whatever else is in hand by then."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Answer] = loop.create_future()
        with self._queue:
            self._waiting.append((step, answer))
            start, self._busy = not self._busy, True
        if start:
            loop.run_in_executor(None, self._drain, loop)
        return await answer

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On a worker thread: commit what waits, group after group, until nothing does; each group's
        answers go back to the loop as soon as it is committed, and the next group starts at once,
        without a round trip through the loop (one thread hop per busy spell, not per group). Whatever
        ends it early (an error outside the ledger's own) ends every answer still owed, so no worker
        waits for one forever."""
        group: list[Waiting] = []
        try:
            while True:
                group = []
                answers = self._commit(group)
                loop.call_soon_threadsafe(_answer, group, answers)
                with self._queue:
                    if not self._waiting:
                        self._busy = False
                        return
        except BaseException as exc:
            with self._queue:
                owed, self._waiting, self._busy = [*group, *self._waiting], [], False
            failed: list[Answer | BaseException] = [exc] * len(owed)
            loop.call_soon_threadsafe(_answer, owed, failed)
            if not isinstance(exc, Exception):  # an interrupt: the thread's own ending
                raise

    def _commit(self, group: list[Waiting]) -> list[Answer | BaseException]:
        """On a worker thread: the steps waiting once the transaction holds the ledger's write lock
        (those handed in while it waited for the lock join) go into `group`; their answers. When the
        group's transaction fails, each step is tried alone, so that a failure stays the one batch's
        it would have been (a batch that cannot be rebuilt fails the claims that meet it, not the
        settles that came with them)."""

        def take() -> list[Settlement]:
            with self._queue:
                group[:], self._waiting = self._waiting, []
            return [step for step, _ in group]

        with self._taking:
            try:
                return self._taken(self._ledger.settle_many(take))
            except Exception as exc:
                steps = [step for step, _ in group] or take()  # or it failed before it took them
                if len(steps) == 1:
                    return [exc]
            answers: list[Answer | BaseException] = []
            for step in steps:
                try:
                    answers += self._taken(self._ledger.settle_many([step]))
                except Exception as exc:
                    answers.append(exc)
            return answers

    def _taken(self, answers: list[Answer]) -> list[Answer | BaseException]:
        """Committed: the batches claimed are the run's (before the lock is let go, see `Delivery._claim`)."""
        self._claimed.update(work.id for work, _ in answers if work is not None)
        return list(answers)


def _answer(group: list[Waiting], answers: list[Answer | BaseException]) -> None:
    """On the loop: each step's answer to the worker awaiting it."""
    for (_, answer), got in zip(group, answers, strict=True):
        if answer.done():  # its worker was cancelled meanwhile (a stop's grace ran out)
            continue
        if isinstance(got, BaseException):
            answer.set_exception(got)
        else:
            answer.set_result(got)
