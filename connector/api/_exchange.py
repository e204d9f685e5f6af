"""One HTTP exchange with the Capture API: the request's bytes out, the whole response in.

The client talks to one origin and follows no redirect, so most of what `httpx.AsyncClient.request`
does for each request is work done again for nothing: parsing and joining the URL, merging the
client's headers, running the auth flow, the redirect loop and the cookie jar (about a sixth of a
sync's CPU for the HTTP exchange, docs/performance.md). Here an `httpx.AsyncClient` is still built,
for what it decides once (the connection pool, TLS verification, a proxy from the environment), and
each request goes straight to the transport it picked for the API's origin: a URL parsed once per
path, the fixed headers encoded once, and the body read in one go.

When that transport is httpx's own (`httpx.AsyncHTTPTransport`, always so unless a caller passed
another), the request goes one step further down, to the httpcore connection pool or proxy the
transport built: an `httpcore.Request` of bytes made ready per path, where httpx would build a
`Request`, re-encode its headers and wrap the body and the answer in its own streams each time (about
a fifth of the exchange's CPU). httpcore's errors are mapped to httpx's exactly as the transport maps
them, so callers see the same exceptions either way.

Without a proxy (the usual case) not even httpcore's pool is used: a request is written as bytes to
a keep-alive connection of the client's own (`_http11.Origin`, configured from the pool httpx built:
its connection limit, keep-alive expiry and TLS context), its head made of lines encoded once per
path and once per credential pair. A proxy's pool (httpx's choice from the environment) is still
httpcore's, on the asyncio backend of `_streams`; so is the pool httpx built while a mock has taken
the place of httpcore's pool method (respx, in the unit tests).
"""

from __future__ import annotations

import functools
import ssl
from typing import NamedTuple, Protocol

import h11
import httpcore
import httpx
from httpcore._backends.auto import AutoBackend
from httpx._client import ClientState
from httpx._transports.default import map_httpcore_exceptions
from pydantic import SecretStr

from ..outbound import origin_of
from ._http11 import Answer, Origin, Outgoing, announcement, header_line
from ._streams import AsyncioBackend


class CredentialPair(Protocol):
    """A key and secret, and where they were read from (for messages; never the values)."""

    @property
    def api_key(self) -> str: ...

    @property
    def api_secret(self) -> SecretStr: ...

    def origins(self) -> str: ...


class Credentials:
    """Both credential headers, for requests to the API's origin only: `Exchange` sends requests to
    no other and follows no redirect. Its repr never shows the secret."""

    def __init__(self, api_key: str, api_secret: SecretStr) -> None:
        self._api_key = api_key
        self._api_secret = api_secret
        self._headers = self._encoded()
        self._lines: bytes | None = None

    def holds(self, pair: CredentialPair) -> bool:
        return (self._api_key, self._api_secret) == (pair.api_key, pair.api_secret)

    def use(self, pair: CredentialPair) -> None:
        self._api_key, self._api_secret = pair.api_key, pair.api_secret
        self._headers = self._encoded()
        self._lines = None

    def headers(self) -> list[tuple[bytes, bytes]]:
        """Both headers, encoded once per pair (never changed by a caller: a request copies them)."""
        return self._headers

    def lines(self) -> bytes:
        """Both header lines as a request's head holds them, made once per pair; a value HTTP forbids
        fails each request that would carry it (`header_line`), as httpcore's h11 refused it."""
        if self._lines is None:
            self._lines = b"".join(header_line(name, value) for name, value in self._headers)
        return self._lines

    def _encoded(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"X-API-Key", self._api_key.encode("ascii")),
            (b"X-API-Secret", self._api_secret.get_secret_value().encode("ascii")),
        ]

    def __repr__(self) -> str:
        return f"Credentials(api_key={self._api_key!r}, api_secret='**********')"


class _Target(NamedTuple):
    """One path under the base URL, ready to send to: as httpx spells it (for the transport, and the
    `request` of each response) and as httpcore takes it, with its Host header."""

    url: httpx.URL
    core: httpcore.URL
    head: list[tuple[bytes, bytes]]  # Host and the client's fixed headers, first in every request
    lines: bytes  # the same as a request's head holds them, after its request line


# httpcore's own way into its pool. A mock that takes its place (respx patches it on the class) is
# where requests must go while it does: then they go through the pool httpx built, as they would without
# the direct path.
_POOL_SEND = httpcore.AsyncConnectionPool.handle_async_request


class Reply:
    """An answer from the client's own connections as the client reads it: its status and content at
    once; httpx's model of it (headers, reason phrase, the request it answers) only when asked, for an
    answer that is not a success. A success needs neither, and the model cost some 100,000
    instructions per request (header normalisation, the decoder chain over the content)."""

    __slots__ = ("_answer", "_exchange", "_method", "_path", "_response", "content", "status_code")

    def __init__(self, answer: Answer, exchange: Exchange, method: str, path: str) -> None:
        self.status_code = answer.status
        self.content = answer.content  # as sent: an answer with a Content-Encoding is decoded by httpx's model
        self._answer, self._exchange, self._method, self._path = answer, exchange, method, path
        self._response: httpx.Response | None = None

    @property
    def response(self) -> httpx.Response:
        if self._response is None:
            self._response = self._exchange._response(self._answer, self._method, self._path)
        return self._response


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """Loading the CA bundle takes ~50 ms: once per process, not once per client."""
    return httpx.create_ssl_context()


class Exchange:
    """The client's HTTP side: its `httpx.AsyncClient` (pool, TLS, proxy) and requests sent past it."""

    def __init__(
        self,
        base_url: httpx.URL,
        *,
        timeout_s: float,
        connect_timeout_s: float,
        max_connections: int,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            headers={"Accept": "application/json", "User-Agent": "capture-sync"},
            verify=_tls_context(),
            transport=transport,
            follow_redirects=False,  # the credentials are bound to base_url's origin: see Credentials
        )
        self._origin = origin_of(base_url)
        # httpx's own choice of transport for the origin (a proxy's, when the environment names one).
        self._transport = self.http._transport_for_url(base_url)
        # Its httpcore pool (a proxy is one too), when it is httpx's own transport: see the module's docstring.
        self._pool: httpcore.AsyncConnectionPool | None = (
            self._transport._pool if type(self._transport) is httpx.AsyncHTTPTransport else None
        )
        self._timeout = self.http.timeout.as_dict()
        # Straight to the origin when httpx would connect to it itself (no proxy): see the module's docstring.
        self._direct: Origin | None = None
        if type(self._pool) is httpcore.AsyncConnectionPool:
            self._direct = Origin(
                base_url.raw_scheme,
                base_url.raw_host.decode("ascii"),
                base_url.port or (443 if base_url.scheme == "https" else 80),
                ssl_context=self._pool._ssl_context,
                max_connections=self._pool._max_connections,
                keepalive_expiry=self._pool._keepalive_expiry,
                timeouts=self._timeout,
            )
        if self._pool is not None and type(self._pool._network_backend) is AutoBackend:
            # A proxy's pool (or httpx's own under a mock) on asyncio's own transports, not through anyio
            # (`_streams`): its connections are opened through this backend. Set before any connection is made.
            self._pool._network_backend = AsyncioBackend()
        # Accept, Accept-Encoding, Connection, User-Agent
        self._fixed = [(key.encode(), value.encode()) for key, value in self.http.headers.multi_items()]
        self._targets: dict[str, _Target] = {}
        self._requests: dict[tuple[str, str], httpx.Request] = {}
        self._heads: dict[tuple[str, str], tuple[bytes, h11.Request]] = {}

    def _target(self, path: str) -> _Target:
        """`path` under the base URL, joined as httpx joins it, once per path."""
        target = self._targets.get(path)
        if target is None:
            built = self.http.build_request("GET", path)
            url = built.url
            if origin_of(url) != self._origin:  # the paths are the client's own: this cannot happen
                raise ValueError("a Capture API path must stay under the base URL")
            core = httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path)
            head = [(b"Host", built.headers["Host"].encode()), *self._fixed]
            lines = b"".join(header_line(name, value) for name, value in head)
            target = self._targets[path] = _Target(url, core, head, lines)
        return target

    def _head(self, method: str, path: str) -> tuple[bytes, h11.Request]:
        """The request line, Host and the fixed headers of `method` on `path`, and h11's announcement
        of a request that begins with them (`_http11.announcement`), once per pair."""
        head = self._heads.get((method, path))
        if head is None:
            target = self._target(path)
            raw_method = method.encode("ascii")
            line = b"%s %s HTTP/1.1\r\n" % (raw_method, target.url.raw_path)
            announced = announcement(raw_method, target.url.raw_path, target.head)
            head = self._heads[(method, path)] = (line + target.lines, announced)
        return head

    async def send(
        self, method: str, path: str, body: bytes | None, key: str | None, credentials: Credentials
    ) -> httpx.Response | Reply:
        """One request, its response read whole (a `Reply` from the client's own connections, unless
        its content is encoded). Raises httpx's errors: `httpx.TransportError` and the like when the
        exchange failed, with or without the request having reached the API."""
        if self.http.is_closed:  # as httpx's own check: its pool would open a socket nobody closes
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        if self._direct is not None and httpcore.AsyncConnectionPool.handle_async_request is _POOL_SEND:
            with map_httpcore_exceptions():
                direct = await self._direct.request(self._outgoing(method, path, body, key, credentials))
            if any(name.lower() == b"content-encoding" for name, _ in direct.headers):
                return self._response(direct, method, path)  # its content decoded as httpx decodes it
            return Reply(direct, self, method, path)
        target = self._target(path)
        headers = target.head + credentials.headers()
        if body is not None:
            headers += [(b"Content-Type", b"application/json"), (b"Content-Length", str(len(body)).encode())]
        if key is not None:
            headers.append((b"Idempotency-Key", key.encode("ascii")))
        if self._pool is None:
            return await self._through_transport(method, target.url, headers, body)
        request = httpcore.Request(
            method, target.core, headers=headers, content=body, extensions={"timeout": self._timeout}
        )
        with map_httpcore_exceptions():
            answer = await self._pool.handle_async_request(request)
            try:
                content = await answer.aread()
            finally:
                await answer.aclose()
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            content=content,
            extensions=answer.extensions,
            request=self._request_line(method, path, target.url),
        )

    def _outgoing(
        self, method: str, path: str, body: bytes | None, key: str | None, credentials: Credentials
    ) -> Outgoing:
        """The whole request as it goes on the wire: its head, with the same headers in the same order
        as through httpcore, then the body; and what h11 is told of it, made once per method and path."""
        head, announced = self._head(method, path)
        parts = [head, credentials.lines()]
        if body is not None:
            parts.append(b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body))
        if key is not None:
            parts.append(header_line(b"Idempotency-Key", key.encode("ascii")))
        parts.append(b"\r\n")
        if body:
            parts.append(body)
        return Outgoing(announced, b"".join(parts))

    def _response(self, answer: Answer, method: str, path: str) -> httpx.Response:
        """`answer` as httpx's model: its content decoded as the headers say, as httpx's transport would."""
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            content=answer.content,
            extensions={"http_version": b"HTTP/" + answer.version, "reason_phrase": answer.reason},
            request=self._request_line(method, path, self._target(path).url),
        )

    def _request_line(self, method: str, path: str, url: httpx.URL) -> httpx.Request:
        """What a response sent past httpx's models answers: its method and URL (a redirect's message
        names them), shared by every request to them; neither the headers (the secret) nor the body."""
        line = self._requests.get((method, path))
        if line is None:
            line = self._requests[(method, path)] = httpx.Request(method, url)
        return line

    async def _through_transport(
        self, method: str, url: httpx.URL, headers: list[tuple[bytes, bytes]], body: bytes | None
    ) -> httpx.Response:
        """Through a transport the caller gave (a recorder, a mock): httpx's request and response models."""
        request = httpx.Request(method, url, headers=headers, content=body, extensions={"timeout": self._timeout})
        response = await self._transport.handle_async_request(request)
        response.request = request
        try:
            await response.aread()
        except BaseException:
            await response.aclose()
            raise
        return response

    async def aclose(self) -> None:
        if self._direct is not None:
            await self._direct.aclose()
            if self._pool is not None and not self._pool.connections and not any(self.http._mounts.values()):
                # httpx's pool never held a connection (the requests went to `_direct`) and no proxy is
                # mounted: closing it would only load anyio's asyncio backend for a cancellation shield
                # around nothing (some 20 ms of CPU at the end of every run). Closed as httpx closes it.
                self.http._state = ClientState.CLOSED
                return
        await self.http.aclose()
