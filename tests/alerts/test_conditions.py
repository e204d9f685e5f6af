"""The alert conditions' promises: each (condition, subject) is told once when it starts and once when
it clears, never on every check; thresholds hold; sources are judged one by one. The clock is the
snapshot's `now`, so time is simulated."""

from __future__ import annotations

from dataclasses import replace

from connector.alerts import AlertSettings, Change, Snapshot, Watch
from connector.health import Outage, SourcePass, Unread
from connector.ledger import Stalls

T0 = 1_700_000_000.0
SOURCES = ("signups", "webinar")


def settings(**over: object) -> AlertSettings:
    return AlertSettings.model_validate({"url": "https://hooks.example.org/x", **over})


def snap(now: float = T0, **over: object) -> Snapshot:
    return replace(Snapshot(now, T0, SOURCES), **over)


def a_pass(at: float, read: int, rejected: int, exit_code: int = 0) -> SourcePass:
    return SourcePass(at, 0.1, exit_code, read, rejected, read - rejected, 0, 0, None)


def told(changes: list[Change]) -> list[tuple[str, str | None, bool]]:
    return [(c.condition, c.subject, c.started) for c in changes]


def test_an_outage_is_told_once_after_its_threshold_and_once_when_it_clears() -> None:
    watch = Watch(settings(conditions=["outage"], outage_after="10m"))
    down = T0 + 5
    assert watch.update(snap(down + 1, outage_since=down)) == []
    assert watch.update(snap(down + 599, outage_since=down)) == []  # shorter than the threshold: nothing
    [started] = watch.update(snap(down + 600, outage_since=down, unsettled=7))
    assert (started.condition, started.started, started.since, started.counts) == (
        "outage",
        True,
        down,
        {"unsettled": 7},
    )
    for minute in range(11, 60):  # it lasts: nothing more is said
        assert watch.update(snap(down + minute * 60, outage_since=down)) == []
    [cleared] = watch.update(snap(down + 3600, outage_since=None))
    assert (cleared.started, cleared.since, cleared.at) == (False, down, down + 3600)
    assert watch.update(snap(down + 3700)) == []


def test_a_short_outage_says_nothing_at_all() -> None:
    watch = Watch(settings(conditions=["outage"], outage_after="2s"))
    assert watch.update(snap(T0 + 1, outage_since=T0)) == []
    assert watch.update(snap(T0 + 1.5)) == []


def test_auth_and_blocked_start_and_clear_once_each() -> None:
    watch = Watch(settings(conditions=["auth", "blocked"]))
    assert told(watch.update(snap(T0, auth_failed="refused", blocked=2))) == [
        ("auth", None, True),
        ("blocked", None, True),
    ]
    assert watch.update(snap(T0 + 15, auth_failed="refused", blocked=5)) == []  # a count that grows is no new alert
    assert told(watch.update(snap(T0 + 30, blocked=5))) == [("auth", None, False)]
    [cleared] = watch.update(snap(T0 + 45, blocked=0))
    assert (cleared.condition, cleared.started, cleared.since, cleared.counts) == ("blocked", False, T0, {"blocked": 0})


def test_reject_rate_is_judged_per_source_above_the_share_and_from_the_minimum_read() -> None:
    watch = Watch(settings(conditions=["reject_rate"], reject_share=0.1, reject_min_read=10))
    small = {"signups": a_pass(T0, read=3, rejected=1)}  # 33 % of 3 records: too few to judge
    assert watch.update(snap(T0, passes=small)) == []
    at_share = {"signups": a_pass(T0 + 1, read=100, rejected=10)}  # exactly 10 %: not above it
    assert watch.update(snap(T0 + 1, passes=at_share)) == []
    bad = {"signups": a_pass(T0 + 2, read=100, rejected=11), "webinar": a_pass(T0 + 2, read=50, rejected=0)}
    [started] = watch.update(snap(T0 + 2, passes=bad))
    assert (started.subject, started.counts) == ("signups", {"read": 100, "rejected": 11, "reject_share": 0.11})
    assert watch.update(snap(T0 + 3, passes=bad)) == []  # the same pass seen again
    worse = {**bad, "webinar": a_pass(T0 + 4, read=20, rejected=20)}
    assert told(watch.update(snap(T0 + 4, passes=worse))) == [("reject_rate", "webinar", True)]
    quiet = {**worse, "signups": a_pass(T0 + 5, read=2, rejected=0)}  # too few: signups' state is kept
    assert watch.update(snap(T0 + 5, passes=quiet)) == []
    fixed = {**worse, "signups": a_pass(T0 + 6, read=40, rejected=1)}
    assert told(watch.update(snap(T0 + 6, passes=fixed))) == [("reject_rate", "signups", False)]
    assert sorted(watch.active()) == [("reject_rate", "webinar")]


def test_a_source_without_a_successful_pass_for_too_long_is_stale_alone() -> None:
    watch = Watch(settings(conditions=["stale"], stale_after="2h"))
    hour = 3600.0
    assert watch.update(snap(T0 + 2 * hour, last_success={"webinar": T0 + hour})) == []  # 2 h exactly: not beyond
    [signups] = watch.update(snap(T0 + 2 * hour + 1, last_success={"webinar": T0 + hour}))
    assert (signups.subject, signups.since) == ("signups", T0)  # never succeeded: stale since the daemon started
    assert watch.update(snap(T0 + 2.5 * hour, last_success={"webinar": T0 + 2.4 * hour})) == []
    webinar = watch.update(snap(T0 + 4.5 * hour, last_success={"webinar": T0 + 2.4 * hour}))
    assert told(webinar) == [("stale", "webinar", True)] and webinar[0].since == T0 + 2.4 * hour
    back = watch.update(snap(T0 + 4 * hour, last_success={"signups": T0 + 4 * hour, "webinar": T0 + hour}))
    assert told(back) == [("stale", "signups", False)]


def test_only_the_conditions_an_entry_names_are_watched() -> None:
    watch = Watch(settings(conditions=["blocked"]))
    assert watch.update(snap(T0 + 10**6, auth_failed="refused", outage_since=T0)) == []
    everything = Watch(settings())
    assert {
        c.condition for c in everything.update(snap(T0 + 10**6, auth_failed="refused", outage_since=T0, blocked=1))
    } == {"auth", "outage", "blocked", "stale"}


def test_an_outage_cleared_late_tells_its_real_length_from_its_first_failed_to_its_first_answered_request() -> None:
    watch = Watch(settings(conditions=["outage"], outage_after="2s"))
    down, up = T0 + 3, T0 + 127  # the first request with no answer; the first capture answered
    [started] = watch.update(snap(down + 15, outage_since=down))
    assert started.since == down
    [cleared] = watch.update(snap(up + 14, last_outage=Outage(down, up)))  # the check comes 14 s later
    assert (cleared.since, cleared.ended, cleared.duration_s) == (down, up, 124)


def test_a_stall_is_told_at_once_with_its_entries_reason_and_what_happens_next_and_cleared_once_settled() -> None:
    watch = Watch(settings())  # on by default
    stalled = Stalls(entries=200, batches=2, since=T0 + 1, reason="HTTP 503 ServiceUnavailable/capture_failed")
    then = "not retried automatically (spec 4.4 rule 4): `capture-sync replay -c c.toml` re-sends them"
    [started] = [c for c in watch.update(snap(T0 + 2, stalled=stalled, stall_then=then)) if c.condition == "stalled"]
    assert (started.started, started.since, started.counts) == (True, T0 + 1, {"entries": 200, "batches": 2})
    assert started.notes == {"reason": "HTTP 503 ServiceUnavailable/capture_failed", "then": then}
    assert [
        c for c in watch.update(snap(T0 + 60, stalled=replace(stalled, entries=300))) if c.condition == "stalled"
    ] == []
    [cleared] = [c for c in watch.update(snap(T0 + 90)) if c.condition == "stalled"]
    assert (cleared.started, cleared.since) == (False, T0 + 1)


def test_the_auth_alert_counts_what_waits_and_names_the_sources_not_read_since() -> None:
    watch = Watch(settings(conditions=["auth"]))
    unread = {"signups": Unread(T0 + 30, "the API refuses the credentials", "credentials")}
    [started] = watch.update(snap(T0 + 31, auth_failed="refused", auth_since=T0 + 29, unsettled=12, unread=unread))
    assert (started.since, started.counts) == (T0 + 29, {"unsettled": 12})
    # webinar is not marked yet (its tick has not come): nothing is read from the refusal on
    assert started.notes == {"unread": "signups since 2023-11-14T22:13:50Z, webinar since 2023-11-14T22:13:49Z"}


def test_a_ledger_database_away_past_the_threshold_is_told_once_and_once_when_it_answers() -> None:
    watch = Watch(settings(conditions=["ledger"], outage_after="1m"))
    why = "PostgreSQL postgresql://capture@db:5432/capture cannot be reached: connection refused"
    assert watch.update(snap(T0 + 30, ledger_down=(T0, why))) == []  # shorter than outage_after
    [started] = watch.update(snap(T0 + 60, ledger_down=(T0, why)))
    assert (started.condition, started.started, started.since, started.notes) == ("ledger", True, T0, {"reason": why})
    assert watch.update(snap(T0 + 600, ledger_down=(T0, why))) == []
    [cleared] = watch.update(snap(T0 + 900))
    assert (cleared.condition, cleared.started) == ("ledger", False)
