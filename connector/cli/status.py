"""`capture-sync status`: what the ledger holds, by state and by source, the last runs, and with a
running daemon its live state (credentials refused, an outage, sources not read, what is paused);
then one line of advice for each state that holds."""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from ..config_file import LedgerPlace
from ..control import daemon_state
from ..ledger import Ledger, StatusReport
from ..recovery import advice
from ._common import command, out, table
from .ledger import open_existing


@command(ledger_only=True)
def status(
    cfg: LedgerPlace,
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print the status as one JSON object (with `live`, the running daemon's state, and `advice`).",
    ),
) -> int:
    """Counts by state and source, the last runs, and one line of advice for each state that holds.

    Each line of advice names the command that helps; with a daemon running, its live state too
    (credentials refused, an outage, sources not read, what is paused).

    Example: capture-sync status -c capture-sync.toml --json
    """
    live = daemon_state(cfg.ledger_path)  # asked before the ledger is opened: a read never waits on the daemon
    with open_existing(cfg) as ledger:
        print_status(ledger, cfg.path, as_json=as_json, live=live)
    return 0


def print_status(
    ledger: Ledger, config_path: Path, *, as_json: bool = False, live: dict[str, Any] | None = None
) -> None:
    """`live`: the running daemon's state, or None; the advice then promises nothing of a daemon."""
    report = ledger.status()
    lines = advice(report, live, config_path, recorded_pauses=ledger.paused() if live is None else None)
    if as_json:
        out.print_json(
            json.dumps(
                {
                    **asdict(report),
                    "settled": report.settled,
                    "live": live,
                    "advice": [asdict(a) for a in lines],
                }
            )
        )
        return
    _print_tables(report)
    for line in lines:
        out.print(line.text, markup=False, soft_wrap=True)  # a command to copy: never broken across lines


def _print_tables(report: StatusReport) -> None:
    states = [s for s, n in report.by_state.items() if n] or ["pending"]
    by_source = table("Entries by source and state", "source", *states, numeric=tuple(states))
    for source, counts in report.by_source.items():
        by_source.add_row(source, *(str(counts.get(s, 0)) for s in states))
    by_source.add_row("all", *(str(report.by_state.get(s, 0)) for s in states))
    out.print(by_source)
    out.print(f"oldest unsettled entry: {report.oldest_unsettled or 'none'}")
    if report.merged:
        out.print(f"merged: {report.merged} captured record(s) went to a person the CRM holds for another record")
    if report.runs:
        cols = ("read", "captured", "merged", "duplicate", "rejected", "failed", "blocked")
        runs = table("Last runs", "run", "kind", "started (UTC)", "took", "exit", *cols, numeric=("exit", *cols))
        for run in report.runs:
            runs.add_row(
                str(run.id),
                run.kind,
                run.started_at or "",
                run.took(),
                "" if run.exit_code is None else str(run.exit_code),
                *(str(run.counts.get(c, 0)) for c in cols),
            )
        out.print(runs)
