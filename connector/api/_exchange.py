"""One HTTP exchange with the Capture API: the request's bytes out, the whole response in.

The client talks to one origin and follows no redirect, so most of what `httpx.AsyncClient.request`
does for each request is work done again for nothing: parsing and joining the URL, merging the
client's headers, running the auth flow, the redirect loop and the cookie jar (about a sixth of a
sync's CPU for the HTTP exchange, docs/performance.md). Here an `httpx.AsyncClient` is still built,
for what it decides once (the connection pool, TLS verification, a proxy from the environment), and
each request goes straight to the transport it picked for the API's origin: a URL parsed once per
path, the fixed headers encoded once, and the body read in one go.
"""

from __future__ import annotations

import functools
import ssl
from typing import Protocol

import httpx
from pydantic import SecretStr

from ..outbound import origin_of


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

    def holds(self, pair: CredentialPair) -> bool:
        return (self._api_key, self._api_secret) == (pair.api_key, pair.api_secret)

    def use(self, pair: CredentialPair) -> None:
        self._api_key, self._api_secret = pair.api_key, pair.api_secret

    def headers(self) -> list[tuple[str, str]]:
        return [("X-API-Key", self._api_key), ("X-API-Secret", self._api_secret.get_secret_value())]

    def __repr__(self) -> str:
        return f"Credentials(api_key={self._api_key!r}, api_secret='**********')"


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
        self._fixed = list(self.http.headers.multi_items())  # Accept, Accept-Encoding, Connection, User-Agent
        self._timeout = self.http.timeout.as_dict()
        self._urls: dict[str, httpx.URL] = {}

    def _url(self, path: str) -> httpx.URL:
        """`path` under the base URL, joined as httpx joins it, once per path."""
        url = self._urls.get(path)
        if url is None:
            url = self.http.build_request("GET", path).url
            if origin_of(url) != self._origin:  # the paths are the client's own: this cannot happen
                raise ValueError("a Capture API path must stay under the base URL")
            self._urls[path] = url
        return url

    async def send(
        self, method: str, path: str, body: bytes | None, key: str | None, credentials: Credentials
    ) -> httpx.Response:
        """One request, its response read whole. Raises httpx's errors: `httpx.TransportError` and
        the like when the exchange failed, with or without the request having reached the API."""
        if self.http.is_closed:  # as httpx's own check: its pool would open a socket nobody closes
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        headers = [*self._fixed, *credentials.headers()]
        if body is not None:
            headers.append(("Content-Type", "application/json"))
        if key is not None:
            headers.append(("Idempotency-Key", key))
        request = httpx.Request(
            method, self._url(path), headers=headers, content=body, extensions={"timeout": self._timeout}
        )
        response = await self._transport.handle_async_request(request)
        response.request = request
        try:
            await response.aread()
        except BaseException:
            await response.aclose()
            raise
        return response

    async def aclose(self) -> None:
        await self.http.aclose()
