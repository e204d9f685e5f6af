"""The HTTP exchange over real sockets (connector/api/_exchange.py sends to httpx's httpcore pool
itself, on asyncio's own sockets: _streams.py): the request the server reads, TLS and proxies, and
the answers a failed exchange becomes."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from connector.api import NO_RETRY, CaptureClient, OutcomeUnknown, UnexpectedStatus
from connector.api._exchange import _tls_context

from ..origins.upstream import self_signed
from .conftest import API_KEY, API_SECRET, BULK_RESULT, INFO, PERSON

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """A server on 127.0.0.1 that runs `handler` for each connection (over TLS with `tls`); yields its base URL."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}/api/v1/capture"
    finally:
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[list[str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("ascii").split("\r\n")[:-2]
    length = next((int(line.split(":")[1]) for line in head if line.lower().startswith("content-length:")), 0)
    return head, await reader.readexactly(length)


def answer(status: int, body: str, extra: str = "") -> bytes:
    data = body.encode()
    return (
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n{extra}\r\n".encode()
        + data
    )


def envelope(data: object) -> str:
    return json.dumps({"success": True, "statusCode": 200, "timestamp": "2026-11-27T08:00:00Z", "data": data})


def client_for(base: str, timeout_s: float = 30.0) -> CaptureClient:
    return CaptureClient(
        base, API_KEY, API_SECRET, allow_insecure_http=True, retry_policy=NO_RETRY, timeout_s=timeout_s
    )


async def test_the_server_reads_the_request_line_headers_and_body_and_both_requests_share_one_connection() -> None:
    seen: list[tuple[list[str], bytes]] = []
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while not reader.at_eof():
            try:
                head, body = await read_request(reader)
            except asyncio.IncompleteReadError:
                break
            seen.append((head, body))
            writer.write(answer(200, envelope(INFO if head[0].startswith("GET") else BULK_RESULT)))
            await writer.drain()
        writer.close()

    async with serving(handler) as base, client_for(base) as client:
        await client.info()
        await client.capture_bulk([PERSON], "bulk-key-1")
    (info_head, info_body), (bulk_head, bulk_body) = seen
    assert info_head[0] == "GET /api/v1/capture/info HTTP/1.1" and info_body == b""
    assert bulk_head[0] == "POST /api/v1/capture/persons/bulk HTTP/1.1"
    headers = {line.split(": ", 1)[0].lower(): line.split(": ", 1)[1] for line in bulk_head[1:]}
    assert headers["host"] == base.split("/")[2]
    assert headers["x-api-key"] == API_KEY and headers["x-api-secret"] == API_SECRET
    assert headers["idempotency-key"] == "bulk-key-1"
    assert headers["content-type"] == "application/json" and headers["content-length"] == str(len(bulk_body))
    assert headers["accept"] == "application/json" and headers["user-agent"] == "capture-sync"
    assert connections == 1  # keep-alive


async def test_a_connection_closed_before_the_answer_is_an_unknown_outcome() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    async with serving(handler) as base, client_for(base) as client:
        with pytest.raises(OutcomeUnknown, match=r"connection failed \(RemoteProtocolError\)"):
            await client.capture_bulk([PERSON], "bulk-key-2")


async def test_an_answer_that_never_comes_is_a_timeout() -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await release.wait()
        writer.close()

    async with serving(handler) as base, client_for(base, timeout_s=0.2) as client:
        try:
            with pytest.raises(OutcomeUnknown, match=r"request timed out \(ReadTimeout\)"):
                await client.capture_bulk([PERSON], "bulk-key-3")
        finally:
            release.set()


async def test_nothing_listening_is_a_connect_error() -> None:
    async with serving(lambda reader, writer: asyncio.sleep(0)) as base:
        pass  # closed: its port now refuses
    async with client_for(base) as client:
        with pytest.raises(OutcomeUnknown, match=r"connection failed \(ConnectError\)"):
            await client.info()


async def test_a_redirect_names_its_target_and_no_response_keeps_the_secret() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer(308, "{}", "Location: /elsewhere/info\r\n"))
        await writer.drain()
        writer.close()

    async with serving(handler) as base, client_for(base) as client:
        with pytest.raises(UnexpectedStatus) as raised:
            await client.info()
    assert "/elsewhere/info" in str(raised.value) and API_SECRET not in str(raised.value)


# The sockets are asyncio's own (connector/api/_streams.py): TLS, proxies, answers bigger than what
# the connection holds unread, and a connection the server closed while it was idle.


@pytest.fixture
def trusted_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ssl.SSLContext]:
    """A server context for 127.0.0.1 whose certificate the client trusts (through SSL_CERT_FILE)."""
    cert, context = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    _tls_context.cache_clear()  # the client loads its CA bundle once per process
    yield context
    _tls_context.cache_clear()


async def echo_bulk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request on the connection with a bulk result naming the request's key."""
    while not reader.at_eof():
        try:
            head, _ = await read_request(reader)
        except asyncio.IncompleteReadError:
            break
        key = next(line.split(": ", 1)[1] for line in head if line.lower().startswith("idempotency-key:"))
        writer.write(answer(200, envelope({"successful": [{"idempotency_key": key}], "duplicates": [], "failed": []})))
        await writer.drain()
    writer.close()


async def test_https_with_a_trusted_certificate_carries_requests_over_one_connection(
    trusted_tls: ssl.SSLContext,
) -> None:
    async with serving(echo_bulk, tls=trusted_tls) as base, client_for(base) as client:
        assert base.startswith("https://")
        for n in range(3):
            result = await client.capture_bulk([PERSON], f"tls-key-{n}")
            assert result.successful == [{"idempotency_key": f"tls-key-{n}"}]


async def test_a_certificate_the_client_does_not_trust_fails_the_connection(tmp_path: Path) -> None:
    _, context = self_signed(tmp_path)  # not in the client's CA bundle
    _tls_context.cache_clear()
    async with serving(echo_bulk, tls=context) as base, client_for(base) as client:
        with pytest.raises(OutcomeUnknown, match=r"connection failed \(ConnectError\)"):
            await client.capture_bulk([PERSON], "tls-untrusted")


async def test_an_https_proxy_from_the_environment_tunnels_to_the_api(
    trusted_tls: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    tunnels: list[str] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, _ = await read_request(reader)
        tunnels.append(head[0])
        host, port = head[0].split()[1].rsplit(":", 1)
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    async with serving(echo_bulk, tls=trusted_tls) as base, serving(proxy) as proxy_base:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTPS_PROXY", proxy_base.split("/api")[0])
        async with client_for(base) as client:
            result = await client.capture_bulk([PERSON], "proxied-key")
    assert result.successful == [{"idempotency_key": "proxied-key"}]
    assert tunnels == [f"CONNECT {base.split('/')[2]} HTTP/1.1"]


async def test_a_plain_http_proxy_from_the_environment_is_sent_the_absolute_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, _ = await read_request(reader)
        seen.append(head[0])
        writer.write(answer(200, envelope(INFO)))
        await writer.drain()
        writer.close()

    async with serving(proxy) as proxy_base:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy_base.split("/api")[0])
        async with client_for("http://127.0.0.1:9/api/v1/capture") as client:  # nothing listens there
            await client.info()
    assert seen == ["GET http://127.0.0.1:9/api/v1/capture/info HTTP/1.1"]


async def test_an_answer_larger_than_the_connection_holds_unread_arrives_whole() -> None:
    successful = [{"idempotency_key": f"big-{n:06d}", "note": "x" * 200} for n in range(5000)]  # ~1.2 MB

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer(200, envelope({"successful": successful, "duplicates": [], "failed": []})))
        await writer.drain()
        writer.close()

    async with serving(handler) as base, client_for(base) as client:
        result = await client.capture_bulk([PERSON], "big-answer")
    assert result.successful == successful


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    connections = 0
    answered = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(answer(200, envelope(INFO)))
        await writer.drain()
        writer.close()  # keep-alive refused after the answer, without saying so
        await writer.wait_closed()
        answered.set()

    async with serving(handler) as base, client_for(base) as client:
        await client.info()
        await answered.wait()
        await client.info()  # not an unknown outcome: a fresh connection carries it
    assert connections == 2


async def test_a_request_cancelled_while_it_waits_for_its_answer_leaves_the_client_usable() -> None:
    requests = 0
    first_read = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        while not reader.at_eof():
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                break
            requests += 1
            if requests == 1:
                first_read.set()
                continue  # never answered: the client gives up on it
            writer.write(answer(200, envelope(INFO)))
            await writer.drain()
        writer.close()

    async with serving(handler) as base, client_for(base) as client:
        waiting = asyncio.create_task(client.info())
        await first_read.wait()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        info = await client.info()  # on another connection: the cancelled one was closed
    assert info.client_name == INFO["client_name"] and requests == 2


async def test_a_body_the_server_does_not_read_is_a_write_timeout() -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()  # reads nothing: the client's socket buffers fill
        writer.close()

    body = b"[" + b",".join([b'{"name":"' + b"x" * 1000 + b'"}'] * 32_000) + b"]"  # ~32 MB
    async with serving(handler) as base, client_for(base, timeout_s=0.3) as client:
        try:
            with pytest.raises(OutcomeUnknown, match=r"request timed out \(WriteTimeout\)"):
                await client.capture_bulk(body, "bulk-key-unread", cost=1)
        finally:
            release.set()


async def test_a_tls_handshake_the_server_never_answers_is_a_connect_timeout() -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()  # a plain TCP server: the client's hello goes unanswered
        writer.close()

    async with serving(handler) as base:
        tls_base = base.replace("http://", "https://")
        async with CaptureClient(tls_base, API_KEY, API_SECRET, retry_policy=NO_RETRY, connect_timeout_s=0.3) as client:
            try:
                with pytest.raises(OutcomeUnknown, match=r"request timed out \(ConnectTimeout\)"):
                    await client.info()
            finally:
                release.set()


async def test_a_host_whose_first_address_never_answers_is_reached_at_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name with two addresses, the first dropping connection attempts (a broken IPv6 route, a zone
    down): the next is tried a moment later (happy eyeballs), not after the whole connect timeout."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer(200, envelope(INFO)))
        await writer.drain()
        writer.close()

    with socket.socket() as hole, socket.socket() as filler:
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        filler.connect(hole.getsockname())  # never accepted: the queue is full, later attempts are dropped
        async with serving(handler) as base:
            live = ("127.0.0.1", int(base.split(":")[2].split("/")[0]))
            real = socket.getaddrinfo

            def resolve(host: object, port: object, *args: object, **kwargs: object) -> list:  # type: ignore[type-arg]
                if host in ("api.test", b"api.test"):
                    return [
                        (socket.AF_INET, socket.SOCK_STREAM, 6, "", address) for address in (hole.getsockname(), live)
                    ]
                return real(host, port, *args, **kwargs)  # type: ignore[arg-type]

            monkeypatch.setattr(socket, "getaddrinfo", resolve)
            named = f"http://api.test:{live[1]}/api/v1/capture"
            async with CaptureClient(
                named, API_KEY, API_SECRET, allow_insecure_http=True, retry_policy=NO_RETRY, connect_timeout_s=5.0
            ) as client:
                assert (await client.info()).client_name == INFO["client_name"]
