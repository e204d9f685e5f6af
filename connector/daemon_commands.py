"""What an operator asks a running daemon through the control channel (connector.control): its state,
a pass now, pause and resume, and how a standby reaches its leader. `scheduler.Daemon` takes it in;
the passes and the schedule themselves stay there."""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from ._run import TAKE_WITHIN_S
from .daemon_lead import Leading
from .delivery import RunReport, SourceJob, replay, sync
from .exit_codes import ExitCode
from .ledger import LedgerError

if TYPE_CHECKING:
    from .api import CaptureClient
    from .delivery import DeliverySettings
    from .health import DaemonHealth

log = structlog.get_logger("capture_sync.daemon")

ALL = "*"  # a pause of every source and of the sweeps


class OperatorCommands(Leading):
    client: CaptureClient
    settings: DeliverySettings
    health: DaemonHealth

    async def sync_source(self, job: SourceJob) -> None:
        raise NotImplementedError  # the daemon's (scheduler.Daemon)

    async def _pass(
        self,
        name: str,
        start: Callable[[], Awaitable[RunReport]],
        *,
        operator: bool = False,
        sources: Sequence[str] = (),
    ) -> RunReport | None:
        raise NotImplementedError  # the daemon's (scheduler.Daemon)

    def _held(self, name: str) -> bool:
        """A scheduled pass is held by a pause of its source, or of all (which holds the sweeps too)."""
        return ALL in self.paused or name in self.paused

    def _paused_since(self, name: str) -> str:
        since = self.paused.get(name, self.paused.get(ALL, 0.0))
        return datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def state(self) -> dict[str, Any]:
        """The control channel's `state`: what is paused (a source's name, or "*": all) and the health."""
        return {"paused": dict(self.paused), "health": self.health.describe(time.time())}

    async def sync_now(self, source: str | None) -> RunReport:
        """`capture-sync sync [--source NAME]` beside the daemon: a pass now, paused or not."""
        jobs = self.config.jobs(source)  # ConfigProblem for a name not configured
        names = [job.name for job in jobs]
        report = await self._pass(
            source or "sync",
            lambda: sync(
                self.ledger,
                self.client,
                jobs,
                self.settings,
                stop=self._halt,
                on_info=self.health.answered,
            ),
            operator=True,
            sources=names,
        )
        assert report is not None  # an operator pass raises rather than skip
        return report

    async def replay_now(self, include_failed: bool) -> RunReport:
        """`capture-sync replay` beside the daemon: stalled batches included, as the command by itself."""
        report = await self._pass(
            "replay",
            lambda: replay(
                self.ledger,
                self.client,
                self.settings,
                include_failed=include_failed,
                stop=self._halt,
                on_info=self.health.answered,
            ),
            operator=True,
        )
        assert report is not None
        return report

    async def pause(self, source: str | None) -> dict[str, float]:
        """Pause a source's ticks (None: every tick and the sweeps). Recorded in the ledger first, so
        that no pass starts after it, then the pass in hand is waited for: when this returns, nothing
        paused is being read. Returns what is paused now."""
        name = self.config.jobs(source)[0].name if source else ALL
        self.paused[name] = await asyncio.to_thread(self.ledger.pause, name)
        log.info(
            "daemon.paused",
            source=name,
            then=f"capture-sync resume -c {shlex.quote(str(self.config.path))}"
            + (f" --source {shlex.quote(name)}" if source else ""),
        )
        async with self._one_at_a_time:
            return dict(self.paused)

    async def resume(self, source: str | None) -> tuple[list[str], dict[str, float]]:
        """Lift the pause of `source` (None: every pause) and start at once a pass of each source it
        held. Returns what was lifted and what stays paused."""
        name = self.config.jobs(source)[0].name if source else None
        async with self._one_at_a_time:
            lifted = await asyncio.to_thread(self.ledger.resume, name)
        for gone in lifted:
            self.paused.pop(gone, None)
        if lifted:
            log.info("daemon.resumed", sources=lifted, still_paused=sorted(self.paused))
            for src in self.config.sources:
                if not self._held(src.name) and (ALL in lifted or src.name in lifted):
                    self._start(self.sync_source(src.job))
        return lifted, dict(self.paused)

    def leader_elsewhere(self) -> Callable[[str, dict[str, Any]], dict[str, Any]] | None:
        """While this daemon stands by for its integration: how to ask the daemon that leads it (the
        HTTP control of a process running several integrations, `control.steer`), through the
        shared ledger, waiting as the CLI does; a request nobody takes is an answer saying so (exit 4)."""
        if self.leadership is None or self.leadership.leads:
            return None
        ledger = self.ledger

        def ask(command: str, args: dict[str, Any]) -> dict[str, Any]:
            try:
                return ledger.ask_leader(command, args, TAKE_WITHIN_S)
            except LedgerError as exc:
                return {"ok": False, "command": command, "error": str(exc), "exit_code": int(ExitCode.UNSETTLED)}

        return ask
