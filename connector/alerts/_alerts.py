"""The daemon's alerts: judged after every pass and on a tick, sent in the background.

Only `capture-sync run` (the daemon) alerts: `sync` and `run --once` end with an exit code that says
the same to whoever started them (a cron job, a person), and a condition that started in one process
could never be told to have cleared.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import structlog

from ..ledger import LedgerError
from ._body import Context, render
from ._conditions import Change, Snapshot, Watch
from ._config import Alert
from ._sender import SendPolicy, Webhook

if TYPE_CHECKING:
    import httpx

    from ..health import DaemonHealth
    from ..ledger import Stalls

log = structlog.get_logger("capture_sync.alerts")

CLOSE_WAIT_S = 2.0  # on stop, how long queued alerts may still take (the daemon exits within 10 s)


class Counts(Protocol):
    """What the alerts read from the ledger (the daemon's `Ledger`)."""

    def blocked_count(self) -> int: ...
    def unsettled_count(self) -> int: ...
    def stalls(self) -> Stalls: ...


class Alerts:
    """Every `[[alerts]]` entry with its own memory of active conditions and its own webhook."""

    def __init__(
        self,
        alerts: Sequence[Alert],
        health: DaemonHealth,
        ledger: Counts,
        *,
        config: Path,
        sources: Sequence[str],
        clock: Callable[[], float] = time.time,
        policy: SendPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.health, self.ledger, self.clock = health, ledger, clock
        self.sources = tuple(sources)
        self.context = Context(config.absolute(), self.sources, socket.gethostname())
        self.entries = [
            (
                alert,
                Watch(alert.settings),
                Webhook(alert.label, alert.url, timeout_s=alert.settings.timeout_s, policy=policy, transport=transport),
            )
            for alert in alerts
        ]
        self._one_at_a_time = asyncio.Lock()  # a tick and a pass's check must not judge out of order

    async def check(self) -> None:
        """Read the ledger's figures into the daemon's health (its page, metrics and live state
        use them too, alerts or not), then judge every condition and queue an alert for each change.
        Never raises: an alert that cannot be judged must not end a pass or the daemon."""
        try:
            async with self._one_at_a_time:
                try:
                    self.health.ledger_read(*await asyncio.to_thread(self._counts))
                    self.health.ledger_down = None
                except LedgerError as exc:  # judged all the same: the `ledger` condition is about this
                    if self.health.ledger_down is None:
                        self.health.ledger_down = (self.clock(), str(exc))
                if not self.entries:
                    return
                snap = Snapshot.of(self.health, self.sources, self.clock())
                for alert, watch, webhook in self.entries:
                    for change in watch.update(snap):
                        self._raise(alert, webhook, change)
        except Exception as exc:
            log.error("alerts.check_failed", error=f"{type(exc).__name__}: {exc}", then="the next tick tries again")

    def _counts(self) -> tuple[int, int, Stalls]:
        return self.ledger.unsettled_count(), self.ledger.blocked_count(), self.ledger.stalls()

    def _raise(self, alert: Alert, webhook: Webhook, change: Change) -> None:
        status = "started" if change.started else "cleared"
        about = {"condition": change.condition, "subject": change.subject, "status": status}
        (log.warning if change.started else log.info)("alert." + status, alert=alert.label, **about)
        webhook.post(render(change, alert.label, alert.settings.format, self.context), **about)

    async def aclose(self, timeout_s: float = CLOSE_WAIT_S) -> None:
        """On the daemon's stop: the queued alerts get `timeout_s` (shared by all webhooks) to go."""
        await asyncio.gather(*(webhook.aclose(timeout_s) for _, _, webhook in self.entries))
