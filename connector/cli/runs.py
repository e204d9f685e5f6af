"""`capture-sync runs`: the run history, and per run the records it changed, as a report a person can
hand to whoever owns the data (`--state rejected --format csv`), contact data masked unless asked."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from .. import logs
from ..config_file import LedgerPlace
from ..contact_mask import mask_email, mask_name, mask_phone, mask_text
from ..ledger import STATES, RunEntry, RunView
from ._common import ExitCode, command, err, fail, open_output, out, table
from ._output import InertConsole, emit_json
from .ledger import open_existing

if TYPE_CHECKING:  # `runs list` reads the ledger alone; `runs show` loads the whole config
    from ..config import Config

app = typer.Typer(help="Run history, and the records each run changed.", no_args_is_help=True)

COLUMNS = ("run", "source", "record_id", "state", "reason", "attempts", "name", "email", "phone", "key", "updated_at")
FORMATS = ("table", "csv", "jsonl")
_SUFFIX_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
_COUNTS_SHOWN = ("read", "enqueued", "rejected", "sent", "captured", "merged", "duplicate", "failed", "blocked")


@app.command("list")
@command(ledger_only=True)
def list_runs(
    cfg: LedgerPlace,
    limit: int = typer.Option(20, "--limit", min=1, help="The newest N runs."),
    as_json: bool = typer.Option(False, "--json", help='Print one JSON object {"runs": [...]} on stdout.'),
) -> int:
    """The newest runs: syncs, replays, daemon passes, and operator commands (ledger resolve, state set).

    Consecutive passes that read and sent nothing and ended for the same reason are one entry:
    `×12 over 5m 30s` is twelve such passes from the first one's start to the last one's end.
    `merged` counts captures the CRM answered with a person it holds for another record.

    Example: capture-sync runs list -c capture-sync.toml --limit 5
    """
    with open_existing(cfg) as ledger:
        runs = ledger.runs(limit)
    if as_json:
        emit_json({"runs": [asdict(r) for r in runs]})
        return 0
    t = table(
        "Runs",
        "run",
        "kind",
        "started (UTC)",
        "took",
        "exit",
        *_COUNTS_SHOWN,
        "what",
        numeric=("run", "exit", *_COUNTS_SHOWN),
    )
    for r in runs:
        what = r.note or ", ".join(r.sources)
        t.add_row(
            str(r.id),
            r.kind,
            r.started_at or "",
            r.took(),
            "" if r.exit_code is None else str(r.exit_code),
            *(str(r.counts.get(c, 0)) for c in _COUNTS_SHOWN),
            f"{what}: {r.reason}" if what and r.reason else what or r.reason or "",
        )
    out.print(t)
    return 0


@app.command("show")
@command()
def show_run(
    cfg: Config,
    run: str = typer.Argument(..., help="A run id from `runs list`, or `last`."),
    state: str | None = typer.Option(None, "--state", help=f"Only entries in this state: {', '.join(STATES)}."),
    fmt: str | None = typer.Option(
        None, "--format", help="table, csv or jsonl (default: table; with --output, from the file's suffix)."
    ),
    output: Path | None = typer.Option(None, "--output", dir_okay=False, help="Write the report to this file (0600)."),
    show_contact_data: bool = typer.Option(
        False,
        "--show-contact-data",
        help="Show names, emails and phones in full (default: masked, e.g. A*** L***, a***@example.org).",
    ),
    as_json: bool = typer.Option(
        False, "--json", help='Print one JSON object {"run": ..., "entries": [...]} on stdout.'
    ),
) -> int:
    """The records a run changed last, with source, record id, state, reason and attempts.

    An entry belongs to the last run that changed it: after a replay settles what a sync left open,
    those entries are in the replay's report. Names, emails and phone numbers are masked (emails and
    phones in reasons too) unless --show-contact-data.

    Example: capture-sync runs show -c capture-sync.toml last --state rejected --format csv --output rejected.csv
    """
    if state is not None and state not in STATES:
        fail(f"--state {state!r}: one of {', '.join(STATES)}", ExitCode.USAGE)
    chosen = fmt or (_SUFFIX_FORMATS.get(output.suffix.lower(), "table") if output else "table")
    if chosen not in FORMATS:
        fail(f"--format {fmt!r}: one of {', '.join(FORMATS)}", ExitCode.USAGE)
    with open_existing(cfg) as ledger:
        found = ledger.find_run(run)
        if found is None:
            fail(f"no run {run!r} in ledger {cfg.ledger_name}; `capture-sync runs list` shows the runs", ExitCode.USAGE)
        entries = ledger.run_entries(found.id, state)
    rows = [_row(found.id, e, _contact_columns(cfg, e.source), show_contact_data) for e in entries]
    if as_json:
        emit_json({"run": asdict(found), "entries": rows})
        return 0
    if chosen == "table" and output is None:
        out.print(_table(found, rows, state))
        return 0
    text = _render(chosen, found, rows, state)
    if output is None:
        typer.echo(logs.inert(text), nl=False)  # a file gets the data as it is; a terminal never does
        return 0
    _write_private(output, text)
    err.print(f"{len(rows)} entries of run {found.id} written to {output} ({chosen})", markup=False)
    return 0


def _contact_columns(cfg: Config, source: str) -> dict[str, tuple[str, ...]]:
    """Which raw fields of a rejected record hold its email, phone and name: the source's mapping says."""
    for s in cfg.sources:
        if s.name == source:
            return s.job.mapping.columns()
    return {}


def _first(raw: dict[str, Any], columns: tuple[str, ...]) -> str:
    return next((str(raw[c]) for c in columns if raw.get(c)), "")


def _row(run_id: int, entry: RunEntry, columns: dict[str, tuple[str, ...]], show: bool) -> dict[str, Any]:
    """One report line. A sent person's fields come from its payload; a rejected record's from its raw
    fields, read through the source's mapping (without one, any field that looks like an email)."""
    payload = entry.payload or {}
    raw = payload.get("record") if isinstance(payload.get("record"), dict) else None
    if raw is None:
        email, phone = str(payload.get("email") or ""), str(payload.get("phone") or "")
        name = str(
            payload.get("name") or " ".join(str(payload[k]) for k in ("first_name", "last_name") if payload.get(k))
        )
    else:
        email = _first(raw, columns.get("email", ())) or next((str(v) for v in raw.values() if "@" in str(v)), "")
        phone = _first(raw, columns.get("phone", ()))
        name = _first(raw, columns.get("name", ())) or " ".join(
            v for v in (_first(raw, columns.get("first_name", ())), _first(raw, columns.get("last_name", ()))) if v
        )
    reason, record_id = entry.reason or "", entry.record_id
    if not show:  # a record id may be the contact's email (primary_key = "Email") or phone
        email, phone, reason, record_id = mask_email(email), mask_phone(phone), mask_text(reason), mask_text(record_id)
        name = mask_name(name)
    return {
        "run": run_id,
        "source": entry.source,
        "record_id": record_id,
        "state": entry.state,
        "reason": reason,
        "attempts": entry.attempts,
        "name": name,
        "email": email,
        "phone": phone,
        "key": entry.key,
        "updated_at": entry.updated_at or "",
    }


def _render(fmt: str, run: RunView, rows: list[dict[str, Any]], state: str | None) -> str:
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()
    if fmt == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    text = io.StringIO()
    InertConsole(file=text, width=240, highlight=False).print(_table(run, rows, state))
    return text.getvalue()


def _table(run: RunView, rows: list[dict[str, Any]], state: str | None) -> Table:
    what = f"{state} " if state else ""
    shown = ("source", "record_id", "state", "attempts", "name", "email", "phone", "reason")
    t = table(
        f"run {run.id} ({run.kind}, started {run.started_at}, exit {run.exit_code}): {len(rows)} {what}entries",
        *shown,
        numeric=("attempts",),
    )
    for row in rows:
        t.add_row(*(str(row[c]) for c in shown))
    return t


def _write_private(path: Path, text: str) -> None:
    with open_output(path) as fh:
        fh.write(text)
