"""The webhook bodies: a generic JSON object, or a Slack-compatible one (`text` and blocks).

A body says what changed, since when, the counts, the sources and the command that helps; it is
built only from those, an answer's status and error name/code, and our own words: never from a
record, a rejection reason or an error text that might quote one, and never from the API secret or
the webhook URL.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._conditions import Change
from ._config import Condition, Format

_WHAT: dict[Condition, tuple[str, str]] = {  # (started, cleared), formatted with the fields below
    "auth": (
        "The Capture API refuses the credentials: nothing is sent and no source is read until the credential "
        "files hold a working pair ({unsettled} entries wait in the ledger; sources not read: {unread}).",
        "The Capture API accepts the credentials again: delivery resumed after {duration}.",
    ),
    "blocked": (
        "{blocked} entries wait for a person's decision (blocked by a 409, or unknown after being asked alone).",
        "No entries wait for a decision any more.",
    ),
    "outage": (
        "Delivery halted: the Capture API has been unavailable for {duration} ({unsettled} entries wait).",
        "Delivery resumed after an outage of {duration}.",
    ),
    "reject_rate": (
        "Source {subject}: a pass rejected {rejected} of {read} records ({share}), above the threshold.",
        "Source {subject}: the last pass rejected {share} of its records, within the threshold.",
    ),
    "stale": (
        "Source {subject}: no successful pass for {duration}.",
        "Source {subject}: a pass succeeded again after {duration}.",
    ),
    "ledger": (
        "The ledger's database has not answered for {duration}: nothing is read or sent until it does ({reason}).",
        "The ledger's database answers again after {duration}: delivery carries on by itself.",
    ),
    "stalled": (
        "{entries} entries in {batches} batches were stopped by a non-retryable answer ({reason}): {then}.",
        "No entries wait in stalled batches any more.",
    ),
}

_COMMAND: dict[Condition, str] = {
    "auth": "capture-sync check -c {config}",
    "blocked": "capture-sync ledger list -c {config} --state blocked",
    "outage": "capture-sync check -c {config}",
    "reject_rate": "capture-sync ledger list -c {config} --state rejected --source {subject}",
    "stale": "capture-sync status -c {config}",
    "stalled": "capture-sync replay -c {config}",
    "ledger": "capture-sync status -c {config}",
}


@dataclass(frozen=True)
class Context:
    """What every body of this daemon carries besides the change itself."""

    config: Path
    sources: tuple[str, ...]
    host: str


def duration(seconds: float) -> str:
    """`45s`, `12m`, `3h 5m`, `2d 4h`: an operator's reading, not an exact figure."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def json_body(change: Change, label: str, context: Context) -> dict[str, Any]:
    """The generic body; the Slack one is drawn from it."""
    fields = {**change.counts, **change.notes, "subject": change.subject, "duration": duration(change.duration_s)}
    if "reject_share" in change.counts:
        fields["share"] = f"{float(change.counts['reject_share']):.0%}"
    command = _COMMAND[change.condition].format(
        config=shlex.quote(str(context.config)), subject=shlex.quote(change.subject or "")
    )
    return {
        "app": "capture-sync",
        "alert": label,
        "condition": change.condition,
        "status": "started" if change.started else "cleared",
        "subject": change.subject,
        "summary": _WHAT[change.condition][0 if change.started else 1].format(**fields),
        "since": _iso(change.since),
        "at": _iso(change.at),
        **({"ended": _iso(change.ended)} if change.ended is not None else {}),
        "duration_s": round(change.duration_s, 1),
        "counts": dict(change.counts),
        **({"details": dict(change.notes)} if change.notes else {}),
        "sources": [change.subject] if change.subject else list(context.sources),
        "command": command,
        "config": str(context.config),
        "host": context.host,
    }


def _escape(text: str) -> str:
    """Slack's mrkdwn takes &, < and > as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(body: dict[str, Any]) -> dict[str, Any]:
    """A Slack incoming-webhook body: `text` (notifications, clients without blocks) and blocks."""
    started = body["status"] == "started"
    title = (
        f"{':rotating_light:' if started else ':white_check_mark:'} capture-sync: {body['condition']} {body['status']}"
    )
    counts = ", ".join(f"{k} {v}" for k, v in body["counts"].items()) or "none"
    facts = [
        f"*Since*\n{body['since']}",
        f"*Sources*\n{_escape(', '.join(body['sources']) or '-')}",
        f"*Counts*\n{_escape(counts)}",
        f"*Host*\n{_escape(body['host'])}",
    ]
    return {
        "text": f"capture-sync {body['condition']} {body['status']}: {body['summary']}",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": title[:150], "emoji": True}},
            {"type": "section", "text": {"type": "mrkdwn", "text": _escape(body["summary"])}},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in facts]},
            {"type": "section", "text": {"type": "mrkdwn", "text": f"Run: `{_escape(body['command'])}`"}},
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": _escape(f"alert {body['alert']} · config {body['config']}")},
                ],
            },
        ],
    }


def render(change: Change, label: str, fmt: Format, context: Context) -> dict[str, Any]:
    body = json_body(change, label, context)
    return slack_body(body) if fmt == "slack" else body
