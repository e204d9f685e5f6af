"""What a person does about work no automatic step will finish, in one wording for every place that
says it (`status`, `ledger show`, the daemon's status page): the cause and the exact command.

A leaf module (ledger views only), so the daemon's web page can use it without the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .ledger import Attention, BatchDetail


@dataclass(frozen=True)
class Step:
    """One line of advice: prose, or a command to copy with why it is the one to run."""

    text: str
    command: str | None = None

    def line(self) -> str:
        return f"  {self.command}   ({self.text})" if self.command else self.text


def resolve_command(config_path: Path, key: str, action: str) -> str:
    return f"capture-sync ledger resolve -c {config_path} {key} --{action}"


def batch_recovery(batch: BatchDetail | None, config_path: Path) -> list[Step]:
    """For a batch that no automatic step will finish: its likely cause and the commands that recover it."""
    if batch is None:
        return []
    if batch.state == "blocked":
        after_timeout = any(a.status_code is None for a in batch.attempts)
        cause = (
            "likely cause: the first request with this key timed out on our side while the server was still "
            "running it, so the retry met a 409 (spec 4.4 rule 3: no automatic retry)"
            if after_timeout else
            "likely cause: the server has an earlier request with this key that needs manual recovery (spec 4.4 rule 3)"
        )
        return [
            Step(cause),
            Step("check in the CRM whether these persons arrived, then either"),
            Step(
                "send it again under its same key: once the first request has finished, the server answers "
                "with its earlier result instead of capturing again" if batch.operation == "person" else
                "send them again in a new batch; their per-person keys let the server recognise any it already has",
                resolve_command(config_path, batch.key, "requeue"),
            ),
            Step("never send them again", resolve_command(config_path, batch.key, "dismiss")),
        ]
    if batch.state == "stalled":
        return [Step(
            f"stopped by a non-retryable server error; `capture-sync replay -c {config_path}` re-sends it with the "
            "same key and body"
        )]
    return []


def attention_lines(attention: Attention, config_path: Path) -> list[str]:
    """One line per kind of unsettled work that a plain `sync` will not finish, with its command."""
    c = f"-c {config_path}"
    lines = []
    if attention.blocked:
        lines.append(
            f"{attention.blocked} blocked: a batch got 409 (an earlier request with its key needs manual recovery, "
            f"often one still running after a client-side timeout); see `capture-sync ledger list {c} --state blocked`, "
            f"then `capture-sync ledger show {c} KEY` for the command that recovers it"
        )
    if attention.stalled:
        lines.append(
            f"{attention.stalled} in flight in batches stopped by a non-retryable server error: "
            f"`capture-sync replay {c}` re-sends them with the same keys"
        )
    if attention.unknown:
        lines.append(
            f"{attention.unknown} unknown: the server's answer could not be placed on them; the next sync or "
            "replay asks for each alone under its own per-person key"
        )
    if attention.unresolved:
        lines.append(
            f"{attention.unresolved} unknown even when asked alone: check them in the CRM "
            f"(`capture-sync ledger list {c} --state unknown`), then `capture-sync ledger resolve {c} KEY --requeue` or `--dismiss`"
        )
    if attention.waiting:
        lines.append(
            f"{attention.waiting} newer versions wait for an older version of their record to settle, "
            "so that the newest data lands last"
        )
    return lines
