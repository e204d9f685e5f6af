"""The API secret never reaches a log record, a rendered log line, an exception or a repr (spec 5)."""

from __future__ import annotations

import io
import json
import logging

import httpx
import pytest
import respx
import structlog

from connector import logs
from connector.api import CaptureClient, CaptureError, InsecureURLError, InvalidIdempotencyKey, RetryPolicy

from .conftest import API_KEY, API_SECRET, BASE, BULK_RESULT, INFO, PERSON, PERSON_RESULT, fail, ok

LOGGERS = ("", "httpx", "httpcore", "capture_sync")


@pytest.fixture
def rendered(debug_logs: io.StringIO, caplog: pytest.LogCaptureFixture) -> io.StringIO:
    """connector.logs at DEBUG as JSON into a StringIO, and caplog at DEBUG on every logger we use."""
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    return debug_logs


def texts_of(records: list[logging.LogRecord]) -> list[str]:
    out = []
    for record in records:
        out += [record.getMessage(), repr(record.msg), repr(record.args), repr(record.__dict__)]
        if record.exc_info:
            out.append(logging.Formatter().formatException(record.exc_info))
    return out


def assert_nowhere(secret: str, stream: io.StringIO, caplog: pytest.LogCaptureFixture, *things: object) -> None:
    lines = stream.getvalue()
    assert lines, "nothing was logged: the test would prove nothing"
    assert secret not in lines
    assert secret not in caplog.text
    for text in texts_of(caplog.records):
        assert secret not in text
    for thing in things:
        assert secret not in str(thing) and secret not in repr(thing)


def log_failure(exc: BaseException) -> None:
    """Log the way callers do: structlog with a traceback, a field holding the error, and stdlib."""
    log = structlog.get_logger("capture_sync.test")
    try:
        raise exc
    except BaseException:
        log.exception("call failed", error=exc)
        logging.getLogger("capture_sync.stdlib").error("call failed: %r", exc, exc_info=True)
    log.warning("call failed", error=exc, detail=repr(exc), args=exc.args)


async def test_secret_absent_on_every_path(rendered: io.StringIO, caplog: pytest.LogCaptureFixture) -> None:
    policy = RetryPolicy(max_attempts=2, initial_backoff_s=0.001, max_backoff_s=0.001)
    errors: list[BaseException] = []
    with respx.mock(base_url=BASE) as router:
        client = CaptureClient(BASE, API_KEY, API_SECRET, retry_policy=policy)
        try:
            router.get("/info").mock(return_value=ok(200, INFO))
            await client.info()
            router.post("/persons/bulk").mock(return_value=ok(200, BULK_RESULT))
            await client.capture_bulk([PERSON], "ok-bulk")
            responses = [
                fail(400, message="person data is invalid"),
                fail(400, message=f"bad header X-API-Secret: {API_SECRET}"),  # a server echoing headers
                fail(409, message="key in use"),
                fail(429, headers={"Retry-After": "0"}),
                fail(503, retryable=True),
                fail(503, retryable=False),
                fail(502),
                httpx.Response(502, text="<html>bad gateway</html>"),
                httpx.Response(201, text="not an envelope"),
                httpx.ReadTimeout("read timed out"),
                httpx.ConnectError("connection refused"),
                ok(201, PERSON_RESULT),
                fail(401, message="invalid credentials"),  # last: after a 401 the client sends nothing more
            ]
            for response in responses:
                route = router.post("/person")
                route.mock(side_effect=response) if isinstance(response, Exception) else route.mock(
                    return_value=response
                )
                try:
                    await client.capture_person(PERSON, "key-1")
                except CaptureError as exc:
                    errors.append(exc)
                    log_failure(exc)
            sent = router.calls.last.request
            assert sent.headers["X-API-Secret"] == API_SECRET  # it was on the wire
            structlog.get_logger("capture_sync.test").debug("request headers", headers=sent.headers)
            for bad_key in ("", "k" * 513):
                with pytest.raises(InvalidIdempotencyKey) as caught:
                    await client.capture_person(PERSON, bad_key)
                errors.append(caught.value)
                log_failure(caught.value)
        finally:
            await client.aclose()
    for url in (
        "http://capture.example.test/api",
        f"https://u:{API_SECRET}@capture.example.test/",
        f"https://capture.example.test/?key={API_SECRET}",
    ):
        with pytest.raises(InsecureURLError) as refused:
            CaptureClient(url, API_KEY, API_SECRET)
        errors.append(refused.value)
        log_failure(refused.value)

    assert len(errors) == 12 + 2 + 3
    events = [json.loads(line) for line in rendered.getvalue().splitlines()]
    assert sum(e["event"] == "capture_api.attempt" for e in events) >= 12
    assert_nowhere(API_SECRET, rendered, caplog, client, *errors)


async def test_secret_absent_over_real_sockets(
    rendered: io.StringIO, caplog: pytest.LogCaptureFixture, sandbox
) -> None:
    """The same over real sockets to the sandbox on 127.0.0.1, at DEBUG for every logger: the client's
    own HTTP/1.1 connections (connector/api/_http11.py), which carry the requests when no proxy is set."""
    key, secret = sandbox.create_client(rate_limit=1000)
    policy = RetryPolicy(max_attempts=1)
    async with CaptureClient(sandbox.base_url, key, secret, retry_policy=policy) as client:
        await client.info()
        await client.capture_person(PERSON, "real-1")
        with pytest.raises(CaptureError) as conflict:  # same key, different body
            await client.capture_person({**PERSON, "name": "Other"}, "real-1")
        await client.capture_bulk([PERSON], "real-bulk")
        log_failure(conflict.value)
    async with CaptureClient(sandbox.base_url, key, API_SECRET, retry_policy=policy) as wrong:
        with pytest.raises(CaptureError) as unauthorized:
            await wrong.info()
        log_failure(unauthorized.value)
    assert unauthorized.value.status_code == 401
    assert client._exchange._direct is not None, "went over the client's own connections"
    for leaked in (secret, API_SECRET):
        assert_nowhere(leaked, rendered, caplog, client, wrong, conflict.value, unauthorized.value)


def test_logs_mask_a_registered_secret(rendered: io.StringIO, caplog: pytest.LogCaptureFixture) -> None:
    logs.register_secret("hush-7c1e-registered")
    log = structlog.get_logger("capture_sync.test")
    log.info("configured", dsn="postgres://app:hush-7c1e-registered@db/crm", nested={"list": ["hush-7c1e-registered"]})
    log.debug("object", obj=httpx.Headers({"X-Token": "hush-7c1e-registered"}))
    logging.getLogger("somelib").warning("connecting with %s", "hush-7c1e-registered")
    out = rendered.getvalue()
    assert "hush-7c1e-registered" not in out
    assert out.count(logs.MASK) >= 3
    assert "postgres://***:***@db/crm" in out  # a URL's userinfo is masked whether registered or not


def test_short_values_are_not_registered(rendered: io.StringIO) -> None:
    logs.register_secret("abc")
    structlog.get_logger("capture_sync.test").info("letters", text="abcdef")
    assert '"text": "abcdef"' in rendered.getvalue()


def rendered_events(stream: io.StringIO) -> dict[str, dict]:
    return {e["event"]: e for e in map(json.loads, stream.getvalue().splitlines())}


def test_pii_masked_below_debug_kept_at_debug(rendered: io.StringIO) -> None:
    log = structlog.get_logger("capture_sync.test")
    contact = {"email": "ada@example.test", "phone": "+44 20 7946 0000"}
    note = "write to ada@example.test or call +44 20 7946 0000"
    log.info("at info", **contact, note=note, count=3)
    log.warning("at warning", note=note)
    log.debug("at debug", **contact, note=note)
    logging.getLogger("somelib").info("stdlib at info: %s", note)
    logging.getLogger("somelib").debug("stdlib at debug: %s", note)
    events = rendered_events(rendered)

    info = events["at info"]
    assert info["email"] == info["phone"] == "<redacted>"
    assert info["note"] == "write to <email> or call <phone>" and info["count"] == 3
    assert events["at warning"]["note"] == "write to <email> or call <phone>"
    assert events["stdlib at info: write to <email> or call <phone>"]["level"] == "info"

    debug = events["at debug"]
    assert (debug["email"], debug["phone"], debug["note"]) == (contact["email"], contact["phone"], note)
    assert f"stdlib at debug: {note}" in events
    assert all("T" in e["timestamp"] and "<phone>" not in e["timestamp"] for e in events.values())


def test_pii_masked_at_info_level_config(caplog: pytest.LogCaptureFixture) -> None:
    """At level INFO, debug events are dropped and the rest are masked."""
    root = logging.getLogger()
    saved_level, saved_handlers = root.level, list(root.handlers)  # structlog: put back by a fixture of conftest
    stream = io.StringIO()
    try:
        logs.configure(level="INFO", json=True, stream=stream)
        log = structlog.get_logger("capture_sync.test")
        log.debug("hidden", email="ada@example.test")
        log.info("shown", email="ada@example.test")
    finally:
        for handler in root.handlers[:]:
            if handler not in saved_handlers:
                root.removeHandler(handler)
        root.setLevel(saved_level)
    out = stream.getvalue()
    assert "hidden" not in out and "ada@example.test" not in out and '"email": "<redacted>"' in out
