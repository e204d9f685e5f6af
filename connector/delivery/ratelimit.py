"""Client-side rate limiting that finds the server's ceiling by itself, in one of two shapes.

`[capture] rate_shape` chooses how requests are let go within the limit:
- **burst** (the default, `_burst.py`): what the window still allows goes at once, then each request
  as an old one leaves the window (a sliding log of sends). A backlog finishes at the best
  schedule the limit allows, whatever the window (1 s to a daily budget).
- **smooth** (`_ceiling.py`, described below): requests evenly spaced at the ceiling, for
  operators who prefer a steady load on the server to the shortest run.

What follows is the smooth shape's story; the burst shape's is in `_burst.py`.

The spec gives `rate_limit` (GET /info) and a 429 when it is exceeded, but neither the window it
counts over nor its unit (spec 8: "not shown"). A server may count 12 requests per second, or
1,200 persons per second (a bulk request of 100 costing 100), or 120 requests per 10 s. The ceiling
is `rate_limit / window` units per second; we learn the unit and the window from the answers.

How, and why (the mechanics are in `_ceiling.py`, clock-free so tests run on a simulated clock):

- **Pacing, not bursts.** Requests are spaced `units / pace` apart (GCRA). A bucket that may
  burst lets a sliding-window server see up to twice its limit in one window; spacing keeps every
  window of any length at the pace. The pace is `MARGIN` (0.985) of the ceiling: room for network
  jitter, and no fixed "2 requests per window" margin that cost 1/6 of a 12-per-window ceiling.
  The only burst tolerance is `CATCH_UP` (0.3 % of a window, 3 ms of a 1 s window): a worker
  woken a few ms late does not push every later send back (that cost 3-4 % of a 12-per-second
  ceiling), and the rest of the margin is left to jitter at the server, which counts arrivals.
- **Slow start.** With no window configured nothing is paced at first: like TCP's slow start, we
  let the server's (empty) window fill at full speed and take its first 429 as the signal. That
  429 is also evidence: we know what we sent, so
  - **the unit**: if fewer than `rate_limit` requests have ever been counted, the server cannot be
    counting requests: it counts persons;
  - **the window**: the oldest request in the full window leaves it when the server frees a slot,
    `Retry-After` seconds later. So window <= now + Retry-After - sent_at(oldest counted), and the
    smallest such bound over later 429s is the estimate. An integer Retry-After may be rounded up
    by up to 1 s, so it also gives a lower bound (bound - 1).
  - **without Retry-After** the window is measured by waiting it out: single probes, each further
    from the oldest counted send by `SEARCH_GROWTH`; the first one let through bounds the window
    between it and the probe before (the spacing of the 429s is the measurement).
- **Narrowing.** A learned window is an interval (lower, upper]; we pace on the upper bound (safe)
  and bisect: a shorter window is tried for 1.5 windows (an overshoot shows within one window); a
  quiet trial becomes the upper bound, a 429 the lower one. Once the bounds are within 4 %, settled.
- **Congestion avoidance.** Settled, a 429 while pacing at the model's ceiling means the window is
  a little longer than we think, or that arrivals bunched at the server: the pace drops by 1 % for
  a 429 that comes alone after a quiet spell (jitter, most likely), by `DECREASE` (5 %) for one
  that follows another within it (the model is wrong), the multiplicative decrease of
  AIMD, but small because the ceiling is a hard fixed limit, not a shared link. 429s that were
  sent before (or within a window after) the last slow-down are one episode and slow it down once,
  as TCP reacts once per window of data.
- **Probing upward.** After a quiet spell (30 s or 3 windows) in which the pace held sends back
  (`BINDING`: a spell in which the source was slower than the pace tests nothing, and stepping up
  through it would climb without bound) the pace steps up 2 %, and each
  step that stays quiet for 1.5 windows doubles the next (as CUBIC's convex probing past its last
  maximum): a limit raised mid-run is found in a few windows after the quiet spell. A step that
  draws a 429 falls back to the last quiet pace. GET /info is asked per run; a changed
  `rate_limit` rescales the pace at once (`reseed`).
- **Pauses.** After a 429 everyone waits until the oldest counted request leaves the window, or
  Retry-After when the window is unknown: the client's retry of the refused request honours
  Retry-After on its own (connector/api/retry.py). A request refused although it was sent after
  that pause means the server counts what our log does not show (GET /info, another process):
  then its Retry-After is trusted whole (or two slots are waited without one).
- **A configured window** (`capture.rate_window_s`) is trusted: no search, no narrowing. The unit
  is still unknown: requests is assumed (the faster guess), and the first 429 settles it.

Costs: each request says what it carries (`acquire(cost)`): 1 for GET /info and POST /person, the
persons of a bulk request. Limits: a server whose window is fixed (reset on the clock) rather than
sliding is paced the same way and may refuse a little more at window edges; another process using
the same client looks like a smaller limit, which the decrease absorbs.
"""

from __future__ import annotations

import asyncio
import math
from typing import Literal

from .. import logs
from ._burst import BurstFinder
from ._ceiling import CeilingFinder, Unit
from .extract import LOGGER

__all__ = ["AdaptiveRateLimiter", "RateShape", "Unit"]

RateShape = Literal["burst", "smooth"]
log = logs.get_logger(LOGGER)


class AdaptiveRateLimiter:
    """Implements connector.api.RateGate over a BurstFinder or a CeilingFinder (the `shape`), on the
    running loop's clock."""

    def __init__(self, rate_limit: int, window_s: float | None = None, shape: RateShape = "burst") -> None:
        self.shape = shape
        self.core: BurstFinder | CeilingFinder = (
            BurstFinder(rate_limit, window_s) if shape == "burst" else CeilingFinder(rate_limit, window_s)
        )

    @property
    def rate(self) -> float:
        """The pace held now (smooth) or on average over a window (burst), in the learned unit per
        second; inf before the first 429 when no window was configured."""
        return self.core.rate if self.core.rate is not None else math.inf

    @property
    def window_s(self) -> float | None:
        return self.core.window_s

    @property
    def hint(self) -> float | None:
        """The window it was configured with (None: it finds the window itself)."""
        return self.core.hint

    @property
    def unit(self) -> Unit | None:
        return self.core.unit

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    def counted(self, cost: int = 1) -> None:
        """A request the server counted just now without this limiter's leave (GET /info)."""
        self.core.counted(cost, self._now())

    def reseed(self, rate_limit: int) -> None:
        """GET /info was asked again (a new run): keep what was learned, follow a changed limit."""
        self.core.reseed(rate_limit, self._now())

    async def acquire(self, cost: int = 1) -> None:
        while (wait := self.core.delay(cost, self._now())) > 0:
            await asyncio.sleep(wait)

    def on_answered(self, cost: int = 1) -> None:
        window = self.core.window_s
        self.core.on_answered(cost, self._now())
        if self.core.window_s != window:
            self._learned("a probe let through")

    def on_unanswered(self, cost: int = 1) -> None:
        self.core.on_unanswered(cost, self._now())

    @property
    def margin_s(self) -> float | None:
        """How much longer than the window the burst shape holds each send (jitter); None: smooth."""
        return self.core.jitter_s if isinstance(self.core, BurstFinder) else None

    def on_rate_limited(self, retry_after: float | None, cost: int = 1) -> None:
        before = self.core.unit, self.core.window_s, self.margin_s
        self.core.on_rate_limited(retry_after, cost, self._now())
        if (self.core.unit, self.core.window_s, self.margin_s) != before:
            self._learned("a 429")

    def _learned(self, why: str) -> None:
        """What the operator sees of the limiter: one event each time what it holds changes (the
        margin too: on a loaded machine it is what a run's 429s mostly change, and what they cost)."""
        window = self.core.window_s
        refill = self.core.refill if isinstance(self.core, BurstFinder) else None
        bucket = f" (a token bucket, refilled at {refill:.4g} per s)" if refill is not None else ""
        margin = self.margin_s
        log.info(
            "ratelimit.learned",
            unit=self.core.unit,
            window_s=round(window, 3) if window is not None else None,
            margin_s=round(margin, 4) if margin is not None else None,
            rate_limit=self.core.limit,
            shape=self.shape,
            configured=self.core.hint is not None,
            refill_per_s=round(refill, 3) if refill is not None else None,
            detail=f"after {why}: rate_limit counts {self.core.unit or 'an unknown unit'} per "
            f"{f'{round(window, 3):g} s' if window is not None else 'an unknown window'}{bucket}",
        )
