"""docs/operations.md cannot drift from what `status` says: each advice line the page quotes (the
line after an `<!-- advice: NAME -->` marker) is the line `connector.recovery.advice` gives for
that state, rendered here for the page's example times, config path and daemon pid. That the real
commands reach each state and print these lines is tests/cli/test_status_advice.py's job."""

from __future__ import annotations

import re
from calendar import timegm
from pathlib import Path
from typing import Any

import pytest

from connector.health import DaemonHealth, Unread
from connector.ledger import Stalls
from connector.ledger.views import Attention, StatusReport
from connector.recovery import advice

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
CONFIG = Path("capture-sync.toml")
T = float(timegm((2026, 3, 4, 9, 12, 0)))  # the page's "since" time, 2026-03-04 09:12:00 UTC
NEXT = T + 180  # the daemon's next retry sweep or credentials check
PID = 4242


def _health(**changes: Any) -> DaemonHealth:
    health = DaemonHealth(("signups",), CONFIG, next_run=lambda job: NEXT)
    for name, value in changes.items():
        setattr(health, name, value)
    return health


def _report(att: Attention = Attention(), **by_state: int) -> StatusReport:
    return StatusReport(by_state=by_state, by_source={}, runs=[], oldest_unsettled=None, attention=att)


def _live(health: DaemonHealth, **paused: float) -> dict[str, Any]:
    return {"paused": paused, "health": {**health.describe(T + 300), "pid": PID}}


STALL = Stalls(200, 2, T, "HTTP 503 ServiceUnavailable/capture_failed")
REFUSED = {
    "auth_failed": "HTTP 401 Unauthorized/invalid_credentials",
    "auth_since": T,
    "unread": {"signups": Unread(T, "the API refuses the credentials", "credentials")},
}
UNREADABLE = {"unread": {"signups": Unread(T, "no file matches /data/signups-*.csv")}}

# name -> (the ledger, the daemon's live state or None, the pauses recorded for the next daemon)
STATES: dict[str, tuple[StatusReport, dict[str, Any] | None, dict[str, float] | None]] = {
    "settled": (_report(), None, None),
    "pending": (_report(pending=5), _live(_health()), None),
    "waiting": (_report(Attention(waiting=1), pending=1), _live(_health()), None),
    "outage": (_report(pending=42), _live(_health(outage_since=T)), None),
    "pending-no-daemon": (_report(pending=42), None, None),
    "stalled": (_report(Attention(stalled=200), in_flight=200), _live(_health(stalled=STALL)), None),
    "blocked": (_report(Attention(blocked=3), blocked=3), _live(_health()), None),
    "unknown": (_report(Attention(unknown=2), unknown=2), _live(_health()), None),
    "unresolved": (_report(Attention(unresolved=1), unknown=1), _live(_health()), None),
    "credentials_refused": (_report(pending=7), _live(_health(**REFUSED)), None),
    "source_unreadable": (_report(), _live(_health(**UNREADABLE)), None),
    "paused": (_report(), _live(_health(), **{"*": T}), None),
    "paused-source": (_report(), _live(_health(), signups=T), None),
    "paused-next-daemon": (_report(), None, {"*": T}),
}


def quoted() -> dict[str, str]:
    """The page's quoted lines: the first line of the fenced block after each marker."""
    found = re.findall(r"<!-- advice: ([\w-]+) -->\n```text\n(.*?)\n", PAGE.read_text(encoding="utf-8"))
    return dict(found)


def test_the_page_quotes_every_state() -> None:
    assert sorted(quoted()) == sorted(STATES)


@pytest.mark.parametrize("state", sorted(STATES))
def test_each_quoted_line_is_what_status_says(state: str) -> None:
    report, live, recorded = STATES[state]
    lines = [a.text for a in advice(report, live, CONFIG, recorded_pauses=recorded)]
    assert quoted()[state] in lines, "\n".join(lines)
