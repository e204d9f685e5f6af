"""What the daemon knows of its own health: the single place its readiness, alerts, metrics, status
page and live state (`describe`) read from, so that they can never disagree with each other.

It learns from three places: every request's outcome as it happens (`observe`, a client observer),
each pass as it ends (`passed`), and the ledger's figures read after each pass and on the alerts
tick (`ledger_read`). Times are those of the requests themselves: an outage lasts from the first
request that got no answer to the first capture request that got one, however late a pass ends.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import structlog

from .api import BadRequest, IdempotencyConflict, Unauthorized, is_retryable
from .ledger import Stalls, answer_reason

if TYPE_CHECKING:
    from .api import Attempt, CaptureError, ClientInfo
    from .delivery import RunReport

log = structlog.get_logger("capture_sync.daemon")

CAPTURES = ("capture_bulk", "capture_person")
REFUSED = "the API refuses the credentials"
SWEEP = "retry-sweep"  # the daemon's job names, as `next_run` knows them
STALLED_RETRY = "retry-stalled"
CREDENTIALS = "credentials"


@dataclass(frozen=True)
class SourcePass:
    """The last pass of one source (or of the retry sweep), as its report told it."""

    at: float
    duration_s: float
    exit_code: int
    read: int
    rejected: int
    captured: int
    duplicate: int
    failed: int
    halted_by: str | None

    @property
    def reject_share(self) -> float:
        return self.rejected / self.read if self.read else 0.0


@dataclass(frozen=True)
class Unread:
    """A source the daemon could not read: since its first tick that could not, and why (`kind`:
    "credentials" while the API refuses them, "source" when the source itself cannot be read)."""

    since: float
    why: str
    kind: Literal["credentials", "source"] = "source"


@dataclass(frozen=True)
class Outage:
    since: float
    until: float


@dataclass
class DaemonHealth:
    """Updated on the daemon's event loop only; readers on that loop see a consistent state."""

    sources: tuple[str, ...] = ()
    config_path: Path | None = None
    retry_stalled_every: str | None = None  # [daemon] retry_stalled_every: stalled batches re-sent on it
    started_at: float = field(default_factory=time.time)
    client: ClientInfo | None = None
    api_answered_at: float | None = None  # the last GET /info that succeeded
    auth_failed: str | None = None  # why the API refuses the credentials in use; None when it accepts them
    auth_since: float | None = None  # when the first request it refused was sent
    outage_since: float | None = None  # delivery halted by an unavailable API since then; None when it delivers
    last_outage: Outage | None = None  # the last outage that ended
    stalled: Stalls = field(default_factory=Stalls)
    unsettled: int = 0  # the ledger's figures, as of the last `ledger_read`
    blocked: int = 0
    unread: dict[str, Unread] = field(default_factory=dict)  # source -> since when it is not read, why
    passes: dict[str, SourcePass] = field(default_factory=dict)  # source (or "retry-sweep") -> its last pass
    last_success: dict[str, float] = field(default_factory=dict)  # source -> end of its last pass that succeeded
    # source -> what its passes read and made of it since start (read, enqueued, unchanged, rejected):
    # the metrics' counters, kept whole here because `passes` holds only the last pass
    read_totals: dict[str, Counter[str]] = field(default_factory=dict)
    # job name (SWEEP, STALLED_RETRY, CREDENTIALS) -> its next run, as the daemon's scheduler says
    next_run: Callable[[str], float | None] = field(default=lambda _: None, repr=False)
    # integration -> this daemon's role for it on a shared PostgreSQL ledger ({"leads": bool, "token":
    # int | None, "since": epoch, "why": text}); empty on SQLite, where the one daemon leads
    roles: Callable[[], dict[str, dict[str, Any]]] = field(default=lambda: {}, repr=False)
    ledger_down: tuple[float, str] | None = None  # since when the ledger cannot be read, and why (the alerts' check)
    _failing_since: float | None = None  # the first request of the current run of failures

    @property
    def ready(self) -> bool:
        return not self.unready_reasons

    @property
    def unready_reasons(self) -> list[str]:
        """Why the API side is not ready, for /readyz: GET /info has not answered under the credentials
        in use, they are refused since, or an outage halted delivery since."""
        reasons = []
        if self.api_answered_at is None:
            reasons.append("GET /info has not succeeded yet")
        if self.auth_failed is not None:
            reasons.append(f"authentication failing since {_iso(self.auth_since)}: {self.auth_failed}")
        if self.outage_since is not None:
            reasons.append(f"delivery halted by an outage since {_iso(self.outage_since)}")
        return reasons

    # --- what it learns -----------------------------------------------------------------------

    def answered(self, info: ClientInfo) -> None:
        self.client, self.api_answered_at = info, time.time()

    def observe(self, attempt: Attempt) -> None:
        """A client observer: every attempt, on the event loop, as it ends. A capture request that
        got no answer starts an outage (since the first failed request of its run, a GET /info
        included); the first capture request answered ends it. A GET /info answered ends nothing:
        it says the API is up, not that it takes captures."""
        if _unanswered(attempt):
            self._failing_since = self._failing_since or attempt.started_at
            if attempt.operation in CAPTURES:
                self.outage_since = self.outage_since or self._failing_since
            return
        if attempt.operation not in CAPTURES:
            if self.outage_since is None:
                self._failing_since = None  # failed GET /info calls that halted nothing: no outage
            return
        if self.outage_since is None or attempt.started_at >= self.outage_since:  # not one sent before it began
            self._outage_over(attempt.started_at + attempt.latency_s)
        if attempt.error is not None and stalls(attempt.error):
            self._stalled(attempt, attempt.error)

    def passed(self, name: str, report: RunReport) -> None:
        now = time.time()
        self.passes[name] = SourcePass(
            now,
            report.duration_s,
            int(report.exit_code),
            report.read,
            report.rejected,
            report.captured,
            report.duplicate,
            report.failed,
            report.halted_by,
        )
        if _succeeded(report):
            self.last_success[name] = now
        totals = self.read_totals.setdefault(name, Counter())
        totals.update(
            read=report.read,
            enqueued=report.enqueued,
            unchanged=report.unchanged,
            rejected=report.rejected,
            late=report.late,
        )
        # a halt: GET /info failed (no capture was tried), or a request's retries ran out (begun already)
        if report.halted_by and not report.auth_failed:
            self.outage_since = self.outage_since or self._failing_since or now
        elif not report.stopped and not report.halted_by and report.unsettled == 0:
            self._outage_over(now)  # nothing waits: nothing is held up any more
        if name in self.sources:
            self._read_or_not(name, report, now)

    def skipped(self, name: str) -> None:
        """A source's tick that did not read it: the API refuses the credentials (nothing is read or sent)."""
        if name in self.sources:
            self.unread.setdefault(name, Unread(time.time(), REFUSED, "credentials"))

    def refused(self, reason: str, since: float | None) -> None:
        self.auth_failed = reason
        self.auth_since = self.auth_since or since or time.time()

    def accepted(self) -> None:
        self.auth_failed = self.auth_since = None

    def ledger_read(self, unsettled: int, blocked: int, stalled: Stalls) -> None:
        """The ledger's figures, read in a worker thread and handed over on the loop."""
        self.unsettled, self.blocked, self.stalled = unsettled, blocked, stalled

    def _read_or_not(self, name: str, report: RunReport, now: float) -> None:
        why = report.unavailable.get(name) or report.source_failures.get(name)
        if why is not None:
            self.unread.setdefault(name, Unread(now, why))
        elif report.auth_failed and name not in report.sources_read:
            self.unread.setdefault(name, Unread(now, REFUSED, "credentials"))
        elif name in report.sources_read:
            self.unread.pop(name, None)

    def _outage_over(self, at: float) -> None:
        if self.outage_since is not None:
            self.last_outage = Outage(self.outage_since, max(at, self.outage_since))
            # debug: a retryable 503 answered on its retry is an outage of a second, not news
            log.debug("delivery.resumed", outage_s=round(self.last_outage.until - self.last_outage.since, 1))
        self.outage_since = self._failing_since = None

    def _stalled(self, attempt: Attempt, error: CaptureError) -> None:
        """Said at once, and counted at once: the ledger's figure replaces this after the pass."""
        reason = answer_reason(attempt.status_code, error.name, error.code)
        was = self.stalled
        self.stalled = Stalls(
            was.entries + attempt.persons,
            was.batches + 1,
            was.since or attempt.started_at,
            reason,
        )
        log.warning(
            "batch.stalled",
            reason=reason,
            entries=attempt.persons,
            operation=attempt.operation,
            key_prefix=(attempt.idempotency_key or "")[:14],
            then=self.stall_then(),
        )

    # --- what it tells ------------------------------------------------------------------------

    def stall_then(self) -> str:
        """What happens next to stalled batches (spec 4.4 rule 4: never re-sent by themselves)."""
        replay = f"capture-sync replay -c {self.config_path or 'CONFIG'}"
        if self.retry_stalled_every is None:
            return f"not retried automatically (spec 4.4 rule 4): `{replay}` re-sends them with the same keys"
        at = self.next_run(STALLED_RETRY)
        when = f", next at {_iso(at)}" if at else ""
        return f"re-sent on [daemon] retry_stalled_every ({self.retry_stalled_every}{when}); `{replay}` sends them now"

    def describe(self, now: float) -> dict[str, Any]:
        """The live state for `status`, the control channel and the page: JSON-able, times as epoch
        seconds. None (null) for what does not hold."""
        stalled = self.stalled
        return {
            "pid": os.getpid(),
            "started_at": self.started_at,
            "ready": self.ready,
            "unready_reasons": self.unready_reasons,
            "auth": None
            if self.auth_failed is None
            else {"refused_since": self.auth_since, "reason": self.auth_failed},
            "outage": None
            if self.outage_since is None
            else {
                "since": self.outage_since,
                "seconds": round(now - self.outage_since, 1),
            },
            "last_outage": None
            if self.last_outage is None
            else {
                **asdict(self.last_outage),
                "seconds": round(self.last_outage.until - self.last_outage.since, 1),
            },
            "stalled": None if not stalled.entries else {**asdict(stalled), "then": self.stall_then()},
            "unread_sources": {name: asdict(u) for name, u in self.unread.items()},
            "unsettled": self.unsettled,
            "blocked": self.blocked,
            "next": {job: self.next_run(job) for job in (SWEEP, STALLED_RETRY, CREDENTIALS)},
            "integrations": self.roles(),
        }


def stalls(error: CaptureError) -> bool:
    """A capture answer that stops its batch for an operator's `replay` (design 4: a 503 not
    retryable, another 5xx): what `Delivery._failed` does with the errors it neither splits
    (400), blocks (409), halts on (401) nor retries."""
    return not is_retryable(error) and not isinstance(error, (BadRequest, IdempotencyConflict, Unauthorized))


def _unanswered(attempt: Attempt) -> bool:
    """No answer, or one that says the API cannot serve now: a 5xx to GET /info, a retryable one to
    a capture (a non-retryable one is the capture's answer: a stall, not an outage)."""
    if attempt.status_code is None:
        return True
    if attempt.status_code < 500:
        return False
    return attempt.operation not in CAPTURES or attempt.error is None or is_retryable(attempt.error)


def _iso(at: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)) if at else "unknown"


def _succeeded(report: RunReport) -> bool:
    """The pass did its own work: read what it was given and delivered without a halt. Its exit
    code is not the test: entries blocked or unsettled from any earlier pass make it 5 or 4, and
    those have their own alert and status lines; they must not make every source look stale."""
    return not (
        report.halted_by
        or report.unavailable
        or report.source_failures
        or report.stopped
        or report.ended_by is not None
    )
