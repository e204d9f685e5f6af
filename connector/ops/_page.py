"""The read-only status page at `/`: plain server-rendered HTML, one small inline stylesheet, no
script, readable on a phone.

Every value goes through `html.escape`: source names, record ids, error texts and payloads come
from outside. Contact data (a blocked person's name, email or phone) is shown only when the operator
opted in with `[daemon] status_page_contact_data = true`; keys, source names and counts always are.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from ..delivery import ExitCode
from ..health import DaemonHealth
from ..ledger import EntryView, StatusReport
from ..recovery import Step, advice, batch_recovery, resolve_command
from ._snapshot import Snapshot

CONTACT_FIELDS = ("name", "first_name", "last_name", "email", "phone", "company")
PASS_COUNTS = ("read", "rejected", "captured", "duplicate", "failed")
RUN_COUNTS = ("read", "captured", "duplicate", "rejected", "failed", "blocked")

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:.75rem;color:#1b1b1b}
h1{font-size:1.3rem;margin:.2rem 0}h2{font-size:1.05rem;margin:1.2rem 0 .4rem}
.scroll{overflow-x:auto}table{border-collapse:collapse;min-width:100%}
th,td{padding:.25rem .5rem;border-bottom:1px solid #ddd;text-align:left;white-space:nowrap}
td.n,th.n{text-align:right}code{font-size:.85rem;background:#f3f3f3;padding:.1rem .25rem;word-break:break-all}
.ok{color:#176b2c}.bad{color:#a4161a}.warn{color:#8a5a00}.muted{color:#666;font-size:.85rem}
li{margin:.3rem 0}.card{border:1px solid #ddd;border-radius:6px;padding:.5rem .75rem;margin:.5rem 0}
"""


@dataclass(frozen=True)
class PageSource:
    name: str
    schedule: str


def render(
    snapshot: Snapshot,
    health: DaemonHealth,
    sources: list[PageSource],
    config_path: Path,
    *,
    ready: bool,
    reasons: list[str],
    contact_data: bool,
    paused: Mapping[str, float] | None = None,
    integration: str = "",
    ledger: str = "",
    role: Mapping[str, Any] | None = None,
) -> str:
    """`paused`: what the daemon holds back (source name or "*" -> since when), as `capture-sync pause` left it.
    `integration` and `ledger`: the integration this page is about (`[integration] name`) and where its ledger is;
    `role`: on a shared PostgreSQL ledger, whether this daemon leads it or stands by (`leadership.Role`)."""
    report = snapshot.report
    paused = paused or {}
    live = {"paused": dict(paused), "health": health.describe(time.time())}
    parts = [
        _header(health, ready, reasons, snapshot, paused),
        _integrations(integration, ledger, role),
        _sources(sources, health, report, paused),
        _states(report),
        _advice(report, live, config_path),
        _blocked(snapshot, config_path, contact_data),
        _unknown(snapshot, config_path, contact_data),
        _runs(report),
    ]
    return _document("".join(parts))


def _when(at: float | None) -> str:
    if at is None:
        return "never"
    ago = max(time.time() - at, 0)
    span = f"{ago:.0f} s" if ago < 120 else f"{ago / 60:.0f} min" if ago < 7200 else f"{ago / 3600:.1f} h"
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f'<span title="{escape(stamp)}">{escape(span)} ago</span>'


def _table(head: Iterable[str], rows: Iterable[Iterable[str]], numeric: Iterable[str] = ()) -> str:
    """`rows` hold HTML already escaped by the caller; `head` is escaped here."""
    nums = set(numeric)
    cols = list(head)
    th = "".join(f"<th{' class=n' if c in nums else ''}>{escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=n' if c in nums else ''}>{v}</td>" for c, v in zip(cols, row, strict=True))
        + "</tr>"
        for row in rows
    )
    return f"<div class=scroll><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>"


def _header(
    health: DaemonHealth, ready: bool, reasons: list[str], snapshot: Snapshot, paused: Mapping[str, float]
) -> str:
    state = "<b class=ok>ready</b>" if ready else "<b class=bad>not ready</b>: " + escape("; ".join(reasons))
    client = f" · client {escape(health.client.client_name)}" if health.client else ""
    outage = (
        f" · <span class=warn>delivery halted by an unavailable API since {_when(health.outage_since)}</span>"
        if health.outage_since
        else ""
    )
    refused = (
        f" · <span class=bad>the API refuses the credentials since {_when(health.auth_since)}</span>"
        if health.auth_failed
        else ""
    )
    stalled = health.stalled
    stall = (
        f" · <span class=warn>{stalled.entries} entries stalled since {_when(stalled.since)} "
        f"({escape(stalled.reason or 'unknown answer')})</span>"
        if stalled.entries
        else ""
    )
    held = (
        f" · <span class=warn>paused since {_when(paused['*'])}: nothing is read or sent on schedule "
        "(<code>capture-sync resume</code>)</span>"
        if "*" in paused
        else ""
    )
    return (
        f"<h1>capture-sync</h1><p>{state}{client}{outage}{refused}{stall}{held}</p>"
        f"<p class=muted>daemon up since {_when(health.started_at)} · ledger read {_when(snapshot.taken_at)} · "
        "refreshes every 30 s</p>"
    )


def _integrations(integration: str, ledger: str, role: Mapping[str, Any] | None) -> str:
    if not integration:
        return ""
    return "<h2>Integrations</h2>" + _table(
        ["integration", "ledger", "this daemon"],
        [[f"<code>{escape(integration)}</code>", f"<code>{escape(ledger)}</code>", _doing(role)]],
    )


def _doing(role: Mapping[str, Any] | None) -> str:
    """Whether this daemon leads the integration (since when) or stands by; it leads alone without a lease."""
    if role is None:
        return "leads it"
    if role["leads"]:
        return f"<span class=ok>{escape(role['why'])}</span> since {_when(role['since'])}"
    return f"<span class=muted>{escape(role['why'])}</span>"


@dataclass(frozen=True)
class IndexRow:
    """One integration of a daemon that runs several, on the status page's index."""

    integration: str
    ledger: str
    role: Mapping[str, Any] | None
    reasons: list[str]  # why it is not ready; empty when it is
    link: str


def render_index(rows: list[IndexRow]) -> str:
    """The status page of a daemon that runs several integrations: one row each (its lead or standby
    state, whether it is ready), linking to the integration's own page."""
    table = _table(
        ["integration", "ledger", "this daemon", "ready"],
        [
            [
                f'<a href="{escape(r.link)}"><code>{escape(r.integration)}</code></a>',
                f"<code>{escape(r.ledger)}</code>",
                _doing(r.role),
                "<span class=ok>ready</span>"
                if not r.reasons
                else "<span class=bad>not ready</span>: " + escape("; ".join(r.reasons)),
            ]
            for r in rows
        ],
    )
    return _document(f"<h1>capture-sync</h1><h2>Integrations</h2>{table}")


def _document(body: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        "<meta http-equiv=refresh content=30><title>capture-sync status</title>"
        f"<style>{STYLE}</style></head><body>{body}</body></html>"
    )


def _meaning(exit_code: int) -> str:
    """`blocked`, `unsettled`, `auth`, `source failed`, ...: the exit code in docs/reliability.md's table."""
    return ExitCode(exit_code).name.lower().replace("_", " ") if exit_code in ExitCode._value2member_map_ else "error"


def _sources(sources: list[PageSource], health: DaemonHealth, report: StatusReport, paused: Mapping[str, float]) -> str:
    """One card per source: a phone has no room for a table of ten columns."""
    cards = []
    for s in sources:
        p = health.passes.get(s.name)
        if p is None:
            state = "<span class=muted>no pass yet</span>"
        elif p.exit_code == 0:
            state = "<span class=ok>ok</span>"
        else:
            state = f"<span class=bad>exit {p.exit_code} ({escape(_meaning(p.exit_code))})</span>"
            state += f" {escape(p.halted_by)}" if p.halted_by else ""
        if (unread := health.unread.get(s.name)) is not None:
            state += f" <span class=bad>not read since {_when(unread.since)}: {escape(unread.why)}</span>"
        counts = " · ".join(f"{c} {getattr(p, c)}" for c in PASS_COUNTS) if p else ""
        unsettled = sum(
            report.by_source.get(s.name, {}).get(k, 0) for k in ("pending", "in_flight", "unknown", "blocked")
        )
        since = paused.get(s.name, paused.get("*"))
        held = f"<span class=warn>paused since {_when(since)}: its ticks read nothing</span><br>" if since else ""
        cards.append(
            f"<div class=card><b>{escape(s.name)}</b> <span class=muted>{escape(s.schedule)}</span><br>{held}"
            f"last pass {_when(p.at if p else None)}: {state}<br>"
            + (f"<span class=muted>last pass: {escape(counts)}</span><br>" if counts else "")
            + f"<span class=muted>in the ledger, unsettled: {unsettled}; last success {_when(health.last_success.get(s.name))}"
            "</span></div>"
        )
    return "<h2>Sources</h2>" + "".join(cards)


def _states(report: StatusReport) -> str:
    rows = [[escape(state), str(n)] for state, n in report.by_state.items() if n]
    oldest = f"<p>oldest unsettled entry: {escape(report.oldest_unsettled)}</p>" if report.oldest_unsettled else ""
    return (
        "<h2>Entries by state</h2>"
        + (
            _table(["state", "entries"], rows, numeric=["entries"])
            if rows
            else "<p class=muted>the ledger is empty</p>"
        )
        + oldest
    )


def _advice(report: StatusReport, live: dict, config_path: Path) -> str:
    """One line per state that holds, with its command: the same words as `capture-sync status`."""
    lines = advice(report, live, config_path)
    return "<h2>What to do</h2><ul>" + "".join(f"<li>{escape(line.text)}</li>" for line in lines) + "</ul>"


def _steps(steps: list[Step]) -> str:
    items = "".join(
        f"<li><code>{escape(s.command)}</code><br><span class=muted>{escape(s.text)}</span></li>"
        if s.command
        else f"<li>{escape(s.text)}</li>"
        for s in steps
    )
    return f"<ul>{items}</ul>"


def _who(entry: EntryView, contact_data: bool) -> str:
    """An entry's source and key; with contact data, its record id and the person's fields."""
    who = f"{escape(entry.source)} <code>{escape(entry.key)}</code>"
    if contact_data:
        person = ", ".join(str(entry.payload[f]) for f in CONTACT_FIELDS if entry.payload and entry.payload.get(f))
        who += f" record {escape(entry.record_id)}" + (f": {escape(person)}" if person else "")
    return who


# this page is served by the daemon, which holds the ledger: its resolve commands wait for it to stop
_STOP_FIRST = (
    "<p class=warn>Stop the daemon before a <code>ledger resolve</code> command: it is refused while the "
    "daemon holds the ledger.</p>"
)


def _blocked(snapshot: Snapshot, config_path: Path, contact_data: bool) -> str:
    if not snapshot.blocked:
        return ""
    cards = []
    for batch in snapshot.blocked:
        blocked = [m for m in batch.members if m.state == "blocked"]
        members = "".join(f"<li>{_who(m, contact_data)}</li>" for m in blocked)
        cards.append(
            f"<div class=card><b>batch <code>{escape(batch.key)}</code></b> ({escape(batch.operation)}, "
            f"{len(blocked)} blocked)<ul>{members}</ul>{_steps(batch_recovery(batch, config_path, daemon=True))}</div>"
        )
    more = snapshot.blocked_batches - len(snapshot.blocked)
    tail = (
        f"<p>and {more} more batches: <code>{escape(f'capture-sync ledger list -c {config_path} --state blocked')}"
        "</code></p>"
        if more > 0
        else ""
    )
    return "<h2>Blocked entries (409)</h2>" + _STOP_FIRST + "".join(cards) + tail


def _unknown(snapshot: Snapshot, config_path: Path, contact_data: bool) -> str:
    if not snapshot.unknown:
        return ""
    items = []
    for u in snapshot.unknown:
        if u.asked_alone:
            steps = [
                Step("check in the CRM whether this person arrived, then either"),
                Step("send it again", resolve_command(config_path, u.entry.key, "requeue")),
                Step("never send it again", resolve_command(config_path, u.entry.key, "dismiss")),
            ]
        else:
            steps = [Step("the next sync or replay asks for it alone under its own per-person key")]
        items.append(f"<div class=card>{_who(u.entry, contact_data)}{_steps(steps)}</div>")
    total = snapshot.report.by_state.get("unknown", 0)
    more = (
        f"<p>and {total - len(items)} more: <code>{escape(f'capture-sync ledger list -c {config_path} --state unknown')}"
        "</code></p>"
        if total > len(items)
        else ""
    )
    stop_first = _STOP_FIRST if any(u.asked_alone for u in snapshot.unknown) else ""
    return "<h2>Unknown entries</h2>" + stop_first + "".join(items) + more


def _runs(report: StatusReport) -> str:
    if not report.runs:
        return ""
    rows = [
        [
            str(r.id),
            escape(r.kind),
            escape(r.started_at or ""),
            escape(r.took()),
            "" if r.exit_code is None else str(r.exit_code),
            *(str(r.counts.get(c, 0)) for c in RUN_COUNTS),
        ]
        for r in report.runs
    ]
    head = ["run", "kind", "started (UTC)", "took", "exit", *RUN_COUNTS]
    return "<h2>Last runs</h2>" + _table(head, rows, numeric=["exit", *RUN_COUNTS])
