"""The burst limiter's log of sends the server counted: when each left (or will leave) its window.

A sliding log holds one timestamp per request; at a daily budget of a million requests that is a
million floats. Sends within `width` of an entry's first send share it, stamped with the latest of
them (so they are taken to leave the window together, when the last of them does: never early, and
never more than `width` late), and the log holds at most about window / width entries whatever the
limit: the limiter asks for a width of window / BUCKETS. Each entry counts requests and persons
apart, so the unit the server counts in can be learned after the sends were booked.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

BUCKETS = 4096  # entries per window at most; a send is held up to window / BUCKETS longer than needed


@dataclass
class _Entry:
    at: float  # the latest send it holds
    requests: int
    persons: int
    first: float  # its first send: an entry spans at most `width`, however closely sends follow


class SendLog:
    """Sends the server counted, oldest first, in requests and persons."""

    def __init__(self) -> None:
        self._log: deque[_Entry] = deque()
        self.requests = 0
        self.persons = 0

    def __len__(self) -> int:
        return len(self._log)

    def used(self, persons: bool) -> int:
        return self.persons if persons else self.requests

    def book(self, at: float, cost: int, width: float) -> None:
        """A request carrying `cost` persons went at `at`."""
        last = self._log[-1] if self._log else None
        if last is not None and at - width <= last.first and last.at <= at:
            last.at, last.requests, last.persons = at, last.requests + 1, last.persons + cost
        else:
            self._log.append(_Entry(at, 1, cost, at))
        self.requests += 1
        self.persons += cost

    def unbook(self, at: float, cost: int) -> None:
        """The request sent at `at` was refused (a 429 is not counted): it no longer holds a slot.
        It sits in the oldest entry stamped at or after its send."""
        found: _Entry | None = None
        for entry in reversed(self._log):
            if entry.at < at:
                break
            found = entry
        if found is None or found.requests < 1:
            return
        found.requests -= 1
        took = min(cost, found.persons)
        found.persons -= took
        self.requests -= 1
        self.persons -= took

    def prune(self, before: float) -> None:
        """Forget sends at or before `before`: they have left the window."""
        log = self._log
        while log and log[0].at <= before:
            gone = log.popleft()
            self.requests -= gone.requests
            self.persons -= gone.persons

    def frees(self, need: int, persons: bool) -> float | None:
        """When `need` units will have left, counting from the oldest: the stamp of the entry whose
        leaving frees the last of them (the window still to be added). None: the log holds fewer."""
        freed = 0
        for entry in self._log:
            freed += entry.persons if persons else entry.requests
            if freed >= need:
                return entry.at
        return None

    def spans(self, before: float, persons: bool, max_gap: float) -> Iterator[tuple[float, int, int]]:
        """Newest first, for each entry booked before `before`, back to the first pause in sending longer
        than `max_gap`: how long before `before` the entry's first send went, and the units and the
        requests booked from that send up to it."""
        total, requests, after = 0, 0, before
        for entry in reversed(self._log):
            if entry.at < before:
                if after - entry.at > max_gap:
                    return
                total += entry.persons if persons else entry.requests
                requests += entry.requests
                after = entry.first
                yield before - entry.first, total, requests

    def oldest_of_last(self, units: int, persons: bool) -> float | None:
        """The stamp of the oldest send among the newest ones that hold more than `units` units:
        in a full window, the send whose leaving frees the next slot. None: the log holds fewer."""
        total = 0
        for entry in reversed(self._log):
            total += entry.persons if persons else entry.requests
            if total > units:
                return entry.at
        return None
