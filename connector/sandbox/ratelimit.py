"""Per-client request limits, counted three ways (the spec leaves the window and its counting to
the server): a sliding window, a fixed window reset on the clock, and a token bucket. A client's
limiter must hold all three without knowing which one it faces.

Each `admit` takes the client's limit and a request's `cost` in units (1 per request, or the
persons it carries: Behaviour.rate_limit_unit) and answers None when admitted (and counted), or
the whole seconds until it would be (Retry-After). Refusals are not counted.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Protocol, get_args

from .behaviour import RateCounting


class RateCounter(Protocol):
    window_s: float

    def admit(self, client: str, limit: int, now: float | None = None, cost: int = 1) -> int | None: ...


def rate_counter(counting: RateCounting, window_s: float) -> RateCounter:
    if window_s <= 0:
        raise ValueError("window_s must be positive")
    counters: dict[str, type[SlidingWindow] | type[FixedWindow] | type[TokenBucket]] = {
        "sliding": SlidingWindow,
        "fixed": FixedWindow,
        "bucket": TokenBucket,
    }
    if counting not in counters:
        raise ValueError(f"counting must be one of {', '.join(get_args(RateCounting))}, not {counting!r}")
    return counters[counting](window_s)


def _retry_after(seconds: float) -> int:
    return max(1, math.ceil(seconds))


class SlidingWindow:
    """At most `limit` admitted units per client in any `window_s` seconds."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.window_s = window_s
        self._hits: dict[str, deque[tuple[float, int]]] = {}
        self._used: dict[str, int] = {}

    def admit(self, client: str, limit: int, now: float | None = None, cost: int = 1) -> int | None:
        now = time.monotonic() if now is None else now
        hits = self._hits.setdefault(client, deque())
        used = self._used.get(client, 0)
        while hits and hits[0][0] <= now - self.window_s:
            used -= hits.popleft()[1]
        self._used[client] = used
        if used + cost > limit:  # until enough have left (all of them, for a cost over the limit)
            freed, frees_at = used, now
            for at, units in hits:
                freed, frees_at = freed - units, at
                if freed + cost <= limit:
                    break
            return _retry_after(frees_at + self.window_s - now)
        hits.append((now, cost))
        self._used[client] = used + cost
        return None


class FixedWindow:
    """At most `limit` admitted units per client in each window of `window_s` seconds counted from
    the clock's origin (as a server that resets its counters every minute on the minute): up to
    twice the limit may pass around a reset."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._counts: dict[str, tuple[int, int]] = {}  # client: (window number, units used in it)

    def admit(self, client: str, limit: int, now: float | None = None, cost: int = 1) -> int | None:
        now = time.monotonic() if now is None else now
        number = math.floor(now / self.window_s)
        current, used = self._counts.get(client, (number, 0))
        if current != number:
            used = 0
        if used + cost > limit:
            return _retry_after((number + 1) * self.window_s - now)
        self._counts[client] = (number, used + cost)
        return None


class TokenBucket:
    """A bucket of `limit` tokens per client, refilled at `limit / window_s` per second: the whole
    limit may go at once, then the sustained rate; a request takes its cost in tokens."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._buckets: dict[str, tuple[float, float]] = {}  # client: (tokens, when last refilled)

    def admit(self, client: str, limit: int, now: float | None = None, cost: int = 1) -> int | None:
        now = time.monotonic() if now is None else now
        tokens, then = self._buckets.get(client, (float(limit), now))
        refill = limit / self.window_s
        tokens = min(float(limit), tokens + (now - then) * refill)
        if tokens < cost:
            self._buckets[client] = (tokens, now)
            return _retry_after((min(cost, limit) - tokens) / refill)
        self._buckets[client] = (tokens - cost, now)
        return None


def best_finish(
    requests: int,
    units: int,
    limit: int,
    window_s: float,
    counting: RateCounting,
    *,
    concurrency: int,
    service_s: float,
) -> float:
    """The earliest a client could have all `requests` answered, each costing `units` and taking
    `service_s` with `concurrency` in flight, if it knew this counting exactly (a fixed window's
    first reset falling a full window after the first request): the yardstick of a limiter."""
    per_window = max(limit // units, 1)
    starts: list[float] = []
    for k in range(requests):
        earliest = starts[k - concurrency] + service_s if k >= concurrency else 0.0
        if counting == "sliding" and k >= per_window:
            earliest = max(earliest, starts[k - per_window] + window_s)
        elif counting == "fixed":
            earliest = max(earliest, (k // per_window) * window_s)
        elif counting == "bucket":
            earliest = max(earliest, ((k + 1) * units - limit) * window_s / limit)
        starts.append(earliest)
    return max((t + service_s for t in starts), default=0.0)
