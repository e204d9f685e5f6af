"""The endpoint's defence against clients that hold connections open (slowloris): uvicorn's h11
protocol with a deadline on reading each request and a cap on open connections.

uvicorn has neither. `timeout_keep_alive` covers only the idle time after a response and every byte
received cancels it; a connection that never sends a byte is never timed out at all; and
`limit_concurrency` answers 503 only to a complete request, so sockets that never finish their
request are accepted and kept, each an open file of the daemon's, until it can open no other file.
Here:

- a request's head must arrive within `header_timeout_s` of the connection, or of the first byte of
  the next request on a kept-alive one, and its body within `body_timeout_s` after the head; each is
  a deadline, so a client trickling a byte at a time does not extend it. On expiry the connection
  is closed.
- past `max_connections`, a new connection closes the oldest one that is waiting for a request
  head or idle between requests (a probe's request arrives at once, an attacker's never does); when
  all are busy answering, the new one is closed at once. So sockets beyond the cap never pile up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import ClassVar, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

Phase = Literal["head", "idle", "body", "answering"]
_EVICTABLE: tuple[Phase, ...] = ("head", "idle")


@dataclass(frozen=True)
class Limits:
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 64


def guarded_protocol(limits: Limits) -> type[asyncio.Protocol]:
    """A protocol class for one server: the connections it may evict are that server's own."""

    class Guarded(_GuardedH11):
        _limits = limits
        _evictable: ClassVar[dict[_GuardedH11, None]] = {}  # insertion order: the oldest first

    return Guarded


class _GuardedH11(H11Protocol):
    _limits: ClassVar[Limits]
    _evictable: ClassVar[dict[_GuardedH11, None]]
    _phase: Phase | None = None
    _deadline: asyncio.TimerHandle | None = None
    _refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        kept = sum(1 for c in self.connections if not c.transport.is_closing())  # not those closed already
        if kept >= self._limits.max_connections and not self._evict_oldest():
            self._refused = True
            transport.abort()
            return
        super().connection_made(transport)
        self._enter("head")

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return  # never served: uvicorn's state knows nothing of it
        self._enter(None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self.transport.is_closing():
            self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._follow()

    def _follow(self) -> None:
        """The phase h11 says the request is in; a deadline is armed when its phase begins, never renewed."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._enter("body")
        elif state is not h11.IDLE:
            self._enter("answering")  # the app has the whole request; the response is its business
        elif self.conn.trailing_data[0]:
            self._enter("head")  # bytes of a request head, still incomplete
        elif self._phase != "head":
            self._enter("idle")  # between requests: uvicorn's keep-alive timer closes an idle connection

    def _enter(self, phase: Phase | None) -> None:
        if phase == self._phase:
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = phase
        self._evictable.pop(self, None)
        if phase in _EVICTABLE:
            self._evictable[self] = None
        timeout = {"head": self._limits.header_timeout_s, "body": self._limits.body_timeout_s}.get(str(phase))
        if timeout is not None:
            self._deadline = self.loop.call_later(timeout, self._expired)

    def _expired(self) -> None:
        self._deadline = None
        self._enter(None)
        self.transport.abort()  # nothing of ours is left to send; the client is told by the reset

    def _evict_oldest(self) -> bool:
        for victim in self._evictable:
            victim._enter(None)
            victim.transport.abort()
            return True
        return False
