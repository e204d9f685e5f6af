"""One exception per outcome of a Capture API call (spec 7, design 4).

Messages are built only from the server's error envelope and our own words: never from request
headers, so the API secret cannot leak through an exception's text or repr.
"""

from __future__ import annotations


class CaptureError(Exception):
    """Any failed Capture API call. `status_code` is None when no response was received."""

    status_code: int | None = None

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        name: str | None = None,
        code: str | None = None,
        retryable: bool | None = None,
        operation: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code
        self.name = name
        self.code = code
        self.retryable = retryable
        self.operation = operation

    def __str__(self) -> str:
        parts = [f"HTTP {self.status_code}" if self.status_code else "no response"]
        if self.operation:
            parts.append(self.operation)
        if self.name or self.code:
            parts.append("/".join(p for p in (self.name, self.code) if p))
        return f"{self.message} ({', '.join(parts)})"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status_code={self.status_code!r}, name={self.name!r}, "
            f"code={self.code!r}, message={self.message!r})"
        )


class BadRequest(CaptureError):
    """400: the request, idempotency key or person data is invalid. Fix it; do not retry."""

    status_code = 400


class Unauthorized(CaptureError):
    """401: key or secret missing, wrong, or the client is inactive. Never retried."""

    status_code = 401


class IdempotencyConflict(CaptureError):
    """409: the key belongs to another body or is still running; needs manual recovery."""

    status_code = 409


class RateLimited(CaptureError):
    """429: slow down; `retry_after` is the server's Retry-After in seconds when it gave one."""

    status_code = 429

    def __init__(self, message: str, *, retry_after: float | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServiceUnavailable(CaptureError):
    """503: retry only when `retryable` is true, with the same key and body."""

    status_code = 503


class UnexpectedStatus(CaptureError):
    """Any other status (a redirect, 500, 502...). Not retried automatically (design 4)."""


class OutcomeUnknown(CaptureError):
    """Timeout, lost connection or an unreadable 2xx: the server may have acted. Retry with the same key."""


class InvalidIdempotencyKey(ValueError):
    """The key is outside 1..512 characters; raised before anything is sent."""


class InsecureURLError(ValueError):
    """A plain-http base URL to a non-loopback host, which would send the secret in clear."""


STATUS_ERRORS: dict[int, type[CaptureError]] = {
    400: BadRequest,
    401: Unauthorized,
    409: IdempotencyConflict,
    429: RateLimited,
    503: ServiceUnavailable,
}
