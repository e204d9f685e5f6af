"""`capture-sync status`: what the ledger holds, by state and by source, and the last runs."""

import json
from dataclasses import asdict
from pathlib import Path

import typer

from ..config_file import LedgerPlace
from ..ledger import Ledger, StatusReport
from ..recovery import attention_lines
from ._common import command, out, table
from .ledger import open_existing


@command(ledger_only=True)
def status(
    cfg: LedgerPlace,
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
    if report.merged:
        out.print(f"merged: {report.merged} captured record(s) went to a person the CRM holds for another record")
    if report.runs:
        cols = ("read", "captured", "merged", "duplicate", "rejected", "failed", "blocked")
        runs = table("Last runs", "run", "kind", "started (UTC)", "took", "exit", *cols, numeric=("exit", *cols))
        for run in report.runs:
            runs.add_row(
                str(run.id), run.kind, run.started_at or "", run.took(),
                "" if run.exit_code is None else str(run.exit_code), *(str(run.counts.get(c, 0)) for c in cols),
            )
        out.print(runs)
