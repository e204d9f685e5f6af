"""Alerts on their way out: the bodies (what they carry and what they never do), and the webhook
sender (backoff, a 4xx given up at once, drop-oldest when the webhook stays down), with the daemon's
health, ledger counts and webhook faked. No sleeps: backoff is set to zero where time is not the point."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import structlog
from pydantic import SecretStr

from connector.alerts import Alert, Alerts, AlertSettings, SendPolicy, Webhook
from connector.health import DaemonHealth, SourcePass
from connector.ledger import Stalls

URL = "https://hooks.example.org/services/T1/B2/s3cr3t-webhook-token"
QUICK = SendPolicy(initial_backoff_s=0.0, max_backoff_s=0.0, max_attempts=3, queue_size=2)


class Ledger:
    blocked, unsettled = 0, 0

    def blocked_count(self) -> int:
        return self.blocked

    def unsettled_count(self) -> int:
        return self.unsettled

    def stalls(self) -> Stalls:
        return Stalls()


def alert(**over: object) -> Alert:
    return Alert("ops", AlertSettings.model_validate({"url": URL, **over}), SecretStr(URL))


class Hook:
    """A webhook transport: answers each request with the next status in `statuses` (then 200)."""

    def __init__(self, *statuses: int) -> None:
        self.statuses, self.bodies = list(statuses), []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return httpx.Response(self.statuses.pop(0) if self.statuses else 200)


async def test_blocked_entries_raise_one_json_alert_with_counts_and_the_command_and_clear_once() -> None:
    hook, ledger, health = Hook(), Ledger(), DaemonHealth(started_at=1e9)
    alerts = Alerts(
        [alert(conditions=["blocked", "reject_rate"])],
        health,
        ledger,
        config=Path("/etc/cs.toml"),
        sources=["signups"],
        transport=httpx.MockTransport(hook),
    )
    ledger.blocked = 3
    health.passes["signups"] = SourcePass(
        1e9, 0.5, 5, read=40, rejected=2, captured=38, duplicate=0, failed=0, halted_by=None
    )
    for _ in range(3):
        await alerts.check()
    ledger.blocked = 0
    await alerts.check()
    await alerts.check()
    await alerts.aclose(timeout_s=5)
    started, cleared = hook.bodies
    assert (started["condition"], started["status"], started["counts"]) == ("blocked", "started", {"blocked": 3})
    assert (cleared["status"], cleared["counts"]) == ("cleared", {"blocked": 0})
    assert started["summary"].startswith("3 entries wait for a person's decision (blocked by a 409")
    assert started["command"] == "capture-sync ledger list -c /etc/cs.toml --state blocked"
    assert set(started) == {
        "app",
        "alert",
        "condition",
        "status",
        "subject",
        "summary",
        "since",
        "at",
        "duration_s",
        "counts",
        "sources",
        "command",
        "config",
        "host",
    }
    assert URL not in json.dumps(hook.bodies)


async def test_a_webhook_error_is_retried_and_a_4xx_given_up_at_once() -> None:
    hook = Hook(503, 429, 200, 404)
    webhook = Webhook("ops", SecretStr(URL), timeout_s=1, policy=QUICK, transport=httpx.MockTransport(hook))
    with structlog.testing.capture_logs() as logs:
        webhook.post({"n": 1}, condition="auth", status="started")
        webhook.post({"n": 2}, condition="auth", status="cleared")
        await webhook.aclose(timeout_s=5)
    assert [b["n"] for b in hook.bodies] == [1, 1, 1, 2]  # 503, 429, then 200; 404 for the second
    said = [(e["event"], e.get("attempt"), e["status"]) for e in logs if e["event"].startswith("alert.")]
    assert said == [
        ("alert.send_failed", 1, "started"),
        ("alert.send_failed", 2, "started"),
        ("alert.sent", None, "started"),
        ("alert.undelivered", None, "cleared"),
    ]
    assert all(URL not in str(e) for e in logs)


async def test_a_webhook_down_for_long_drops_the_oldest_alert_and_says_so() -> None:
    gate, first_in_hand = asyncio.Event(), asyncio.Event()

    async def down(request: httpx.Request) -> httpx.Response:
        first_in_hand.set()
        await gate.wait()
        return httpx.Response(200, json={})

    webhook = Webhook("ops", SecretStr(URL), timeout_s=1, policy=QUICK, transport=httpx.MockTransport(down))
    with structlog.testing.capture_logs() as logs:
        webhook.post({"n": 0}, condition="stale", subject="s0", status="started")
        await first_in_hand.wait()  # the worker holds the first; the queue holds 2 of the next 4
        for n in range(1, 5):
            webhook.post({"n": n}, condition="stale", subject=f"s{n}", status="started")
        gate.set()
        await webhook.aclose(timeout_s=5)
    dropped = [e["subject"] for e in logs if e["event"] == "alert.dropped"]
    sent = [e["subject"] for e in logs if e["event"] == "alert.sent"]
    assert dropped == ["s1", "s2"] and sent == ["s0", "s3", "s4"]


async def test_alerts_are_not_judged_without_entries_and_never_raise() -> None:
    class Broken(Ledger):
        def blocked_count(self) -> int:
            raise OSError("disk I/O error")

    idle = Alerts([], DaemonHealth(), Ledger(), config=Path("c.toml"), sources=["signups"])
    with structlog.testing.capture_logs() as logs:
        await idle.check()  # no [[alerts]]: the ledger's figures are read for the page, nothing is judged
    assert logs == []
    alerts = Alerts([alert()], DaemonHealth(), Broken(), config=Path("c.toml"), sources=["signups"])
    with structlog.testing.capture_logs() as logs:
        await alerts.check()
    assert [e["event"] for e in logs] == ["alerts.check_failed"]
