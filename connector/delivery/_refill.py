"""The burst limiter's model of a server that refills (a token bucket) rather than counts by window.

A first 429 looks the same from a sliding window and from a bucket: the server is full. What tells
them apart is how much it let through before: a window of `limit` lets `limit` units through the
span that filled it (a send or so more at most, as sends leave a window shorter than that span), a
bucket lets `limit` and all it refilled meanwhile. Any server that allows `limit` at once and
refills at some rate (a bucket; a sliding window too, on average) admits at most
`limit + rate * span` units in any span, so what it admitted beyond `limit` over the span it took
bounds its rate from below: `rate >= (admitted - limit) / span` (over spans of sending without
pauses: after a slower spell, units beyond `limit` may be sends that left a window long ago).
Enough units beyond `limit` make that a usable estimate (`EVIDENCE`), and a bucket's Retry-After
(the time one request's units take to come back) must agree with it: a fixed window reset within the
span also lets more than `limit` through, but then Retry-After says how far its next reset is,
seconds away. If the reset is near, the fill also reads as a fixed window's: one that ends in Retry-After, full now, and held no more
than `limit` of what went, so no longer than `fixed_s` (Retry-After and the time since the send
before the last `limit` ones). The rate followed is capped to what such a window allows, and when
that cap is well below the rate (`FIXED_SHARE`: a short window reset within a fast fill), the 429
is read as a window's instead.

Against a bucket, holding sends to `limit` per window (`limit / rate`) is safe but slow: a bucket
refills between bursts, and the best schedule after it ran dry is a steady stream at its rate. So
the limiter then keeps a mirror of the bucket (`BucketMirror`): empty when the server said so (a
jitter margin below empty: the server counts arrivals), refilled, never fuller than `limit`; a
request goes when the mirror holds its units. Refilled at the lower bound, the mirror never holds more than the
server's bucket, but the bound may be several per cent low: it counts only the requests answered
when the 429 came, and is exact to a request's units over what the fill let through; a bucket full
when the fill began, that took every request sent, refilled at most that much more (the upper
bound). When they are more than `CLIMB_MIN` apart, the mirror's rate climbs from the lower to
the upper bound within `CLIMB_WINDOWS` windows: past the server's rate, its bucket runs dry (the
second 429) and the send log then bounds the rate closely (the span since the first send is long);
the mirror holds that bound from then on. Learning a bucket costs the 429 that fills it and at most
the one that ends the climb (none when the fill itself drew two: the climb is given up).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

EVIDENCE = 8  # requests' worth of units beyond `limit` before a refill rate is believed
FIXED_SHARE = 0.9  # a cap for a fixed window this far below the rate: read as a window instead
CLIMB_MIN = 0.02  # the mirror climbs when the upper bound is this much above the lower one ...
CLIMB_WINDOWS = 0.2  # ... and reaches it within this many windows (limit / rate) of the first 429


def bounds(
    limit: int, spans: Iterable[tuple[float, int, int]], cost: int, late_s: float, jitter_s: float
) -> tuple[float, float] | None:
    """The least rate (units per second) the server must refill at to have let through what it did,
    the most over `spans` ((seconds from a send to the refused one, units admitted in them, units
    sent in them), up to a full server) of the units admitted beyond `limit` per second; and the
    most it may refill at if it was full when that span began and took all the units sent (it then
    held less than `cost` units at its end). None when no span shows `EVIDENCE` requests' (`cost`)
    worth beyond the limit. The server counts arrivals: the first
    send of a span arrived after it went, and the refused one before its 429 came back, `late_s`
    after it went (on a loaded machine, far more than jitter)."""
    best: tuple[float, float] | None = None
    for span, admitted, sent in spans:
        if admitted - limit >= EVIDENCE * cost:
            low = (admitted - limit) / (span + late_s)
            if best is None or low > best[0]:
                # (arrivals closer together than the sends were: by the jitter margin, each end)
                best = low, (sent - limit + cost) / max(span - 2 * jitter_s, span / 2)
    return best


def refill_rate(
    limit: int,
    spans: Iterable[tuple[float, int, int]],
    retry_after: float | None,
    cost: int,
    late_s: float,
    jitter_s: float,
    fixed_s: float,
) -> tuple[float, float] | None:
    """The bounds of the refill rate a first 429 shows (`bounds`), when it shows one, capped for a
    fixed window of up to `fixed_s`; None when it shows a window."""
    found = bounds(limit, spans, cost, late_s, jitter_s) if retry_after is not None else None
    # A bucket frees `cost` units within cost / rate (whole seconds: rounded up): a longer wait is a
    # window's reset, not a refill.
    if found is None or retry_after is None or retry_after > math.ceil(cost / found[0]):
        return None
    low, high = found
    cap = (limit - cost) / fixed_s  # paced at most this, no such fixed window overfills
    return (min(low, cap), min(high, cap)) if cap >= FIXED_SHARE * low else None


@dataclass
class BucketMirror:
    """A token bucket of `limit` units as the client sees the server's: `level` units at `at`, refilled
    at `floor` per second, or climbing from it to `top` since `climb_from`."""

    limit: int
    floor: float
    level: float
    at: float
    top: float | None = None
    climb_from: float = 0.0

    def rate(self, now: float) -> float:
        if self.top is None:
            return self.floor
        climbed = (now - self.climb_from) / (CLIMB_WINDOWS * self.limit / self.floor)
        return self.floor + (self.top - self.floor) * min(max(climbed, 0.0), 1.0)

    def hold(self, floor: float, now: float) -> None:
        """No more climbing: refilled at `floor` from `now` on."""
        self.level, self.at = self.level_at(now), max(now, self.at)
        self.floor, self.top = floor, None

    def level_at(self, now: float) -> float:
        if now <= self.at:
            return self.level
        return min(self.limit, self.level + self.rate((self.at + now) / 2) * (now - self.at))

    def wait(self, units: int, now: float) -> float:
        """Seconds until the mirror holds `units` (a request over the limit waits for a full one)."""
        short = min(units, self.limit) - self.level_at(now)
        return short / self.rate(now) if short > 0 else 0.0

    def take(self, units: int, now: float) -> None:
        self.level, self.at = self.level_at(now) - units, max(now, self.at)

    def drain(self, at: float, margin_s: float) -> None:
        """The server's bucket was empty when the send of `at` arrived, and arrivals jitter by `margin_s`."""
        self.level, self.at = -self.floor * margin_s, at
