"""Per-client request limit over a sliding window (the spec leaves the window to the server)."""

from __future__ import annotations

import math
import time
from collections import deque


class SlidingWindow:
    """At most `limit` admitted units per client in any `window_s` seconds: a unit is a request,
    or a person when each request is admitted with its `cost` (Behaviour.rate_limit_unit)."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.window_s = window_s
        self._hits: dict[str, deque[tuple[float, int]]] = {}
        self._used: dict[str, int] = {}

    def admit(self, client: str, limit: int, now: float | None = None, cost: int = 1) -> int | None:
        """None when admitted (and counted); otherwise the whole seconds until a slot frees (for a
        request costing more than one unit: until enough have freed). Refusals are not counted."""
        now = time.monotonic() if now is None else now
        hits = self._hits.setdefault(client, deque())
        used = self._used.get(client, 0)
        while hits and hits[0][0] <= now - self.window_s:
            used -= hits.popleft()[1]
        self._used[client] = used
        if used + cost > limit:
            freed, frees_at = used, now
            for at, units in hits:
                freed, frees_at = freed - units, at
                if freed + cost <= limit:
                    break
            return max(1, math.ceil(frees_at + self.window_s - now))
        hits.append((now, cost))
        self._used[client] = used + cost
        return None
