"""A daemon's hold on its integration over a shared PostgreSQL ledger: it stands by, leads while it
holds the lease, and stops sending before the lease can pass to another (issue 23).

The lease lives in the database (`ledger._lease`), its expiry by the database's clock. This side
keeps a local deadline measured with `time.monotonic()` from the moment before the statement that
took or renewed the lease was sent: the database's expiry is at least `lease_s` after that moment,
and the deadline is `margin_s` earlier, so a daemon that cannot renew (paused by SIGSTOP,
partitioned, its wall clock wrong) stops sending before any standby may take over. Three fences
stand in the way of a zombie leader, each enough for the ledger's own guarantees:

- `gate()`, called by the API client before every request that carries an idempotency key: past
  the deadline nothing is sent;
- `halt`, the event every pass of the leader stops on: set when the lease is lost;
- the ledger's write check (`LedgerFenced`): a write after the lease passed is refused wholly.

On taking the lease, the new leader's first pass is the retry sweep: the batches the old leader
wrote ahead and never settled go again under their same keys, then the entries it left pending.

A hand-off to balance the integrations is the leader's own choice, so it stops first and releases
after: the passes halt (no batch is claimed any more), the requests in hand are answered and settled
under the lease still held, the send gate closes, and only then does the lease end in the database.
The next standby to try takes it at once (standbys try every second), with nothing left in flight.

The lease's statements run on a thread of their own: a renewal must never wait in the queue of the
default executor behind the passes' reads and settles (it would come late, and the lease be lost
under load for no fault of the daemon).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import structlog

from .ledger import LedgerError, LedgerFenced

if TYPE_CHECKING:
    from .ledger import Lease

log = structlog.get_logger("capture_sync.lease")

DEFAULT_LEASE_S = 15.0
STANDBY_TRY_S = 1.0  # a standby looks this often (at most) for a lease released or expired
T = TypeVar("T")


async def _nothing_in_hand(within_s: float) -> None:
    """What a leadership without a daemon winds down before a hand-off: nothing."""


@functools.cache
def holder_id() -> str:
    """This daemon (the process, whatever integrations it runs) among all that share the database:
    host, pid, and a random part (a pid reused after a restart is another daemon)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Balancer:
    """The process's leaderships share one: at most one lease handed back per renewal period, so
    several integrations of one daemon do not all give theirs up at the same moment."""

    def __init__(self) -> None:
        self.next_release = 0.0

    def may_release(self, period_s: float) -> bool:
        now = time.monotonic()
        if now < self.next_release:
            return False
        self.next_release = now + 2 * period_s
        return True


BALANCER = Balancer()


@dataclass
class Role:
    """What this daemon is for its integration now, for /readyz, the status page and `status`."""

    leads: bool = False
    token: int | None = None
    since: float = field(default_factory=time.time)
    why: str = "starting: the lease not asked yet"


class Leadership:
    """Leads the integration while the lease is held; `on_gain` / `on_loss` tell the daemon."""

    def __init__(self, lease: Lease, lease_s: float) -> None:
        self.lease, self.lease_s = lease, lease_s
        self.margin_s = max(lease_s / 5, 0.5)  # stop this much before the database may hand the lease over
        self.period_s = lease_s / 3  # renew this often (and write the heartbeat)
        # A standby tries more often: a lease handed back is taken within a second, not a period.
        # A try on a lease another daemon holds is one plain read, which no write of the leader waits for.
        self.try_s = min(self.period_s, STANDBY_TRY_S)
        self._beat_at = -float("inf")  # monotonic: the last heartbeat written
        self.deadline = 0.0  # monotonic: nothing is sent from here on unless renewed
        self.role = Role()
        self.halt = asyncio.Event()  # the passes of the term in hand stop on it
        self.halt.set()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = asyncio.Event()
        self._resting_until = 0.0  # after handing the lease back for balance: leave it to another daemon
        self._round_in_hand = asyncio.Lock()  # `close` waits for a round in hand: no lease taken after it
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"lease-{lease.integration}")
        self.on_gain: Callable[[int], None] = lambda token: None
        self.on_loss: Callable[[str], None] = lambda why: None
        # Before a hand-off: wait (at most the seconds given) for the passes in hand to stop on `halt`.
        self.on_yield: Callable[[float], Awaitable[None]] = _nothing_in_hand

    @property
    def holder(self) -> str:
        return self.lease.holder

    @property
    def leads(self) -> bool:
        return self.role.leads

    def gate(self) -> None:
        """Before each request that sends persons: refused past the deadline (the lease may pass)."""
        if time.monotonic() >= self.deadline:
            raise LedgerFenced(
                f"the lease of integration {self.lease.integration} was not renewed in time: this daemon sends "
                "nothing more for it and stands by"
            )

    async def run(self, stop: asyncio.Event) -> None:
        """Renew the lease every `period_s` (a standby: try to take it every `try_s`) until `close`.
        Once `stop` is set the passes halt and no lease is taken any more, but the one held is still
        renewed while the passes in hand finish and record their answers (a clean stop loses no
        settle to the fence)."""
        while not self._closed.is_set():
            if stop.is_set():
                self.halt.set()
            if self.leads or not stop.is_set():
                await self._round()
            waits = [asyncio.ensure_future(e.wait()) for e in (self._closed, stop) if not e.is_set()] or [
                asyncio.ensure_future(self._closed.wait())
            ]
            every = self.period_s if self.leads else self.try_s
            _, pending = await asyncio.wait(waits, timeout=every, return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()

    async def close(self) -> None:
        """The daemon has wound down: end the lease now (a standby takes over at once), write no more,
        and take this daemon off the live ones (the others' shares are counted without it at once)."""
        self._closed.set()
        async with self._round_in_hand:
            if self.leads:
                self.deadline = 0.0
                if await self._release():
                    log.info(
                        "lease.released",
                        integration=self.lease.integration,
                        holder=self.holder,
                        reason="the daemon stops",
                    )
            with contextlib.suppress(LedgerError):  # unreachable: its heartbeat expires by itself
                await self._db(self.lease.forget)
        self._stand_down("the daemon stops", lost=False)
        self._thread.shutdown(wait=False)

    async def _db(self, call: Callable[[], T]) -> T:
        """A lease statement, on the lease's own thread."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, call)

    async def _release(self) -> bool:
        """End the lease in the database; False when it cannot be reached (the lease expires by itself)."""
        try:
            await self._db(self.lease.release)
        except LedgerError as exc:
            log.warning("lease.release_failed", integration=self.lease.integration, reason=str(exc))
            return False
        return True

    async def _round(self) -> None:
        async with self._round_in_hand:
            if not self._closed.is_set():
                await self._try()

    async def _try(self) -> None:
        asked_at = time.monotonic()
        try:
            if self.leads:
                held = await self._db(self.lease.renew)
                token = self.role.token if held else None
                if held:
                    self._extend(asked_at + self.lease_s - self.margin_s)  # a hand-off winds down within it
                    if await self._hand_back():
                        return
            else:
                if asked_at - self._beat_at >= self.period_s:  # a heartbeat: the leaders count this daemon live
                    await self._db(self.lease.share)
                    self._beat_at = asked_at
                if asked_at < self._resting_until:  # handed back for balance: left to another for a while
                    return
                token = await self._db(self.lease.take)
        except LedgerError as exc:
            if self.leads:
                log.warning(
                    "lease.renew_failed",
                    integration=self.lease.integration,
                    reason=str(exc),
                    then=f"leading until the lease runs out ({max(self.deadline - time.monotonic(), 0):.1f} s)",
                )
            else:
                self.role.why = f"standing by: the ledger database does not answer ({exc})"
            return
        if token is None:
            if self.leads:
                self._lose("the lease passed to another daemon")
            else:
                self.role.why = "standing by: another daemon leads it"
            return
        self._extend(asked_at + self.lease_s - self.margin_s)
        if not self.leads:
            self.role = Role(leads=True, token=token, why=f"leads it (token {token})")
            self.halt = asyncio.Event()
            log.info("lease.taken", integration=self.lease.integration, holder=self.holder, token=token)
            self.on_gain(token)

    async def _hand_back(self) -> bool:
        """Balance: a daemon leading at least two more integrations than another live daemon that
        runs this one hands this lease back (the other takes it within `try_s`): never to a daemon
        that does not run it, and never back and forth (the taker then leads no more than the giver).
        True when it did.

        It stops before it releases: the passes halt, the requests in hand are answered and settled
        under the lease still held (for at most the time left before the deadline, less the margin),
        the send gate closes, and then the lease ends. What a request cut off at that bound left open
        goes again under its same key with the next leader's first sweep."""
        mine, fair, fewest = await self._db(self.lease.share)
        if mine - fewest < 2 or not BALANCER.may_release(self.period_s):
            return False
        self._resting_until = time.monotonic() + 3 * self.period_s
        self.halt.set()
        await self.on_yield(max(self.deadline - time.monotonic() - self.margin_s, 0.0))
        if not self.leads:  # the deadline passed meanwhile: already stood down
            return True
        self.deadline = 0.0  # nothing more is sent; then the database hears of it
        await self._release()
        log.info(
            "lease.handed_back",
            integration=self.lease.integration,
            holder=self.holder,
            leads=mine,
            share=fair,
            fewest=fewest,
            reason="another live daemon leads fewer integrations",
        )
        self._stand_down("handed back to balance the integrations over the live daemons", lost=False)
        return True

    def _extend(self, deadline: float) -> None:
        self.deadline = deadline
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + max(deadline - time.monotonic(), 0), self._expired)

    def _expired(self) -> None:
        if self.leads and time.monotonic() >= self.deadline:
            self._lose("the lease was not renewed in time")

    def lost(self, why: str, term: asyncio.Event) -> None:
        """A write was fenced (or a send refused) in a pass of the term that `term` (the `halt` it
        ran under) ended: the lease passed while this daemon led. A pass of an earlier term, cut off
        after this daemon took the lease again, says nothing about the term in hand."""
        if term is self.halt:
            self._lose(why)

    def _lose(self, why: str) -> None:
        self._stand_down(why, lost=True)

    def _stand_down(self, why: str, lost: bool) -> None:
        """Stop leading: the passes halt, the daemon hears of it (`on_loss`). `lost`: the lease passed
        while this daemon led, which `lease.lost` warns of; a hand-off or a clean stop is the daemon's
        own choice, logged where it is made (`lease.handed_back`, `lease.released`)."""
        self.deadline = 0.0
        self.lease.drop()
        self.halt.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.leads:
            if lost:
                log.warning(
                    "lease.lost",
                    integration=self.lease.integration,
                    holder=self.holder,
                    token=self.role.token,
                    reason=why,
                    then="stops this integration's passes and stands by",
                )
            self.role = Role(why=f"standing by: {why}")
            self.on_loss(why)
        else:
            self.role.why = f"standing by: {why}"
