"""Serving /metrics, /healthz, /readyz and the status page on the daemon's own event loop.

A bare ASGI callable on uvicorn, which the project already ships (the sandbox runs on it): its HTTP
parsing, keep-alive and slow-client handling are tested by others, where a hand-written asyncio
server would have to earn that trust. It runs as a task of the daemon's loop, so every handler
reads DaemonHealth where the daemon writes it, without locks; the ledger is read in a worker thread.
uvicorn's own signal handling is switched off: SIGTERM, SIGINT and SIGHUP stay the daemon's.
Hostile clients meet `_guard` (deadlines, a connection cap) before the app, and the app answers
only a known Host (`_address`).

Reads are open. Writes exist only when `[daemon] control_token_file` is set: `POST /control/<command>`
with a JSON body of arguments runs a command of connector.control's table (the one the socket and
the CLI use) once `Authorization: Bearer <token>` matches, compared in constant time; a missing or
wrong token is 401 and nothing is done. Without the file every POST is 405, as before.

A process running several integrations is steered one integration at a time, at the address of its
status page: `POST /integrations/<name>/control/<command>`, with that integration's own token (each
config's `[daemon] control_token_file`): whoever holds one integration's token steers that one, not
its neighbours (403, naming the file to read; an integration whose config sets none takes no command
over HTTP). A token of none of them is 401 whatever the request names. The bare `/control/<command>`
is 409 naming the integrations: no command silently picks one (a `sync` answers one run report, a
`pause` of a source names a source of one config). Where the process stands by for the integration
(another daemon leads it over a shared PostgreSQL ledger), the command goes to that daemon through
the ledger (`control.steer`), as the CLI's does from another host.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import socket
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import structlog
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ..loopback import HttpAddress
from ._address import allowed_hosts, host_allowed
from ._fds import endpoint_connections
from ._guard import Limits, guarded_protocol
from ._page import IndexRow, render_index
from ._served import MergedMetrics, Served
from ._snapshot import Snapshot

if TYPE_CHECKING:
    from ..api.client import CaptureClient
    from ..config import Config
    from ..control import Steered
    from ..health import DaemonHealth

log = structlog.get_logger("capture_sync.ops")

Scope = MutableMapping[str, Any]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
BACKLOG = 2048  # uvicorn's default
STOP_GRACE_S = 1  # open connections get this long once the daemon stops; the daemon's bound is 10 s
MAX_CONTROL_BODY = 4096  # a command's arguments are a few short fields
CONTROL = "/control/"
INTEGRATION_PAGE = "/integrations/"
PAGE_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the daemon owns the signals; it stops this server itself


class OpsServer:
    def __init__(
        self,
        address: HttpAddress,
        config: Config,
        health: DaemonHealth,
        client: CaptureClient,
        control: Steered | None = None,
        more: Sequence[Served] = (),
    ) -> None:
        """The first integration's config sets the address's limits; each integration's own config
        its control token; `more`: the other integrations the process runs."""
        self.address, self.config, self.health, self.control = address, config, health, control
        self.first = Served(config, health, client, control)  # reads the token: ConfigProblem when unusable
        self.served = [self.first, *more]
        self.steerable = any(each.token is not None for each in self.served)
        self.metrics = self.first.metrics
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(MergedMetrics(self.served))
        self._server: _Uvicorn | None = None
        self._task: asyncio.Task[None] | None = None
        self.bound: HttpAddress | None = None
        self.hosts: frozenset[str] = frozenset()

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.address.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # else a keep-alive scrape waits ~40 ms for an ACK
        try:
            sock.bind((self.address.host, self.address.port))
            sock.listen(BACKLOG)  # now, not when uvicorn's task first runs: ops.serving is logged before that
        except OSError:
            sock.close()
            raise
        self.bound = HttpAddress(self.address.host, sock.getsockname()[1], self.address.public)
        daemon = self.config.daemon
        self.hosts = allowed_hosts(self.bound, daemon.http_allowed_hosts)
        limits = Limits(
            daemon.http_header_timeout_s, daemon.http_body_timeout_s, endpoint_connections(daemon.http_max_connections)
        )
        config = uvicorn.Config(
            self.app,
            interface="asgi3",
            http=guarded_protocol(limits),
            proxy_headers=False,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_graceful_shutdown=STOP_GRACE_S,
        )
        self._server = _Uvicorn(config)
        for each in self.served:
            each.client.observers.append(each.metrics.observe)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="ops-http")
        # host and port apart: at INFO the log masks anything phone-like, a dotted address included
        log.info(
            "ops.serving",
            host=self.bound.host,
            port=self.bound.port,
            endpoints=[
                "/metrics",
                "/healthz",
                "/readyz",
                "/",
                *([f"POST {self._control_route()}"] if self.steerable else []),
            ],
            steered=[each.name for each in self.served if each.token is not None],
            max_connections=limits.max_connections,
            header_timeout_s=limits.header_timeout_s,
        )
        if limits.max_connections < daemon.http_max_connections:
            log.warning(
                "ops.connections_capped",
                wanted=daemon.http_max_connections,
                cap=limits.max_connections,
                why="a quarter of the open-file limit: raise LimitNOFILE= (systemd) or ulimit -n",
            )
        where = {"host": self.bound.host, "port": self.bound.port}
        if not self.bound.loopback:
            log.warning(
                "ops.beyond_loopback",
                **where,
                allowed_hosts=sorted(self.hosts),
                why="the endpoints have no login: whoever reaches this address reads the status page and /metrics; "
                "prefer 127.0.0.1 behind a proxy you trust",
            )
        elif self.bound.public:
            log.warning(
                "ops.public_allowed",
                **where,
                why="http_public (--http-public) is set: the endpoints have no login, and an address beyond "
                "loopback would be served as well",
            )

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), STOP_GRACE_S + 1.0)
        if not self._task.done():
            self._server.force_exit = True
            self._task.cancel()
        for each in self.served:
            with contextlib.suppress(ValueError):
                each.client.observers.remove(each.metrics.observe)

    async def snapshot(self) -> Snapshot:
        """The first integration's ledger (see Served.snapshot)."""
        return await self.first.snapshot()

    async def readiness(self) -> list[str]:
        """Why the process is not ready (each reason prefixed by its integration when it runs
        several); empty when every integration it runs is."""
        if len(self.served) == 1:
            return await self.first.readiness()
        return [f"{each.name}: {reason}" for each in self.served for reason in await each.readiness()]

    async def app(self, scope: Scope, receive: Callable[[], Awaitable[Any]], send: Send) -> None:
        if scope["type"] != "http":
            return
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        if not host_allowed(host, self.hosts):  # before anything is read: a rebound name learns nothing
            return await _reply(
                send,
                421,
                b"misdirected request: this Host is not served here ([daemon] http_allowed_hosts)\n",
                b"text/plain; charset=utf-8",
            )
        path = scope["path"]
        if scope["method"] == "POST" and self.steerable and (route := self._control_path(path)) is not None:
            return await self._control(scope, receive, send, *route)
        if scope["method"] not in ("GET", "HEAD"):
            return await _reply(send, 405, b"only GET\n", b"text/plain; charset=utf-8", [(b"allow", b"GET, HEAD")])
        try:
            if path == "/metrics":
                await asyncio.gather(*(each.snapshot() for each in self.served))
                return await _reply(send, 200, generate_latest(self.registry), CONTENT_TYPE_LATEST.encode())
            if path == "/healthz":
                return await _json(
                    send, 200, {"status": "alive", "uptime_s": round(time.time() - self.health.started_at, 1)}
                )
            if path == "/readyz":
                reasons = await self.readiness()
                # integrations: which this daemon leads and which it stands by for (a standby is ready)
                return await _json(
                    send,
                    503 if reasons else 200,
                    {
                        "ready": not reasons,
                        "reasons": reasons,
                        "integrations": {k: v for each in self.served for k, v in each.health.roles().items()},
                    },
                )
            if path == "/" or path.startswith(INTEGRATION_PAGE):
                page = await self._page(path)
                if page is not None:
                    return await _reply(send, 200, page.encode(), b"text/html; charset=utf-8", PAGE_HEADERS)
        except Exception as exc:  # a failed read (a locked or damaged ledger) is one answer, never the daemon
            log.error("ops.request_failed", path=path, error=f"{type(exc).__name__}: {exc}")
            return await _reply(send, 500, b"internal error; see the daemon's log\n", b"text/plain; charset=utf-8")
        await _reply(send, 404, b"not found: /, /metrics, /healthz, /readyz\n", b"text/plain; charset=utf-8")

    async def _page(self, path: str) -> str | None:
        """/: the integration's page, or with several an index linking to /integrations/<name>."""
        if path == "/" and len(self.served) == 1:
            return await self.first.page()
        if path == "/":
            rows = [
                IndexRow(
                    each.name,
                    each.config.ledger_name,
                    each.role(),
                    await each.readiness(),
                    INTEGRATION_PAGE + each.name,
                )
                for each in self.served
            ]
            return render_index(rows)
        name = unquote(path[len(INTEGRATION_PAGE) :])
        found = next((each for each in self.served if each.name == name), None)
        return await found.page() if found is not None else None

    def _control_route(self) -> str:
        """The control's address as the log and the 409 name it."""
        return f"{CONTROL}<command>" if len(self.served) == 1 else f"{INTEGRATION_PAGE}<name>{CONTROL}<command>"

    def _control_path(self, path: str) -> tuple[str | None, str] | None:
        """(integration, command) of a control address; None: not one. The integration is None for
        the bare /control/<command>, which names none."""
        if path.startswith(CONTROL):
            return None, path[len(CONTROL) :]
        name, found, command = path[len(INTEGRATION_PAGE) :].partition(CONTROL)
        if path.startswith(INTEGRATION_PAGE) and found:
            return unquote(name), command
        return None

    def _steered(self, integration: str | None) -> tuple[Served | None, str]:
        """The integration a control request steers, or None and why not (a 404 or a 409)."""
        names = ", ".join(each.name for each in self.served)
        if integration is None:
            if len(self.served) == 1:
                return self.first, ""
            return None, (
                f"this process runs several integrations ({names}): steer one with "
                f"POST {INTEGRATION_PAGE}<name>{CONTROL}<command>"
            )
        found = next((each for each in self.served if each.name == integration), None)
        return found, "" if found else f"no integration {integration!r} here (this process runs: {names})"

    async def _control(
        self, scope: Scope, receive: Callable[[], Awaitable[Any]], send: Send, integration: str | None, name: str
    ) -> None:
        """POST [/integrations/<name>]/control/<command>: a token of one of the integrations first (401,
        nothing read or done), then which integration (404, 409) and whether it is that one's (403),
        then the body."""
        from ..control import COMMANDS, BadRequest, check_request, steer

        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        scheme, _, token = given.partition(b" ")
        bearer = token.strip() if scheme.lower() == b"bearer" else b""
        # every token compared, in constant time each: how many compare equal is all the answer tells
        holds = [each for each in self.served if each.token is not None and _same(bearer, each.token)]
        if not holds:
            log.warning("control.unauthorized", command=name, token="missing" if not given else "wrong")
            return await _json(
                send,
                401,
                {"ok": False, "error": "a valid `Authorization: Bearer <token>` is needed"},
                [(b"www-authenticate", b"Bearer")],
            )
        served, why = self._steered(integration)
        if served is None or served.control is None:
            status = 409 if integration is None else 404
            listed = [each.name for each in self.served]
            return await _json(send, status, {"ok": False, "error": why, "integrations": listed, "exit_code": 2})
        if served not in holds:
            log.warning("control.forbidden", command=name, integration=served.name, token="another integration's")
            return await _json(send, 403, {"ok": False, "error": _not_its_token(served), "exit_code": 2})
        body = await _body(receive)
        try:
            if body is None:
                raise BadRequest(f"the body must be a JSON object of at most {MAX_CONTROL_BODY} bytes")
            args = json.loads(body) if body.strip() else {}
            check_request(name, args)
        except (BadRequest, ValueError) as exc:
            status = 404 if name not in COMMANDS else 400
            return await _json(send, status, {"ok": False, "error": str(exc), "exit_code": 2})
        with structlog.contextvars.bound_contextvars(integration=served.name):
            log.info("control.request", command=name, args=args, via="http")
            answer = await steer(served.control, name, args)
        await _json(send, 200, answer)


def _same(given: bytes, token: str) -> bool:
    return hmac.compare_digest(given, token.encode())


def _not_its_token(served: Served) -> str:
    """Why a token of another integration does not steer `served`, and what to do."""
    config = served.config.path
    if served.token is None:
        return (
            f"integration {served.name!r} takes no commands over HTTP: its config {config} sets no "
            "[daemon] control_token_file (add one, or steer it with the CLI on its host)"
        )
    return (
        f"this token is not integration {served.name!r}'s: each integration is steered with the token in "
        f"the [daemon] control_token_file of its own config ({config})"
    )


async def _body(receive: Callable[[], Awaitable[Any]]) -> bytes | None:
    """The request body, or None when it is longer than MAX_CONTROL_BODY or the client left."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        if len(body) > MAX_CONTROL_BODY:
            return None
        if not message.get("more_body"):
            return body


async def _json(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await _reply(send, status, json.dumps(body).encode() + b"\n", b"application/json", headers)


async def _reply(
    send: Send, status: int, body: bytes, content_type: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
