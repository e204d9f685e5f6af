"""What goes on the wire: credentials, Idempotency-Key bounds, bodies and the base URL checks."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from connector.api import (
    BulkPersonInput,
    CaptureClient,
    InsecureURLError,
    InvalidIdempotencyKey,
    PersonInput,
    encode_json,
)

from .conftest import API_KEY, API_SECRET, BASE, BULK_RESULT, INFO, PERSON, PERSON_RESULT, ok


@pytest.fixture
def all_ok(router: respx.MockRouter) -> respx.MockRouter:
    router.get("/info").mock(return_value=ok(200, INFO))
    router.post("/person").mock(return_value=ok(201, PERSON_RESULT))
    router.post("/persons/bulk").mock(return_value=ok(200, BULK_RESULT))
    return router


async def test_credentials_on_every_call_and_key_and_json_on_posts(
    all_ok: respx.MockRouter, client: CaptureClient
) -> None:
    await client.info()
    await client.capture_person(PERSON, "person-key")
    await client.capture_bulk([PERSON], "bulk-key")
    requests = [call.request for call in all_ok.calls]
    assert [str(r.url) for r in requests] == [BASE + "/info", BASE + "/person", BASE + "/persons/bulk"]
    for request in requests:
        assert request.headers["X-API-Key"] == API_KEY
        assert request.headers["X-API-Secret"] == API_SECRET
        assert "Authorization" not in request.headers
    info, person, bulk = requests
    assert "Idempotency-Key" not in info.headers and info.content == b""
    assert person.headers["Idempotency-Key"] == "person-key"
    assert bulk.headers["Idempotency-Key"] == "bulk-key"
    for post in (person, bulk):
        assert post.headers["Content-Type"] == "application/json"
    assert json.loads(person.content) == PERSON
    assert json.loads(bulk.content) == {"persons": [PERSON]}


async def test_requests_name_the_client_accept_json_and_never_return_a_cookie(
    router: respx.MockRouter, client: CaptureClient
) -> None:
    """Each request is built past httpx's client (connector/api/_exchange.py): its fixed headers still
    go, and a cookie the API sets is not kept (nothing in the spec asks for one)."""
    answer = ok(200, INFO)
    answer.headers["Set-Cookie"] = "session=abc; Path=/"
    router.get("/info").mock(return_value=answer)
    router.post("/persons/bulk").mock(return_value=ok(200, BULK_RESULT))
    await client.info()
    await client.capture_bulk([PERSON], "bulk-key")
    for call in router.calls:
        assert call.request.headers["Accept"] == "application/json"
        assert call.request.headers["User-Agent"] == "capture-sync"
        assert call.request.headers["Host"] == "capture.example.test"
        assert "Cookie" not in call.request.headers
    assert router.calls.last.request.headers["Content-Length"] == str(len(router.calls.last.request.content))


async def test_body_leaves_out_absent_fields_and_keeps_custom_fields(
    all_ok: respx.MockRouter, client: CaptureClient
) -> None:
    person = PersonInput(first_name="Ada", phone="+44 20 7946 0000", custom_fields={"tier": None, "n": 3})
    await client.capture_person(person, "k")
    sent = json.loads(all_ok.calls.last.request.content)
    assert sent == {"first_name": "Ada", "phone": "+44 20 7946 0000", "custom_fields": {"tier": None, "n": 3}}


async def test_bytes_are_sent_unchanged(all_ok: respx.MockRouter, client: CaptureClient) -> None:
    body = encode_json({"persons": [{**PERSON, "idempotency_key": "p-1"}]})
    await client.capture_bulk(body, "k")
    assert all_ok.calls.last.request.content == body


async def test_bulk_accepts_models_and_per_person_keys(all_ok: respx.MockRouter, client: CaptureClient) -> None:
    await client.capture_bulk([BulkPersonInput(**PERSON, idempotency_key="p-1"), {**PERSON, "phone": "1"}], "k")
    sent = json.loads(all_ok.calls.last.request.content)
    assert sent == {"persons": [{**PERSON, "idempotency_key": "p-1"}, {**PERSON, "phone": "1"}]}


@pytest.mark.parametrize("length", [1, 512])
async def test_idempotency_key_lengths_accepted(all_ok: respx.MockRouter, client: CaptureClient, length: int) -> None:
    key = "k" * length
    await client.capture_person(PERSON, key)
    await client.capture_bulk([PERSON], key)
    assert [c.request.headers["Idempotency-Key"] for c in all_ok.calls] == [key, key]


@pytest.mark.parametrize("key", ["", "k" * 513, "clé-unicode", "line\nbreak"], ids=["0", "513", "non-ascii", "newline"])
async def test_invalid_idempotency_key_sends_nothing(all_ok: respx.MockRouter, client: CaptureClient, key) -> None:
    with pytest.raises(InvalidIdempotencyKey):
        await client.capture_person(PERSON, key)
    with pytest.raises(InvalidIdempotencyKey):
        await client.capture_bulk([PERSON], key)
    assert all_ok.calls.call_count == 0


async def test_non_string_idempotency_key_is_refused(all_ok: respx.MockRouter, client: CaptureClient) -> None:
    with pytest.raises(InvalidIdempotencyKey):
        await client.capture_person(PERSON, 12345)  # type: ignore[arg-type]
    assert all_ok.calls.call_count == 0


@pytest.mark.parametrize("count", [0, 101])
async def test_bulk_size_out_of_bounds_sends_nothing(all_ok: respx.MockRouter, client: CaptureClient, count) -> None:
    with pytest.raises(ValueError, match="1 to 100"):
        await client.capture_bulk([PERSON] * count, "k")
    assert all_ok.calls.call_count == 0


async def test_invalid_person_sends_nothing(all_ok: respx.MockRouter, client: CaptureClient) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        await client.capture_person({"name": "Ada"}, "k")
    assert all_ok.calls.call_count == 0


@pytest.mark.parametrize(
    "url",
    [
        "https://capture.example.test/api/v1/capture",
        "http://127.0.0.1:8080/api/v1/capture",
        "http://localhost:8080/api/v1/capture",
        "http://[::1]:8080/api/v1/capture",
        "http://127.0.0.2/api/v1/capture",
    ],
)
def test_secure_or_loopback_urls_accepted(url: str) -> None:
    client = CaptureClient(url, API_KEY, API_SECRET)
    assert str(client.base_url).rstrip("/") == url


@pytest.mark.parametrize(
    "url", ["http://capture.example.test/api/v1/capture", "http://10.0.0.5/api", "http://localhost.example.test/"]
)
def test_plain_http_to_other_hosts_refused(url: str) -> None:
    with pytest.raises(InsecureURLError, match="plain http"):
        CaptureClient(url, API_KEY, API_SECRET)
    assert CaptureClient(url, API_KEY, API_SECRET, allow_insecure_http=True).base_url.scheme == "http"


@pytest.mark.parametrize(
    "url",
    [
        f"https://user:{API_SECRET}@capture.example.test/api/v1/capture",
        f"https://{API_SECRET}@capture.example.test/",
        f"ftp://user:{API_SECRET}@capture.example.test/",
    ],
)
def test_credentials_in_url_refused_without_echoing_them(url: str) -> None:
    with pytest.raises(InsecureURLError) as caught:
        CaptureClient(url, API_KEY, API_SECRET, allow_insecure_http=True)
    assert API_SECRET not in str(caught.value) and API_SECRET not in repr(caught.value)


@pytest.mark.parametrize("url", ["ftp://capture.example.test/", "capture.example.test/api", "https:///nohost"])
def test_non_http_urls_refused(url: str) -> None:
    with pytest.raises(InsecureURLError):
        CaptureClient(url, API_KEY, API_SECRET)


def test_missing_credentials_refused() -> None:
    with pytest.raises(ValueError, match="key"):
        CaptureClient(BASE, "", API_SECRET)
    with pytest.raises(ValueError, match="secret"):
        CaptureClient(BASE, API_KEY, "")


async def test_base_path_is_kept_for_every_operation(router: respx.MockRouter, make_client) -> None:
    route = router.get("/info").mock(return_value=ok(200, INFO))
    await make_client(base_url=BASE + "/").info()
    assert str(route.calls.last.request.url) == BASE + "/info"


async def test_connections_are_reused(all_ok: respx.MockRouter, client: CaptureClient) -> None:
    """Keep-alive: the pool is configured so keep-alive connections equal the connection limit."""
    transport = client._exchange.http._transport
    assert isinstance(transport, httpx.AsyncHTTPTransport)
    pool = transport._pool
    assert pool._max_keepalive_connections == pool._max_connections == 10


async def test_tls_certificates_and_hostnames_are_verified(client: CaptureClient) -> None:
    import ssl

    context = client._exchange.http._transport._pool._ssl_context
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname is True


async def test_a_closed_client_sends_nothing_and_says_it_is_closed(
    all_ok: respx.MockRouter, client: CaptureClient
) -> None:
    """Requests go past httpx's client to its transport, so the closed check is the client's own."""
    await client.info()
    await client.aclose()
    with pytest.raises(RuntimeError, match="client has been closed"):
        await client.info(retry=False)
    assert len(all_ok.calls) == 1
