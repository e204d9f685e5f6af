"""The wire rules of the Capture API that need no client: what a key and a base URL must be, and what
a response means (spec 2.3 and 7): a typed result, or one exception per outcome. Messages are built
from the server's error envelope and our own words, never from headers, so the secret cannot leak."""

from __future__ import annotations

import datetime
import email.utils
import functools
import json
import math
import time
from typing import TYPE_CHECKING, Any, TypeVar, cast

import httpx
from pydantic import BaseModel, ValidationError

from ..logs import mask_secrets
from ..loopback import is_loopback
from ..redact import UNPARSEABLE, redact_url
from .errors import (
    STATUS_ERRORS,
    InsecureURLError,
    InvalidIdempotencyKey,
    OutcomeUnknown,
    RateLimited,
    UnexpectedStatus,
)
from .models import MAX_KEY_LENGTH, ErrorBody, ErrorEnvelope, SuccessEnvelope

if TYPE_CHECKING:
    from ._exchange import Reply

R = TypeVar("R", bound=BaseModel)


def check_idempotency_key(key: str) -> str:
    if not isinstance(key, str):
        raise InvalidIdempotencyKey(f"Idempotency-Key must be a string, got {type(key).__name__}")
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise InvalidIdempotencyKey(f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters, got {len(key)}")
    if not key.isascii() or not key.isprintable():
        raise InvalidIdempotencyKey("Idempotency-Key must be printable ASCII")
    return key


def check_base_url(base_url: str, *, allow_insecure_http: bool = False) -> httpx.URL:
    """The parsed base URL, or InsecureURLError. Messages never echo the URL: it may hold a secret."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        raise InsecureURLError("base_url is not a valid URL") from None
    if url.userinfo:
        raise InsecureURLError("base_url must not carry credentials; use the API key and secret")
    if url.query or url.fragment:  # so that it can be shown, and stored with a flow pass, as it is
        raise InsecureURLError("base_url must not carry a query or a fragment; the API's paths are appended to it")
    if url.scheme not in ("http", "https") or not url.host:
        raise InsecureURLError(
            f"base_url must be an http(s) URL with a host, got scheme {url.scheme!r} and host {url.host!r}"
        )
    if url.scheme == "http" and not allow_insecure_http and not is_loopback(url.host):
        raise InsecureURLError(
            f"refusing plain http to {url.host}: the API secret would travel in clear. "
            "Use https, or set allow_insecure_http = true for a trusted network."
        )
    return url


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After is either delta-seconds or an HTTP date (RFC 9110 10.2.3). A date is read as whole
    seconds from now, rounded up: it is whole seconds of the server's clock, and the limiter takes a
    fraction for an exact wait (a whole number for one rounded up by up to 1 s), so a date's fraction,
    our clock's phase against the server's, would read as a wait jitter cannot explain."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:  # negative, nan and inf are no delay we could honour
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000" parses naive; HTTP dates are always UTC
        when = when.replace(tzinfo=datetime.UTC)
    return float(max(math.ceil(when.timestamp() - time.time()), 0))


@functools.cache
def _envelope(result_model: type[R]) -> type[SuccessEnvelope[R]]:
    """`SuccessEnvelope[result_model]`, spelt so mypy accepts a runtime type argument (it is the
    same class pydantic caches for that subscript). Held here: pydantic's cache holds it weakly, and a
    class is freed only by the cyclic collector, after which pydantic built it again (some 9 ms)."""
    return cast("type[SuccessEnvelope[R]]", SuccessEnvelope.__class_getitem__(result_model))


def parse_response(response: httpx.Response | Reply, result_model: type[R], operation: str) -> R:
    status = response.status_code
    if 200 <= status < 300:
        try:
            envelope = _envelope(result_model).model_validate_json(response.content)
        except ValidationError:
            # The server acted but we cannot read what it did: resending the same key replays it.
            raise OutcomeUnknown(
                "a 2xx response without a valid success envelope", status_code=status, operation=operation
            ) from None
        return envelope.data
    if not isinstance(response, httpx.Response):
        response = response.response  # headers, reason and request: httpx's model, made for the rare answer
    err = _error_body(response.content)
    name: str | None
    code: str | None
    retryable: bool | None
    if err is not None:
        # A server that echoes request headers must not carry the secret into our exceptions.
        message, name, code, retryable = mask_secrets(err.message), err.name, err.code, err.retryable
    elif response.has_redirect_location:
        message = f"HTTP {status}: {_redirect(response)}"
        name = code = retryable = None
    else:
        message = f"HTTP {status} {response.reason_phrase} without an error envelope"
        name = code = retryable = None
    cls = STATUS_ERRORS.get(status, UnexpectedStatus)
    kwargs: dict[str, Any] = {
        "status_code": status,
        "name": name,
        "code": code,
        "retryable": retryable,
        "operation": operation,
    }
    if cls is RateLimited:
        kwargs["retry_after"] = parse_retry_after(response.headers.get("Retry-After"))
    raise cls(message, **kwargs)


def _redirect(response: httpx.Response) -> str:
    """A redirect, which the client never follows: the credentials are bound to the base URL's origin."""
    try:
        target = redact_url(response.request.url.join(response.headers["Location"]))
    except httpx.InvalidURL:
        target = UNPARSEABLE
    home = redact_url(response.request.url.copy_with(path="/", query=None))
    return f"a redirect to {target}, not followed (the credentials go to {home} only)"


def _error_body(content: bytes) -> ErrorBody | None:
    """The envelope's `error`, read even when the envelope around it is off: it decides retries."""
    try:
        return ErrorEnvelope.model_validate_json(content).error
    except ValidationError:
        pass
    try:
        return ErrorBody.model_validate(json.loads(content)["error"])
    except (ValueError, TypeError, KeyError, ValidationError):
        return None
