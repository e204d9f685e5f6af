"""`capture-sync status`: what the ledger holds, by state and by source, and the last runs."""

import json
from dataclasses import asdict
from pathlib import Path

import typer

from ..config import Config
from ..ledger import Attention, Ledger, StatusReport
from ._common import command, out, table
from .ledger import open_existing


@command()
def status(
    cfg: Config,
    as_json: bool = typer.Option(False, "--json", help="Print the status as one JSON object."),
) -> int:
    """Counts by state and source, the last runs, and the oldest unsettled entry.

    Example: capture-sync status -c capture-sync.toml --json
    """
    with open_existing(cfg) as ledger:
        print_status(ledger, cfg.path, as_json=as_json)
    return 0


def print_status(ledger: Ledger, config_path: Path, *, as_json: bool = False) -> None:
    report = ledger.status()
    if as_json:
        out.print_json(json.dumps({**asdict(report), "settled": report.settled}))
        return
    _print_tables(report)
    for line in attention_lines(report.attention, config_path):
        out.print(line, markup=False)


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


def _print_tables(report: StatusReport) -> None:
    states = [s for s, n in report.by_state.items() if n] or ["pending"]
    by_source = table("Entries by source and state", "source", *states, numeric=tuple(states))
    for source, counts in report.by_source.items():
        by_source.add_row(source, *(str(counts.get(s, 0)) for s in states))
    by_source.add_row("all", *(str(report.by_state.get(s, 0)) for s in states))
    out.print(by_source)
    if report.settled:
        out.print("oldest unsettled entry: none, everything is settled")
    else:
        out.print(f"oldest unsettled entry: {report.oldest_unsettled or 'none pending'}")
    if report.runs:
        cols = ("read", "captured", "duplicate", "rejected", "failed", "blocked")
        runs = table("Last runs", "run", "kind", "started (UTC)", "seconds", "exit", *cols, numeric=("seconds", "exit", *cols))
        for run in report.runs:
            runs.add_row(
                str(run.id), run.kind, run.started_at or "", f"{run.duration_s:.1f}" if run.duration_s is not None else "running",
                "" if run.exit_code is None else str(run.exit_code), *(str(run.counts.get(c, 0)) for c in cols),
            )
        out.print(runs)
