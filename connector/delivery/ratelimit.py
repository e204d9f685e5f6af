"""Client-side rate limiting seeded from GET /info `rate_limit`, slowing down on 429.

A leaky bucket that may burst a whole window's worth would let a sliding-window server see up to
twice its limit; so the bucket holds only `burst` requests and drains at the rate that keeps any
window of `window_s` within the limit.
"""

from __future__ import annotations

import asyncio

from aiolimiter import AsyncLimiter


class AdaptiveRateLimiter:
    """Implements connector.api.RateGate."""

    def __init__(
        self,
        rate_limit: int,
        window_s: float = 60.0,
        *,
        burst: int = 2,
        slowdown: float = 0.9,
        floor: float = 0.25,
    ) -> None:
        if rate_limit < 1 or window_s <= 0:
            raise ValueError("rate_limit must be >= 1 and window_s > 0")
        self.burst = max(1, min(burst, rate_limit // 2 or 1))
        self.window_s = window_s
        self.initial_rate = max(rate_limit - self.burst, 1) / window_s
        self.rate = self.initial_rate
        self._floor = self.initial_rate * floor
        self._slowdown = slowdown
        self._limiter = self._make()
        self._paused_until = 0.0

    def _make(self) -> AsyncLimiter:
        return AsyncLimiter(self.burst, self.burst / self.rate)

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            delay = self._paused_until - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            await self._limiter.acquire()
            if loop.time() >= self._paused_until:
                return

    def on_rate_limited(self, retry_after: float | None) -> None:
        """Everyone waits out Retry-After (or one window's share), and the pace drops for good."""
        loop = asyncio.get_running_loop()
        pause = retry_after if retry_after is not None else self.burst / self.rate
        self._paused_until = max(self._paused_until, loop.time() + pause)
        self.rate = max(self.rate * self._slowdown, self._floor)
        self._limiter = self._make()
