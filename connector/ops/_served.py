"""One integration a daemon process serves over HTTP: its metrics, its ledger snapshots, its
readiness and its status page. A process that runs several integrations (`run -c a -c b`) serves
one of these per integration behind one address (`_server`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ._metrics import Metrics
from ._page import PageSource, render
from ._snapshot import LedgerReader, SettledTally, Snapshot

if TYPE_CHECKING:
    from ..api.client import CaptureClient
    from ..config import Config
    from ..control import Steered
    from ..health import DaemonHealth

MAX_SNAPSHOT_AGE_S = 5.0


class Served:
    """`control`: the daemon running this integration, for the page's paused sources and the HTTP
    control (`POST /integrations/<name>/control/<command>`), which takes a command for it only with
    `token`, its own config's `[daemon] control_token_file` (None: no command over HTTP)."""

    def __init__(
        self, config: Config, health: DaemonHealth, client: CaptureClient, control: Steered | None = None
    ) -> None:
        self.config, self.health, self.client, self.control = config, health, client, control
        self.token = config.control_token() if control is not None else None  # ConfigProblem when unusable
        self.name = config.integration_name
        self.sources = [PageSource(s.name, s.schedule) for s in config.sources]
        self.reader = LedgerReader(config.ledger_target, config.ledger_password_file, config.integration_name)
        self.metrics = Metrics(
            health,
            client,
            [s.name for s in self.sources],
            config.capture.rate_window_s or 60.0,
            integration=config.integration_name,
        )
        self.tally = SettledTally(counted_until=health.started_at)
        self.metrics.state.tally = self.tally
        self._snapshot: Snapshot | None = None
        self._read_after: float | None = None  # the last pass's end when that snapshot's read began
        self._reading = asyncio.Lock()

    async def snapshot(self) -> Snapshot:
        """The ledger as of now, or as of the last read if no pass ended since it began and it is
        fresh. Since it began, not since it was taken: a pass that ended during a read is not in
        that read's settled counts, and comparing with `taken_at` (after the read) kept them stale."""
        async with self._reading:  # concurrent scrapes share one read
            ended = max((p.at for p in self.health.passes.values()), default=None)
            snap = self._snapshot
            if snap is None or time.time() - snap.taken_at > MAX_SNAPSHOT_AGE_S or ended != self._read_after:
                snap = self._snapshot = await asyncio.to_thread(self.reader.snapshot, self.tally, ended)
                self._read_after = ended
                self.metrics.state.snapshot = snap
            return snap

    async def readiness(self) -> list[str]:
        """Why this integration is not ready; empty when it is."""
        reasons = self.health.unready_reasons
        if (problem := await asyncio.to_thread(self.reader.writable)) is not None:
            reasons.append(f"ledger not writable: {problem}")
        return reasons

    def role(self) -> dict[str, object] | None:
        return self.health.roles().get(self.name)

    async def page(self) -> str:
        snap, reasons = await self.snapshot(), await self.readiness()
        return render(
            snap,
            self.health,
            self.sources,
            self.config.path,
            ready=not reasons,
            reasons=reasons,
            contact_data=self.config.daemon.status_page_contact_data,
            paused=self.control.paused if self.control is not None else None,
            integration=self.name,
            ledger=self.config.ledger_name,
            role=self.role(),
        )


class MergedMetrics(Collector):
    """The series of every integration in one exposition: a metric's families from each integration
    (told apart by their `integration` label) become one family, as Prometheus wants each name once."""

    def __init__(self, served: Sequence[Served]) -> None:
        self.served = served

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for each in self.served:
            for family in each.metrics.registry.collect():  # fresh families on each collect
                if family.name in families:
                    families[family.name].samples.extend(family.samples)
                else:
                    families[family.name] = family
        yield from families.values()
