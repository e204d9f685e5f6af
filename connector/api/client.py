"""Async client for the three Capture API operations (spec 4).

Every call goes through `_call`: rate gate, one HTTP attempt, envelope parsing into a typed result
or a typed exception, an `Attempt` report, and the retry policy around all of it. A retry re-sends
the very same bytes under the very same Idempotency-Key.

A 401 may mean the secret was rotated (spec 5: regenerating it stops the old one at once). When the
client was given a way to re-read its credentials, it does so once: a changed pair is verified with
GET /info and put in use, and the request in hand goes again under its same key and bytes.

A 401 that this does not cure latches the client: from then on no request leaves under the refused
pair (one still waiting at the rate gate or in a retry's backoff fails at once with the same
Unauthorized; those already sent may finish), until `use_credentials` verifies a pair again. A
refused pair would only be refused again, and each refusal is one more request the API counts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

import httpx
from pydantic import BaseModel, SecretStr

from .. import logs, tracing
from ..logs import register_secret
from ._exchange import CredentialPair, Credentials, Exchange, Reply
from ._wire import check_base_url, check_idempotency_key, parse_response, parse_retry_after
from .encoding import encode_json, persons_in
from .errors import CaptureError, OutcomeUnknown, RateLimited, Unauthorized
from .models import (
    MAX_BULK_PERSONS,
    BulkCaptureResult,
    BulkPersonInput,
    ClientInfo,
    PersonCaptureResult,
    PersonInput,
    encode_bulk,
)
from .retry import NO_RETRY, RetryPolicy

__all__ = [
    "Attempt",
    "CaptureClient",
    "CredentialPair",
    "RateGate",
    "check_base_url",
    "check_idempotency_key",
    "parse_retry_after",
]

log = logs.get_logger("capture_sync.api")

R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt, as the ledger's attempts table records it."""

    operation: str
    idempotency_key: str | None
    started_at: float
    latency_s: float
    status_code: int | None
    error: CaptureError | None = None
    number: int = 1  # its place among the attempts of one logical request: above 1, a retry
    persons: int = 1  # the persons it carried: a bulk request's batch size (a stall's entries)


class _Request(NamedTuple):
    """One logical request: every attempt sends these same bytes under this same key."""

    method: str
    path: str
    body: bytes | None
    key: str | None
    operation: str
    cost: int = 1  # what the rate limit may count: the persons it carries


class _NotSent(Unauthorized):
    """A request the latch kept back: the API refused the credentials before it could go."""


class RateGate(Protocol):
    """What the client needs from a client-side rate limiter. `cost` is the persons a request
    carries (1 for GET /info and POST /person): the server may count persons, not requests."""

    async def acquire(self, cost: int = 1) -> None: ...

    def on_answered(self, cost: int = 1) -> None: ...

    def on_rate_limited(self, retry_after: float | None, cost: int = 1) -> None: ...

    def on_unanswered(self, cost: int = 1) -> None: ...


class CaptureClient:
    """One API client's connection to the Capture API: pooled, keep-alive, retrying per spec 4.4."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        api_secret: str | SecretStr,
        *,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        retry_policy: RetryPolicy | None = None,
        allow_insecure_http: bool = False,
        max_connections: int = 10,
        rate_gate: RateGate | None = None,
        on_attempt: Callable[[Attempt], Awaitable[None] | None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        credentials_from: str | None = None,
        reload_credentials: Callable[[], CredentialPair | None] | None = None,
    ) -> None:
        """`reload_credentials` re-reads the pair where it came from (None when it cannot be read);
        `credentials_from` says where that is, in the message of a 401 that renewal did not cure."""
        if not api_key:
            raise ValueError("an API key is required")
        secret = api_secret if isinstance(api_secret, SecretStr) else SecretStr(api_secret)
        if not secret.get_secret_value():
            raise ValueError("an API secret is required")
        register_secret(secret.get_secret_value())
        self.base_url = check_base_url(base_url, allow_insecure_http=allow_insecure_http)
        self.retry_policy = retry_policy or RetryPolicy()
        self.rate_gate = rate_gate
        self.on_attempt = on_attempt  # the caller in hand (the delivery engine sets its own per run)
        # Watchers of every attempt whoever the caller is (the daemon's metrics); they must not block.
        self.observers: list[Callable[[Attempt], None]] = []
        # Called before each request that carries an idempotency key (one that sends persons), after
        # any wait for the rate limit: it raises to stop the request going (a daemon whose lease ran out).
        self.send_gate: Callable[[], None] | None = None
        self.credentials_from = credentials_from
        self.reload_credentials = reload_credentials
        self._auth = Credentials(api_key, secret)
        self._generation = 0  # bumped each time another pair is put in use
        self._renewing = asyncio.Lock()
        self._refused: CredentialPair | None = None  # the last re-read pair GET /info refused
        self._latch: Unauthorized | None = None  # the refusal that stopped the sending; None: requests go
        self._refused_at: float | None = None  # when the request that met it was sent
        self._last_401_at: float | None = None
        self._exchange = Exchange(
            self.base_url,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_connections=max_connections,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"CaptureClient(base_url={str(self.base_url)!r})"

    async def __aenter__(self) -> CaptureClient:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._exchange.aclose()

    async def info(self, *, retry: bool = True) -> ClientInfo:
        """GET /info: the client's settings; the first call any integration should make. Without
        `retry`, one attempt: a quick look that an outage must not hold up."""
        return await self._call("GET", "/info", None, None, ClientInfo, "info", None if retry else NO_RETRY)

    async def capture_person(
        self, person: PersonInput | dict[str, Any] | bytes, idempotency_key: str
    ) -> PersonCaptureResult:
        """POST /person under `idempotency_key`. Pass bytes to resend an earlier body exactly."""
        check_idempotency_key(idempotency_key)
        if isinstance(person, bytes):
            body = person
        else:
            model = person if isinstance(person, PersonInput) else PersonInput.model_validate(person)
            body = encode_json(model.to_json_dict())
        return await self._call("POST", "/person", body, idempotency_key, PersonCaptureResult, "capture_person")

    async def capture_bulk(
        self,
        persons: Sequence[BulkPersonInput | dict[str, Any]] | bytes,
        idempotency_key: str,
        *,
        cost: int | None = None,
    ) -> BulkCaptureResult:
        """POST /persons/bulk under `idempotency_key`. Pass bytes to resend an earlier body exactly,
        and then `cost`, the persons it holds (for the rate gate; read from the body when left out).

        A 200 means the batch completed: the caller must inspect all three result arrays.
        """
        check_idempotency_key(idempotency_key)
        if isinstance(persons, bytes):
            body = persons
            if cost is None:
                cost = persons_in(body)
        else:
            cost = len(persons)
            if not 1 <= len(persons) <= MAX_BULK_PERSONS:
                raise ValueError(f"a bulk request takes 1 to {MAX_BULK_PERSONS} persons, got {len(persons)}")
            body = encode_bulk(
                [p if isinstance(p, BulkPersonInput) else BulkPersonInput.model_validate(p) for p in persons]
            )
        return await self._call(
            "POST", "/persons/bulk", body, idempotency_key, BulkCaptureResult, "capture_bulk", cost=cost
        )

    @property
    def refused_since(self) -> float | None:
        """When the request that met the refusal in force was sent; None while requests go out."""
        return self._refused_at if self._latch is not None else None

    def uses(self, pair: CredentialPair) -> bool:
        """Is `pair` the one requests carry now?"""
        return self._auth.holds(pair)

    async def use_credentials(self, pair: CredentialPair) -> ClientInfo:
        """Verify `pair` with GET /info and put it in use for every request from now on; raises
        Unauthorized (the pair in use stays) when the API refuses it."""
        candidate = Credentials(pair.api_key, pair.api_secret)
        register_secret(pair.api_secret.get_secret_value())
        info = await self._retrying(_Request("GET", "/info", None, None, "info"), ClientInfo, auth=candidate)
        if not self._auth.holds(pair):
            self._auth.use(pair)
            self._generation += 1
            log.info("credentials.renewed", credentials=pair.origins())
        self.credentials_from = pair.origins()
        if self._latch is not None:
            log.info("credentials.accepted", credentials=pair.origins(), then="requests go out again")
        self._latch = self._refused_at = None
        return info

    async def _renewed(self, generation: int) -> bool:
        """After a 401 on a request sent under pair `generation`: is another working pair in use
        now? Re-reads the credentials once; an unchanged pair, or one the API refuses, is no cure."""
        if self.reload_credentials is None:
            return False
        async with self._renewing:  # concurrent 401s re-read and verify once
            if self._generation != generation:
                return True  # another request renewed the pair while this one was answered
            pair = self.reload_credentials()
            if pair is None or self._auth.holds(pair) or pair == self._refused:
                return False
            try:
                await self.use_credentials(pair)
            except Unauthorized:
                self._refused = pair
                log.error("credentials.refused", credentials=pair.origins())
                return False
            return True

    async def _call(
        self,
        method: str,
        path: str,
        body: bytes | None,
        key: str | None,
        result_model: type[R],
        operation: str,
        policy: RetryPolicy | None = None,
        cost: int = 1,
    ) -> R:
        request = _Request(method, path, body, key, operation, cost)
        with tracing.request(operation, cost):
            return await self._answered(request, result_model, policy)

    async def _answered(self, request: _Request, result_model: type[R], policy: RetryPolicy | None) -> R:
        """The request's answer, its retries and one renewal of refused credentials included."""
        generation = self._generation
        try:
            return await self._retrying(request, result_model, policy=policy)
        except Unauthorized as exc:
            refused = exc
        if await self._renewed(generation):  # the same logical request: same key, same bytes
            try:
                return await self._retrying(request, result_model, policy=policy)
            except Unauthorized as exc:
                refused = exc
        if self.credentials_from is not None and not isinstance(refused, _NotSent):
            refused = Unauthorized(
                f"{refused.message}; {self.credentials_from}",
                status_code=refused.status_code,
                name=refused.name,
                code=refused.code,
                operation=refused.operation,
            )
        if self._latch is None:
            self._latch, self._refused_at = refused, self._last_401_at or time.time()
        raise refused

    def _latched(self, operation: str) -> Unauthorized:
        """The refusal in force, for a request that is not sent because of it."""
        assert self._latch is not None
        latch = self._latch
        return _NotSent(
            f"{latch.message} (not sent: the API refuses these credentials)",
            name=latch.name,
            code=latch.code,
            operation=operation,
        )

    async def _retrying(
        self,
        request: _Request,
        result_model: type[R],
        *,
        auth: Credentials | None = None,
        policy: RetryPolicy | None = None,
    ) -> R:
        async for attempt in (policy or self.retry_policy).retrying():
            with attempt:
                return await self._attempt(request, result_model, auth, attempt.retry_state.attempt_number)
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover

    async def _attempt(self, request: _Request, result_model: type[R], auth: Credentials | None, number: int = 1) -> R:
        method, path, body, key, operation, cost = request
        if self.rate_gate is not None:
            await self.rate_gate.acquire(cost)
        if self._latch is not None and auth is None:  # refused while it waited: it must not go
            raise self._latched(operation)
        if key is not None and self.send_gate is not None:
            self.send_gate()
        started = time.time()
        t0 = time.perf_counter()
        response: httpx.Response | Reply | None = None
        error: CaptureError | None = None
        try:
            try:
                response = await self._exchange.send(method, path, body, key, auth or self._auth)
            except httpx.TimeoutException as exc:
                raise OutcomeUnknown(f"request timed out ({type(exc).__name__})", operation=operation) from None
            except httpx.TransportError as exc:
                raise OutcomeUnknown(f"connection failed ({type(exc).__name__})", operation=operation) from None
            except httpx.RequestError as exc:  # e.g. an undecodable body: sent, answer unreadable
                raise OutcomeUnknown(f"request failed ({type(exc).__name__})", operation=operation) from None
            return parse_response(response, result_model, operation)
        except CaptureError as exc:
            error = exc
            if isinstance(exc, Unauthorized) and auth is None:
                self._last_401_at = started
            if isinstance(exc, RateLimited) and self.rate_gate is not None:
                self.rate_gate.on_rate_limited(exc.retry_after, cost)
            raise
        finally:
            if self.rate_gate is not None:
                if response is None:
                    self.rate_gate.on_unanswered(cost)  # a lost connection, a timeout: counted or not
                elif response.status_code != 429:
                    self.rate_gate.on_answered(cost)  # counted by the server, whatever it said
            report = Attempt(
                operation=operation,
                idempotency_key=key,
                started_at=started,
                latency_s=time.perf_counter() - t0,
                status_code=response.status_code if response is not None else None,
                error=error,
                number=number,
                persons=cost,
            )
            if log.isEnabledFor(logging.DEBUG):  # not built when dropped: see deliver.Delivery._settled
                log.debug(
                    "capture_api.attempt",
                    operation=operation,
                    key_prefix=key[:12] if key else None,
                    status=report.status_code,
                    error=type(error).__name__ if error else None,
                    latency_ms=round(report.latency_s * 1000, 1),
                )
            tracing.attempted(number, report.status_code)
            for observe in self.observers:
                observe(report)
            if self.on_attempt is not None:
                maybe = self.on_attempt(report)
                if maybe is not None:
                    await maybe
