"""HTTP/1.1 to the API's one origin on keep-alive connections: what httpcore's pool and connection did
for each request, cut to what one origin needs.

The client sends to one origin, one request per connection at a time, and reads every answer whole.
httpcore's pool is built for any number of origins, HTTP/2 and streamed bodies: for each request it
made a `Request` of validated bytes, a pool request and an event to hand it a connection, took a lock
per connection and a cancellation shield per step, built a `Trace` per step, and ran h11's state
machine, which validated every header of the request and the answer once more (some 15 % of a sync's
CPU for the whole exchange: docs/performance.md). Here a request is its head, whose fixed part is made
once per path, the credentials' lines once per pair, and the body, written in one call; the answer is
read into one buffer and framed as RFC 9112 says (Content-Length, chunked, or until the server closes).

What httpcore gave is kept: the connection limit with its pool timeout (`httpx.PoolTimeout`), the
connect, read and write timeouts (httpcore's exceptions, which `map_httpcore_exceptions` turns into
httpx's, so callers see the same errors), TLS with the client's verifying context (ALPN http/1.1),
idle connections closed after the keep-alive expiry or once the server closed them or sent what nobody
asked for, and a connection that any failure or cancellation interrupts is dropped, never reused. An
answer the parser cannot read is a `RemoteProtocolError`: the request may have been acted on, so the
caller's retry sends the same bytes under the same key. Proxies keep httpcore's pool (`_exchange.py`).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from typing import NamedTuple

import httpcore

from ._streams import AsyncioBackend, AsyncioStream

_READ_SIZE = 64 * 1024  # as httpcore reads
_MAX_HEAD = 100 * 1024  # the largest status line and headers read (httpcore's limit for h11's events)
_BLANK_LINE = re.compile(rb"\n\r?\n")  # the end of the head: h11 accepts a bare LF too
_STATUS_LINE = re.compile(rb"HTTP/(\d\.\d) (\d{3})(?: ([^\x00\r\n]*))?")
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")  # h11's field-value: nothing that ends a line
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,20})[ \t]*(?:;[^\r\n]*)?")


def header_line(name: bytes, value: bytes) -> bytes:
    """`name: value` and its line end; a value HTTP forbids (a line break in a secret read from a file
    would add a header of its own) is refused as h11 refuses it, without showing it."""
    if not _VALUE.fullmatch(value):
        raise httpcore.LocalProtocolError(f"the value of the {name.decode()} header holds characters HTTP forbids")
    return b"%s: %s\r\n" % (name, value)


class Answer(NamedTuple):
    """One answer, read whole: its content as sent (an encoded one is decoded by httpx's model)."""

    version: bytes  # b"1.1"
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    content: bytes


class _Connection:
    """One keep-alive connection, and since when it waits idle (for the keep-alive expiry)."""

    __slots__ = ("idle_since", "stream")

    def __init__(self, stream: AsyncioStream) -> None:
        self.stream = stream
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

    async def request(self, message: bytes) -> Answer:
        """Send `message` (a whole request: head and body) and read its answer whole."""
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
                await stream.write(message)
                answer, reusable = await self._answer(stream)
            except BaseException:
                stream.abort()
                raise
            if reusable and not self._closed:
                connection.idle_since = asyncio.get_running_loop().time()
                self._idle.append(connection)
            else:
                await stream.aclose()
            return answer
        finally:
            self._slots.release()

    async def _connection(self) -> _Connection:
        """An idle connection still fit to carry a request, else a new one."""
        idle = self._idle
        while idle:
            connection = idle.pop()
            stream = connection.stream
            expired = (
                self._expiry is not None and asyncio.get_running_loop().time() - connection.idle_since > self._expiry
            )
            if not expired and not stream.stale():
                return connection
            await stream.aclose()  # closed by the server, sent what nobody asked for, or too old
        opened = await self._backend.connect_tcp(self._host, self._port, timeout=self._connect_s)
        if self._tls is not None:
            opened = await opened.start_tls(self._tls, server_hostname=self._host, timeout=self._connect_s)
        assert isinstance(opened, AsyncioStream)
        return _Connection(opened)

    async def _answer(self, stream: AsyncioStream) -> tuple[Answer, bool]:
        """The answer to the request just written, and whether the connection can carry another."""
        buffer = bytearray()
        while True:  # an informational answer (1xx) comes before the final one: skipped, as h11 does
            end = await self._fill_to(stream, buffer, _BLANK_LINE, _MAX_HEAD, "the answer's headers")
            head = bytes(buffer[: end.start()])
            del buffer[: end.end()]
            version, status, reason, headers = _parse_head(head)
            if status >= 200:
                break
            if status == 101:
                raise httpcore.RemoteProtocolError("the server switched protocols unasked")
        framing = _framing(status, headers)
        reusable = version == b"1.1" and not _says_close(headers)
        if framing is None:
            content = b""
        elif framing == "chunked":
            content = await self._chunked(stream, buffer)
        elif framing == "close":
            content = await self._to_close(stream, buffer)
            reusable = False
        else:
            assert isinstance(framing, int)
            while len(buffer) < framing:
                data = await stream.read(_READ_SIZE, self._read_s)
                if not data:
                    raise httpcore.RemoteProtocolError(
                        "peer closed connection without sending complete message body: "
                        f"received {len(buffer)} bytes, expected {framing}"
                    )
                buffer += data
            content = bytes(buffer[:framing])
            del buffer[:framing]
        if buffer:  # bytes past the answer: nothing was asked that they could answer
            reusable = False
        return Answer(version, status, reason, headers, content), reusable

    async def _fill_to(
        self, stream: AsyncioStream, buffer: bytearray, end: re.Pattern[bytes], limit: int, what: str
    ) -> re.Match[bytes]:
        """Read until `buffer` holds `end`; its match."""
        start = 0
        while (found := end.search(buffer, start)) is None:
            if len(buffer) > limit:
                raise httpcore.RemoteProtocolError(f"{what} exceed {limit} bytes")
            start = max(len(buffer) - 3, 0)  # a match may begin in the last bytes read
            data = await stream.read(_READ_SIZE, self._read_s)
            if not data:
                if buffer:
                    raise httpcore.RemoteProtocolError(f"the server closed the connection inside {what}")
                raise httpcore.RemoteProtocolError("Server disconnected without sending a response.")
            buffer += data
        return found

    async def _chunked(self, stream: AsyncioStream, buffer: bytearray) -> bytes:
        """A chunked body (RFC 9112 7.1), its trailers read and dropped."""
        body = bytearray()
        while True:
            line_end = await self._fill_to(stream, buffer, _LINE_END, 1024, "a chunk's size line")
            size_line = _CHUNK_SIZE.fullmatch(bytes(buffer[: line_end.start()]).rstrip(b"\r"))
            if size_line is None:
                raise httpcore.RemoteProtocolError("a chunk's size line is malformed")
            del buffer[: line_end.end()]
            size = int(size_line.group(1), 16)
            if size == 0:
                break
            while len(buffer) < size + 2:
                data = await stream.read(_READ_SIZE, self._read_s)
                if not data:
                    raise httpcore.RemoteProtocolError("the server closed the connection inside a chunk")
                buffer += data
            if buffer[size : size + 2] != b"\r\n":
                raise httpcore.RemoteProtocolError("a chunk does not end where its size says")
            body += buffer[:size]
            del buffer[: size + 2]
        while True:  # trailer lines up to the empty one
            line_end = await self._fill_to(stream, buffer, _LINE_END, _MAX_HEAD, "the trailers")
            line = bytes(buffer[: line_end.start()]).rstrip(b"\r")
            del buffer[: line_end.end()]
            if not line:
                return bytes(body)

    async def _to_close(self, stream: AsyncioStream, buffer: bytearray) -> bytes:
        """A body that ends where the connection does (no length given: RFC 9112 6.3, rule 8)."""
        while data := await stream.read(_READ_SIZE, self._read_s):
            buffer += data
        content = bytes(buffer)
        buffer.clear()
        return content

    async def aclose(self) -> None:
        """Close the idle connections; those carrying a request close when their answer is in."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.stream.aclose()


_LINE_END = re.compile(rb"\n")


def _parse_head(head: bytes) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    """The status line and header fields of an answer (RFC 9112 4 and 5), as h11 reads them."""
    lines = head.split(b"\n")
    status_line = _STATUS_LINE.fullmatch(lines[0].rstrip(b"\r"))
    if status_line is None:
        raise httpcore.RemoteProtocolError("the answer's status line is malformed")
    version, status, reason = status_line.groups(b"")
    headers: list[tuple[bytes, bytes]] = []
    for raw in lines[1:]:
        line = raw.rstrip(b"\r")
        if line[:1] in (b" ", b"\t"):  # obsolete line folding: part of the header above
            if not headers:
                raise httpcore.RemoteProtocolError("the answer's headers begin with a continuation line")
            name, value = headers[-1]
            headers[-1] = (name, b"%s %s" % (value, line.strip(b" \t")))
            continue
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise httpcore.RemoteProtocolError("the answer has a malformed header line")
        value = value.strip(b" \t")
        if not _VALUE.fullmatch(value):
            raise httpcore.RemoteProtocolError("the answer has a header value HTTP forbids")
        headers.append((name, value))
    return version, int(status), reason, headers


def _values(headers: list[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    """Every comma-separated value of the headers called `name`, lower-cased."""
    return [
        part.strip().lower()
        for key, value in headers
        if key.lower() == name
        for part in value.split(b",")
        if part.strip()
    ]


def _says_close(headers: list[tuple[bytes, bytes]]) -> bool:
    return b"close" in _values(headers, b"connection")


def _framing(status: int, headers: list[tuple[bytes, bytes]]) -> int | str | None:
    """How the answer's body ends (RFC 9112 6.3): None (no body), its length, "chunked" or "close"."""
    if status in (204, 304):
        return None
    codings = _values(headers, b"transfer-encoding")
    if codings:
        if codings != [b"chunked"]:
            raise httpcore.RemoteProtocolError("only Transfer-Encoding: chunked is supported")
        return "chunked"
    lengths = {part.strip() for key, value in headers if key.lower() == b"content-length" for part in value.split(b",")}
    if not lengths:
        return "close"
    if len(lengths) > 1 or not all(length.isdigit() for length in lengths) or any(len(n) > 20 for n in lengths):
        raise httpcore.RemoteProtocolError("the answer's Content-Length is malformed")
    return int(lengths.pop())
