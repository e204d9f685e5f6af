"""Schedules: `every N{s,m,h}` and crontab lines, and the messages for anything else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from connector.schedule import schedule_trigger


@pytest.mark.parametrize(("text", "seconds"), [("every 1s", 1), ("every 5m", 300), ("Every 2 h", 7200)])
def test_every_is_an_interval(text: str, seconds: int) -> None:
    trigger = schedule_trigger(text)
    assert isinstance(trigger, IntervalTrigger)
    assert trigger.interval == timedelta(seconds=seconds)


def test_a_crontab_line_fires_on_its_minutes() -> None:
    trigger = schedule_trigger("*/15 * * * *")
    assert isinstance(trigger, CronTrigger)
    start = datetime(2026, 1, 1, 10, 1, tzinfo=UTC).astimezone(trigger.timezone)
    fire = trigger.get_next_fire_time(None, start)
    assert fire is not None and fire.minute == 15


@pytest.mark.parametrize("text", ["every 0s", "every 5 days", "*/5 * * *", "", "hourly", 5])
def test_anything_else_says_what_is_accepted(text: object) -> None:
    with pytest.raises(ValueError, match=r"every N|at least 1 second"):
        schedule_trigger(text)
