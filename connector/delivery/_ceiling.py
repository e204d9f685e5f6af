"""The clock-free core of the rate limiter: it decides when a request may go and learns the ceiling.

Every method takes `now` (seconds, any monotonic origin), so the same code runs under asyncio
(connector/delivery/ratelimit.py) and under a simulated clock in the tests. Why it works this way
is told in ratelimit.py's docstring; this module holds the mechanics only.

Words used below: a request's *cost* is the persons it carries (1 for GET /info and POST /person);
its *units* are what the server counts: 1 when the unit is requests, its cost when persons.
The *ceiling* is `rate_limit / window` units per second; the *pace* is what we hold, `MARGIN`
below the ceiling.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

Unit = Literal["requests", "persons"]

MARGIN = 0.985  # the pace as a share of the ceiling: room for network jitter, no more
MAX_WINDOW_S = 3600.0  # the longest window we would believe; the send log reaches this far back
QUIET_MIN_S = 30.0  # no probe upward before this long without a 429 ...
QUIET_WINDOWS = 3.0  # ... nor before this many windows
PROBE_FIRST = 0.02  # the first step up; each step that passes doubles the next
PROBE_MAX = 0.5
SEARCH_GROWTH = 1.4  # without Retry-After: each probe waits this much longer (from the oldest send)
WINDOW_CLOSE = 1.04  # a learned window is trusted once its bounds are this close
TRIAL_STEP = 1.1  # a trial shortens the window by at most this factor
PLAUSIBLE = 0.75  # requests are the unit if the 429 came after this share of rate_limit requests
DECREASE = 0.95  # a 429 the model cannot explain: the pace drops this much
LONE_DECREASE = 0.99  # ... when it comes alone after a quiet spell: most likely arrivals that bunched
BINDING = 0.5  # a quiet spell proves a pace only if sends waited for it this share of the spell
CATCH_UP = 0.003  # a late send takes back up to this share of a window (a fifth of the margin)


@dataclass
class _Sent:
    at: float
    cost: int


class CeilingFinder:
    """Paces requests in units per second, and learns the unit, the window and the ceiling."""

    def __init__(self, rate_limit: int, window_s: float | None = None) -> None:
        if rate_limit < 1 or (window_s is not None and window_s <= 0):
            raise ValueError("rate_limit must be >= 1 and window_s > 0")
        self.limit = rate_limit
        self.hint = window_s
        self.window_s: float | None = window_s  # the best estimate; learned ones only ever shrink
        # A configured window still leaves the unit open: requests first (the faster guess); the
        # first 429 settles it. Without a window nothing is paced until the server first says no.
        self.unit: Unit | None = "requests" if window_s is not None else None
        self.rate: float | None = MARGIN * rate_limit / window_s if window_s is not None else None
        self.next_at = -math.inf
        self.paused_until = -math.inf
        self.rate_limited = 0
        self._pending: deque[_Sent] = deque()  # sent, not yet answered
        self._admitted: deque[_Sent] = deque()  # answered other than 429, oldest first
        self._event_at = -math.inf  # when the pace last changed on a 429
        self._calm_since = -math.inf  # when the pace last changed at all
        self._paced_units = 0  # units sent since then as soon as the pace let them
        self._slowed_at = -math.inf  # when an unexplained 429 last slowed the pace
        self._good_rate: float | None = None  # the fastest pace known to draw no 429
        self._step = PROBE_FIRST
        self._search_from: float | None = None  # searching the window: the oldest send it counts
        self._search_span = 0.0  # ... and how long after it the next probe goes
        self._settled = window_s is not None  # the window is known closely (or was given)
        self._window_lo = window_s or 0.0  # a learned window lies in (_window_lo, window_s]
        self._trying: float | None = None  # a shorter window on trial

    # --- what the server counts ---------------------------------------------------------------

    def units(self, cost: int) -> int:
        return cost if self.unit == "persons" else 1

    def ceiling(self) -> float | None:
        """Units per second the server allows, as far as we know."""
        return None if self.window_s is None else self.limit / self.window_s

    def reseed(self, rate_limit: int, now: float) -> None:
        """GET /info said `rate_limit` (again): a changed limit scales the pace with it."""
        if rate_limit < 1 or rate_limit == self.limit:
            return
        scale = rate_limit / self.limit
        self.limit = rate_limit
        if self.rate is not None:
            self.rate *= scale
            self._good_rate = self.rate
        self._calm(now)

    def counted(self, cost: int, at: float) -> None:
        """A request sent without asking (the run's GET /info, asked before the limiter existed):
        the server counted it, so the send log must hold it, or the first 429 of a full window
        finds one send short and cannot read the window from Retry-After."""
        self._admitted.append(_Sent(at, cost))

    # --- sending ------------------------------------------------------------------------------

    def delay(self, cost: int, now: float) -> float:
        """0 when a request of `cost` may go now (it is then booked); else seconds to wait first."""
        if self._calm_since == -math.inf:
            self._calm(now)  # the quiet spell starts with the first request
        self._probe(now)
        start = max(self.paused_until, self.next_at)
        if now < start:
            return start - now
        if self.rate is not None:
            spacing = self.units(cost) / self.rate
            if now - start < spacing:
                self._paced_units += self.units(cost)  # it waited for its turn: the pace holds it back
            # A worker wakes a few ms late (the loop's timers, other callbacks, the GIL); restarting
            # the clock from each late send cost 3-4 % of a 1 s window's ceiling. Up to CATCH_UP of a
            # window is taken back; the rest of the margin is left to jitter at the server, which
            # counts arrivals (taking back half the margin drew more 429s than it saved).
            slack = CATCH_UP * self.window_s if self.window_s is not None else 0.0
            self.next_at = max(self.next_at, now - slack) + spacing
        if self._search_from is not None:  # one probe at a time, further and further apart
            self._search_span *= SEARCH_GROWTH
            self.paused_until = self._search_from + self._search_span
        self._pending.append(_Sent(now, cost))
        return 0.0

    def _take(self, cost: int, now: float, *, refused: bool = False) -> _Sent:
        """The unanswered send of this cost an answer is most likely for: the oldest for an answer
        (they come back roughly in order), the newest for a 429, which a server gives before doing
        any work, so it overtakes the answers to the requests sent before it. Taking the oldest for
        a 429 left those earlier requests out of what the server had counted, and the first 429 of
        a full window then looked a send or more short of full and taught nothing."""
        for sent in reversed(self._pending) if refused else self._pending:
            if sent.cost == cost:
                self._pending.remove(sent)
                return sent
        return _Sent(now, cost)

    def on_answered(self, cost: int, now: float) -> None:
        """Any answer but 429: the server counted the request."""
        sent = self._take(cost, now)
        self._admitted.append(sent)
        for log in (self._admitted, self._pending):  # a send never answered (a lost connection) too
            while log and log[0].at < now - MAX_WINDOW_S:
                log.popleft()
        if self._search_from is not None and sent.at > self._event_at:
            # The first request let through after the storm: the oldest counted send had left
            # the window by the time this one arrived, so the window is at most this long.
            span = sent.at - self._search_from  # the probe before this one was refused
            self._learn_window(span, span / SEARCH_GROWTH, now)
            self._search_from = None
            self.paused_until = now

    def on_unanswered(self, cost: int, now: float) -> None:
        """No answer came (a lost connection, a timeout): neither admitted nor refused, awaited no more."""
        self._take(cost, now)

    def on_rate_limited(self, retry_after: float | None, cost: int, now: float) -> None:
        """A 429: learn what it says, and slow down once per episode."""
        self.rate_limited += 1
        sent = self._take(cost, now, refused=True)
        settled = False  # the pace was just set from what this 429 taught
        if self.unit is None or (self.hint is not None and self._event_at == -math.inf):
            unit = self._plausible_unit(sent)
            if unit != self.unit and self.window_s is not None:
                self.rate, settled = MARGIN * self.limit / self.window_s, True
            self.unit = unit
        oldest = self._oldest_counted(sent)
        if retry_after is not None and oldest is not None and self.hint is None:
            # The server frees a slot when `oldest` leaves its window, in `retry_after` (rounded
            # up): so the window is at most this long. The smallest such bound is the best one.
            bound = now + retry_after - oldest
            if self.window_s is None or bound < self.window_s:
                whole = retry_after == int(retry_after)  # then it may be rounded up by up to 1 s
                self._learn_window(bound, max(now - oldest, bound - 1 if whole else bound / 1.02), now)
                settled = True
        if self._event_at <= sent.at < self._event_at + (self.window_s or 0.0):
            # Refused although sent after we paused for the last 429: the server counts something
            # our log does not show (GET /info, another process). Trust its word, or wait a slot.
            spacing = self.units(cost) / self.rate if self.rate else 0.0
            free_at = now + (retry_after if retry_after is not None else 2 * spacing)
        elif self.window_s is not None and oldest is not None:
            free_at = oldest + self.window_s  # when the oldest counted request leaves the window
        else:
            free_at = now + (retry_after or 0.0)
        self.paused_until = max(self.paused_until, min(free_at, now + (retry_after or math.inf)))
        if sent.at < self._event_at + (self.window_s or 0.0):
            # Sent before we last slowed down, or within a window after: what the server counts
            # still holds the faster pace. The same episode, already answered.
            return
        self._event_at = now
        if self.window_s is None:
            # No window yet and no Retry-After to compute one: wait out the window with single
            # probes; the first one let through measures it (on_answered).
            if self._search_from is None:
                self._search_from = oldest if oldest is not None else sent.at
                self._search_span = max(now - self._search_from, 0.05) * SEARCH_GROWTH
                self.paused_until = max(self.paused_until, self._search_from + self._search_span)
            return
        if not settled:
            self._slow_down(now, sent)
        self.next_at = max(self.next_at, self.paused_until)

    def _slow_down(self, now: float, sent: _Sent) -> None:
        if self._trying is not None:  # the shorter window was wrong: it is longer than that
            self._window_lo, self._trying = self._trying, None
            self._settle_if_close()
            self.rate = self._target()
            self._calm(now)
            return
        target = MARGIN * self.limit / self.window_s if self.window_s is not None else None
        assert target is not None
        probing = self._good_rate is not None and self.rate is not None and self.rate > self._good_rate
        if probing:
            assert self._good_rate is not None
            self.rate = self._good_rate  # the step up was too far: back to the last quiet pace
            self._settled = True
            full = self._units_in_window(sent)
            if (
                full > self.limit and self.window_s is not None
            ):  # the window held more than rate_limit: the limit was raised
                self.limit = full
                self.rate = max(self.rate, MARGIN * full / self.window_s)
        elif self.rate is None or self.rate > target * 1.001:
            self.rate = target  # we outran the model's ceiling: hold to it
        else:  # at or under the model's ceiling yet refused: the window is longer than we think (or
            # the limit lower), or arrivals bunched at the server. One such 429 after a quiet spell is
            # most likely the bunching: a small step. Another soon after says the model is wrong.
            lone = now - self._slowed_at >= max(QUIET_MIN_S, QUIET_WINDOWS * (self.window_s or 0.0))
            decrease = LONE_DECREASE if lone else DECREASE
            self._slowed_at = now
            self.window_s = min(self.window_s / decrease, MAX_WINDOW_S) if self.window_s is not None else None
            self.rate *= decrease
            self._good_rate = self.rate
        self._step = PROBE_FIRST
        self._calm(now)

    def _learn_window(self, window_s: float, lower: float, now: float) -> None:
        self.window_s = min(max(window_s, 1e-3), MAX_WINDOW_S)
        self._window_lo = min(max(lower, 0.0), self.window_s)
        self._trying = None
        self.rate = self._target()
        self._good_rate = None
        self._calm(now)
        self._step = PROBE_FIRST
        self._settle_if_close()

    def _target(self) -> float:
        assert self.window_s is not None
        return MARGIN * self.limit / (self._trying or self.window_s)

    def _settle_if_close(self) -> None:
        if self.window_s is not None and self.window_s <= self._window_lo * WINDOW_CLOSE:
            self._settled = True

    def _calm(self, now: float) -> None:
        """A quiet spell starts: the pace changed, or the last one proved nothing."""
        self._calm_since = now
        self._paced_units = 0

    def _held_back(self, now: float) -> bool:
        """Whether the quiet spell so far tested the pace: sends queued for it most of the time. A
        spell in which the source was slower than the pace says nothing of the ceiling (raising the
        pace through it would climb without bound); it starts again."""
        assert self.rate is not None
        if self._paced_units >= BINDING * self.rate * (now - self._calm_since):
            return True
        self._calm(now)
        return False

    # --- reading the send log -----------------------------------------------------------------

    def _counted_before(self, sent: _Sent) -> list[_Sent]:
        """What the server had counted when `sent` arrived, newest first: answered sends and
        unanswered ones sent before it."""
        older = [s for s in self._pending if s.at <= sent.at]
        return sorted([*self._admitted, *older], key=lambda s: s.at, reverse=True)

    def _plausible_unit(self, sent: _Sent) -> Unit:
        """Requests, if we have sent nearly enough of them for that count to be full (the server
        may count a request or two we did not pace, GET /info's); else persons."""
        counted = self._counted_before(sent)
        return "requests" if len(counted) + 1 >= PLAUSIBLE * self.limit else "persons"

    def _units_in_window(self, sent: _Sent) -> int:
        """The units counted in the window before `sent` was refused: the server's real limit."""
        assert self.window_s is not None
        since = sent.at - self.window_s
        return sum(self.units(s.cost) for s in self._counted_before(sent) if s.at > since)

    def _oldest_counted(self, sent: _Sent) -> float | None:
        """The send time of the oldest request in a full window just before `sent` was refused."""
        room = self.limit - self.units(sent.cost)
        total = 0
        for s in self._counted_before(sent):
            total += self.units(s.cost)
            if total > room:
                return s.at
        return None

    # --- probing upward -----------------------------------------------------------------------

    def _probe(self, now: float) -> None:
        """After a quiet spell, step the pace up; each step that stays quiet for a window doubles
        the next. This is how a raised limit, or a ceiling learned too low, is found."""
        if self.rate is None or self.window_s is None or self._search_from is not None:
            return
        if not self._settled:
            self._narrow(now)
            return
        if self._good_rate is not None and self.rate > self._good_rate:
            quiet = max(self.window_s * 1.5, 1.0)  # a step's verdict takes a window to come
        else:
            quiet = max(QUIET_MIN_S, QUIET_WINDOWS * self.window_s)
        if now - self._calm_since < quiet or now - self._event_at < quiet or not self._held_back(now):
            return
        if self._good_rate is None or self.rate <= self._good_rate:
            self._good_rate = self.rate
        else:  # the last step stayed quiet for a window and a half: keep it, go further
            self._good_rate = self.rate
            self._step = min(self._step * 2, PROBE_MAX)
        self.rate = self._good_rate * (1 + self._step)
        self._calm(now)

    def _narrow(self, now: float) -> None:
        """Bisect (_window_lo, window_s]: hold a shorter window for a window (and a bit); quiet, it
        becomes the bound. A 429 makes it the lower bound instead (_slow_down)."""
        assert self.window_s is not None
        if self._trying is None:
            self._trying = max((self._window_lo + self.window_s) / 2, self.window_s / TRIAL_STEP)
        elif now - self._calm_since >= max(1.5 * self.window_s, 1.0) and self._held_back(
            now
        ):  # too fast shows within a window
            self.window_s, self._trying = self._trying, None
            self._settle_if_close()
            if not self._settled:
                self._trying = max((self._window_lo + self.window_s) / 2, self.window_s / TRIAL_STEP)
        else:
            return
        self.rate = self._target()
        self._calm(now)
