"""The burst shape's clock-free core: send what the window still allows at once, then each request
as an old one leaves the window.

A server that counts `rate_limit` per window accepts the whole limit at once, then one more each
time an old request leaves its window. Even pacing (`_ceiling.py`, the smooth shape) never uses
that burst, and with a daily budget it spreads a small backfill over the whole day. Here a sliding
log of what the server counted (`_sendlog.py`) says when the next request may go: now, while the
window has room; else when enough old sends have left it, plus a margin for arrival jitter (the
server counts arrivals, we know sends). A log that never holds more than the limit in any window
of the server's length also never overfills a fixed window (each fixed window is one such window)
nor a token bucket of the limit refilled over the window, so one shape serves all three countings.

Learning, when no window is configured (`capture.rate_window_s` unset):

- **Slow start.** Nothing is held back until the server first says 429: its window fills at full
  speed, which is also the burst we want. That 429 says the window is full, and what we sent says
  the rest: fewer requests than `rate_limit` counted means the server counts persons; the oldest
  send of the full window leaves it when the server frees a slot, `Retry-After` seconds from now,
  so window <= now + Retry-After - that send (and, Retry-After being whole seconds rounded up,
  > that bound - 1).
- **A bucket at that first 429** (`_refill.py`): a fill that let through well beyond `rate_limit`,
  with a Retry-After of one request's refill, shows a server that refills (a token bucket) rather
  than counts by window. Its rate is bounded from what the fill let through; the limiter then
  mirrors the bucket (a request goes when the mirror holds its units) and climbs toward the upper
  bound, which costs one more 429 at most and fixes the rate closely.
- **Narrowing at the cost of one more 429 at most.** The bound may be up to a second long. While
  the log is full, one request at a time (a *probe*) goes as soon as a shorter window would let it:
  first the whole second within the bounds (servers are configured in whole seconds; if it holds,
  that is the window), else 1 % shorter than the last window that held, again and again; the first
  429 a probe draws ends the narrowing on the last window that held. Probes ride on requests that
  would have gone a little later anyway, so narrowing costs no time, and one 429 at most.
- **Without Retry-After** the window is measured by waiting it out: single probes, each further
  from the oldest counted send by `SEARCH_GROWTH`; the first one let through bounds the window (one
  429 per probe refused: about log1.4(window / time to fill it)).
- **A 429 the log does not explain** (the window had room by our count): arrivals bunched beyond
  the margin, another process using the same client, a window longer than learned, or a bucket the
  fill did not show (its first Retry-After says how soon one token comes back, not how long the
  window is: a 1 s bucket refills too little within its fill to tell, a daily one nothing). Nothing
  goes until Retry-After has passed, then one request alone until one is let through. The jitter
  margin doubles, or steps to 1 % of the window if that is more (a step of 100 ms at most); it grows
  up to 5 % of the window or 100 ms, and once it can grow no more the window grows by 2 % (to what
  Retry-After says at once if that is longer). Once per window at most (a configured window too: it
  is where the limiter starts, and the server's answers overrule it). 429s of requests sent before
  that change are the same episode. (The window is not learned again from the sends before such a
  429: pruned sends may be long gone, or another process's, and a limit lowered mid-run looks the
  same; a longer window is reached by the 2 % steps instead.)
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from ._ceiling import Unit
from ._refill import CLIMB_MIN, BucketMirror, bounds, refill_rate
from ._sendlog import BUCKETS, SendLog

MAX_WINDOW_S = 86_400.0  # the longest window we would believe: a daily budget
JITTER_S = 0.02  # each window is held this much longer: arrivals jitter (event loop, network) ...
JITTER_SHARE = 0.002  # ... and clocks drift apart, more over a long window
JITTER_STEP_SHARE = 0.01  # an unexplained 429 widens the margin to this share of the window (JITTER_MAX_S at most)
JITTER_MAX_SHARE = 0.05  # the margin never grows past this share of the window ...
JITTER_MAX_S = 0.1  # ... or this, if more: arrivals on 2 cores at load 5-6 come up to 95 ms late
TRIAL_STEP = 0.01  # a probe tries a window this much shorter than the last one that held
SEARCH_GROWTH = 1.4  # without Retry-After: each probe waits this much longer (from the oldest send)
PLAUSIBLE = 0.75  # requests are the unit if the 429 came after this share of rate_limit requests
LENGTHEN = 1.02  # an unexplained 429 lengthens a learned window at least this much
BUSY_REQUESTS, BUSY_GAPS = 8, 10  # a pause of 10 mean gaps of the last 8 sends ends a bucket's span ...
BUSY_PACE = 0.5  # ... and so does a slower spell: the span's requests a second below this share of theirs
BUCKET_HISTORY = 4  # windows of sends kept while following a bucket: enough to bound its rate closely
BUCKET_LOWER = 0.9  # a held bucket's second 429 within a window lowers the rate followed this much
SOLO_POLL_S = 0.01  # while one request tests the room after such a 429, the others look this often


@dataclass
class _Sent:
    at: float
    cost: int


class BurstFinder:
    """Releases requests by a sliding log of sends, and learns the unit and the window."""

    def __init__(self, rate_limit: int, window_s: float | None = None) -> None:
        if rate_limit < 1 or (window_s is not None and not 0 < window_s <= MAX_WINDOW_S):
            raise ValueError(f"rate_limit must be >= 1 and window_s in (0, {MAX_WINDOW_S:g}]")
        self.limit = rate_limit
        self.hint = window_s
        self.window_s: float | None = window_s
        # A configured window still leaves the unit open: requests first (the faster guess); the
        # first 429 settles it.
        self.unit: Unit | None = "requests" if window_s is not None else None
        self.rate_limited = 0
        self.paused_until = -math.inf
        self.jitter_s = JITTER_S
        self._log = SendLog()
        self._pending: deque[_Sent] = deque()  # sent, not yet answered
        self._lo = window_s or 0.0  # a learned window lies in (_lo, window_s]
        self._trial: float | None = None  # narrowing: the shorter window the next probe tries
        self._probe_at: float | None = None  # ... and the send of the probe in flight
        self._search_from: float | None = None  # searching the window: the oldest send it counts
        self._search_span = 0.0
        self._changed_at = -math.inf  # when a 429 last changed the model
        self._unexplained_at = -math.inf  # when the log last had room the server had not
        self._solo_since: float | None = None  # one request at a time tests the room since then
        self._first_at: float | None = None
        self._bucket: BucketMirror | None = None  # the server refills (a token bucket): its mirror
        self._bucket_refused_at = -math.inf  # ... and the send its last 429 refused

    @property
    def rate(self) -> float | None:
        """The ceiling held on average, in the learned unit per second (None: window not known)."""
        return None if self.window_s is None else self.limit / self.window_s

    @property
    def refill(self) -> float | None:
        """The rate a token bucket is followed at, in the unit per second (None: counted by window)."""
        return self._bucket.floor if self._bucket is not None else None

    def units(self, cost: int) -> int:
        return cost if self.unit == "persons" else 1

    def span(self, window_s: float) -> float:
        """How long a send is held in the log: the window, and the margin for jitter."""
        return window_s * (1 + JITTER_SHARE) + self.jitter_s

    def reseed(self, rate_limit: int, now: float) -> None:
        """GET /info said `rate_limit` (again): a changed limit is the new budget per window."""
        if rate_limit >= 1:
            if self._bucket is not None:  # a bucket's depth and rate, both per window, scale alike
                self._bucket.hold(self._bucket.floor * rate_limit / self.limit, now)
                self._bucket.limit = rate_limit
            self.limit = rate_limit

    def counted(self, cost: int, at: float) -> None:
        """A request the server counted without asking (the run's GET /info)."""
        self._log.book(at, cost, self._width(at))
        if self._bucket is not None:
            self._bucket.take(self.units(cost), at)

    # --- sending ------------------------------------------------------------------------------

    def delay(self, cost: int, now: float) -> float:
        """0 when a request of `cost` may go now (it is then booked); else seconds to wait first."""
        if self._first_at is None:
            self._first_at = now
        if now < self.paused_until:
            return self.paused_until - now
        if self._solo_since is not None and self._pending and self._pending[-1].at >= self._solo_since:
            return SOLO_POLL_S  # after a 429 the log did not explain, one request tests the room first
        if self._bucket is not None:  # a bucket: a request goes when its mirror holds the units
            self._log.prune(now - BUCKET_HISTORY * self.span(self.limit / self._bucket.floor))
            if (wait := self._bucket.wait(self.units(cost), now)) > 0:
                return max(wait, 1e-6)
            self._bucket.take(self.units(cost), now)
            return self._send(cost, now)
        if self.window_s is None:  # slow start, or one probe of the search at a time
            if self._search_from is not None:
                self._search_span *= SEARCH_GROWTH
                self.paused_until = self._search_from + self._search_span
            return self._send(cost, now)
        persons = self.unit == "persons"
        span = self.span(self.window_s)
        self._log.prune(now - span)
        used = self._log.used(persons)
        need = min(used + self.units(cost) - self.limit, used)  # a request over the limit waits for all
        if need <= 0:
            return self._send(cost, now)
        frees = self._log.frees(need, persons)
        assert frees is not None  # need <= used
        go_at = frees + span
        if self._trial is not None:
            trial_at = frees + self.span(self._trial)
            if self._probe_at is not None:  # a probe in flight: if it holds, this one's turn may be now
                return max(min(go_at, max(trial_at, now + SOLO_POLL_S)) - now, 1e-6)
            if trial_at <= now:
                self._probe_at = now
                return self._send(cost, now)
            go_at = min(go_at, trial_at)
        return max(go_at - now, 1e-6)  # never 0 unbooked: rounding may put go_at a hair before now

    def _width(self, now: float) -> float:
        """Sends closer than this share a log entry: a window's worth is at most BUCKETS entries."""
        known = self.window_s if self.window_s is not None else now - (self._first_at or now)
        return known / BUCKETS

    def _send(self, cost: int, now: float) -> float:
        self._log.book(now, cost, self._width(now))
        self._pending.append(_Sent(now, cost))
        return 0.0

    def _take(self, cost: int, now: float, *, refused: bool) -> _Sent:
        """The unanswered send an answer is for: the oldest of its cost for an answer, the newest
        for a 429 (a server refuses before doing any work, so a 429 overtakes older answers)."""
        for sent in reversed(self._pending) if refused else self._pending:
            if sent.cost == cost:
                self._pending.remove(sent)
                return sent
        return _Sent(now, cost)

    # --- answers ------------------------------------------------------------------------------

    def on_answered(self, cost: int, now: float) -> None:
        """Any answer but 429: the server counted the request."""
        sent = self._take(cost, now, refused=False)
        keep = self.span(self.window_s) if self.window_s is not None else MAX_WINDOW_S
        while self._pending and self._pending[0].at < now - keep:  # never answered (a lost connection)
            self._pending.popleft()
        if self._probe_at is not None and sent.at >= self._probe_at and self._trial is not None:
            # The probe, or a send after it, was answered: a 429 comes faster than an answer, so the
            # probe was let through: the shorter window held.
            self.window_s, self._probe_at = self._trial, None
            self._trial = self._next_trial()
        if self._solo_since is not None and sent.at >= self._solo_since:
            self._solo_since = None
        if self._search_from is not None and sent.at >= self._changed_at:
            # The first request let through after the 429: the oldest counted send had left the
            # window when it arrived, so the window is at most this long (the probe before, not).
            span = sent.at - self._search_from
            self._learn(span, span / SEARCH_GROWTH)
            self._search_from = None
            self.paused_until = now

    def on_unanswered(self, cost: int, now: float) -> None:
        """No answer came (a lost connection, a timeout): the server may have counted the request, so
        it stays in the send log, but it is awaited no more. Awaited still, a request that was testing
        the room alone after a 429 would hold every request back for good (its retry included), and a
        narrowing probe would keep the others polling every SOLO_POLL_S until the longer bound: the
        narrowing ends on the last window that held."""
        sent = self._take(cost, now, refused=False)
        if self._probe_at is not None and sent.at >= self._probe_at:
            self._trial = self._probe_at = None

    def on_rate_limited(self, retry_after: float | None, cost: int, now: float) -> None:
        """A 429: the server did not count it. Learn what it says."""
        self.rate_limited += 1
        sent = self._take(cost, now, refused=True)
        self._log.unbook(sent.at, cost)
        if self._probe_at is not None and sent.at >= self._probe_at:  # too short: narrowing ends
            self._lo, self._trial, self._probe_at = self._trial or self._lo, None, None
            return
        if sent.at < self._changed_at:
            if self._bucket is not None:
                self._bucket.hold(self._bucket.floor, now)  # a second 429 spent: the mirror climbs no more
            return  # sent before the model last changed: the same episode, already answered
        self._changed_at = now
        if self.unit is None or (self.hint is not None and self.rate_limited == 1):
            unit = self._plausible_unit()
            changed, self.unit = unit != self.unit, unit
            if changed and self.window_s is not None:
                return  # counted in the wrong unit: that explains it
        persons = self.unit == "persons"
        if self._bucket is not None and self._bucket_refused(sent, now):
            return
        oldest = self._log.oldest_of_last(self.limit - self.units(cost), persons)
        if self.window_s is None:
            if self._search_from is not None:
                return  # a search probe refused: the next one waits longer (delay)
            # The first 429 of all (a refuted bucket's is read as a window's) may show a refill.
            spans = self._busy_spans(sent.at) if self.rate_limited == 1 else ()
            before = self._log.oldest_of_last(self.limit, persons)  # the send before the last `limit` units
            fixed_s = now + (retry_after or 0.0) - before if before is not None else math.inf
            rates = refill_rate(self.limit, spans, retry_after, self.units(cost), now - sent.at, self.jitter_s, fixed_s)
            if rates is not None:
                low, high = rates
                self.window_s = self._lo = min(self.limit / low, MAX_WINDOW_S)
                self._trial = None
                top = high if high > low * (1 + CLIMB_MIN) else None
                self._bucket = BucketMirror(self.limit, low, 0.0, sent.at, top, now)
                self._drained(sent.at)
            elif retry_after is not None and oldest is not None:
                bound = now + retry_after - oldest
                whole = retry_after == int(retry_after)  # then it may be rounded up by up to 1 s
                self._learn(bound, max(now - oldest, bound - 1 if whole else bound / 1.02))
            else:  # no Retry-After to compute it from: wait the window out, one probe at a time
                self._search_from = oldest if oldest is not None else sent.at
                self._search_span = max(now - self._search_from, 0.05)
                self.paused_until = self._search_from + self._search_span * SEARCH_GROWTH
            return
        # The log had room, the server had none: nothing more goes until it says there is room.
        if retry_after is not None:
            self.paused_until = max(self.paused_until, now + retry_after)
        self._solo_since = now
        if now < self._unexplained_at + self.window_s:
            return  # the last change has not had a window to show (a bucket drained below zero refills first)
        self._unexplained_at = now
        cap = max(JITTER_MAX_SHARE * self.window_s, JITTER_MAX_S)
        margin_grew = self.jitter_s < cap  # jitter first; the window grows once the margin is spent
        # Doubled, or to 1 % of the window at once: on a loaded machine arrivals lag by up to some 400 ms,
        # and each doubling from 20 ms cost a 429, whose whole-second Retry-After holds every send back.
        # That step stops at 100 ms: the margin never narrows, and at long windows an unexplained 429 is
        # another process or a lowered limit, which no margin helps (1 % of a day is 864 s, review R12).
        step = min(JITTER_STEP_SHARE * self.window_s, JITTER_MAX_S)
        self.jitter_s = max(self.jitter_s, min(max(2 * self.jitter_s, step), cap))
        self._trial = self._probe_at = None
        bound = now + retry_after - oldest if retry_after is not None and oldest is not None else 0.0
        self.window_s = min(max(bound, self.window_s if margin_grew else self.window_s * LENGTHEN), MAX_WINDOW_S)

    def _busy_spans(self, before: float) -> Iterator[tuple[float, int, int]]:
        """The spans of sending up to `before` that may show a bucket's rate: back to the first pause
        longer than `BUSY_GAPS` times the mean gap between the last `BUSY_REQUESTS` sends (at least
        four jitter margins). A bucket is drained by a burst that goes without pauses; over a slower
        spell before it, units beyond the limit may be sends that left a window long ago, and their
        rate says nothing of the server's (a sliding window after a trickle would be followed at the
        trickle's pace). A trickle without such pauses ends the spans too: from where the span's requests
        a second fall below `BUSY_PACE` of the last sends' pace. Each span: its length, the units
        answered in it, the units sent in it (those not answered yet may still draw a 429: one may come
        back after one to a later send)."""
        last = self._log.oldest_of_last(BUSY_REQUESTS, persons=False)
        pause = BUSY_GAPS * (before - last) / BUSY_REQUESTS if last is not None else 0.0
        unanswered = [(s.at, self.units(s.cost)) for s in self._pending if s.at < before]
        pace = BUSY_REQUESTS / (before - last) if last is not None and before > last else math.inf
        for span, units, requests in self._log.spans(before, self.unit == "persons", max(pause, 4 * self.jitter_s)):
            if requests > BUSY_REQUESTS and requests < BUSY_PACE * pace * span:
                return
            yield span, units - sum(u for at, u in unanswered if at >= before - span), units

    def _drained(self, at: float) -> None:
        """The server's bucket was empty when the send of `at` arrived: so is the mirror then, a jitter
        margin lower still, less what went after it."""
        assert self._bucket is not None
        self._bucket.drain(at, self.jitter_s)
        for sent in self._pending:
            if sent.at > at:
                self._bucket.take(self.units(sent.cost), sent.at)

    def _bucket_refused(self, sent: _Sent, now: float) -> bool:
        """A 429 while mirroring a bucket. The mirror held a request's units at most: its climb went past
        the server's rate (the send log now bounds the rate closely: held from then on), or, once held,
        arrivals bunched past the margin (it doubles); the mirror empties. It held more: the server is no
        such bucket; the mirror goes, and this 429 is read as a window's first. A held mirror's second
        429 within a window is the bucket's rate lowered (by the server, or another process drawing on
        it): the rate followed is lowered by `BUCKET_LOWER`, each time. True: handled."""
        bucket = self._bucket
        assert bucket is not None
        units = self.units(sent.cost)
        if bucket.level_at(sent.at) > units + bucket.floor * self.jitter_s:
            self._bucket, self.window_s, self._lo = None, None, 0.0
            return False
        floor = bucket.floor
        if bucket.top is None:
            self.jitter_s = min(2 * self.jitter_s, JITTER_MAX_SHARE * self.limit / bucket.floor)
            if sent.at < self._bucket_refused_at + self.limit / bucket.floor:
                floor *= BUCKET_LOWER  # twice within a window: the bucket refills slower than it did
        self._bucket_refused_at = sent.at
        found = bounds(self.limit, self._busy_spans(sent.at), units, now - sent.at, self.jitter_s)
        if found is not None and (bucket.top is not None or found[0] < floor):
            # Climbing: the log's bound, closer than the first; held: a 429 says the rate is at most it.
            floor = found[0] if bucket.top is None else max(found[0], floor)
        bucket.hold(floor, sent.at)
        self.window_s = self._lo = min(self.limit / bucket.floor, MAX_WINDOW_S)
        self._drained(sent.at)
        return True

    def _learn(self, window_s: float, lower: float) -> None:
        self.window_s = min(max(window_s, 1e-3), MAX_WINDOW_S)
        self._lo = min(max(lower, 0.0), self.window_s)
        # Servers are configured in whole seconds: the whole second inside the bounds is tried
        # first, and holding it ends the narrowing; else each probe tries 1 % shorter.
        whole = float(math.floor(self.window_s))
        self._trial = whole if self._lo < whole < self.window_s else self._next_trial()

    def _next_trial(self) -> float | None:
        assert self.window_s is not None
        if self.window_s == int(self.window_s):
            return None  # a whole second held: that is the window
        trial = self.window_s * (1 - TRIAL_STEP)
        return trial if trial > self._lo else None

    def _plausible_unit(self) -> Unit:
        """Requests, if we have sent nearly enough of them for that count to be full (the server
        may count a request or two we did not book); else persons."""
        return "requests" if self._log.requests + 1 >= PLAUSIBLE * self.limit else "persons"
