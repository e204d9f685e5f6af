"""DaemonHealth as the requests tell it: an outage lasts from the first request the API did not
answer to the first capture request it answered (a GET /info that answers ends nothing), a
non-retryable answer is a stall (said at once), not an outage; `describe` is JSON."""

from __future__ import annotations

import json
from pathlib import Path

import structlog

from connector.api import Attempt, CaptureError, OutcomeUnknown, ServiceUnavailable
from connector.health import DaemonHealth

T0 = 1_700_000_000.0


def attempt(
    at: float,
    operation: str = "capture_bulk",
    status: int | None = 200,
    error: CaptureError | None = None,
    persons: int = 10,
) -> Attempt:
    return Attempt(operation, "key-0123456789abcdef", at, 0.5, status, error, persons=persons)


def down(at: float, operation: str = "capture_bulk") -> Attempt:
    return attempt(at, operation, None, OutcomeUnknown("connection failed (ConnectError)"))


def test_an_outage_runs_from_the_first_failed_request_to_the_first_answered_capture() -> None:
    health = DaemonHealth(("signups",), Path("c.toml"))
    health.observe(down(T0, "info"))  # a GET /info with no answer: not an outage yet
    assert health.outage_since is None and health.ready is False
    health.observe(down(T0 + 2))  # a capture request with none: the outage began at the first
    assert health.outage_since == T0
    health.observe(attempt(T0 + 30, "info"))  # GET /info answers: captures may still fail
    assert health.outage_since == T0
    health.observe(attempt(T0 - 1))  # a capture sent before it began, answered late: ends nothing
    assert health.outage_since == T0
    health.observe(attempt(T0 + 60))  # the first capture answered after it: over, at its answer
    assert health.outage_since is None
    assert (health.last_outage.since, health.last_outage.until) == (T0, T0 + 60.5)  # type: ignore[union-attr]


def test_a_non_retryable_answer_is_a_stall_said_at_once_not_an_outage() -> None:
    health = DaemonHealth(("signups",), Path("c.toml"))
    fatal = ServiceUnavailable(
        "capture failed", status_code=503, name="ServiceUnavailableError", code="capture_failed", retryable=False
    )
    with structlog.testing.capture_logs() as logs:
        health.observe(attempt(T0, status=503, error=fatal, persons=100))
    assert health.outage_since is None
    [said] = logs
    assert (said["event"], said["log_level"], said["entries"]) == ("batch.stalled", "warning", 100)
    assert said["reason"] == "HTTP 503 ServiceUnavailableError/capture_failed"
    assert "capture failed" not in json.dumps(said)  # the answer's message may quote the request: never said
    assert (
        said["then"]
        == "not retried automatically (spec 4.4 rule 4): `capture-sync replay -c c.toml` re-sends them with the same keys"
    )
    described = json.loads(json.dumps(health.describe(T0 + 5)))
    assert described["stalled"]["entries"] == 100 and described["stalled"]["since"] == T0
    assert described["outage"] is None and described["auth"] is None
