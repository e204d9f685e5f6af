"""Every documented status of every operation (spec 4, 7) becomes the right result or exception."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from uuid import UUID

import httpx
import pytest
import respx

from connector.api import (
    NO_RETRY,
    BadRequest,
    BulkCaptureResult,
    CaptureClient,
    CaptureError,
    ClientInfo,
    IdempotencyConflict,
    OutcomeUnknown,
    PersonCaptureResult,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
    UnexpectedStatus,
)

from .conftest import BULK_RESULT, INFO, PERSON, PERSON_ID, PERSON_RESULT, fail, ok

Call = Callable[[CaptureClient], Awaitable[object]]

OPERATIONS: dict[str, tuple[str, str, Call]] = {
    "info": ("GET", "/info", lambda c: c.info()),
    "capture_person": ("POST", "/person", lambda c: c.capture_person(PERSON, "key-1")),
    "capture_bulk": ("POST", "/persons/bulk", lambda c: c.capture_bulk([PERSON], "key-1")),
}
DOCUMENTED = {
    "info": (401, 429, 503),
    "capture_person": (400, 401, 409, 429, 503),
    "capture_bulk": (400, 401, 409, 429, 503),
}
EXCEPTIONS = {
    400: BadRequest,
    401: Unauthorized,
    409: IdempotencyConflict,
    429: RateLimited,
    503: ServiceUnavailable,
}
ERROR_CASES = [(op, status) for op, statuses in DOCUMENTED.items() for status in statuses]


async def test_info_200_parses_client_info(router: respx.MockRouter, client: CaptureClient) -> None:
    router.get("/info").mock(return_value=ok(200, INFO))
    info = await client.info()
    assert isinstance(info, ClientInfo)
    assert (info.client_name, info.rate_limit, info.default_lead_source) == ("Website forms", 120, "web")
    assert info.has_custom_field_mapping is True
    assert info.allowed_origins == ["https://example.test"]


async def test_info_200_with_only_required_fields(router: respx.MockRouter, client: CaptureClient) -> None:
    router.get("/info").mock(
        return_value=ok(
            200,
            {
                "client_name": "c",
                "rate_limit": 5,
                "has_custom_field_mapping": False,
                "allowed_origins": None,
                "default_lead_source": None,
            },
        )
    )
    info = await client.info()
    assert info.allowed_origins is None and info.default_lead_source is None and info.rate_limit == 5


async def test_person_201_parses_result(router: respx.MockRouter, client: CaptureClient) -> None:
    router.post("/person").mock(return_value=ok(201, {**PERSON_RESULT, "idempotent_replay": True}))
    result = await client.capture_person(PERSON, "key-1")
    assert isinstance(result, PersonCaptureResult)
    assert result.person_id == UUID(PERSON_ID)
    assert (result.status, result.action, result.duplicate_detected, result.idempotent_replay) == (
        "created",
        "create",
        False,
        True,
    )


async def test_person_201_with_only_person_id(router: respx.MockRouter, client: CaptureClient) -> None:
    router.post("/person").mock(return_value=ok(201, {"person_id": PERSON_ID, "action": None}))
    result = await client.capture_person(PERSON, "key-1")
    assert result.person_id == UUID(PERSON_ID) and result.idempotent_replay is None and result.action is None


async def test_bulk_200_parses_all_three_arrays(router: respx.MockRouter, client: CaptureClient) -> None:
    data = {
        "successful": [{"index": 0, "person_id": PERSON_ID}],
        "duplicates": [{"index": 1, "person_id": PERSON_ID}],
        "failed": [{"index": 2, "error": "bad"}],
    }
    router.post("/persons/bulk").mock(return_value=ok(200, data))
    result = await client.capture_bulk([PERSON, PERSON, PERSON], "key-1")
    assert isinstance(result, BulkCaptureResult)
    assert (result.successful, result.duplicates, result.failed) == (
        data["successful"],
        data["duplicates"],
        data["failed"],
    )


@pytest.mark.parametrize(("operation", "status"), ERROR_CASES)
async def test_error_status_raises_its_exception_with_envelope_fields(
    router: respx.MockRouter, make_client: Callable[..., CaptureClient], operation: str, status: int
) -> None:
    method, path, call = OPERATIONS[operation]
    route = router.route(method=method, path__regex=f"{path}$").mock(
        return_value=fail(
            status,
            name=f"Name{status}",
            message=f"message {status}",
            code=f"CODE_{status}",
            retryable=False,
            isOperational=True,
            detail={"extra": 1},
        )
    )
    with pytest.raises(EXCEPTIONS[status]) as caught:
        await call(make_client(retry_policy=NO_RETRY))
    exc = caught.value
    assert (exc.status_code, exc.name, exc.code, exc.message, exc.retryable, exc.operation) == (
        status,
        f"Name{status}",
        f"CODE_{status}",
        f"message {status}",
        False,
        operation,
    )
    assert route.call_count == 1
    if status == 429:
        assert exc.retry_after is None


async def test_503_carries_retryable_true(router: respx.MockRouter, make_client) -> None:
    router.post("/person").mock(return_value=fail(503, name="Unavailable", retryable=True))
    with pytest.raises(ServiceUnavailable) as caught:
        await make_client(retry_policy=NO_RETRY).capture_person(PERSON, "key-1")
    assert caught.value.retryable is True


async def test_error_without_code_or_retryable(router: respx.MockRouter, make_client) -> None:
    router.post("/person").mock(return_value=fail(400, name="ValidationError", message="email is invalid"))
    with pytest.raises(BadRequest) as caught:
        await make_client().capture_person(PERSON, "key-1")
    assert (caught.value.code, caught.value.retryable, caught.value.message) == (None, None, "email is invalid")
    assert "email is invalid" in str(caught.value) and "HTTP 400" in str(caught.value)


@pytest.mark.parametrize("operation", list(OPERATIONS))
async def test_429_reads_retry_after(router: respx.MockRouter, make_client, operation: str) -> None:
    method, path, call = OPERATIONS[operation]
    router.route(method=method, path__regex=f"{path}$").mock(
        return_value=fail(429, name="TooManyRequests", headers={"Retry-After": "7"})
    )
    with pytest.raises(RateLimited) as caught:
        await call(make_client(retry_policy=NO_RETRY))
    assert caught.value.retry_after == 7.0


@pytest.mark.parametrize("status", [500, 502, 418])
@pytest.mark.parametrize("operation", list(OPERATIONS))
async def test_unexpected_status_with_envelope(
    router: respx.MockRouter, make_client, operation: str, status: int
) -> None:
    method, path, call = OPERATIONS[operation]
    route = router.route(method=method, path__regex=f"{path}$").mock(
        return_value=fail(status, name="BadGateway", message="upstream down", code="UPSTREAM", retryable=True)
    )
    with pytest.raises(UnexpectedStatus) as caught:
        await call(make_client())
    exc = caught.value
    assert (exc.status_code, exc.name, exc.code, exc.message) == (status, "BadGateway", "UPSTREAM", "upstream down")
    assert route.call_count == 1, "design 4: a 5xx other than 503 is not retried automatically"


async def test_unexpected_status_without_envelope(router: respx.MockRouter, client: CaptureClient) -> None:
    router.post("/person").mock(return_value=httpx.Response(502, text="<html>Bad Gateway</html>"))
    with pytest.raises(UnexpectedStatus) as caught:
        await client.capture_person(PERSON, "key-1")
    exc = caught.value
    assert exc.status_code == 502 and exc.name is None and exc.code is None and exc.retryable is None
    assert "502" in exc.message


async def test_503_without_envelope_is_not_retryable(router: respx.MockRouter, client: CaptureClient) -> None:
    route = router.post("/person").mock(return_value=httpx.Response(503, text="maintenance"))
    with pytest.raises(ServiceUnavailable) as caught:
        await client.capture_person(PERSON, "key-1")
    assert caught.value.retryable is None and route.call_count == 1


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        json.dumps({"success": True, "statusCode": 201, "timestamp": "2026-11-22T08:00:00Z"}).encode(),
        json.dumps(
            {"success": False, "statusCode": 201, "timestamp": "2026-11-22T08:00:00Z", "data": PERSON_RESULT}
        ).encode(),
        json.dumps(
            {
                "success": True,
                "statusCode": 201,
                "timestamp": "2026-11-22T08:00:00Z",
                "data": {"person_id": "not-a-uuid"},
            }
        ).encode(),
    ],
    ids=["not-json", "no-data", "success-false", "bad-person-id"],
)
async def test_malformed_2xx_is_outcome_unknown(router: respx.MockRouter, make_client, body: bytes) -> None:
    router.post("/person").mock(return_value=httpx.Response(201, content=body))
    with pytest.raises(OutcomeUnknown) as caught:
        await make_client(retry_policy=NO_RETRY).capture_person(PERSON, "key-1")
    assert caught.value.status_code == 201 and caught.value.operation == "capture_person"


async def test_malformed_bulk_result_is_outcome_unknown(router: respx.MockRouter, make_client) -> None:
    router.post("/persons/bulk").mock(return_value=ok(200, {"successful": [], "failed": []}))
    with pytest.raises(OutcomeUnknown):
        await make_client(retry_policy=NO_RETRY).capture_bulk([PERSON], "key-1")


@pytest.mark.parametrize(
    ("error", "kind"), [(httpx.ReadTimeout("timed out"), "timed out"), (httpx.ConnectError("refused"), "connection")]
)
async def test_transport_failures_are_outcome_unknown(router: respx.MockRouter, make_client, error, kind) -> None:
    router.post("/person").mock(side_effect=error)
    with pytest.raises(OutcomeUnknown) as caught:
        await make_client(retry_policy=NO_RETRY).capture_person(PERSON, "key-1")
    assert caught.value.status_code is None and kind in caught.value.message


def test_every_error_is_a_capture_error() -> None:
    assert all(issubclass(cls, CaptureError) for cls in (*EXCEPTIONS.values(), UnexpectedStatus, OutcomeUnknown))


async def test_bulk_result_fixture_round_trips(router: respx.MockRouter, client: CaptureClient) -> None:
    router.post("/persons/bulk").mock(return_value=ok(200, BULK_RESULT))
    result = await client.capture_bulk([PERSON], "key-1")
    assert result.successful == BULK_RESULT["successful"] and result.failed == [] and result.duplicates == []


async def test_undecodable_body_is_outcome_unknown(router: respx.MockRouter, make_client) -> None:
    router.post("/person").mock(side_effect=httpx.DecodingError("bad gzip"))
    with pytest.raises(OutcomeUnknown) as caught:
        await make_client(retry_policy=NO_RETRY).capture_person(PERSON, "key-1")
    assert "DecodingError" in caught.value.message


async def test_redirect_is_not_followed(router: respx.MockRouter, client: CaptureClient) -> None:
    """Following a redirect would hand the credentials to wherever it points."""
    route = router.get("/info").mock(
        return_value=httpx.Response(301, headers={"Location": "https://elsewhere.example.test/info"})
    )
    with pytest.raises(UnexpectedStatus) as caught:
        await client.info()
    assert caught.value.status_code == 301 and route.call_count == 1
    assert router.calls.call_count == 1


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"name": "Busy", "message": "try again", "statusCode": 503, "retryable": True}},
        {
            "success": False,
            "statusCode": 503,
            "timestamp": "yesterday",
            "error": {"name": "Busy", "message": "try again", "statusCode": 503, "retryable": True},
        },
    ],
    ids=["bare-error", "bad-timestamp"],
)
async def test_error_object_read_despite_an_imperfect_envelope(router: respx.MockRouter, client, body) -> None:
    """`error.retryable` decides whether a 503 is retried: it is read even if the envelope is off."""
    route = router.post("/person").mock(side_effect=[httpx.Response(503, json=body), ok(201, PERSON_RESULT)])
    await client.capture_person(PERSON, "key-1")
    assert route.call_count == 2


@pytest.mark.parametrize("body", [b"[]", b'{"error": "busy"}', b'{"error": {"name": "x"}}', b"\xff"])
async def test_unreadable_error_bodies_give_a_plain_error(router: respx.MockRouter, client, body: bytes) -> None:
    router.post("/person").mock(return_value=httpx.Response(503, content=body))
    with pytest.raises(ServiceUnavailable) as caught:
        await client.capture_person(PERSON, "key-1")
    assert caught.value.retryable is None and "without an error envelope" in caught.value.message
