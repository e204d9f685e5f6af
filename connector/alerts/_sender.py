"""Posting alert bodies to one webhook in the background.

A pass never waits for a webhook: `post` puts the body on a bounded queue and returns, and one task
per webhook sends them in order, each retried with exponential backoff (a timeout, a lost
connection, 429 and 5xx are retried; another 4xx is a mistake in the URL or the body, and is not).
If the webhook stays down until the queue is full, the oldest body is dropped with a log line: the
newest state of a condition is the one worth telling. The URL is never logged: httpx's request
lines show only its origin (`connector.redact.hide_path`), and no redirect is followed.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import httpx
import structlog
from pydantic import SecretStr
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from ..redact import hide_path

log = structlog.get_logger("capture_sync.alerts")


@dataclass(frozen=True)
class SendPolicy:
    """How hard one body is tried: up to `max_attempts`, waits doubling from `initial_backoff_s`
    to `max_backoff_s` (about four minutes in all by default), then it is given up with a log line."""

    initial_backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    max_attempts: int = 10
    queue_size: int = 50


class WebhookRefused(Exception):
    """The webhook answered with a status other than 2xx."""

    def __init__(self, status_code: int) -> None:
        redirect = ": a redirect, not followed (the URL is a credential)" if 300 <= status_code < 400 else ""
        super().__init__(f"HTTP {status_code}{redirect}")
        self.status_code = status_code


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, WebhookRefused):
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, httpx.TransportError)


@dataclass(frozen=True)
class Outgoing:
    """A body and the words that name it in log lines (condition, subject, status: never its text)."""

    body: dict[str, Any]
    about: dict[str, Any]


class Webhook:
    """One `[[alerts]]` entry's webhook; use from the event loop only."""

    def __init__(
        self,
        label: str,
        url: SecretStr,
        *,
        timeout_s: float,
        policy: SendPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.label, self._url, self._timeout_s = label, url, timeout_s
        hide_path(url.get_secret_value())  # httpx logs each POST's URL: its path is the token
        self.policy = policy or SendPolicy()
        self._transport = transport
        self._queue: asyncio.Queue[Outgoing] = asyncio.Queue(self.policy.queue_size)
        self._client: httpx.AsyncClient | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    def post(self, body: dict[str, Any], **about: Any) -> None:
        """Queue `body` for sending; returns at once. A full queue drops its oldest body. `about`
        names it in log lines."""
        if self._closed:  # a pass that outlived the daemon's stop: no task may start after aclose
            log.warning("alert.unsent", alert=self.label, **about, reason="the daemon stopped")
            return
        if self._queue.full():
            dropped = self._queue.get_nowait()
            self._queue.task_done()
            log.warning(
                "alert.dropped",
                alert=self.label,
                **dropped.about,
                reason=f"{self.policy.queue_size} alerts wait for a webhook that keeps failing",
            )
        self._queue.put_nowait(Outgoing(body, about))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work(), name=f"alerts:{self.label}")

    async def _work(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._deliver(item)
            finally:
                self._queue.task_done()

    async def _deliver(self, item: Outgoing) -> None:
        retrying = AsyncRetrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(self.policy.max_attempts),
            wait=wait_exponential(multiplier=self.policy.initial_backoff_s, max=self.policy.max_backoff_s)
            + wait_random(0, self.policy.initial_backoff_s / 2),
            before_sleep=lambda state: self._failed(item, state),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    await self._send(item.body)
        except (httpx.HTTPError, WebhookRefused) as exc:
            log.error(
                "alert.undelivered",
                alert=self.label,
                **item.about,
                error=_error(exc),
                then="given up; the next change of a condition is sent as usual",
            )
        else:
            log.info("alert.sent", alert=self.label, **item.about)

    def _failed(self, item: Outgoing, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "alert.send_failed",
            alert=self.label,
            **item.about,
            attempt=state.attempt_number,
            error=_error(exc),
            retry_in_s=round(wait, 2),
        )

    async def _send(self, body: dict[str, Any]) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout_s, transport=self._transport, follow_redirects=False)
        response = await self._client.post(self._url.get_secret_value(), json=body)
        if not response.is_success:
            raise WebhookRefused(response.status_code)

    async def aclose(self, timeout_s: float) -> None:
        """Give the queued bodies `timeout_s` to go, then stop; what is left is said in one line."""
        self._closed = True
        if self._worker is not None and not self._worker.done():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._queue.join(), timeout_s)
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        if self._queue.qsize():
            log.warning("alert.unsent", alert=self.label, count=self._queue.qsize(), reason="the daemon stopped")
        if self._client is not None:
            await self._client.aclose()


def _error(exc: BaseException | None) -> str:
    """The error's class and text: httpx's texts name the failure, not the URL (which is masked anyway)."""
    if exc is None:
        return "unknown"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
