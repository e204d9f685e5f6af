"""Group commit of delivery's ledger steps: the answers in hand when a settle can start are settled
together, in one transaction on one worker thread (one fsync under synchronous = FULL, one thread hop).

A worker hands its step (a batch's outcomes and the claim riding along, or a claim alone) to
`GroupCommit` and awaits its own answer. When no transaction is under way the step starts one at
once, on the loop's next turn; steps handed in while one is under way wait for it, then go together
in the next. No timer: nothing waits for an answer still to come, only for the connection to be free.
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
        self._queue = threading.Lock()
        self._draining: asyncio.Task[None] | None = None

    async def __call__(self, step: Settlement) -> Answer:
        """`step` settled (and its claim made) in a transaction with whatever else is in hand by then."""
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        with self._queue:
            self._waiting.append((step, answer))
        if self._draining is None:
            self._draining = asyncio.create_task(self._drain())
        return await answer

    async def _drain(self) -> None:
        """Commit what waits, group after group, until nothing does (loop thread). Whatever ends it
        early (a cancel at shutdown, an error outside the ledger's own) ends every answer still owed,
        so no worker waits for one forever."""
        group: list[Waiting] = []
        try:
            while self._waiting:
                group = []
                answers = await asyncio.to_thread(self._commit, group)
                for (_, answer), got in zip(group, answers, strict=True):
                    if answer.done():  # its worker was cancelled meanwhile (a stop's grace ran out)
                        continue
                    if isinstance(got, BaseException):
                        answer.set_exception(got)
                    else:
                        answer.set_result(got)
        except BaseException as exc:
            with self._queue:
                owed, self._waiting = [*group, *self._waiting], []
            for _, answer in owed:
                if answer.done():
                    continue
                if isinstance(exc, Exception):
                    answer.set_exception(exc)
                else:
                    answer.cancel()
            if not isinstance(exc, Exception):  # a cancel, an interrupt: the task's own ending
                raise
        finally:
            self._draining = None

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
