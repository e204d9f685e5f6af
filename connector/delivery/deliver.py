"""Load: ledger -> write-ahead batches -> Capture API -> ledger, with bounded concurrency.

Every ledger write runs on a thread, never on the event loop: under synchronous=FULL each commit is
an fsync, and the requests in flight must not wait for it. The settles and claims go through
`GroupCommit` (its own long-lived threads): the answers in hand when the ledger is free are settled
in one transaction (one fsync), each exactly as alone; the rarer steps (a split, a failed batch) go
through `asyncio.to_thread`.

Workers that find nothing to claim wait for news (a chunk committed by a streaming read, a batch
settled by another worker: either can make work claimable, e.g. a newer version that waited for
its older one) instead of exiting. They end together once nothing is being read, no batch is in
anyone's hands and a claim finds nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from .. import failpoints, logs
from ..api import (
    Attempt,
    BadRequest,
    BulkCaptureResult,
    CaptureClient,
    CaptureError,
    ClientInfo,
    IdempotencyConflict,
    PersonCaptureResult,
    RateGate,
    Unauthorized,
    is_retryable,
)
from ..ledger import BatchWork, Claim, Ledger, Outcome, Settlement
from ._group import GroupCommit
from .extract import LOGGER, Progress
from .ratelimit import RateShape
from .rejects import RejectsFeed
from .report import RunReport
from .settle import match_bulk, person_outcome

log = logs.get_logger(LOGGER)

OnInfo = Callable[[ClientInfo], None]
BACKLOG_BATCHES = 4  # a streaming read pauses while this many batches per worker are pending
ROOM_POLL_S = 0.25  # how often a paused read looks again, whatever it was told


@dataclass(frozen=True)
class DeliverySettings:
    batch_size: int = 100
    concurrency: int = 4
    rate_window_s: float | None = None  # the rate limit's window when known; None: the limiter finds it
    rate_shape: RateShape = "burst"  # burst: the window's room at once; smooth: evenly spaced (ratelimit.py)
    chunk_size: int = 1000  # records per enqueue transaction: after a crash at most this many are read again
    stop_grace_s: float = 8.0
    rejects: RejectsFeed | None = None  # `[daemon] rejects_file`: each rejected record appended as a JSON line

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 100:
            raise ValueError("batch_size must be 1 to 100")
        if self.concurrency < 1 or self.chunk_size < 1:
            raise ValueError("concurrency and chunk_size must be at least 1")


def halt_report(report: RunReport, exc: CaptureError) -> None:
    report.halted_by = str(exc)
    if isinstance(exc, Unauthorized):
        report.auth_failed = True
    log.warning("delivery.halted", error=type(exc).__name__, reason=str(exc))


async def connect(
    client: CaptureClient,
    report: RunReport,
    on_info: OnInfo | None,
    *,
    before_reading: bool = False,
) -> ClientInfo | None:
    """GET /info, the spec's first call before sending (spec 5): the client's rate limit, and
    `on_info` may refuse the run (a ConfigProblem). None when it failed, with the report halted.
    `before_reading`: one attempt, and only refused credentials halt; an outage must not hold the
    reading back (the sources are read and queued, and delivery asks again with retries)."""
    try:
        info = await client.info(retry=not before_reading)
    except CaptureError as exc:
        if before_reading and not isinstance(exc, Unauthorized):
            log.warning("api.unreachable", reason=str(exc), then="reading the sources; delivery asks again")
        else:
            halt_report(report, exc)
        return None
    if on_info is not None:
        on_info(info)
    return info


_WENT_WRONG = frozenset({"failed", "unknown"})


def _timing(attempts: Sequence[Attempt], elapsed_ms: float) -> dict[str, float | int]:
    """`latency_ms`: the HTTP exchange that brought the answer, alone; `wait_ms`: the rest of the
    request's time, spent waiting before and between its attempts (the rate limiter's hold, a retry's
    backoff) and on the attempts that failed; `attempts` when there was more than one. A slow API and a
    held-back client read apart."""
    if not attempts:  # no observer saw it (a client without one): all of it is the exchange, as far as known
        return {"latency_ms": round(elapsed_ms, 1), "wait_ms": 0.0}
    exchange_ms = attempts[-1].latency_s * 1000
    timing: dict[str, float | int] = {
        "latency_ms": round(exchange_ms, 1),
        "wait_ms": round(max(elapsed_ms - exchange_ms, 0.0), 1),
    }
    if len(attempts) > 1:
        timing["attempts"] = len(attempts)
    return timing


class Delivery:
    """Drains the ledger with bounded concurrency until it is empty (and, with a streaming read,
    the read has ended), halted or stopped."""

    def __init__(
        self,
        ledger: Ledger,
        client: CaptureClient,
        settings: DeliverySettings,
        report: RunReport,
        progress: Progress,
        stop: asyncio.Event | None,
        include_stalled: bool,
    ) -> None:
        self.ledger, self.client, self.settings, self.report = ledger, client, settings, report
        self.progress = progress
        self.stop = stop or asyncio.Event()
        self.halt = asyncio.Event()
        self.claimed: set[int] = set()
        self.want = Claim(settings.batch_size, self.claimed, include_stalled)  # `claimed` grows in place
        self.attempts: dict[str | None, list[Attempt]] = defaultdict(list)
        self.in_hand = 0  # batches a worker holds (claimed, being sent or settled)
        self.reading = False  # a streaming read is still going
        self._news = asyncio.Event()  # replaced on each notice; a waiter keeps the one it saw before claiming
        self._room = threading.Event()  # set when a paused read should look again (`_notify`)
        self.taken = 0  # members taken in hand since the run began (loop thread only)
        self._look_at = 0  # a paused read looks again once `taken` reaches this (set by the read's thread)
        self._read_error: BaseException | None = None
        self._taking = threading.Lock()  # a claim and its entry in `claimed` are one step (see _claim)
        self._steps = GroupCommit(ledger, self.claimed, self._taking)  # settles and claims, grouped
        self._over = False  # delivery ended for good (a stop, an error): the read ends too
        self._loop = asyncio.get_running_loop()  # built inside the run's coroutine

    # --- news between the read, the workers and the loop ------------------------------------

    def _notify(self) -> None:
        """Something may have become claimable: wake every waiting worker. Loop thread only. A paused
        read is woken only when its backlog can have fallen below its mark (enough members taken in
        hand since it counted) or when it must not wait (see `room_to_read`): not after every batch,
        each wake a thread switch and a backlog count for nothing."""
        self._news.set()
        self._news = asyncio.Event()
        if self.taken >= self._look_at or self.in_hand == 0 or self.halt.is_set() or self.stop.is_set():
            self._room.set()

    def room_to_read(self, backlog: Callable[[int], int]) -> bool:
        """For the read's thread, after each chunk: tell the workers, then wait while enough work
        is pending and a worker is busy with it. False when the read must end (a stop, refused
        credentials). An outage halt does not end it: what is read is queued for `replay`."""
        loop_notify = self._loop.call_soon_threadsafe
        loop_notify(self._notify)
        high = BACKLOG_BATCHES * self.settings.batch_size * self.settings.concurrency
        while True:
            if self._over or self.stop.is_set() or self.report.auth_failed:
                return False
            if self.halt.is_set() or self.in_hand == 0:
                return True  # nobody is draining: waiting would wait for nothing
            self._room.clear()
            taken = self.taken  # before the count: the count sees at least these claims
            pending = backlog(2 * high)  # counted past the mark: how far above it the backlog stands
            if pending < high:
                return True
            # only a claim lowers the backlog: it is under the mark once this many more are taken
            self._look_at = taken + pending - high + 1
            if self.taken < self._look_at:  # a claim told while this counted compared an older mark
                self._room.wait(ROOM_POLL_S)

    # --- the run ----------------------------------------------------------------------------

    async def run(
        self,
        info: ClientInfo,
        rate_gate: RateGate | None,
        read: Callable[[Delivery], Awaitable[None]] | None = None,
    ) -> None:
        """Deliver; with `read`, a streaming read runs alongside (its chunks are claimed as they
        commit). An error of the read stops the claiming, lets requests in hand finish, then raises."""
        self.client.rate_gate = rate_gate  # None: this run's GET /info gave no limit
        self.client.on_attempt = lambda attempt: self.attempts[attempt.idempotency_key].append(attempt)
        reader = None
        if read is not None:
            self.reading = True
            reader = asyncio.ensure_future(self._read(read))
        workers = [asyncio.create_task(self._worker()) for _ in range(self.settings.concurrency)]
        all_done = asyncio.ensure_future(asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION))
        stopping = asyncio.ensure_future(self.stop.wait())
        stopping.add_done_callback(lambda _: self._notify())  # waiting workers see the stop
        try:
            await asyncio.wait({all_done, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not all_done.done():
                # Requests in hand get a grace period to finish and be settled; a request cut off
                # after that stays an open batch, resent later under the same key and body.
                self.report.stopped = True
                await asyncio.wait({all_done}, timeout=self.settings.stop_grace_s)
        finally:
            for task in (stopping, all_done, *workers):
                task.cancel()
            try:
                results = await asyncio.gather(*workers, return_exceptions=True)
            finally:  # a claim whose worker was cancelled may still be under way: not left behind, even on a cancel
                await asyncio.shield(self._steps.close())
            errors = [r for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)]
            if reader is not None:
                # After an outage halt the read goes on to its end (what it reads is queued for
                # `replay`); after a stop, an error or a cancel it ends after the chunk in hand.
                clean = not errors and not self.stop.is_set() and not any(w.cancelled() for w in workers)
                self._over = not clean
                self._room.set()
                await asyncio.shield(reader)  # the thread writes to the ledger: never leave it behind
        if errors:
            raise errors[0]
        if self._read_error is not None:
            raise self._read_error

    async def _read(self, read: Callable[[Delivery], Awaitable[None]]) -> None:
        try:
            await read(self)
        except BaseException as exc:  # kept for `run` to raise once the requests in hand are settled
            self._read_error = exc
            self.halt.set()
        finally:
            self.reading = False
            self._notify()

    def _halt(self, exc: CaptureError) -> None:
        halt_report(self.report, exc)
        self.halt.set()
        self._notify()

    async def _claim(self, want: Claim) -> BatchWork | None:
        """A claim alone, grouped with the settles in hand (`GroupCommit`). An open batch is skipped
        once in `claimed`: it gets there, under the `_taking` lock, before the lock is released after the
        commit, so no two workers ever take the same batch."""
        return (await self._steps(Settlement(None, then=want)))[0]

    def _split(self, work: BatchWork, reason: str, attempts: Sequence[Attempt]) -> tuple[BatchWork, BatchWork]:
        """Both halves are this worker's: another one must not take the second while the first is sent."""
        with self._taking:
            halves = self.ledger.split(work, reason, attempts)
            self.claimed.update(half.id for half in halves)
        return halves

    def _wanted(self) -> Claim | None:
        """What to claim after the batch in hand; nothing once the run is halted or stopping."""
        return None if self.halt.is_set() or self.stop.is_set() else self.want

    async def _worker(self) -> None:
        work: BatchWork | None = None
        while True:
            if work is None:
                news = self._news  # the notice a claim that finds nothing must wait for
                want = self._wanted()
                work = None if want is None else await self._claim(want)
                if work is None:
                    if want is None or (not news.is_set() and not self.reading and self.in_hand == 0):
                        self._notify()  # the others see that it is over
                        return
                    await news.wait()
                    continue
                self.taken += len(work.members)
            self.in_hand += 1
            try:
                work = await self._send(work, claim_next=True)
                if work is not None:  # claimed with the settle: counted before the read is told
                    self.taken += len(work.members)
            finally:
                self.in_hand -= 1
                self._notify()

    async def _send(self, work: BatchWork, *, claim_next: bool = False) -> BatchWork | None:
        """Send one batch and record what came of it. With `claim_next`, returns the next batch
        (after a response, claimed in the settle's own transaction)."""
        self.claimed.add(work.id)
        size = len(work.members)
        t0 = time.perf_counter()
        failpoints.hit("after-batch-write")
        result: BulkCaptureResult | PersonCaptureResult
        try:
            if work.operation == "bulk":
                result = await self.client.capture_bulk(work.body, work.key, cost=size)
            else:
                result = await self.client.capture_person(work.body, work.key)
        except CaptureError as exc:
            await self._failed(work, exc, self.attempts.pop(work.key, []))
            want = self._wanted() if claim_next else None
            return None if want is None else await self._claim(want)
        failpoints.hit("after-response")
        attempts = self.attempts.pop(work.key, [])
        # capture_bulk's result exactly when work.operation == "bulk"; isinstance lets mypy see it
        outcomes = (
            match_bulk(work.members, result)
            if isinstance(result, BulkCaptureResult)
            else [person_outcome(work.members[0], result)]
        )
        then = self._wanted() if claim_next else None
        elapsed_ms = (time.perf_counter() - t0) * 1000
        # Sent and answered: counted before the settle, which may fail (a full disk), so that the run
        # report never says less was sent than the CRM received; unsettled members stay in flight.
        self.report.sent += size
        self.progress.advance("sent", size)
        settling = self._steps(Settlement(work, outcomes, attempts, then))
        try:
            following, merged = await asyncio.shield(settling)
        except asyncio.CancelledError:
            # The run is ending (another worker's error): the settle goes on in its thread and may
            # commit; the report counts it if it did, so that it stays what the ledger holds.
            try:
                _, merged = await settling
            except Exception:
                raise asyncio.CancelledError from None  # not settled: the members stay in flight
            self._settled(work, outcomes, merged, attempts, elapsed_ms)
            raise
        self._settled(work, outcomes, merged, attempts, elapsed_ms)
        return following

    def _settled(
        self, work: BatchWork, outcomes: Sequence[Outcome], merged: int, attempts: Sequence[Attempt], elapsed_ms: float
    ) -> None:
        """A batch's outcomes, committed, counted in the report and the progress, and logged."""
        size = len(work.members)
        tally: dict[str, int] = defaultdict(int)
        for outcome in outcomes:
            tally[outcome.state] += 1
        for state, count in tally.items():  # once per state, not per member
            self.report.add_outcome(state, count)
        if merged:
            tally["merged"] = merged
            self.report.merged += merged
        self.progress.advance("settled", size - tally.get("unknown", 0))
        # Per batch at debug when all went well (0.5 us of CPU per record at info: stages.py); at
        # info when a member failed or is unknown, or the request took more than one attempt. A debug
        # line is not even built when the level drops it (structlog's logger, made for each call, would
        # drop it in `filter_by_level`, which asks the same stdlib logger).
        went_wrong = len(attempts) > 1 or bool(tally.keys() & _WENT_WRONG)
        if not went_wrong and not log.isEnabledFor(logging.DEBUG):
            return
        (log.info if went_wrong else log.debug)(
            "batch.settled",
            operation=work.operation,
            size=size,
            key_prefix=work.key[:14],
            **_timing(attempts, elapsed_ms),
            **tally,
        )

    async def _failed(self, work: BatchWork, exc: CaptureError, attempts: list[Attempt]) -> None:
        reason = str(exc)
        size = len(work.members)
        log.info(
            "batch.error",
            operation=work.operation,
            size=size,
            key_prefix=work.key[:14],
            error=type(exc).__name__,
            status=exc.status_code,
        )
        ledger = self.ledger
        if isinstance(exc, Unauthorized):
            # Credentials, not data: nothing is marked failed; the batch is resent as it is later.
            self._halt(exc)  # first, so that the read ends before another chunk
            await asyncio.to_thread(ledger.record_attempts, work, attempts)
        elif isinstance(exc, IdempotencyConflict):
            await asyncio.to_thread(ledger.block, work, reason, attempts)
            self.report.blocked += size
        elif isinstance(exc, BadRequest):
            if size == 1:
                await asyncio.to_thread(ledger.fail, work, reason, attempts)
                self.report.failed += 1
            else:
                for half in await asyncio.to_thread(self._split, work, reason, attempts):
                    await self._send(half)
        elif is_retryable(exc):
            # Retries ran out on a transient failure: most likely an outage, so stop sending.
            await asyncio.to_thread(ledger.keep_open, work, reason, attempts)
            self._halt(exc)
        else:
            await asyncio.to_thread(ledger.stall, work, reason, attempts)
