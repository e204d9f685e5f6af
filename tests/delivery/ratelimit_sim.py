"""A discrete-event simulation of the delivery engine's workers, the client's 429 retries and a
rate-limited server, on a simulated clock: the limiter's core (connector/delivery/_ceiling.py)
decides when each request may go, exactly as AdaptiveRateLimiter does under asyncio.

The server is the sandbox's policy (connector/sandbox/ratelimit.py): at most `limit` units
(requests, or persons) per `window_s`, counted by a sliding window, a fixed one or a token bucket,
429s not counted, Retry-After the whole seconds until there is room (or no Retry-After at all).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from connector.delivery._burst import BurstFinder
from connector.delivery._ceiling import CeilingFinder
from connector.sandbox.behaviour import RateCounting
from connector.sandbox.ratelimit import rate_counter


@dataclass
class SimServer:
    """The sandbox's counting (sliding, fixed or bucket) behind a simulated network; it keeps what
    it admitted, by arrival, for the oracle that no window of its counting ever held more."""

    limit: int
    window_s: float
    unit: str = "requests"
    retry_after: bool = True
    counting: RateCounting = "sliding"
    admitted: list[tuple[float, int]] = field(default_factory=list)  # (arrived at, units)
    phase_s: float = 0.0  # the server's clock is this far ahead (a fixed window resets at its multiples)

    def __post_init__(self) -> None:
        self.counter = rate_counter(self.counting, self.window_s)

    def admit(self, cost: int, now: float) -> float | None:
        """None when admitted; else the Retry-After to send (math.nan: none sent)."""
        units = cost if self.unit == "persons" else 1
        wait = self.counter.admit("c", self.limit, now + self.phase_s, units)
        if wait is None:
            self.admitted.append((now, units))
            return None
        return float(wait) if self.retry_after else math.nan

    def most_in_any_window(self) -> int:
        """The most units admitted in any window of the server's length (sliding, over arrivals)."""
        most, start, inside = 0, 0, 0
        for at, units in self.admitted:
            inside += units
            while self.admitted[start][0] <= at - self.window_s:
                inside -= self.admitted[start][1]
                start += 1
            most = max(most, inside)
        return most


@dataclass
class SimResult:
    done: list[tuple[float, int]] = field(default_factory=list)  # (answered at, persons)
    sent: list[tuple[float, bool]] = field(default_factory=list)  # (sent at, answered 429)
    finished_at: float = 0.0

    def persons_between(self, start: float, end: float) -> int:
        return sum(n for t, n in self.done if start <= t < end)

    def share_429_after(self, start: float) -> float:
        after = [limited for t, limited in self.sent if t >= start]
        return sum(after) / max(len(after), 1)


def simulate(
    server: SimServer,
    limiter: BurstFinder | CeilingFinder,
    *,
    records: int,
    batch: int = 100,
    concurrency: int = 4,
    one_way_s: float = 0.002,
    service_s: float = 0.05,
    seed: int = 1,
    at: tuple[float, Callable[[], None]] | None = None,
    late_s: float = 0.0,
    trickle: tuple[int, float] = (0, 0.0),
    arrival_jitter_s: float = 0.0,
    arrival_delay: Callable[[random.Random], float] | None = None,
) -> SimResult:
    """Deliver `records` in batches of `batch` with `concurrency` workers; returns what happened.
    `at` = (time, action) runs the action once at that simulated time (a limit raised mid-run).
    `late_s`: a worker told to wait wakes up to this much later (a busy event loop, a thread
    holding the GIL), uniformly at random. `trickle` = (n, every_s): the first n batches come one
    per `every_s` (a source slower than the ceiling), the rest all at once after them.
    `arrival_jitter_s`: each request takes up to this much longer to reach the server, uniformly
    at random (a loaded machine): the server counts arrivals, the limiter knows sends.
    `arrival_delay`, given, draws each request's extra time to the server instead (a heavier tail)."""
    rng = random.Random(seed)
    queue: list[tuple[float, int, Callable[[float], None]]] = []
    seq = itertools.count()
    result = SimResult()
    batches = deque([batch] * (records // batch) + ([records % batch] if records % batch else []))

    def schedule(when: float, action: Callable[[float], None]) -> None:
        heapq.heappush(queue, (when, next(seq), action))

    def attempt(cost: int, number: int) -> Callable[[float], None]:
        def go(now: float) -> None:
            wait = limiter.delay(cost, now)
            if wait > 0:
                schedule(now + wait + rng.uniform(0, late_s), go)
                return
            late = arrival_delay(rng) if arrival_delay is not None else rng.uniform(0, arrival_jitter_s)
            verdict = server.admit(cost, now + one_way_s + late)
            if verdict is None:
                result.sent.append((now, False))
                # Answers take the service time give or take a fifth, so the workers drift apart
                # and a fast 429 overtakes answers to older requests, as over a real network.
                schedule(now + 2 * one_way_s + service_s * rng.uniform(0.8, 1.2), answered(cost))
            else:
                result.sent.append((now, True))
                schedule(now + 2 * one_way_s, limited(cost, number, verdict))

        return go

    def answered(cost: int) -> Callable[[float], None]:
        def go(now: float) -> None:
            limiter.on_answered(cost, now)
            result.done.append((now, cost))
            result.finished_at = now
            next_batch(now)

        return go

    def limited(cost: int, number: int, verdict: float) -> Callable[[float], None]:
        def go(now: float) -> None:
            retry_after = None if math.isnan(verdict) else verdict
            limiter.on_rate_limited(retry_after, cost, now)
            # The client's RetryPolicy: Retry-After when given, else full-jitter exponential backoff.
            wait = retry_after if retry_after is not None else rng.uniform(0, min(30.0, 0.5 * 2**number))
            schedule(now + wait, attempt(cost, number + 1))

        return go

    trickled, every_s = trickle
    taken = itertools.count()

    def next_batch(now: float) -> None:
        if not batches:
            return
        n = next(taken)
        ready_at = min(n, trickled) * every_s
        if ready_at > now:
            schedule(ready_at, lambda later: attempt(batches.popleft(), 1)(later))
        else:
            attempt(batches.popleft(), 1)(now)

    if at is not None:
        when, once = at
        schedule(when, lambda now: once())
    # GET /info first, as the engine asks it: the server counts it, the limiter is told afterwards
    server.admit(1, 0.0)
    limiter.counted(1, 0.0)
    for _ in range(concurrency):
        schedule(0.0, next_batch)
    while queue:
        now, _, action = heapq.heappop(queue)
        action(now)
    return result
