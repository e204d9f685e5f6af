"""An asyncio network backend for httpcore: sockets as asyncio protocols, timeouts as timer handles.

httpcore's default backend goes through anyio, which opens a cancel scope around every read and
write (`anyio.fail_after`) and looks its socket up through typed attributes on each question the pool
asks an idle connection: some 15 % of the client's CPU per request (docs/performance.md). The client
runs on asyncio only, so here each connection is an `asyncio.Protocol` whose received bytes wait in a
buffer, a read that must wait parks on one future with a `call_later` for its timeout, and TLS is
asyncio's own `loop.start_tls`. httpcore's public `AsyncNetworkBackend` interface is all it implements;
its errors are httpcore's (`ReadTimeout`, `ConnectError`...), which httpx's mapping turns into the same
exceptions as before.

A request's head and body are written in one system call: what httpcore writes is held until it
reads the answer (it always reads after writing a request), then sent at once. A write that cannot
leave (the peer reads nothing and the socket's buffer is full) waits for room there and fails as a
`WriteTimeout`, as before; its limit is the one httpcore gives that read (the client's read and write
timeouts are one value, `timeout_s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
from httpcore._backends.base import SOCKET_OPTION

HAPPY_EYEBALLS_S = 0.25  # RFC 8305's connection attempt delay, anyio's default
_HIGH_WATER = 256 * 1024  # received bytes held unread before the socket is no longer read from


class _Connection(asyncio.Protocol):
    """One socket's state as the event loop reports it: bytes received, end of stream, room to write."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.received = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None  # a read (or a write waiting for room) parked
        self.paused = False  # the transport's write buffer is full
        self.reading = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received += data
        if self.reading and len(self.received) > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
            self.reading = False
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self.paused = False
        self._wake()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float | None, expired: type[Exception]) -> None:
        """Until the loop reports something on this socket, or `expired` after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        waiter = self.waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()
        if waiter.result() is _EXPIRED:
            raise expired()


_EXPIRED: Any = object()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(_EXPIRED)


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection, plain or TLS, as httpcore reads and writes it."""

    def __init__(self, transport: asyncio.Transport, connection: _Connection) -> None:
        self._transport = transport
        self._connection = connection
        self._unsent: list[bytes] = []

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._unsent:
            await self._flush(timeout)
        connection = self._connection
        while not connection.received:
            if connection.eof:
                if connection.error is not None:
                    raise httpcore.ReadError(str(connection.error) or type(connection.error).__name__)
                return b""
            await connection.wait(timeout, httpcore.ReadTimeout)
        received = connection.received
        if len(received) <= max_bytes:
            data = bytes(received)
            received.clear()
        else:
            data = bytes(received[:max_bytes])
            del received[:max_bytes]
        if not connection.reading and not connection.eof:
            connection.reading = True
            self._transport.resume_reading()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Held until the next read: see the module's docstring."""
        if buffer:
            if self._transport.is_closing():
                raise httpcore.WriteError("the connection is closed")
            self._unsent.append(buffer)

    async def _flush(self, timeout: float | None) -> None:
        unsent = self._unsent
        data = unsent[0] if len(unsent) == 1 else b"".join(unsent)
        unsent.clear()
        if self._transport.is_closing():
            return  # closed under the request: the read that follows reports it
        self._transport.write(data)
        connection = self._connection
        while connection.paused and not connection.eof:
            await connection.wait(timeout, httpcore.WriteTimeout)

    async def aclose(self) -> None:
        """Closed at once, as anyio's backend closes it: the socket is shut in the loop's next turn, which
        this waits for, so that a loop closing right after the client (the end of a sync) leaks none."""
        self._unsent.clear()
        transport = self._transport
        if not transport.is_closing():
            transport.close()
            await asyncio.sleep(0)
            transport.abort()

    def peer_spoke(self) -> bool:
        """Has the loop read, on this idle connection, the server's close or what nobody asked for?"""
        return self._connection.eof or bool(self._connection.received)

    def stale(self) -> bool:
        """`peer_spoke`, or has it since the loop's last turn (a close just before a request)? That is
        asked of the socket itself, with one poll(2) that does not wait."""
        if self.peer_spoke():
            return True
        sock = self._transport.get_extra_info("socket")
        if sock is None:
            return False
        poll = select.poll()
        poll.register(sock.fileno(), select.POLLIN)
        return bool(poll.poll(0))

    def abort(self) -> None:
        """Dropped at once, its unsent and unread bytes with it: after a failed or cancelled exchange."""
        self._unsent.clear()
        self._transport.abort()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        if self._unsent:
            await self._flush(timeout)
        loop = asyncio.get_running_loop()
        connection = _Connection()  # the TLS layer's own protocol; this one stays with the raw transport
        try:
            # The timeout is ours, not the handshake's own (an abort, which would read as a refused connection).
            with _connect_errors():
                async with asyncio.timeout(timeout):
                    transport = await loop.start_tls(
                        self._transport, connection, ssl_context, server_hostname=server_hostname
                    )
        except BaseException:
            self._transport.close()
            raise
        if transport is None:  # pragma: no cover - only with server_side=True
            raise httpcore.ConnectError("the TLS handshake gave no transport")
        connection.connection_made(transport)
        return AsyncioStream(transport, connection)

    def get_extra_info(self, info: str) -> Any:
        transport = self._transport
        if info == "ssl_object":
            return transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return transport.get_extra_info("sockname")
        if info == "server_addr":
            return transport.get_extra_info("peername")
        if info == "socket":
            return transport.get_extra_info("socket")
        if info == "is_readable":
            # Asked of each idle connection whenever the pool assigns a request: has the server closed it,
            # or sent what nobody asked for? The loop reads every socket as soon as it is readable, so the
            # protocol's own state answers without the poll(2) per connection that anyio's backend makes.
            connection = self._connection
            return connection.eof or bool(connection.received)
        return None


@contextlib.contextmanager
def _connect_errors() -> Iterator[None]:
    """A failed connect or handshake as httpcore names it (httpx maps those to its own)."""
    try:
        yield
    except TimeoutError as exc:
        raise httpcore.ConnectTimeout(str(exc)) from exc
    except OSError as exc:  # ssl.SSLError among them
        raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network I/O on asyncio's own transports (see the module's docstring)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        with _connect_errors():
            async with asyncio.timeout(timeout):
                transport, connection = await loop.create_connection(
                    _Connection,
                    host,
                    port,
                    local_addr=(local_address, 0) if local_address else None,
                    happy_eyeballs_delay=HAPPY_EYEBALLS_S,  # as anyio: an address that never answers
                    interleave=1,  # (a broken IPv6 route, a zone down) does not hold the others back
                )
        return _stream(transport, connection, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SOCKET_OPTION] | None = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        with _connect_errors():
            async with asyncio.timeout(timeout):
                transport, connection = await loop.create_unix_connection(_Connection, path)
        return _stream(transport, connection, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _stream(
    transport: asyncio.BaseTransport, connection: _Connection, socket_options: Iterable[SOCKET_OPTION] | None
) -> AsyncioStream:
    assert isinstance(transport, asyncio.Transport)
    sock: socket.socket | None = transport.get_extra_info("socket")
    for option in socket_options or ():  # asyncio sets TCP_NODELAY itself, as anyio does
        if sock is not None:
            sock.setsockopt(*option)
    return AsyncioStream(transport, connection)
