"""The client's own HTTP/1.1 connections to the API's origin (connector/api/_http11.py) over real
sockets: every way RFC 9112 lets an answer's body end, when a connection is used again and when it is
not, answers that cannot be read (h11 reads them), the limit on an answer's head, the connection limit,
and header values that would break the head."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from connector.api import NO_RETRY, CaptureClient, OutcomeUnknown

from .conftest import API_KEY, API_SECRET, INFO
from .test_exchange_sockets import client_for, envelope, read_request, serving

BODY = envelope(INFO).encode()


def head(status: str = "200 OK", *lines: str) -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", "Content-Type: application/json", *lines]) + "\r\n\r\n").encode()


OK = head("200 OK", f"Content-Length: {len(BODY)}") + BODY


def chunked(body: bytes, size: int) -> bytes:
    parts = [b"%x;ext=1\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\nX-Trailer: yes\r\n\r\n"


class Replier:
    """A server's handler that sends `reply` to each request on a connection (then closes it, with
    `close_after`, after the first); counts the connections it was given."""

    def __init__(self, reply: bytes, *, close_after: bool = False) -> None:
        self.reply, self.close_after, self.connections = reply, close_after, 0

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                await read_request(reader)
                writer.write(self.reply)
                await writer.drain()
                if self.close_after:
                    break
        except asyncio.IncompleteReadError:
            pass
        writer.close()


async def answered_twice(reply: bytes, *, close_after: bool = False) -> int:
    """Two GET /info in turn against a server that sends `reply` to each request; the connections made."""
    replier = Replier(reply, close_after=close_after)
    async with serving(replier) as base, client_for(base) as client:
        assert (await client.info()).client_name == INFO["client_name"]
        assert (await client.info()).client_name == INFO["client_name"]
    return replier.connections


async def test_a_chunked_answer_with_extensions_and_trailers_is_read_whole_and_the_connection_kept() -> None:
    assert await answered_twice(head("200 OK", "Transfer-Encoding: chunked") + chunked(BODY, 7)) == 1


async def test_an_answer_that_ends_where_the_connection_does_is_read_whole_and_the_next_goes_on_a_new_one() -> None:
    assert await answered_twice(head() + BODY, close_after=True) == 2


async def test_connection_close_and_http_1_0_answers_are_not_used_again() -> None:
    length = f"Content-Length: {len(BODY)}"
    assert await answered_twice(head("200 OK", length, "Connection: close") + BODY) == 2
    assert await answered_twice(head("200 OK", length).replace(b"HTTP/1.1", b"HTTP/1.0", 1) + BODY) == 2


async def test_bytes_past_the_answer_keep_the_connection_from_being_used_again() -> None:
    assert await answered_twice(OK + b"HTTP/1.1 200 OK\r\n") == 2


async def test_an_informational_answer_before_the_final_one_is_skipped() -> None:
    reply = b"HTTP/1.1 100 Continue\r\n\r\n" + OK
    assert await answered_twice(reply) == 1


async def test_a_gzip_answer_is_decoded_and_header_lines_folded_or_bare_lf_are_read() -> None:
    packed = gzip.compress(BODY)
    reply = (
        b"HTTP/1.1 200 OK\nContent-Type: application/json\nX-Folded: one\n  two\n"
        b"Content-Encoding: gzip\nContent-Length: %d\n\n" % len(packed)
    ) + packed
    assert await answered_twice(reply) == 1


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(head("200 OK", f"Content-Length: {len(BODY) + 10}") + BODY, id="body-shorter-than-its-length"),
        pytest.param(head("200 OK", "Transfer-Encoding: chunked") + b"zz\r\n", id="malformed-chunk-size"),
        pytest.param(head("200 OK", "Transfer-Encoding: gzip") + BODY, id="unsupported-transfer-coding"),
        pytest.param(head("200 OK", "Content-Length: 5", "Content-Length: 6") + BODY, id="two-lengths"),
        pytest.param(b"HTTP/1.1 2xx OK\r\n\r\n", id="malformed-status-line"),
        pytest.param(b"HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", id="malformed-header-line"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Ty", id="closed-inside-the-headers"),
        pytest.param(
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n" + OK,
            id="switching-protocols-unasked",
        ),
    ],
)
async def test_an_answer_that_cannot_be_read_is_an_unknown_outcome_and_the_next_request_goes_out(reply: bytes) -> None:
    """The request may have been acted on: the caller asks again under its key, on a fresh connection."""
    served = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        await read_request(reader)
        served += 1
        writer.write(reply if served == 1 else OK)
        await writer.drain()
        writer.close()

    async with serving(handler) as base, client_for(base) as client:
        with pytest.raises(OutcomeUnknown, match="RemoteProtocolError"):
            await client.info(retry=False)
        assert (await client.info(retry=False)).client_name == INFO["client_name"]


async def test_headers_that_never_end_are_refused_past_the_limit_while_the_server_still_holds_the_connection() -> None:
    """An answer's head is read up to 100 KiB (httpcore's limit): a server that keeps sending one header
    is an unreadable answer at once, not a read that goes on until the timeout."""
    done = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nX-Endless: " + b"a" * (200 * 1024))
        await writer.drain()
        await done.wait()  # the connection stays open: only the limit can end the read
        writer.close()

    async with serving(handler) as base, client_for(base) as client:
        try:
            with pytest.raises(OutcomeUnknown, match="RemoteProtocolError"):
                await client.info(retry=False)
        finally:
            done.set()


async def test_a_secret_with_a_line_break_never_becomes_a_header_of_its_own() -> None:
    """A secret read from a file with its line end: refused before anything is sent, and not shown."""
    requests = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        try:
            await read_request(reader)
            requests += 1
        except asyncio.IncompleteReadError:
            pass
        writer.close()

    secret = "hush-1f2e\r\nX-Injected: yes"
    async with (
        serving(handler) as base,
        CaptureClient(base, API_KEY, secret, allow_insecure_http=True, retry_policy=NO_RETRY) as client,
    ):
        with pytest.raises(OutcomeUnknown, match="LocalProtocolError") as refused:
            await client.info()
    assert requests == 0
    assert "hush-1f2e" not in str(refused.value) and "hush-1f2e" not in repr(refused.value)


async def test_requests_beyond_the_connection_limit_wait_for_a_connection_then_time_out_as_a_pool_timeout() -> None:
    """Two connections for more requests: the others wait for one; answers that hold both connections
    past the client's timeout (arriving a byte at a time, so their own reads never time out) make the
    next request a pool timeout."""
    open_connections = peak = 0
    trickle = asyncio.Event()
    trickling: list[int] = []
    both_trickle = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_connections, peak
        open_connections += 1
        peak = max(peak, open_connections)
        try:
            while True:
                await read_request(reader)
                reply = OK
                if not trickle.is_set():
                    writer.write(reply)
                    await writer.drain()
                    continue
                trickling.append(1)
                if len(trickling) == 2:
                    both_trickle.set()
                for byte in reply:
                    if reader.at_eof():
                        return
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(0.05)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            open_connections -= 1
            writer.close()

    async with serving(handler) as base:
        client = CaptureClient(
            base, API_KEY, API_SECRET, allow_insecure_http=True, retry_policy=NO_RETRY, timeout_s=0.5, max_connections=2
        )
        async with client:
            infos = await asyncio.gather(*(client.info() for _ in range(6)))
            assert all(info.client_name == INFO["client_name"] for info in infos)
            trickle.set()
            slow = [asyncio.ensure_future(client.info()) for _ in range(2)]
            await both_trickle.wait()
            with pytest.raises(OutcomeUnknown, match="PoolTimeout"):
                await client.info()
            for task in slow:
                task.cancel()
            await asyncio.gather(*slow, return_exceptions=True)
    assert peak <= 2


async def test_an_idle_connection_older_than_the_keep_alive_expiry_is_closed_and_a_new_one_carries_the_request() -> (
    None
):
    replier = Replier(OK)
    async with serving(replier) as base, client_for(base) as client:
        await client.info()
        await client.info()
        assert replier.connections == 1
        client._exchange._direct._expiry = 0.0  # every idle connection has outlived it
        await client.info()
    assert replier.connections == 2


async def test_the_request_on_the_wire_is_the_same_head_and_body_as_through_httpcore() -> None:
    """Byte for byte what httpcore wrote before (read from it at 82d24f4), header order and case included."""
    seen: list[tuple[list[str], bytes]] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        result = {"successful": [], "duplicates": [], "failed": [], "idempotent_replay": False}
        writer.write(head("200 OK", f"Content-Length: {len(envelope(result))}") + envelope(result).encode())
        await writer.drain()
        writer.close()

    async with serving(handler) as base, client_for(base) as client:
        await client.capture_bulk(b'{"persons":[]}', "bulk-key-1", cost=1)
    [(lines, body)] = seen
    assert lines[0] == "POST /api/v1/capture/persons/bulk HTTP/1.1"
    assert lines[1:] == [
        f"Host: {base.split('/')[2]}",
        "accept-encoding: gzip, deflate",
        "connection: keep-alive",
        "accept: application/json",
        "user-agent: capture-sync",
        f"X-API-Key: {API_KEY}",
        f"X-API-Secret: {API_SECRET}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Idempotency-Key: bulk-key-1",
    ]
    assert json.loads(body) == {"persons": []}


async def test_idle_connections_the_server_closed_are_closed_too_not_only_the_one_taken() -> None:
    """Connections are taken newest first; the older idle ones the server has closed are closed at the
    next request as httpcore's pool closed them, not held in CLOSE_WAIT for a daemon's life."""
    closed_by_server = 0
    three_closed = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal closed_by_server
        await read_request(reader)
        if closed_by_server < 3:  # the first three answered, then closed without saying so
            closed_by_server += 1
            writer.write(OK)
            await writer.drain()
            writer.close()
            await writer.wait_closed()
            if closed_by_server == 3:
                three_closed.set()
            return
        await three_closed.wait()  # the fourth answers last, so it is the newest idle connection
        try:
            while True:
                writer.write(OK)
                await writer.drain()
                await read_request(reader)
        except asyncio.IncompleteReadError:
            writer.close()

    async with (
        serving(handler) as base,
        CaptureClient(
            base, API_KEY, API_SECRET, allow_insecure_http=True, retry_policy=NO_RETRY, max_connections=4
        ) as client,
    ):
        await asyncio.gather(*(client.info() for _ in range(4)))
        origin = client._exchange._direct
        idle = list(origin._idle)
        assert len(idle) == 4
        async with asyncio.timeout(10):  # the loop reads the three closes
            while sum(c.stream.peer_spoke() for c in idle) < 3:
                await asyncio.sleep(0)
        await client.info()
        assert [c for c in origin._idle if c.stream.peer_spoke()] == []
        assert len(origin._idle) == 1
