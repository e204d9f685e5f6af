"""Each decision of the retry policy (spec 4.4, design 4), observed on the recorded requests."""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass, field

import httpx
import pytest
import respx

from connector.api import (
    Attempt,
    BadRequest,
    CaptureClient,
    IdempotencyConflict,
    OutcomeUnknown,
    RateLimited,
    RetryPolicy,
    ServiceUnavailable,
    Unauthorized,
)
from connector.api.client import parse_retry_after

from .conftest import API_SECRET, BULK_RESULT, INFO, PERSON, PERSON_RESULT, fail, ok

CREATED = ok(201, PERSON_RESULT)


def assert_same_request_resent(route: respx.Route, times: int) -> None:
    """Every attempt carried the same key, the same credentials and byte-identical content."""
    requests = [call.request for call in route.calls]
    assert len(requests) == times
    first = requests[0]
    for again in requests[1:]:
        assert again.content == first.content
        for header in ("Idempotency-Key", "X-API-Key", "X-API-Secret", "Content-Type"):
            assert again.headers[header] == first.headers[header]


@pytest.mark.parametrize(
    "failure", [httpx.ReadTimeout("slow"), httpx.ConnectError("refused"), httpx.RemoteProtocolError("dropped")]
)
async def test_transport_failure_retried_with_same_key_and_body(router, client: CaptureClient, failure) -> None:
    route = router.post("/person").mock(side_effect=[failure, failure, CREATED])
    result = await client.capture_person(PERSON, "same-key")
    assert result.person_id is not None
    assert_same_request_resent(route, 3)
    assert route.calls.last.request.headers["Idempotency-Key"] == "same-key"


async def test_bulk_timeout_retried_with_identical_bytes(router, client: CaptureClient) -> None:
    route = router.post("/persons/bulk").mock(side_effect=[httpx.ReadTimeout("slow"), ok(200, BULK_RESULT)])
    persons = [{**PERSON, "custom_fields": {"ünïcode": "✓", "n": 1.5}, "idempotency_key": "p-1"}] * 3
    await client.capture_bulk(persons, "bulk-key")
    assert_same_request_resent(route, 2)


async def test_malformed_2xx_is_resent_under_the_same_key(router, client: CaptureClient) -> None:
    route = router.post("/person").mock(side_effect=[httpx.Response(201, text="oops"), CREATED])
    await client.capture_person(PERSON, "k")
    assert_same_request_resent(route, 2)


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (fail(409, name="IdempotencyConflict", retryable=True), IdempotencyConflict),
        (fail(401, name="Unauthorized", retryable=True), Unauthorized),
        (fail(400, name="ValidationError", retryable=True), BadRequest),
        (fail(503, name="Unavailable", retryable=False), ServiceUnavailable),
        (fail(503, name="Unavailable"), ServiceUnavailable),
    ],
    ids=["409", "401", "400", "503-not-retryable", "503-retryable-absent"],
)
async def test_never_retried(router, client: CaptureClient, response, error) -> None:
    route = router.post("/person").mock(side_effect=[response, CREATED])
    with pytest.raises(error):
        await client.capture_person(PERSON, "k")
    assert route.call_count == 1


async def test_401_on_info_not_retried(router, client: CaptureClient) -> None:
    route = router.get("/info").mock(side_effect=[fail(401), ok(200, INFO)])
    with pytest.raises(Unauthorized):
        await client.info()
    assert route.call_count == 1


async def test_retryable_503_retried_then_succeeds(router, client: CaptureClient) -> None:
    busy = fail(503, name="ServiceUnavailable", retryable=True)
    route = router.post("/person").mock(side_effect=[busy, busy, CREATED])
    await client.capture_person(PERSON, "k")
    assert_same_request_resent(route, 3)


@pytest.mark.parametrize("retry_after", [None, "0", "0.01", "bogus", "nan", "-5"])
async def test_429_retried_then_succeeds(router, client: CaptureClient, retry_after) -> None:
    headers = {"Retry-After": retry_after} if retry_after is not None else None
    route = router.post("/person").mock(side_effect=[fail(429, headers=headers), CREATED])
    await client.capture_person(PERSON, "k")
    assert_same_request_resent(route, 2)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("7", 7.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        ("-3", None),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after_seconds(header, expected) -> None:
    assert parse_retry_after(header) == expected


def test_parse_retry_after_http_date() -> None:
    future = email.utils.formatdate(time.time() + 90, usegmt=True)
    assert 80 <= parse_retry_after(future) <= 91
    assert parse_retry_after(future) % 1 == 0  # whole seconds, rounded up: the limiter reads a fraction as exact
    past = email.utils.formatdate(time.time() - 90, usegmt=True)
    assert parse_retry_after(past) == 0.0
    assert 80 <= parse_retry_after(email.utils.formatdate(time.time() + 90)) <= 91  # "-0000" zone


async def test_429_http_date_in_past_retried(router, client: CaptureClient) -> None:
    past = email.utils.formatdate(time.time() - 5, usegmt=True)
    route = router.post("/person").mock(side_effect=[fail(429, headers={"Retry-After": past}), CREATED])
    await client.capture_person(PERSON, "k")
    assert route.call_count == 2


@pytest.mark.parametrize("header", ["3600", "Wed, 21 Oct 2099 07:28:00 GMT"])
async def test_retry_after_beyond_the_time_budget_stops_at_once(router, make_client, header) -> None:
    """Waiting an hour under a 5 s budget would break the bound: give the 429 back instead."""
    route = router.post("/person").mock(side_effect=[fail(429, headers={"Retry-After": header}), CREATED])
    policy = RetryPolicy(max_attempts=5, max_elapsed_s=5.0, initial_backoff_s=0.001, max_backoff_s=0.001)
    with pytest.raises(RateLimited) as caught:
        await make_client(retry_policy=policy).capture_person(PERSON, "k")
    assert caught.value.retry_after is not None and caught.value.retry_after > 5
    assert route.call_count == 1


def _state_after(exc: BaseException, attempt: int = 1):
    from tenacity import RetryCallState

    state = RetryCallState(None, None, (), {})
    state.attempt_number = attempt
    try:
        raise exc
    except BaseException as raised:
        state.set_exception((type(raised), raised, raised.__traceback__))
    return state


def test_wait_honours_retry_after_and_caps_it() -> None:
    policy = RetryPolicy(initial_backoff_s=0.5, max_backoff_s=2.0, max_retry_after_s=60.0)
    assert policy.wait(_state_after(RateLimited("slow", status_code=429, retry_after=12.5))) == 12.5
    assert policy.wait(_state_after(RateLimited("slow", status_code=429, retry_after=999))) == 60.0


def test_wait_backs_off_exponentially_with_jitter_and_a_cap() -> None:
    policy = RetryPolicy(initial_backoff_s=0.5, max_backoff_s=2.0)
    no_header = RateLimited("slow", status_code=429)
    waits = [policy.wait(_state_after(no_header, attempt=n)) for n in (1, 2, 3, 8) for _ in range(50)]
    assert all(0 <= w <= 2.0 for w in waits)
    assert len(set(waits)) > 10, "jitter: waits differ"
    first = [policy.wait(_state_after(OutcomeUnknown("t"), attempt=1)) for _ in range(50)]
    assert max(first) <= 0.5 * 2  # the first backoff stays within the initial window


async def test_attempts_bounded_by_max_attempts(router, make_client) -> None:
    route = router.post("/person").mock(side_effect=httpx.ReadTimeout("slow"))
    policy = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.001)
    with pytest.raises(OutcomeUnknown):
        await make_client(retry_policy=policy).capture_person(PERSON, "k")
    assert route.call_count == 3


async def test_429_bounded_by_max_attempts(router, make_client) -> None:
    route = router.post("/person").mock(return_value=fail(429, headers={"Retry-After": "0"}))
    policy = RetryPolicy(max_attempts=4, initial_backoff_s=0.001, max_backoff_s=0.001)
    with pytest.raises(RateLimited):
        await make_client(retry_policy=policy).capture_person(PERSON, "k")
    assert route.call_count == 4


async def test_attempts_bounded_by_max_elapsed(router, make_client) -> None:
    route = router.post("/person").mock(side_effect=httpx.ConnectError("refused"))
    policy = RetryPolicy(max_attempts=10_000, max_elapsed_s=0.1, initial_backoff_s=0.02, max_backoff_s=0.02)
    with pytest.raises(OutcomeUnknown):
        await make_client(retry_policy=policy).capture_person(PERSON, "k")
    assert 1 <= route.call_count < 100


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="initial_backoff_s <= max_backoff_s"):
        RetryPolicy(initial_backoff_s=2, max_backoff_s=1)


@pytest.mark.parametrize("is_async", [False, True])
async def test_on_attempt_reports_every_http_attempt(router, make_client, is_async: bool) -> None:
    seen: list[Attempt] = []

    def record(attempt: Attempt) -> None:
        seen.append(attempt)

    async def record_async(attempt: Attempt) -> None:
        seen.append(attempt)

    router.post("/person").mock(
        side_effect=[
            httpx.ReadTimeout("slow"),
            fail(503, retryable=True),
            fail(429, headers={"Retry-After": "0"}),
            CREATED,
        ]
    )
    client = make_client(on_attempt=record_async if is_async else record)
    await client.capture_person(PERSON, "the-key")
    assert [a.status_code for a in seen] == [None, 503, 429, 201]
    assert [type(a.error).__name__ if a.error else None for a in seen] == [
        "OutcomeUnknown",
        "ServiceUnavailable",
        "RateLimited",
        None,
    ]
    assert {a.operation for a in seen} == {"capture_person"}
    assert {a.idempotency_key for a in seen} == {"the-key"}
    assert all(a.latency_s >= 0 for a in seen)
    assert [a.started_at for a in seen] == sorted(a.started_at for a in seen)


async def test_on_attempt_sees_terminal_errors_too(router, make_client) -> None:
    seen: list[Attempt] = []
    router.get("/info").mock(return_value=fail(401))
    with pytest.raises(Unauthorized):
        await make_client(on_attempt=seen.append).info()
    assert len(seen) == 1 and seen[0].status_code == 401 and isinstance(seen[0].error, Unauthorized)
    assert seen[0].idempotency_key is None and seen[0].operation == "info"


@dataclass
class RecordingGate:
    acquired: int = 0
    rate_limited: list[float | None] = field(default_factory=list)

    answered: list[int] = field(default_factory=list)
    unanswered: list[int] = field(default_factory=list)

    async def acquire(self, cost: int = 1) -> None:
        self.acquired += 1

    def on_answered(self, cost: int = 1) -> None:
        self.answered.append(cost)

    def on_rate_limited(self, retry_after: float | None, cost: int = 1) -> None:
        self.rate_limited.append(retry_after)

    def on_unanswered(self, cost: int = 1) -> None:
        self.unanswered.append(cost)


async def test_rate_gate_acquired_per_attempt_and_told_of_429(router, make_client) -> None:
    gate = RecordingGate()
    router.post("/persons/bulk").mock(
        side_effect=[
            fail(429, headers={"Retry-After": "0"}),
            fail(429),
            httpx.ReadTimeout("slow"),
            ok(200, BULK_RESULT),
        ]
    )
    await make_client(rate_gate=gate).capture_bulk([PERSON], "k")
    assert gate.acquired == 4
    assert gate.rate_limited == [0.0, None]
    assert gate.unanswered == [1] and gate.answered == [1]  # the timeout, then the 200


async def test_rate_gate_not_told_of_other_errors(router, make_client) -> None:
    gate = RecordingGate()
    router.post("/person").mock(side_effect=[fail(503, retryable=True), CREATED])
    await make_client(rate_gate=gate).capture_person(PERSON, "k")
    assert gate.acquired == 2 and gate.rate_limited == []


async def test_secret_sent_on_retries(router, client: CaptureClient) -> None:
    route = router.get("/info").mock(side_effect=[httpx.ConnectError("refused"), ok(200, INFO)])
    await client.info()
    assert [c.request.headers["X-API-Secret"] for c in route.calls] == [API_SECRET, API_SECRET]
