"""Group commit of delivery's ledger steps: the answers in hand when a settle can start are settled
together, in one transaction (one fsync under synchronous = FULL).

A worker hands its step (a batch's outcomes and the claim riding along, or a claim alone) to
`GroupCommit` and awaits its own answer, on a worker thread as before (one hop per step: a single
thread draining every group was measured to cost wall time, docs/performance.md). On that thread the
step joins the waiting ones, then waits for the ledger's turn (`taking`). Whoever gets the turn first
commits every step waiting by the time its transaction holds the write lock (those handed in while
it waited for the lock join); the others find their step committed and return at once. No timer:
nothing waits for an answer still to come, only for the connection to be free.

Each step is settled as it would be alone (`Ledger.settle_many`); its answer comes back only after
the COMMIT, so whatever depends on an outcome (the report, the next claim, `run.finished`) comes after
it is durable. A kill before the COMMIT loses the whole group's writes, each batch left open as before
its answer: resent under its key and body, the server answers it again from its idempotency store.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from ..ledger import BatchWork, Ledger, LedgerUnreachable, Settlement

Answer = tuple[BatchWork | None, int]  # the batch claimed next (or None), and the members counted as merges


@dataclass(eq=False)
class _Step:
    settlement: Settlement
    answer: Answer | BaseException | None = None  # set under `taking` by the thread that committed it


class GroupCommit:
    """Delivery's settles and claims, grouped while the ledger is busy. `claimed` (the run's batches in
    hand) gains each batch claimed, under `taking`, the lock that makes a claim and that entry one step."""

    def __init__(self, ledger: Ledger, claimed: set[int], taking: threading.Lock) -> None:
        self._ledger, self._claimed, self._taking = ledger, claimed, taking
        self._waiting: list[_Step] = []  # handed in, not yet taken by a transaction
        self._queue = threading.Lock()  # guards `_waiting`

    async def __call__(self, settlement: Settlement) -> Answer:
        """`settlement` settled (and its claim made) in a transaction with whatever else is in hand by then."""
        return await asyncio.to_thread(self._settle, _Step(settlement))

    def _settle(self, step: _Step) -> Answer:
        """On a worker thread: commit the waiting steps unless another thread's group took this one."""
        with self._queue:
            self._waiting.append(step)
        with self._taking:
            if step.answer is None:
                self._commit()
        if isinstance(step.answer, BaseException):
            raise step.answer
        assert step.answer is not None  # the group that took it answered it
        return step.answer

    def _commit(self) -> None:
        """Under `taking`: the steps waiting once the transaction holds the ledger's write lock, each
        answered. When the group's transaction fails (and so was rolled back), each step is tried alone,
        so that a failure stays the one batch's it would have been (a batch that cannot be rebuilt fails
        the claims that meet it, not the settles that came with them)."""
        group: list[_Step] = []

        def take() -> list[Settlement]:
            with self._queue:
                group[:], self._waiting = self._waiting, []
            return [s.settlement for s in group]

        try:
            self._answer(group, self._ledger.settle_many(take))
            return
        except Exception as exc:
            if not group:  # it failed before it took them
                take()
            if len(group) == 1 or isinstance(exc, LedgerUnreachable):
                # unreachable: the COMMIT may have happened (PostgreSQL's answer lost), so no step is
                # written again; each worker meets the error as a step alone would have
                for s in group:
                    s.answer = exc
                return
        except BaseException as exc:  # whoever waits on a step taken must not wait for an answer never set
            for s in group:
                s.answer = exc
            raise
        for s in group:
            try:
                self._answer([s], self._ledger.settle_many([s.settlement]))
            except Exception as exc:
                s.answer = exc

    def _answer(self, group: list[_Step], answers: list[Answer]) -> None:
        """Committed: the batches claimed are the run's (before `taking` is let go, see `Delivery._claim`)."""
        self._claimed.update(work.id for work, _ in answers if work is not None)
        for s, answer in zip(group, answers, strict=True):
            s.answer = answer
