"""The sync pass and the replay: extract -> map -> ledger, then ledger -> batches -> API -> ledger.

Extraction commits each chunk of records with the source cursor after it (dlt-style: state moves
only with the data it covers). Delivery then drains the ledger: every batch is on disk with its
key and member list before its request leaves, and every response is settled in one transaction.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

import structlog

from .. import failpoints
from ..api import (
    Attempt,
    BadRequest,
    BulkCaptureResult,
    CaptureClient,
    CaptureError,
    ClientInfo,
    IdempotencyConflict,
    PersonCaptureResult,
    PersonInput,
    Unauthorized,
    encode_json,
    is_retryable,
)
from ..ledger import BatchWork, Claim, Ledger, Mapped
from ..problems import ConfigProblem
from ..source import BadRecord, SourceError
from .job import SourceJob
from .preflight import preflight
from .ratelimit import AdaptiveRateLimiter
from .report import RunReport
from .settle import match_bulk, person_outcome

if TYPE_CHECKING:
    from ..mapping import Mapping
    from ..source import Record

LOGGER = "capture_sync.delivery"
log = structlog.get_logger(LOGGER)

RAW_VALUE_LIMIT = 500
PREVIEW_LIMIT = 20


@dataclass(frozen=True)
class DeliverySettings:
    batch_size: int = 100
    concurrency: int = 4
    rate_window_s: float | None = None  # the rate limit's window when known; None: the limiter finds it
    chunk_size: int = 1000
    stop_grace_s: float = 8.0

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 100:
            raise ValueError("batch_size must be 1 to 100")
        if self.concurrency < 1 or self.chunk_size < 1:
            raise ValueError("concurrency and chunk_size must be at least 1")


class Progress(Protocol):
    def advance(self, what: Literal["read", "sent", "settled"], n: int) -> None: ...


class _NoProgress:
    def advance(self, what: str, n: int) -> None:
        pass


def to_mapped(mapping: Mapping, record: Record) -> Mapped:
    result, notes = mapping.map_noting(record.data)
    if isinstance(result, PersonInput):
        return Mapped(record.id, payload=encode_json(result.to_json_dict()).decode("utf-8"), reasons=notes)
    return Mapped(record.id, raw=_shown_record(record.data), reasons=tuple(result.reasons))


def _shown_record(data: dict[str, Any]) -> dict[str, str]:
    return {str(k): _shown(v) for k, v in data.items()}


def _shown(value: object) -> str:
    """The rejected value as kept in the ledger for a person to read; never an exception."""
    try:
        return str(value)[:RAW_VALUE_LIMIT]
    except ValueError:  # an int beyond the interpreter's digit limit
        return f"<{type(value).__name__} too large to show>"


def _entry(mapping: Mapping, item: Record | BadRecord, report: RunReport) -> Mapped:
    """A record as the ledger keeps it; a rejection's reasons are counted for the summary (a bad
    record's without its position, so that alike ones add up)."""
    if isinstance(item, BadRecord):
        report.rejection_reasons[item.reason] += 1
        raw = None if item.raw is None else _shown_record(item.raw)
        # Without an id, its position names it: the same bad line read again is the same entry.
        return Mapped(item.id or f"@{item.where}", raw=raw, reasons=(f"{item.where}: {item.reason}",))
    mapped = to_mapped(mapping, item)
    if mapped.payload is None:
        report.rejection_reasons.update(mapped.reasons)
        if item.where:
            return replace(mapped, reasons=tuple(f"{item.where}: {reason}" for reason in mapped.reasons))
    return mapped


def _read(ledger: Ledger, job: SourceJob, report: RunReport) -> Iterator[Record | BadRecord]:
    """The source's records from its committed cursor until it ends or raises. A raise ends only
    this source's read: it is reported, and what came before is kept (design 2: a bad record is a
    rejection; a source that breaks mid-read must not cost the records it already gave)."""
    count = 0
    try:
        for item in job.source.read(None if job.from_start else ledger.source_state(job.name)):
            count += 1
            yield item
    except Exception as exc:  # a plugin may raise anything; KeyboardInterrupt and stops are not this
        detail = str(exc) if isinstance(exc, SourceError) else f"{type(exc).__name__}: {exc}"
        message = f"sources.{job.name}: the read failed after {count} record(s): {detail}"
        report.source_failures[job.name] = message
        traceback = logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG)  # -v: a plugin author wants it
        log.error("source.failed", source=job.name, records=count, error=detail, exc_info=traceback)


def _readable(jobs: Sequence[SourceJob], report: RunReport) -> list[SourceJob]:
    """Check the setup before anything is read or sent: a config problem stops the run (all of
    them reported at once); a source that cannot be read now is skipped and reported, the others go on."""

    found = preflight(jobs)
    if found.config_problems:
        raise ConfigProblem(found.config_problems)
    for name, reason in found.unavailable.items():
        report.unavailable[name] = reason
        log.error("source.unavailable", source=name, reason=reason)
    return [job for job in jobs if job.name not in found.unavailable]


def extract(
    ledger: Ledger, job: SourceJob, chunk_size: int, report: RunReport, progress: Progress,
    stop: asyncio.Event | None = None,
) -> None:
    """Read the source from its committed cursor; each chunk and its cursor commit together, so a
    stop between chunks (or a crash anywhere) resumes exactly after the last committed chunk. A bad
    record is a rejected entry and the cursor moves past it; a source that raises keeps the
    records before it, its cursor at the last of them."""
    chunk: list[Mapped] = []
    last_state: Any = None
    report.sources_read.append(job.name)
    if job.from_start:  # the cursor it replaces stays in the state history, to be put back if wanted
        ledger.change_source_state(job.name, None, "full-refresh")

    def flush() -> None:
        counts = ledger.enqueue(job.name, job.mapping.version, chunk, last_state)
        report.enqueued += counts.enqueued
        report.unchanged += counts.unchanged
        report.rejected += counts.rejected
        progress.advance("read", len(chunk))
        chunk.clear()

    for item in _read(ledger, job, report):
        chunk.append(_entry(job.mapping, item, report))
        last_state = item.state
        report.read += 1
        if len(chunk) >= chunk_size:
            flush()
            if stop is not None and stop.is_set():
                report.stopped = True
                return
    if chunk:
        flush()


OnInfo = Callable[[ClientInfo], None]


def _halt(report: RunReport, exc: CaptureError) -> None:
    report.halted_by = str(exc)
    if isinstance(exc, Unauthorized):
        report.auth_failed = True
    log.warning("delivery.halted", error=type(exc).__name__, reason=str(exc))


async def _connect(
    client: CaptureClient, report: RunReport, on_info: OnInfo | None, *, before_reading: bool = False,
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
            _halt(report, exc)
        return None
    if on_info is not None:
        on_info(info)
    return info


class _Delivery:
    """Drains the ledger with bounded concurrency until it is empty, halted or stopped."""

    def __init__(
        self, ledger: Ledger, client: CaptureClient, settings: DeliverySettings, report: RunReport,
        progress: Progress, stop: asyncio.Event | None, include_stalled: bool,
    ) -> None:
        self.ledger, self.client, self.settings, self.report = ledger, client, settings, report
        self.progress = progress
        self.stop = stop or asyncio.Event()
        self.halt = asyncio.Event()
        self.claimed: set[int] = set()
        self.want = Claim(settings.batch_size, self.claimed, include_stalled)  # `claimed` grows in place
        self.attempts: dict[str | None, list[Attempt]] = defaultdict(list)

    async def run(self, info: ClientInfo) -> None:
        if info.rate_limit >= 1:
            self.client.rate_gate = AdaptiveRateLimiter(info.rate_limit, self.settings.rate_window_s)
        self.client.on_attempt = lambda attempt: self.attempts[attempt.idempotency_key].append(attempt)
        workers = [asyncio.create_task(self._worker()) for _ in range(self.settings.concurrency)]
        all_done = asyncio.ensure_future(asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION))
        stopping = asyncio.ensure_future(self.stop.wait())
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
            results = await asyncio.gather(*workers, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)]
        if errors:
            raise errors[0]

    def _halt(self, exc: CaptureError) -> None:
        _halt(self.report, exc)
        self.halt.set()

    async def _worker(self) -> None:
        work = self._claim_next()
        while work is not None:
            work = await self._send(work, claim_next=True)

    def _wanted(self) -> Claim | None:
        """What to claim after the batch in hand; nothing once the run is halted or stopping."""
        return None if self.halt.is_set() or self.stop.is_set() else self.want

    def _claim_next(self) -> BatchWork | None:
        want = self._wanted()
        return None if want is None else self.ledger.claim(want)

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
            return self._claim_next() if claim_next else None
        failpoints.hit("after-response")
        attempts = self.attempts.pop(work.key, [])
        # capture_bulk's result exactly when work.operation == "bulk"; isinstance lets mypy see it
        outcomes = (
            match_bulk(work.members, result) if isinstance(result, BulkCaptureResult)
            else [person_outcome(work.members[0], result)]
        )
        following = self.ledger.settle(work, outcomes, attempts, then=self._wanted() if claim_next else None)
        tally: dict[str, int] = defaultdict(int)
        for outcome in outcomes:
            tally[outcome.state] += 1
            self.report.add_outcome(outcome.state)
        self.report.sent += size
        self.progress.advance("sent", size)
        self.progress.advance("settled", size - tally.get("unknown", 0))
        log.info(
            "batch.settled", operation=work.operation, size=size, key_prefix=work.key[:14],
            latency_ms=round((time.perf_counter() - t0) * 1000, 1), **tally,
        )
        return following

    async def _failed(self, work: BatchWork, exc: CaptureError, attempts: list[Attempt]) -> None:
        reason = str(exc)
        size = len(work.members)
        log.info("batch.error", operation=work.operation, size=size, key_prefix=work.key[:14], error=type(exc).__name__, status=exc.status_code)
        if isinstance(exc, Unauthorized):
            # Credentials, not data: nothing is marked failed; the batch is resent as it is later.
            self.ledger.record_attempts(work, attempts)
            self._halt(exc)
        elif isinstance(exc, IdempotencyConflict):
            self.ledger.block(work, reason, attempts)
            self.report.blocked += size
        elif isinstance(exc, BadRequest):
            if size == 1:
                self.ledger.fail(work, reason, attempts)
                self.report.failed += 1
            else:
                for half in self.ledger.split(work, reason, attempts):
                    await self._send(half)
        elif is_retryable(exc):
            # Retries ran out on a transient failure: most likely an outage, so stop sending.
            self.ledger.keep_open(work, reason, attempts)
            self._halt(exc)
        else:
            self.ledger.stall(work, reason, attempts)


async def _deliver(
    ledger: Ledger, client: CaptureClient, settings: DeliverySettings, report: RunReport,
    progress: Progress | None, stop: asyncio.Event | None, *, include_stalled: bool, info: ClientInfo | None,
) -> None:
    """`info` is this run's GET /info answer; without one (the API was not reachable when the run
    began) delivery asks first and stops, halted, if it still cannot."""
    if info is None:
        info = await _connect(client, report, None)
        if info is None:
            return
    delivery = _Delivery(ledger, client, settings, report, progress or _NoProgress(), stop, include_stalled)
    await delivery.run(info)


@contextmanager
def _recorded(ledger: Ledger, report: RunReport) -> Iterator[None]:
    """Record the run in the ledger with the exit code the command returns, however it ends."""
    t0 = time.monotonic()
    run_id = report.run_id = ledger.start_run(report.kind)
    try:
        yield
    except BaseException as exc:
        report.end_with(exc)
        raise
    finally:
        report.unsettled = ledger.unsettled_count()
        report.blocked_total = ledger.blocked_count()
        report.duration_s = time.monotonic() - t0
        ledger.finish_run(run_id, report.counts(), report.duration_s, int(report.exit_code), report.sources_read)
        log.info(
            "run.finished", kind=report.kind, duration_s=round(report.duration_s, 3), unsettled=report.unsettled,
            exit_code=int(report.exit_code), **report.counts(),
        )


async def sync(
    ledger: Ledger, client: CaptureClient, jobs: Sequence[SourceJob], settings: DeliverySettings, *,
    dry_run: bool = False, progress: Progress | None = None, stop: asyncio.Event | None = None,
    on_info: OnInfo | None = None,
) -> RunReport:
    """One pass over the sources, then drain the ledger (design 5 `sync`). The setup is checked
    first (a config problem raises ConfigProblem before anything is read), then GET /info: refused
    credentials end the run before a source is read; an API that does not answer yet does not stop
    the reading (delivery asks again). A source that cannot be read, or fails mid-read, is in the
    report's `unavailable` or `source_failures`; the other sources are read and everything the
    ledger holds is delivered all the same."""
    if dry_run:
        return await asyncio.to_thread(preview, ledger, jobs)
    report = RunReport(kind="sync")
    with _recorded(ledger, report):
        readable = await asyncio.to_thread(_readable, jobs, report)
        info = await _connect(client, report, on_info, before_reading=True)
        if report.auth_failed:
            return report
        for job in readable:
            if stop is not None and stop.is_set():
                report.stopped = True
                break
            await asyncio.to_thread(
                extract, ledger, job, settings.chunk_size, report, progress or _NoProgress(), stop
            )
        if not report.stopped:
            await _deliver(ledger, client, settings, report, progress, stop, include_stalled=False, info=info)
    return report


async def replay(
    ledger: Ledger, client: CaptureClient, settings: DeliverySettings, *,
    include_failed: bool = False, progress: Progress | None = None, stop: asyncio.Event | None = None,
    on_info: OnInfo | None = None,
) -> RunReport:
    """Re-send what the ledger holds unsettled: written batches first with their original key and
    body, then unknown and pending entries; then, if asked, failed ones under new batch keys."""
    report = RunReport(kind="replay")
    started = time.time()
    with _recorded(ledger, report):
        info = await _connect(client, report, on_info)
        if info is None:
            return report
        await _deliver(ledger, client, settings, report, progress, stop, include_stalled=True, info=info)
        if include_failed and not (report.halted_by or report.stopped):
            if ledger.requeue_failed(before=started):
                await _deliver(ledger, client, settings, report, progress, stop, include_stalled=False, info=info)
    return report


def preview(
    ledger: Ledger, jobs: Sequence[SourceJob], sink: Callable[[dict[str, Any]], None] | None = None
) -> RunReport:
    """--dry-run: map and validate what a sync would read, and count what it would send, without
    sending, committing a cursor or changing any entry. Whether the CRM would create or update a
    person cannot be known without asking it, so the preview does not guess. The setup is checked
    as by `sync`. The report keeps the first PREVIEW_LIMIT persons; `sink` gets every one as it is
    read (`"outcome": "send"`) and every rejected record with its reasons (`"outcome": "rejected"`),
    so a preview of any size streams to a file."""
    shown: list[dict[str, Any]] = []
    report = RunReport(kind="dry_run", dry_run_preview=shown)
    t0 = time.monotonic()
    for job in _readable(jobs, report):
        for found in _read(ledger, job, report):
            report.read += 1
            item = _entry(job.mapping, found, report)
            if ledger.is_unchanged(job.name, item):
                report.unchanged += 1
            elif item.payload is None:
                report.rejected += 1
                if sink is not None:
                    sink({"source": job.name, "record_id": item.record_id, "outcome": "rejected",
                          "reasons": list(item.reasons), "record": item.raw})
            else:
                report.enqueued += 1
                person = {"source": job.name, "record_id": item.record_id, **json.loads(item.payload)}
                if len(shown) < PREVIEW_LIMIT:
                    shown.append(person)
                if sink is not None:
                    sink({"outcome": "send", **person})
    report.unsettled = ledger.unsettled_count()
    report.duration_s = time.monotonic() - t0
    return report
