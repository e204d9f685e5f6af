"""Per-client request limit over a sliding window (the spec leaves the window to the server)."""

from __future__ import annotations

import math
import time
from collections import deque


class SlidingWindow:
    """At most `limit` admitted requests per client in any `window_s` seconds."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.window_s = window_s
        self._hits: dict[str, deque[float]] = {}

    def admit(self, client: str, limit: int, now: float | None = None) -> int | None:
        """None when admitted (and counted); otherwise the whole seconds until a slot frees."""
        now = time.monotonic() if now is None else now
        hits = self._hits.setdefault(client, deque())
        while hits and hits[0] <= now - self.window_s:
            hits.popleft()
        if len(hits) >= limit:
            return max(1, math.ceil(hits[0] + self.window_s - now))
        hits.append(now)
        return None
