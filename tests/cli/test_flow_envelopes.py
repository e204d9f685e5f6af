"""The flow's envelope step (spec 2.3 and 7) refuses what a lenient client would quietly accept."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from connector.flow._record import Exchange, envelope_problem

INFO = {"client_name": "c", "rate_limit": 5, "has_custom_field_mapping": False}
OK: dict[str, Any] = {"success": True, "statusCode": 200, "timestamp": "2026-11-24T04:00:00Z", "data": INFO}
ERROR: dict[str, Any] = {
    "success": False,
    "statusCode": 401,
    "timestamp": "2026-11-24T04:00:00.123+01:00",
    "error": {"name": "UnauthorizedError", "message": "no", "statusCode": 401, "retryable": False},
}


def exchange(status: int, body: dict[str, Any]) -> Exchange:
    response = httpx.Response(status, content=json.dumps(body).encode(), headers={"content-type": "application/json"})
    return Exchange("GET", "/api/v1/capture/info", response)


def test_spec_envelopes_pass() -> None:
    assert envelope_problem(exchange(200, OK)) is None
    assert envelope_problem(exchange(401, ERROR)) is None


@pytest.mark.parametrize(
    ("status", "body", "named"),
    [
        (200, {**OK, "statusCode": "200"}, "statusCode"),
        (200, {**OK, "success": 1}, "success"),
        (200, {**OK, "timestamp": "1700000000"}, "timestamp"),
        (200, {**OK, "timestamp": "2024-01-01"}, "timestamp"),
        (200, {**OK, "data": {**INFO, "rate_limit": "60"}}, "rate_limit"),
        (200, {**OK, "data": {**INFO, "has_custom_field_mapping": "true"}}, "has_custom_field_mapping"),
        (200, {**OK, "statusCode": 201}, "statusCode"),
        (401, {**ERROR, "error": {**ERROR["error"], "statusCode": "401"}}, "statusCode"),
        (401, {**ERROR, "error": {**ERROR["error"], "retryable": "yes"}}, "retryable"),
        (401, {**ERROR, "success": 0}, "success"),
    ],
)
def test_a_lenient_reading_is_not_a_pass(status: int, body: dict[str, Any], named: str) -> None:
    problem = envelope_problem(exchange(status, body))
    assert problem is not None and named in problem, problem
