"""The retry decisions of spec 4.4 and design 4, expressed as a tenacity policy.

Retrying is always of the same logical request: the caller hands the same key and the same bytes
to every attempt, so the policy only decides *whether* and *when*.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from .errors import CaptureError, OutcomeUnknown, RateLimited, ServiceUnavailable


def is_retryable(exc: BaseException) -> bool:
    """429, retryable 503 and unknown outcomes are retried; 400, 401, 409 and the rest never."""
    if isinstance(exc, (RateLimited, OutcomeUnknown)):
        return True
    if isinstance(exc, ServiceUnavailable):
        return exc.retryable is True
    return False


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded by attempts and by total time."""

    max_attempts: int = 6
    max_elapsed_s: float = 120.0
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 300.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_backoff_s < 0 or self.max_backoff_s < self.initial_backoff_s:
            raise ValueError("need 0 <= initial_backoff_s <= max_backoff_s")

    def wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), self.max_retry_after_s)
        backoff = wait_random_exponential(multiplier=self.initial_backoff_s, max=self.max_backoff_s)
        return backoff(state)

    def retrying(self) -> AsyncRetrying:
        return AsyncRetrying(
            retry=retry_if_exception(is_retryable),
            # stop_before_delay also stops when the coming wait would overrun the budget: a long
            # Retry-After is handed back to the caller instead of being slept through.
            stop=stop_after_attempt(self.max_attempts) | stop_before_delay(self.max_elapsed_s),
            wait=self.wait,
            reraise=True,
        )


NO_RETRY = RetryPolicy(max_attempts=1)

__all__ = ["NO_RETRY", "CaptureError", "RetryPolicy", "is_retryable"]
