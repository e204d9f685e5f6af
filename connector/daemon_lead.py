"""The daemon's side of leading an integration (`scheduler.Daemon` takes it in): what its passes stop
on, the control socket served while it leads, what it does on taking and losing the lease, and the
sweeps' count that a standby or an unreadable ledger skips. Kept apart from the schedule itself."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog

from .control import ControlServer
from .ledger import LedgerError
from .problems import ConfigProblem

if TYPE_CHECKING:
    from .config import Config
    from .leadership import Leadership
    from .ledger import Ledger

log = structlog.get_logger("capture_sync.daemon")


class Leading:
    config: Config
    ledger: Ledger
    stop: asyncio.Event
    leadership: Leadership | None
    paused: dict[str, float]
    _control: ControlServer | None
    _control_turn: asyncio.Lock
    _one_at_a_time: asyncio.Lock

    def _start(self, coro: Awaitable[Any]) -> None: ...
    async def sweep(self) -> None: ...

    @property
    def _halt(self) -> asyncio.Event:
        """What the passes stop on: the daemon's stop, or the end of its lease."""
        return self.leadership.halt if self.leadership is not None else self.stop

    async def _counted(self, count: Callable[[], int]) -> int:
        """What a sweep would send: 0 for a standby (its leader sweeps) and while the ledger cannot be
        read (said once per tick: the next tick asks again)."""
        if self.leadership is not None and not self.leadership.leads:
            return 0
        try:
            return await asyncio.to_thread(count)
        except LedgerError as exc:
            log.warning("sweep.skipped", reason=str(exc), then="the next tick tries again")
            return 0

    async def _turn_control(self, on: bool) -> None:
        """The local control socket beside the ledger, served by the daemon that leads (alone: it holds
        the ledger's daemon lock; on a shared ledger: while it holds the lease)."""
        async with self._control_turn:
            if not on and self._control is not None:
                await self._control.stop()
                self._control = None
            elif on and self._control is None:
                control = ControlServer(self.config.ledger_path, self)  # type: ignore[arg-type]
                try:
                    await control.start()
                except OSError as exc:
                    raise ConfigProblem(
                        [f"control socket {control.path}: cannot listen there: {exc.strerror or exc}"]
                    ) from None
                self._control = control

    def _gained(self, token: int) -> None:
        """The lease taken: the pauses as the ledger holds them, the control socket, and at once a
        sweep, which re-sends under their same keys the batches an earlier leader left open."""

        async def lead() -> None:
            self.paused = await asyncio.to_thread(self.ledger.paused)
            await self._turn_control(True)
            self._start(self._serve_requests())
            await self.sweep()

        self._start(lead())

    async def _serve_requests(self) -> None:
        """While it leads: the operator commands asked through the database (`capture-sync pause`
        and the others on any host), taken as soon as the asker's NOTIFY wakes it (and on a slow poll
        besides), each run as its local socket runs it."""
        from .control import dispatch

        assert self.leadership is not None
        halt, lease = self.leadership.halt, self.leadership.lease

        async def run(request: int, command: str, args: dict[str, Any]) -> None:
            log.info("control.request", command=command, args=args, via="ledger", request=request)
            reply = await dispatch(self, command, args)  # type: ignore[arg-type]
            try:
                await asyncio.to_thread(lease.answer, request, reply)
            except LedgerError as exc:
                log.warning("control.answer_failed", command=command, request=request, reason=str(exc))

        async with lease.doorbell() as doorbell:  # LISTENing before the first look: no request passes unheard
            while not halt.is_set():
                try:
                    for request, command, args in await asyncio.to_thread(lease.requests):
                        self._start(run(request, command, args))
                except LedgerError as exc:
                    log.warning("control.requests_unread", reason=str(exc), then="asks again shortly")
                await doorbell.rung(halt)

    def _lost(self, why: str) -> None:
        self._start(self._turn_control(False))

    async def _wind_down(self, within_s: float) -> None:
        """Before a hand-off (the passes already told to halt): wait, at most `within_s`, for the pass
        in hand to end, its requests answered and settled under the lease still held, so that the
        next leader finds nothing in flight. Passes queued behind it see the halt and do nothing."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s), self._one_at_a_time:
                pass
