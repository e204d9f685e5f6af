"""The alert conditions as a state machine: each (condition, subject) is active or not, and only a
change of that state is an alert, so a condition that lasts a day is told twice (started, cleared),
never on every tick.

Each condition is a pure function of a `Snapshot` (what the daemon's health and the ledger say at
one moment, with the clock read once) to verdicts per subject: the subject is a source name for
`reject_rate` and `stale`, and None for the conditions of the whole daemon. A verdict of None says
"nothing new": a pass that read too few records to judge keeps the source's reject state as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..ledger import Stalls
from ._config import AlertSettings, Condition

if TYPE_CHECKING:
    from ..health import DaemonHealth, Outage, SourcePass, Unread

Counts = dict[str, int | float]
Notes = dict[str, str]  # words beside the counts (a reason, what happens next): never a record's data


@dataclass(frozen=True)
class Snapshot:
    """What the conditions are judged on, read at one moment (`now`, seconds since the epoch)."""

    now: float
    started_at: float
    sources: tuple[str, ...]
    auth_failed: str | None = None
    outage_since: float | None = None
    passes: Mapping[str, SourcePass] = field(default_factory=dict)
    last_success: Mapping[str, float] = field(default_factory=dict)
    blocked: int = 0
    unsettled: int = 0
    auth_since: float | None = None
    last_outage: Outage | None = None
    stalled: Stalls = field(default_factory=Stalls)
    stall_then: str = ""
    unread: Mapping[str, Unread] = field(default_factory=dict)
    ledger_down: tuple[float, str] | None = None  # since when the ledger's database has not answered, and why

    @classmethod
    def of(cls, health: DaemonHealth, sources: tuple[str, ...], now: float) -> Snapshot:
        return cls(
            now,
            health.started_at,
            sources,
            health.auth_failed,
            health.outage_since,
            dict(health.passes),
            dict(health.last_success),
            health.blocked,
            health.unsettled,
            health.auth_since,
            health.last_outage,
            health.stalled,
            health.stall_then(),
            dict(health.unread),
            health.ledger_down,
        )


@dataclass(frozen=True)
class Verdict:
    """Whether the condition holds for a subject; `since` is when it began (None: when first seen)."""

    active: bool
    since: float | None = None
    counts: Counts = field(default_factory=dict)
    notes: Notes = field(default_factory=dict)
    until: float | None = None  # for a clear: when the condition ended, when known


@dataclass(frozen=True)
class Change:
    """One alert: a condition started or cleared for a subject. `since` is when the condition began;
    `at` when the change was seen; `ended`, for a clear, when the condition ended if known."""

    condition: Condition
    subject: str | None
    started: bool
    since: float
    at: float
    counts: Counts
    notes: Notes = field(default_factory=dict)
    ended: float | None = None

    @property
    def duration_s(self) -> float:
        return (self.ended if self.ended is not None else self.at) - self.since


Judge = Callable[[Snapshot, AlertSettings], Iterator[tuple[str | None, Verdict | None]]]


def _auth(snap: Snapshot, _: AlertSettings) -> Iterator[tuple[str | None, Verdict | None]]:
    """The entries the ledger holds unsent, and the sources not read since (their new rows wait
    unread: no figure counts them)."""
    since = (
        snap.auth_since or snap.now
    )  # nothing is read from the refusal on: a source not marked yet is unread since then
    unread = (
        ", ".join(f"{name} since {_iso(u.since if (u := snap.unread.get(name)) else since)}" for name in snap.sources)
        or "none"
    )
    notes = {"unread": unread}
    yield None, Verdict(snap.auth_failed is not None, snap.auth_since, {"unsettled": snap.unsettled}, notes)


def _blocked(snap: Snapshot, _: AlertSettings) -> Iterator[tuple[str | None, Verdict | None]]:
    yield None, Verdict(snap.blocked > 0, counts={"blocked": snap.blocked})


def _outage(snap: Snapshot, settings: AlertSettings) -> Iterator[tuple[str | None, Verdict | None]]:
    since = snap.outage_since
    long_enough = since is not None and snap.now - since >= settings.outage_after
    until = snap.last_outage.until if since is None and snap.last_outage else None
    yield None, Verdict(long_enough, since, {"unsettled": snap.unsettled}, until=until)


def _ledger(snap: Snapshot, settings: AlertSettings) -> Iterator[tuple[str | None, Verdict | None]]:
    """The ledger's database unreachable (PostgreSQL down, a network between) for `outage_after`."""
    down = snap.ledger_down
    long_enough = down is not None and snap.now - down[0] >= settings.outage_after
    yield None, Verdict(long_enough, down[0] if down else None, {}, {"reason": down[1]} if down else {})


def _stalled(snap: Snapshot, _: AlertSettings) -> Iterator[tuple[str | None, Verdict | None]]:
    stalled = snap.stalled
    counts: Counts = {"entries": stalled.entries, "batches": stalled.batches}
    notes = {"reason": stalled.reason or "unknown", "then": snap.stall_then} if stalled.entries else {}
    yield None, Verdict(stalled.entries > 0, stalled.since, counts, notes)


def _reject_rate(snap: Snapshot, settings: AlertSettings) -> Iterator[tuple[str | None, Verdict | None]]:
    for source in snap.sources:
        last = snap.passes.get(source)
        if last is None or last.read < settings.reject_min_read:
            yield source, None
            continue
        counts: Counts = {"read": last.read, "rejected": last.rejected, "reject_share": round(last.reject_share, 4)}
        yield source, Verdict(last.reject_share > settings.reject_share, last.at, counts)


def _stale(snap: Snapshot, settings: AlertSettings) -> Iterator[tuple[str | None, Verdict | None]]:
    for source in snap.sources:
        last = snap.last_success.get(source, snap.started_at)  # never succeeded: stale since the start
        yield source, Verdict(snap.now - last > settings.stale_after, last)


JUDGES: dict[Condition, Judge] = {
    "auth": _auth,
    "blocked": _blocked,
    "outage": _outage,
    "reject_rate": _reject_rate,
    "stale": _stale,
    "ledger": _ledger,
    "stalled": _stalled,
}


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


class Watch:
    """One alert entry's memory: when each active (condition, subject) began. Not thread-safe: the
    daemon updates it on its event loop, one check at a time."""

    def __init__(self, settings: AlertSettings) -> None:
        self.settings = settings
        self._active: dict[tuple[Condition, str | None], float] = {}

    def active(self) -> list[tuple[Condition, str | None]]:
        return list(self._active)

    def update(self, snap: Snapshot) -> list[Change]:
        """The changes since the last update: a start for each newly active subject, a clear for
        each one no longer active."""
        changes = []
        for condition in self.settings.conditions:
            for subject, verdict in JUDGES[condition](snap, self.settings):
                if verdict is None:
                    continue
                key = (condition, subject)
                began = self._active.get(key)
                if verdict.active and began is None:
                    began = self._active[key] = verdict.since if verdict.since is not None else snap.now
                    changes.append(Change(condition, subject, True, began, snap.now, verdict.counts, verdict.notes))
                elif not verdict.active and began is not None:
                    del self._active[key]
                    changes.append(
                        Change(condition, subject, False, began, snap.now, verdict.counts, verdict.notes, verdict.until)
                    )
        return changes
