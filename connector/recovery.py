"""What a person does about each state of the daemon and the ledger, in one wording for every place
that says it (`status`, `ledger show`, the daemon's status page): the cause and the exact command,
never one that would be refused in that state.

A leaf module (ledger views only), so the daemon's web page can use it without the command line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .ledger import BatchDetail, StatusReport


@dataclass(frozen=True)
class Step:
    """One line of advice: prose, or a command to copy with why it is the one to run."""

    text: str
    command: str | None = None

    def line(self) -> str:
        return f"  {self.command}   ({self.text})" if self.command else self.text


def resolve_command(config_path: Path, key: str, action: str) -> str:
    return f"capture-sync ledger resolve -c {config_path} {key} --{action}"


def batch_recovery(batch: BatchDetail | None, config_path: Path, *, daemon: bool = False) -> list[Step]:
    """For a batch that no automatic step will finish: its likely cause and the commands that recover it.
    `daemon`: one holds the ledger, which `ledger resolve` needs for itself; the steps say so first."""
    if batch is None:
        return []
    if batch.state == "blocked":
        after_timeout = any(a.status_code is None for a in batch.attempts)
        cause = (
            "likely cause: the first request with this key timed out on our side while the server was still "
            "running it, so the retry met a 409 (spec 4.4 rule 3: no automatic retry)"
            if after_timeout
            else "likely cause: the server has an earlier request with this key that needs manual recovery (spec 4.4 rule 3)"
        )
        return [
            Step(cause),
            Step(
                "check in the CRM whether these persons arrived, then "
                + (
                    "stop the daemon (`ledger resolve` is refused while it holds the ledger) and either"
                    if daemon
                    else "either"
                )
            ),
            Step(
                "send it again under its same key: once the first request has finished, the server answers "
                "with its earlier result instead of capturing again"
                if batch.operation == "person"
                else "send them again in a new batch; their per-person keys let the server recognise any it already has",
                resolve_command(config_path, batch.key, "requeue"),
            ),
            Step("never send them again", resolve_command(config_path, batch.key, "dismiss")),
        ]
    if batch.state == "stalled":
        return [
            Step(
                f"stopped by a non-retryable server error; `capture-sync replay -c {config_path}` re-sends it with the "
                "same key and body"
            )
        ]
    return []


@dataclass(frozen=True)
class Advice:
    """One line for one state the daemon or the ledger is in, with the exact command that helps
    (or the words that say nothing is to be done). `state` names the state for `status --json`."""

    state: str
    text: str


def advice(
    report: StatusReport,
    live: Mapping[str, Any] | None,
    config_path: Path,
    *,
    recorded_pauses: Mapping[str, float] | None = None,
) -> list[Advice]:
    """One line per state that holds, most urgent first; "nothing to do" when none does.

    `live` is the running daemon's state (`{"paused": {...}, "health": DaemonHealth.describe(now)}`),
    None when no daemon holds the ledger: then a daemon's own doings are not promised, and commands
    that a running daemon would refuse (`ledger resolve`) are advised only without one. Beside a
    daemon, `replay` is asked of the daemon itself, so it is advised in both cases. `recorded_pauses`:
    without a daemon, what `capture-sync pause` recorded in the ledger for the next one."""
    c = f"-c {config_path}"
    health: Mapping[str, Any] = (live or {}).get("health") or {}
    unsettled = sum(report.by_state.get(state, 0) for state in ("pending", "in_flight", "unknown"))
    lines = [
        *_live_lines(live, health, c, unsettled),
        *_recorded_pauses((recorded_pauses or {}) if live is None else {}, c),
        *_ledger_lines(report, live, health, c),
    ]
    return lines or [Advice("settled", "nothing to do: everything is settled and every source is read")]


def _live_lines(live: Mapping[str, Any] | None, health: Mapping[str, Any], c: str, unsettled: int) -> Iterator[Advice]:
    if live is None:
        return
    unread: dict[str, Mapping[str, Any]] = health.get("unread_sources") or {}
    if auth := health.get("auth"):
        names = ", ".join(
            f"{n} since {_at(u['since'])}" for n, u in sorted(unread.items()) if u["kind"] == "credentials"
        )
        unread_too = f" and these sources are not read: {names}" if names else ""
        yield Advice(
            "credentials_refused",
            f"the Capture API refuses the credentials since {_at(auth['refused_since'])} ({auth['reason']}): nothing is "
            f"sent ({unsettled} entries wait in the ledger){unread_too}; write a working pair into the credential files, "
            f"then `kill -HUP {health['pid']}` (or wait: the daemon reads them again "
            f"{_when(health.get('next', {}).get('credentials'))})",
        )
    broken = {n: u for n, u in sorted(unread.items()) if u["kind"] != "credentials"}
    if broken:
        what = "; ".join(f"{n} since {_at(u['since'])}: {u['why']}" for n, u in broken.items())
        yield Advice(
            "source_unreadable",
            f"not read: {what}; fix it (`capture-sync check {c}` says what is wrong); the daemon reads it again on its "
            "next tick",
        )
    paused: Mapping[str, float] = live.get("paused") or {}
    if "*" in paused:
        yield Advice("paused", f"delivery is paused since {_at(paused['*'])}: `capture-sync resume {c}` resumes it")
    elif paused:
        since = ", ".join(f"{n} since {_at(t)}" for n, t in sorted(paused.items()))
        commands = " and ".join(f"`capture-sync resume {c} --source {n}`" for n in sorted(paused))
        yield Advice("paused", f"paused: {since}; {commands} resumes it")


def _recorded_pauses(paused: Mapping[str, float], c: str) -> Iterator[Advice]:
    if paused:
        what = "every source" if "*" in paused else ", ".join(sorted(paused))
        yield Advice(
            "paused",
            f"paused for the next daemon ({what}, since {_at(min(paused.values()))}): a daemon started on this ledger "
            f"reads and sends nothing on schedule there until `capture-sync resume {c}`"
            + ("" if "*" in paused else " (or `--source NAME`)"),
        )


def _ledger_lines(
    report: StatusReport,
    live: Mapping[str, Any] | None,
    health: Mapping[str, Any],
    c: str,
) -> Iterator[Advice]:
    """The ledger's unsettled work, by kind; `health` ({} without a daemon) says what the daemon will do."""
    daemon = live is not None
    att = report.attention
    plain = report.by_state.get("pending", 0) + report.by_state.get("in_flight", 0) - att.stalled - att.waiting
    held = health.get("auth") or "*" in (live or {}).get("paused", {})  # the line above says what waits, and why
    if plain > 0 and not held:
        yield _pending(plain, health, c, daemon=daemon)
    if att.stalled:
        stalled = health.get("stalled") or {}
        why = f" ({stalled['reason']}, since {_at(stalled['since'])})" if stalled.get("reason") else ""
        then = stalled.get("then") or f"`capture-sync replay {c}` re-sends them with the same keys"
        yield Advice(
            "stalled", f"{att.stalled} entries stalled: a non-retryable answer stopped their batches{why}; {then}"
        )
    resolve = (
        "then stop the daemon (`ledger resolve` is refused while it holds the ledger) and run" if daemon else "then run"
    )
    if att.blocked:
        yield Advice(
            "blocked",
            f"{att.blocked} blocked: a batch got 409 (an earlier request with its key needs manual recovery, often one "
            f"still running after a client-side timeout); see `capture-sync ledger list {c} --state blocked`, {resolve} "
            f"the `ledger resolve` command that `capture-sync ledger show {c} KEY` gives",
        )
    if att.unknown:
        yield Advice(
            "unknown",
            f"{att.unknown} unknown: the server's answer could not be placed on them; the next "
            f"{'pass' if daemon else 'sync or replay'} asks for each alone under its own per-person key",
        )
    if att.unresolved:
        yield Advice(
            "unresolved",
            f"{att.unresolved} unknown even when asked alone: check them in the CRM (`capture-sync ledger list {c} "
            f"--state unknown`), {resolve} `capture-sync ledger resolve {c} KEY --requeue` or `--dismiss`",
        )
    if att.waiting:
        yield Advice(
            "waiting",
            f"{att.waiting} newer versions wait for an older version of their record to settle, so that the newest "
            "data lands last: nothing to do",
        )


def _pending(n: int, health: Mapping[str, Any], c: str, *, daemon: bool) -> Advice:
    sweep = _when(health.get("next", {}).get("retry-sweep"))
    if outage := health.get("outage"):
        return Advice(
            "outage",
            f"{n} entries wait: the Capture API has not answered since {_at(outage['since'])}; the daemon re-sends them "
            f"by itself once it answers (next try: its retry sweep {sweep}): nothing to do; `capture-sync check {c}` says "
            "whether it answers now",
        )
    if daemon:
        return Advice(
            "pending",
            f"{n} entries wait to be sent: the daemon sends them on its next pass or retry sweep ({sweep})",
        )
    return Advice(
        "pending",
        f"{n} entries wait to be sent and no daemon runs: `capture-sync replay {c}` sends them once the API answers "
        f"(`capture-sync check {c}` says whether it does)",
    )


def _at(at: float | None) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at else "an unknown time"


def _when(at: float | None) -> str:
    return f"at {_at(at)}" if at else "on its next tick"
