"""HTTP/1.1 to the API's one origin on keep-alive connections: what httpcore's pool and connection did
for each request, cut to what one origin needs.

The client sends to one origin, one request per connection at a time, and reads every answer whole.
httpcore's pool is built for any number of origins, HTTP/2 and streamed bodies: for each request it
made a `Request` of validated bytes, a pool request and an event to hand it a connection, took a lock
per connection and a cancellation shield per step, and built a `Trace` per step (some 15 % of a sync's
CPU for the whole exchange: docs/performance.md). Here a request is its head, whose fixed part is made
once per path, the credentials' lines once per pair, and the body, written in one call.

The answer is read by h11, the parser httpcore itself uses, one `h11.Connection` per connection: how
an answer is framed (Content-Length, chunked, or until the server closes) is where a hand-written
parser lets a desync in, so it is not written here. h11 is told a request went out (its line and fixed
headers, made once per path: `announcement`), fed what the server sends, and a connection carries another request only when h11 says both sides
are done and nothing came past the answer.

What httpcore gave is kept: the connection limit with its pool timeout (`httpx.PoolTimeout`), the
connect, read and write timeouts (httpcore's exceptions, which `map_httpcore_exceptions` turns into
httpx's, so callers see the same errors), TLS with the client's verifying context (ALPN http/1.1),
idle connections closed after the keep-alive expiry or once the server closed them or sent what nobody
asked for, and a connection that any failure or cancellation interrupts is dropped, never reused. An
answer h11 cannot read is a `RemoteProtocolError`: the request may have been acted on, so the
caller's retry sends the same bytes under the same key. Proxies keep httpcore's pool (`_exchange.py`).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from typing import NamedTuple

import h11
import httpcore

from ._streams import AsyncioBackend, AsyncioStream

_READ_SIZE = 64 * 1024  # as httpcore reads
_MAX_HEAD = 100 * 1024  # the largest status line and headers read (httpcore's limit for h11's events)
_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")  # h11's field-value: nothing that ends a line


def header_line(name: bytes, value: bytes) -> bytes:
    """`name: value` and its line end; a value HTTP forbids (a line break in a secret read from a file
    would add a header of its own) is refused as h11 refuses it, without showing it."""
    if not _VALUE.fullmatch(value):
        raise httpcore.LocalProtocolError(f"the value of the {name.decode()} header holds characters HTTP forbids")
    return b"%s: %s\r\n" % (name, value)


class Outgoing(NamedTuple):
    """A request as it goes on the wire (`message`: head and body, written as built) and what h11 is
    told went out (`announced`, from `announcement`)."""

    announced: h11.Request
    message: bytes


def announcement(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> h11.Request:
    """What h11 is told of every request with this request line and these fixed headers (Host first),
    made and validated once per method and path. h11 reads an answer by the request's method (a HEAD
    answer has no body) and its Connection header; the lines that vary per request (the credentials,
    Content-Type and Content-Length, the key) decide neither, and the body is written here, not by h11,
    so they are not told: each request is announced as this head and its end (`_sent`)."""
    try:
        return h11.Request(method=method, target=target, headers=headers)
    except h11.LocalProtocolError as exc:
        raise httpcore.LocalProtocolError(exc) from exc


class Answer(NamedTuple):
    """One answer, read whole: its content as sent (an encoded one is decoded by httpx's model)."""

    version: bytes  # b"1.1"
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    content: bytes


class _Connection:
    """One keep-alive connection, h11's state of it, and since when it waits idle (for the expiry)."""

    __slots__ = ("h11", "idle_since", "stream")

    def __init__(self, stream: AsyncioStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        self.idle_since = 0.0


class Origin:
    """The API origin's connections: at most `max_connections`, each carrying one request at a time."""

    def __init__(
        self,
        scheme: bytes,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        max_connections: int,
        keepalive_expiry: float | None,
        timeouts: dict[str, float | None],
    ) -> None:
        self._host, self._port = host, port
        self._tls = ssl_context if scheme == b"https" else None
        if self._tls is not None:
            self._tls.set_alpn_protocols(["http/1.1"])  # as httpcore asks, without HTTP/2
        self._expiry = keepalive_expiry
        self._connect_s = timeouts.get("connect")
        self._read_s = timeouts.get("read")
        self._pool_s = timeouts.get("pool")
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Connection] = []  # the most recently used last
        self._backend = AsyncioBackend()
        self._closed = False

    async def request(self, outgoing: Outgoing) -> Answer:
        """Send `outgoing` and read its answer whole."""
        if self._slots.locked():  # all connections busy: wait for one, as long as the pool timeout
            try:
                async with asyncio.timeout(self._pool_s):
                    await self._slots.acquire()
            except TimeoutError:
                raise httpcore.PoolTimeout("no connection to the API came free in time") from None
        else:
            await self._slots.acquire()  # free: taken without suspending
        try:
            connection = await self._connection()
            stream = connection.stream
            try:
                _sent(connection.h11, outgoing)
                await stream.write(outgoing.message)
                answer = await self._answer(connection)
            except BaseException:
                stream.abort()
                raise
            if _reusable(connection.h11) and not self._closed:
                connection.h11.start_next_cycle()
                connection.idle_since = asyncio.get_running_loop().time()
                self._idle.append(connection)
            else:
                await stream.aclose()
            return answer
        finally:
            self._slots.release()

    async def _connection(self) -> _Connection:
        """An idle connection still fit to carry a request, else a new one. Every idle connection the
        server has closed (or sent to) or that has outlived the keep-alive expiry is closed first, as
        httpcore's pool did on each request: a daemon's client lives for days, and a connection taken
        last-in first would otherwise leave the older ones in CLOSE_WAIT."""
        now = asyncio.get_running_loop().time()
        spent = [c for c in self._idle if c.stream.peer_spoke() or self._expired(c, now)]
        if spent:
            self._idle = [c for c in self._idle if c not in spent]
            for connection in spent:
                await connection.stream.aclose()
        while self._idle:
            connection = self._idle.pop()
            if not connection.stream.stale():  # what came since the loop's last turn, asked of the socket
                return connection
            await connection.stream.aclose()
        opened = await self._backend.connect_tcp(self._host, self._port, timeout=self._connect_s)
        if self._tls is not None:
            opened = await opened.start_tls(self._tls, server_hostname=self._host, timeout=self._connect_s)
        assert isinstance(opened, AsyncioStream)
        return _Connection(opened)

    def _expired(self, connection: _Connection, now: float) -> bool:
        return self._expiry is not None and now - connection.idle_since > self._expiry

    async def _answer(self, connection: _Connection) -> Answer:
        """The answer to the request just written, as h11 reads it (an informational one is skipped)."""
        parser, stream = connection.h11, connection.stream
        response: h11.Response | None = None
        content: list[bytes] = []
        while True:  # h11 holds nothing yet (a connection is reused only then): read before asking it
            data = await stream.read(_READ_SIZE, self._read_s)
            if not data and parser.their_state is h11.SEND_RESPONSE:
                raise httpcore.RemoteProtocolError("Server disconnected without sending a response.")
            parser.receive_data(data)
            while (event := _next_event(parser)) is not h11.NEED_DATA:
                if type(event) is h11.Data:
                    content.append(event.data)
                elif type(event) is h11.Response:
                    response = event
                elif type(event) is h11.EndOfMessage:
                    assert response is not None  # h11 ends no message it has not begun
                    return Answer(
                        response.http_version,
                        response.status_code,
                        response.reason,
                        response.headers.raw_items(),
                        b"".join(content),
                    )
                elif type(event) is not h11.InformationalResponse:  # a 1xx before the answer: skipped
                    raise httpcore.RemoteProtocolError(f"the server's answer ended unread ({type(event).__name__})")

    async def aclose(self) -> None:
        """Close the idle connections; those carrying a request close when their answer is in."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.stream.aclose()


_END = h11.EndOfMessage()


def _sent(parser: h11.Connection, outgoing: Outgoing) -> None:
    """Tell h11 the request went out, with the least work: its announcement and its end, whose bytes
    h11 makes and this drops (`outgoing.message` is written instead)."""
    try:
        parser.send(outgoing.announced)
        parser.send(_END)
    except h11.LocalProtocolError as exc:  # a connection not ready for a request: never one from `_connection`
        raise httpcore.LocalProtocolError(exc) from exc


def _next_event(parser: h11.Connection) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
    """h11's next event of the answer; an answer it cannot read is httpcore's error, as httpcore maps it."""
    try:
        return parser.next_event()
    except h11.RemoteProtocolError as exc:
        raise httpcore.RemoteProtocolError(exc) from exc


def _reusable(parser: h11.Connection) -> bool:
    """Whether the connection can carry another request: both sides done (neither asked to close, the
    answer not framed by the connection's end) and nothing came past the answer."""
    return parser.our_state is h11.DONE and parser.their_state is h11.DONE and not parser.trailing_data[0]
