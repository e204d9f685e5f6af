"""The HTTP exchange over real sockets (connector/api/_exchange.py sends to httpx's httpcore pool
itself): the request the server reads, and the answers a failed exchange becomes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from connector.api import NO_RETRY, CaptureClient, OutcomeUnknown, UnexpectedStatus

from .conftest import API_KEY, API_SECRET, BULK_RESULT, INFO, PERSON

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """A server on 127.0.0.1 that runs `handler` for each connection; yields its base URL."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/api/v1/capture"
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
