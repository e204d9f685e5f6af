"""Fixtures for the Capture API client's unit tests: a respx router and envelope builders."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
import respx

from connector.api import CaptureClient, RetryPolicy

BASE = "https://capture.example.test/api/v1/capture"
API_KEY = "key-test-001"
API_SECRET = "SEKRET-4f9a-do-not-log"
PERSON_ID = "5f0c6c1e-9a52-4e8f-8d0b-7b0c3c7a1d11"
TIMESTAMP = "2026-11-22T08:00:00Z"

# Tiny backoff so retries take milliseconds; the decisions are what the tests look at.
FAST = RetryPolicy(max_attempts=4, max_elapsed_s=5.0, initial_backoff_s=0.001, max_backoff_s=0.005)


def ok(status: int, data: Any, **extra: Any) -> httpx.Response:
    """A success envelope (spec 2.3)."""
    return httpx.Response(
        status, json={"success": True, "statusCode": status, "timestamp": TIMESTAMP, "data": data, **extra}
    )


def fail(
    status: int, name: str = "Error", message: str = "it failed", headers: dict[str, str] | None = None, **error: Any
) -> httpx.Response:
    """An error envelope (spec 7); `error` adds fields such as code or retryable."""
    body = {
        "success": False,
        "statusCode": status,
        "timestamp": TIMESTAMP,
        "error": {"name": name, "message": message, "statusCode": status, **error},
    }
    return httpx.Response(status, json=body, headers=headers)


INFO = {
    "client_name": "Website forms",
    "rate_limit": 120,
    "default_lead_source": "web",
    "has_custom_field_mapping": True,
    "allowed_origins": ["https://example.test"],
}
PERSON = {"name": "Ada Lovelace", "email": "ada@example.test"}
PERSON_RESULT = {
    "person_id": PERSON_ID,
    "status": "created",
    "action": "create",
    "duplicate_detected": False,
    "idempotent_replay": False,
}
BULK_RESULT = {"successful": [{"index": 0, "person_id": PERSON_ID}], "duplicates": [], "failed": []}


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as mock:
        yield mock


@pytest.fixture
async def make_client() -> AsyncIterator[Callable[..., CaptureClient]]:
    """Build CaptureClients against BASE (retry policy FAST unless given); all are closed after."""
    made: list[CaptureClient] = []

    def make(**options: Any) -> CaptureClient:
        options.setdefault("retry_policy", FAST)
        client = CaptureClient(options.pop("base_url", BASE), API_KEY, API_SECRET, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()


@pytest.fixture
async def client(make_client: Callable[..., CaptureClient]) -> CaptureClient:
    return make_client()
