"""Schedules as the config writes them (`every 5m`, or a crontab line), as APScheduler triggers.

A leaf module: the config checks a schedule when it loads, and the daemon builds its jobs from it.
The crontab parser loads at the first crontab line: the defaults are all `every N`, and a sync that
only checks them need not load it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from apscheduler.triggers.interval import IntervalTrigger

if TYPE_CHECKING:
    from apscheduler.triggers.base import BaseTrigger

_EVERY = re.compile(r"^every\s+(\d+)\s*([smh])$", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600}


def schedule_trigger(text: Any) -> BaseTrigger:
    """`every N{s,m,h}` or a 5-field crontab line (local time); ValueError says what is accepted."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError('must be a cron expression ("*/5 * * * *") or "every N{s,m,h}" ("every 5m")')
    match = _EVERY.match(text.strip())
    if match:
        seconds = int(match.group(1)) * _UNIT_S[match.group(2).lower()]
        if seconds < 1:
            raise ValueError(f"{text!r}: the interval must be at least 1 second")
        return IntervalTrigger(seconds=seconds)
    from apscheduler.triggers.cron import CronTrigger

    try:
        return CronTrigger.from_crontab(text.strip())
    except ValueError as exc:
        raise ValueError(f'{text!r} is neither a cron expression (5 fields) nor "every N{{s,m,h}}": {exc}') from None
