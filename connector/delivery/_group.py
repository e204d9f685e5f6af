"""Group commit of delivery's ledger steps: the answers in hand when a settle can start are settled
together, in one transaction (one fsync under synchronous = FULL).

A worker hands its step (a batch's outcomes and the claim riding along, or a claim alone) to
`GroupCommit` and awaits its own answer, on a thread of its own as before (one hop per step: a single
thread draining every group was measured to cost wall time, docs/performance.md). The threads are the
group's own, long-lived, each blocked on one queue (`SimpleQueue`): a step is one put and its answer one
`call_soon_threadsafe`, without an executor's work item, concurrent future and the future chained to it
(the executor's `submit` was among the largest self times of a sync's GIL profile). There are as many threads as
steps ever out at once, so no step waits for a thread. On its thread the step joins the waiting ones,
then waits for the ledger's turn (`taking`). Whoever gets the turn first commits every step waiting by
the time its transaction holds the write lock (those handed in while it waited for the lock join); the
others find their step committed and return at once. No timer: nothing waits for an answer still to
come, only for the connection to be free.

Each step is settled as it would be alone (`Ledger.settle_many`); its answer comes back only after
the COMMIT, so whatever depends on an outcome (the report, the next claim, `run.finished`) comes after
it is durable. A kill before the COMMIT loses the whole group's writes, each batch left open as before
its answer: resent under its key and body, the server answers it again from its idempotency store.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from dataclasses import dataclass

from ..ledger import BatchWork, Ledger, LedgerUnreachable, Settlement

Answer = tuple[BatchWork | None, int]  # the batch claimed next (or None), and the members counted as merges


@dataclass(eq=False)
class _Step:
    settlement: Settlement
    answer: Answer | BaseException | None = None  # set under `taking` by the thread that committed it


# what a step's thread takes from the queue: the step, the context to run it in (the caller's context
# variables, as `asyncio.to_thread` carries them: log fields bound by the daemon), and where its answer goes
_Handed = tuple[_Step, contextvars.Context, asyncio.AbstractEventLoop, "asyncio.Future[Answer]"]


class GroupCommit:
    """Delivery's settles and claims, grouped while the ledger is busy. `claimed` (the run's batches in
    hand) gains each batch claimed, under `taking`, the lock that makes a claim and that entry one step."""

    def __init__(self, ledger: Ledger, claimed: set[int], taking: threading.Lock) -> None:
        self._ledger, self._claimed, self._taking = ledger, claimed, taking
        self._waiting: list[_Step] = []  # handed in, not yet taken by a transaction
        self._queue = threading.Lock()  # guards `_waiting`
        self._inbox: queue.SimpleQueue[_Handed | None] = queue.SimpleQueue()  # None: a thread's end
        self._threads: list[threading.Thread] = []
        self._out = 0  # steps handed in and not yet answered on the loop (touched on the loop alone)

    def __call__(self, settlement: Settlement) -> asyncio.Future[Answer]:
        """`settlement` settled (and its claim made) in a transaction with whatever else is in hand by
        then. A cancel of the future only drops the answer: the step is committed all the same (as a
        step on `asyncio.to_thread` was), and `close` waits for it."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Answer] = loop.create_future()
        self._out += 1
        if self._out > len(self._threads):
            thread = threading.Thread(target=self._serve, name="ledger-step", daemon=True)
            thread.start()
            self._threads.append(thread)
        self._inbox.put((_Step(settlement), contextvars.copy_context(), loop, answer))
        return answer

    async def close(self) -> None:
        """Once nothing hands in steps any more: the threads end after the steps in hand, so that the
        run does not end (and the ledger close) under a write."""
        threads, self._threads = self._threads, []
        for _ in threads:
            self._inbox.put(None)
        if threads:
            await asyncio.to_thread(_join, threads)

    def _serve(self) -> None:
        """A step's thread: each step taken from the queue settled, its answer (or error) sent to the loop."""
        while (handed := self._inbox.get()) is not None:
            step, context, loop, answer = handed
            got: Answer | BaseException
            try:
                got = context.run(self._settle, step)
            except BaseException as exc:  # the worker awaiting it meets it, as from `asyncio.to_thread`
                got = exc
            loop.call_soon_threadsafe(self._answered, answer, got)

    def _answered(self, answer: asyncio.Future[Answer], got: Answer | BaseException) -> None:
        """On the loop: a step's answer to the worker awaiting it, unless it gave up (a cancel)."""
        self._out -= 1
        if answer.done():
            return
        if isinstance(got, StopIteration):  # a future refuses to carry one (TypeError), leaving its waiter hung
            got = RuntimeError(f"a ledger step raised {got!r}")
        if isinstance(got, BaseException):
            answer.set_exception(got)
        else:
            answer.set_result(got)

    def _settle(self, step: _Step) -> Answer:
        """On a step's thread: commit the waiting steps unless another thread's group took this one."""
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


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join()
