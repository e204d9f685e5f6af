"""The sync pass and the replay: extract -> map -> ledger, and ledger -> batches -> API -> ledger,
running side by side.

Extraction (`extract.py`, on a thread) commits each chunk of records with the source cursor after
it (dlt-style: state moves only with the data it covers). Delivery (`deliver.py`) claims batches
as the chunks commit: every batch is on disk with its key and member list before its request
leaves, and every response is settled in one transaction. The read pauses while enough work is
pending, so memory stays bounded however long the source is.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from .. import logs, tracing
from ..api import CaptureClient, ClientInfo, RateGate
from ..ledger import Ledger
from .deliver import LOGGER, Delivery, DeliverySettings, OnInfo, connect
from .extract import NoProgress, Progress, extract, readable, to_mapped
from .job import SourceJob
from .preview import preview
from .ratelimit import AdaptiveRateLimiter
from .report import RunReport

__all__ = ["DeliverySettings", "Progress", "extract", "preview", "replay", "sync", "to_mapped"]

log = logs.get_logger(LOGGER)


def _rate_gate(client: CaptureClient, info: ClientInfo, settings: DeliverySettings) -> RateGate | None:
    """The client-side limiter for this run, seeded from GET /info's `rate_limit`. A client keeps
    its limiter from run to run (the daemon's passes and sweeps share one client): what it learned
    of the unit, the window and the pace is not learned again with a burst of 429s each pass, and
    a changed `rate_limit` rescales it (`reseed`)."""
    if info.rate_limit < 1:
        return None
    kept = client.rate_gate
    if isinstance(kept, AdaptiveRateLimiter) and (kept.hint, kept.shape) == (
        settings.rate_window_s,
        settings.rate_shape,
    ):
        kept.reseed(info.rate_limit)  # that GET /info went through it: it is in its send log
        return kept
    limiter = AdaptiveRateLimiter(info.rate_limit, settings.rate_window_s, settings.rate_shape)
    limiter.counted(1)  # the GET /info just answered, which the server counted too
    return limiter


async def _deliver(
    ledger: Ledger,
    client: CaptureClient,
    settings: DeliverySettings,
    report: RunReport,
    progress: Progress | None,
    stop: asyncio.Event | None,
    *,
    include_stalled: bool,
    info: ClientInfo | None,
) -> None:
    """Drain the ledger. `info` is this run's GET /info answer; without one (the API was not
    reachable when the run began) delivery asks first and stops, halted, if it still cannot."""
    if info is None:
        info = await connect(client, report, None)
        if info is None:
            return
    delivery = Delivery(ledger, client, settings, report, progress or NoProgress(), stop, include_stalled)
    await delivery.run(info, _rate_gate(client, info, settings))


def _read_all(
    ledger: Ledger,
    jobs: Sequence[SourceJob],
    settings: DeliverySettings,
    report: RunReport,
    progress: Progress,
    stop: asyncio.Event | None,
    delivery: Delivery | None,
) -> None:
    """Read every source in turn (on a thread). With `delivery`, each committed chunk is handed to
    it and the read waits while enough is pending; a stop ends it after the chunk in hand."""
    last_id = ledger.last_entry_id()
    if settings.rejects is not None:  # what a crash after a commit kept out of the feed goes in first
        settings.rejects.catch_up(ledger)

    def between_chunks() -> bool:
        go_on = True if delivery is None else delivery.room_to_read(lambda high: ledger.backlog(last_id, high))
        if stop is not None and stop.is_set():
            report.stopped = True
            return False
        return go_on

    for job in jobs:
        if stop is not None and stop.is_set():
            report.stopped = True
            return
        with tracing.source_read(job.name, report):
            done = extract(ledger, job, settings.chunk_size, report, progress, between_chunks, settings.rejects)
        if not done:
            return


Gate = Callable[[], None]  # a check before a run reads or sends anything; raises ConfigProblem to refuse it


_YOUNG_THRESHOLD = 10_000  # allocations between two collections of the youngest generation (Python's default: 700)
_tuning = threading.Lock()
_runs = 0  # runs going on in this process
_restore: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None  # (set by the runs, the host's own)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """A run makes and drops dozens of short-lived objects per record (rows, dicts, responses), and
    reference counting frees nearly all of them; at the default threshold the cyclic collector still
    walked the young ones some 500 times in a 30,000-record sync, 11-13 us of CPU per record (3 at
    this threshold; docs/performance.md). The setting is process-wide: the host's own is back once no
    run goes on, unless it changed it meanwhile; a host that switched automatic collection off
    (threshold 0) or set a higher one keeps it."""
    global _runs, _restore
    with _tuning:
        if _runs == 0:
            own = gc.get_threshold()
            _restore = None
            if 0 < own[0] < _YOUNG_THRESHOLD:
                _restore = ((_YOUNG_THRESHOLD, own[1], own[2]), own)
                gc.set_threshold(*_restore[0])
        _runs += 1
    try:
        yield
    finally:
        with _tuning:
            _runs -= 1
            if _runs == 0 and _restore is not None and gc.get_threshold() == _restore[0]:
                gc.set_threshold(*_restore[1])


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
        try:
            report.run_id = ledger.finish_run(
                run_id,
                report.counts(),
                report.duration_s,
                int(report.exit_code),
                report.sources_read,
                report.reason,
            )
        finally:  # said even when the ledger cannot record it (a full disk): the figures are this run's
            log.info(
                "run.finished",
                kind=report.kind,
                duration_s=round(report.duration_s, 3),
                unsettled=report.unsettled,
                exit_code=int(report.exit_code),
                **report.counts(),
            )


async def sync(
    ledger: Ledger,
    client: CaptureClient,
    jobs: Sequence[SourceJob],
    settings: DeliverySettings,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    stop: asyncio.Event | None = None,
    on_info: OnInfo | None = None,
    gate: Gate | None = None,
) -> RunReport:
    """One pass over the sources, delivering as it reads, then drain the ledger (design 5 `sync`).
    `gate` may refuse the run (a ConfigProblem, recorded as the run's exit 2) before anything else.
    The setup is checked first (a config problem raises ConfigProblem before anything is read),
    then GET /info: refused credentials end the run before a source is read. An API that does not
    answer yet does not stop the reading: the sources are read whole, then delivery asks again.
    A source that cannot be read, or fails mid-read, is in the report's `unavailable` or
    `source_failures`; the other sources are read and everything the ledger holds is delivered
    all the same. Requests refused for credentials mid-run end the reading after the chunk in hand."""
    if dry_run:
        return await asyncio.to_thread(preview, ledger, jobs)
    report = RunReport(kind="sync")
    shown = progress or NoProgress()
    with tracing.run(report), _recorded(ledger, report), _fewer_collections():
        if gate is not None:
            gate()
        found = await asyncio.to_thread(readable, jobs, report)
        info = await connect(client, report, on_info, before_reading=True)
        if report.auth_failed:
            return report
        if info is None:  # nothing can be sent yet: read everything, then delivery asks again
            await asyncio.to_thread(_read_all, ledger, found, settings, report, shown, stop, None)
            # With nothing to send, an API that does not answer halts nothing: exit 0, no outage.
            if not report.stopped and await asyncio.to_thread(ledger.unsettled_count) > 0:
                await _deliver(ledger, client, settings, report, progress, stop, include_stalled=False, info=None)
            return report
        snapshots = [job for job in found if job.snapshot]
        if (
            snapshots
        ):  # read whole before anything goes, so a record a snapshot holds twice is sent as its last row only
            await asyncio.to_thread(_read_all, ledger, snapshots, settings, report, shown, stop, None)
        streamed = [job for job in found if not job.snapshot]
        delivery = Delivery(ledger, client, settings, report, progress or NoProgress(), stop, include_stalled=False)

        async def read(d: Delivery) -> None:
            await asyncio.to_thread(_read_all, ledger, streamed, settings, report, shown, stop, d)

        await delivery.run(info, _rate_gate(client, info, settings), read)
    return report


async def replay(
    ledger: Ledger,
    client: CaptureClient,
    settings: DeliverySettings,
    *,
    include_failed: bool = False,
    include_stalled: bool = True,
    progress: Progress | None = None,
    stop: asyncio.Event | None = None,
    on_info: OnInfo | None = None,
    gate: Gate | None = None,
) -> RunReport:
    """Re-send what the ledger holds unsettled: written batches first with their original key and
    body, then unknown and pending entries; then, if asked, failed ones under new batch keys.
    `include_stalled=False` leaves the batches a non-retryable answer stopped (spec 4.4 rule 4: an
    operator's `replay` sends them, never the daemon's sweep unless told to). `gate` as for `sync`."""
    report = RunReport(kind="replay")
    started = time.time()
    with tracing.run(report), _recorded(ledger, report), _fewer_collections():
        if gate is not None:
            gate()
        info = await connect(client, report, on_info)
        if info is None:
            return report
        await _deliver(ledger, client, settings, report, progress, stop, include_stalled=include_stalled, info=info)
        if include_failed and not (report.halted_by or report.stopped) and ledger.requeue_failed(before=started):
            await _deliver(ledger, client, settings, report, progress, stop, include_stalled=False, info=info)
    return report
