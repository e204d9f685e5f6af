"""A credential bound to its origin, for every outbound HTTP client: the built-in `http` source, the
Capture API client, and source plugins, which should build their client with `bound_client`.

httpx puts a client's default headers on every request and, following a redirect, copies them to
the next host (it drops only `Authorization`): an upstream could send a token to any host it names.
Here the credential headers are set per request, only when its origin (scheme, host, port) is the
configured one, and stripped from any other; redirects are followed by the auth flow itself, so each
hop is checked. A hop to another origin is refused (`OriginRefused`) unless `follow_foreign_origins`
says to follow it without the credential; https never goes down to http; plain http with a
credential goes only to loopback unless `allow_insecure_http`.

    from connector.outbound import bound_client

    client = bound_client("https://api.example.com/v1/", {"Authorization": f"Bearer {token}"}, timeout=30)
    client.get("https://api.example.com/v1/contacts")  # carries the token
    client.get("https://cdn.example.net/page2")        # carries no token
    # a redirect from api.example.com to cdn.example.net: OriginRefused, naming both (redacted)
"""

from __future__ import annotations

import base64
from collections.abc import Generator, Mapping
from typing import Any

import httpx

from .logs import register_secret
from .loopback import is_loopback
from .redact import redact_url

__all__ = ["Origin", "OriginBoundAuth", "OriginRefused", "bound_client", "check_hop", "origin_of", "userinfo_auth"]

Origin = tuple[str, str, int]
_DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_REDIRECTS = 10


class OriginRefused(Exception):
    """A request the credential's origin rules forbid: the message names both origins, redacted.
    `downgrade` is True for https to http, which no option allows."""

    def __init__(self, message: str, *, downgrade: bool = False) -> None:
        super().__init__(message)
        self.downgrade = downgrade


def origin_of(url: str | httpx.URL) -> Origin:
    """(scheme, host, port) with the scheme's default port filled in."""
    parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    return parsed.scheme, parsed.host, parsed.port or _DEFAULT_PORTS.get(parsed.scheme, 0)


def _shown(origin: Origin) -> str:
    scheme, host, port = origin
    return redact_url(f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}")


def check_hop(
    from_url: str | httpx.URL,
    to_url: str | httpx.URL,
    bound: Origin,
    *,
    follow_foreign_origins: bool = False,
    what: str = "a redirect",
) -> None:
    """Raise OriginRefused when a hop (a redirect, a next link) from `from_url` to `to_url` must not be
    taken: https to http always; to an origin other than `bound` unless `follow_foreign_origins`."""
    source, target = origin_of(from_url), origin_of(to_url)
    if source[0] == "https" and target[0] != "https":
        raise OriginRefused(
            f"refusing {what} from {redact_url(from_url)} to {redact_url(to_url)}: https never goes down to http",
            downgrade=True,
        )
    if target != bound and not follow_foreign_origins:
        raise OriginRefused(
            f"refusing {what} from {redact_url(from_url)} to {redact_url(to_url)}: the credential is bound to "
            f"{_shown(bound)} and {_shown(target)} is another origin"
        )


def insecure_reason(url: str | httpx.URL) -> str | None:
    """Why plain http may not carry a credential to `url` (None: it may): only loopback is exempt."""
    scheme, host, _ = origin_of(url)
    if scheme == "http" and not is_loopback(host):
        return (
            f"refusing plain http to {host} with a credential (it would travel in clear): "
            "use https, or set allow_insecure_http = true"
        )
    return None


def userinfo_auth(url: str) -> tuple[str, dict[str, str]]:
    """`url` without its userinfo, and the Basic `Authorization` header the userinfo stood for (empty
    when it had none): the header can then be bound to the origin, and the URL stored and shown."""
    parsed = httpx.URL(url)
    if not parsed.userinfo:
        return url, {}
    user, password = parsed.username, parsed.password
    register_secret(password or user)  # a token is often the user alone (`https://TOKEN@host`, `TOKEN:`)
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    register_secret(token)
    return str(parsed.copy_with(username=None, password=None)), {"Authorization": f"Basic {token}"}


class OriginBoundAuth(httpx.Auth):
    """httpx auth that sets `headers` only on requests to `url`'s origin and follows redirects itself,
    checking each hop (`check_hop`). Use it on a client with `follow_redirects=False` (httpx's
    default): a client that follows redirects itself copies headers past this check."""

    def __init__(
        self,
        url: str | httpx.URL,
        headers: Mapping[str, str],
        *,
        follow_foreign_origins: bool = False,
        allow_insecure_http: bool = False,
        max_redirects: int = MAX_REDIRECTS,
    ) -> None:
        self.origin = origin_of(url)
        if headers and not allow_insecure_http and (why := insecure_reason(url)):
            raise OriginRefused(why)
        for value in headers.values():
            register_secret(value)
        self._headers = dict(headers)
        self._follow = follow_foreign_origins
        self._max_redirects = max_redirects

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        for _ in range(self._max_redirects + 1):
            self.bind(request)
            response = yield request
            following = response.next_request
            if following is None:
                return
            check_hop(request.url, following.url, self.origin, follow_foreign_origins=self._follow)
            request = following
        raise httpx.TooManyRedirects(f"more than {self._max_redirects} redirects", request=request)

    def bind(self, request: httpx.Request) -> None:
        """Set the headers on `request` if it goes to the origin, else strip them."""
        if origin_of(request.url) == self.origin:
            request.headers.update(self._headers)
        else:
            for name in self._headers:
                request.headers.pop(name, None)

    def __repr__(self) -> str:
        return f"OriginBoundAuth(origin={_shown(self.origin)!r}, headers={sorted(self._headers)!r})"


def bound_client(
    url: str,
    credential: Mapping[str, str] | None = None,
    *,
    follow_foreign_origins: bool = False,
    allow_insecure_http: bool = False,
    **client_options: Any,
) -> httpx.Client:
    """An httpx.Client whose requests carry the `credential` headers (and `url`'s userinfo, as Basic
    auth) only to `url`'s origin, following redirects hop by hop under those rules. `client_options`
    go to httpx.Client (headers, timeout, transport...); `auth` and `follow_redirects` are this
    function's. A request hook binds the headers again on every hop, so even a call made with
    `follow_redirects=True` (which bypasses the auth flow) sends the credential nowhere else."""
    _, basic = userinfo_auth(url)
    auth = OriginBoundAuth(
        url,
        {**basic, **(credential or {})},
        follow_foreign_origins=follow_foreign_origins,
        allow_insecure_http=allow_insecure_http,
    )
    hooks = client_options.pop("event_hooks", {})
    hooks = {**hooks, "request": [auth.bind, *hooks.get("request", [])]}
    return httpx.Client(auth=auth, follow_redirects=False, event_hooks=hooks, **client_options)
