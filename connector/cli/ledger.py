"""`capture-sync ledger`: inspect entries and batches, and repair what needs a person's decision."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from ..config_file import LedgerPlace
from ..control import daemon_state
from ..ledger import STATES, BatchDetail, EntryDetail, EntryView, Ledger
from ..recovery import batch_recovery
from ._common import ExitCode, command, err, fail, open_ledger, out, table

if TYPE_CHECKING:
    from ..config import Config

app = typer.Typer(help="Inspect the ledger's entries and batches, and resolve blocked ones.", no_args_is_help=True)
_STATE_HELP = f"One of: {', '.join(STATES)}."


def open_existing(cfg: Config | LedgerPlace, *, exclusive: bool = False) -> Ledger:
    """The ledger for a command that inspects or repairs it: a missing file is an error, never a new
    empty ledger, which would hide a wrong path behind "nothing here". A repair takes the lock that
    `sync`, `replay` and `run` hold (`exclusive`): requeuing a batch while a daemon sends it would put
    the same per-person keys into a second batch in flight at the same time."""
    if cfg.ledger.url is None and not cfg.ledger_path.exists():
        fail(
            f"no ledger at {cfg.ledger_path}: nothing was synced with {cfg.path} yet, or its [ledger] path names "
            "another file (a relative path starts from the config file's folder)",
            ExitCode.USAGE,
        )
    return open_ledger(cfg, exclusive=exclusive)


@app.command("list")
@command(ledger_only=True)
def list_(
    cfg: LedgerPlace,
    state: str = typer.Option(..., "--state", help=_STATE_HELP),
    source: str | None = typer.Option(None, "--source", help="Only this source."),
    limit: int = typer.Option(
        100, "--limit", min=1, help="At most this many entries; when there are more, a line on stderr says how many."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object per line (JSON Lines): an entry each, with its payload."
    ),
) -> int:
    """List the entries in one state (oldest first).

    Example: capture-sync ledger list -c capture-sync.toml --state failed
    """
    if state not in STATES:
        fail(f"--state {state!r}: {_STATE_HELP}", ExitCode.USAGE)
    with open_existing(cfg) as ledger:
        entries = ledger.list_entries(state, source=source, limit=limit)
        total = ledger.count_entries(state, source=source) if len(entries) == limit else len(entries)
    if as_json:
        for entry in entries:
            out.print(json.dumps(asdict(entry), ensure_ascii=False), markup=False, soft_wrap=True)
    else:
        _entries_table(f"{len(entries)} {state} entries", entries)
    if total > len(entries):  # on stderr, so that --json output stays one object per line
        err.print(f"showing {len(entries)} of {total}; use --limit {total} to see them all", markup=False)
    return 0


def _entries_table(title: str, entries: list[EntryView]) -> None:
    t = table(title, "key", "source", "record", "state", "person_id", "updated (UTC)", "last error")
    for e in entries:
        t.add_row(e.key, e.source, e.record_id, e.state, e.person_id or "", e.updated_at or "", e.last_error or "")
    out.print(t)


@app.command()
@command(ledger_only=True)
def show(
    cfg: LedgerPlace,
    key: str | None = typer.Argument(
        None, help="A per-person idempotency key or a batch key; or name a record with --source and --record."
    ),
    source: str | None = typer.Option(None, "--source", help="With --record: the source the record comes from."),
    record: str | None = typer.Option(
        None,
        "--record",
        help="With --source: the record's id in that source; every version of it is shown, oldest first.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print one JSON object (the entry or batch); with --record one JSON array, a version each.",
    ),
) -> int:
    """Show one entry (with every batch and attempt it was part of), one batch, or every version of one record.

    A record has one entry per version of its content (a newer version supersedes or waits for an older one),
    so --source and --record may show several.

    Example: capture-sync ledger show -c capture-sync.toml p-d58d216ce949d96912c94d6f16f32900677dac3f

    Example: capture-sync ledger show -c capture-sync.toml --source signups --record 1042
    """
    by_record = source is not None or record is not None
    if by_record == (key is not None) or (by_record and None in (source, record)):
        fail("give a KEY, or both --source and --record", ExitCode.USAGE)
    details: list[EntryDetail | BatchDetail]
    with open_existing(cfg) as ledger:
        if source is not None and record is not None:
            details = list(ledger.versions(source, record))
            if not details:
                fail(f"source {source!r} has no record with the id {record!r} in the ledger", ExitCode.USAGE)
        else:
            try:
                details = [ledger.show(str(key))]
            except KeyError:
                fail(f"no entry or batch has the key {key!r}", ExitCode.USAGE)
        daemon = daemon_state(cfg.ledger_path) is not None
        recoveries = [
            [step.line() for step in batch_recovery(_blocking_batch(ledger, d), cfg.path, daemon=daemon)]
            for d in details
        ]
    if as_json:
        shown = [asdict(d) for d in details]
        out.print_json(json.dumps(shown if by_record else shown[0], ensure_ascii=False))
        return 0
    for n, (detail, recovery) in enumerate(zip(details, recoveries, strict=True), 1):
        if by_record:
            out.print(f"version {n} of {len(details)}", markup=False)
        _print_detail(detail)
        for line in recovery:
            out.print(line, markup=False, soft_wrap=True)  # commands stay whole for copy and paste
    return 0


def _blocking_batch(ledger: Ledger, detail: EntryDetail | BatchDetail) -> BatchDetail | None:
    """The batch whose state a person must act on: the batch shown, or a blocked entry's last batch."""
    if isinstance(detail, BatchDetail):
        return detail
    if detail.entry.state == "blocked" and detail.batches:
        return ledger.batch(detail.batches[-1])
    return None


def _print_detail(detail: EntryDetail | BatchDetail) -> None:
    if isinstance(detail, EntryDetail):
        e = detail.entry
        for name, value in (
            ("key", e.key),
            ("source", e.source),
            ("record", e.record_id),
            ("state", e.state),
            ("person_id", e.person_id),
            ("updated", e.updated_at),
            ("last error", e.last_error),
            ("notes", e.notes),
        ):
            if value or name != "notes":
                out.print(f"{name:>10}: {value or ''}", markup=False)
        out.print(f"{'payload':>10}: {json.dumps(e.payload, ensure_ascii=False)}", markup=False)
        out.print(f"{'batches':>10}: {', '.join(detail.batches) or 'none yet'}", markup=False)
    else:
        for name, value in (
            ("batch", detail.key),
            ("operation", detail.operation),
            ("state", detail.state),
            ("last error", detail.last_error),
        ):
            out.print(f"{name:>10}: {value or ''}", markup=False)
        _entries_table(f"{len(detail.members)} members", detail.members)
    attempts = table(
        "Attempts",
        "started (UTC)",
        "operation",
        "status",
        "error",
        "retryable",
        "ms",
        "outcome",
        numeric=("status", "ms"),
    )
    for a in detail.attempts:
        attempts.add_row(
            a.started_at or "",
            a.operation,
            "" if a.status_code is None else str(a.status_code),
            "/".join(x for x in (a.error_name, a.error_code) if x),
            "" if a.retryable is None else str(a.retryable).lower(),
            "" if a.latency_ms is None else f"{a.latency_ms:.0f}",
            a.outcome,
        )
    out.print(attempts)


@app.command()
@command(ledger_only=True)
def resolve(
    cfg: LedgerPlace,
    key: str = typer.Argument(..., help="The per-person or batch key to resolve."),
    requeue: bool = typer.Option(
        False, "--requeue", help="Send it again (under a new batch key) on the next sync or replay."
    ),
    dismiss: bool = typer.Option(False, "--dismiss", help="Give up on it; it is never sent again."),
) -> int:
    """Resolve a blocked, failed or unknown entry or batch by hand: requeue it or dismiss it.

    A requeued entry that is no longer its record's newest version is superseded instead: the newer
    version is sent, never the older one over it.

    Example: capture-sync ledger resolve -c capture-sync.toml b-8a72bd2b2c634831a8c7f4f21a11eaac --requeue
    """
    if requeue == dismiss:
        fail("say what to do: exactly one of --requeue or --dismiss", ExitCode.USAGE)
    action: Literal["requeue", "dismiss"] = "requeue" if requeue else "dismiss"
    with open_existing(cfg, exclusive=True) as ledger:
        # A run of its own, so that `runs show` attributes the entries it changed to this command.
        t0, code = time.monotonic(), ExitCode.USAGE
        run_id = ledger.start_run("resolve", note=f"ledger resolve {key} --{action}")
        try:
            changed = ledger.resolve(key, action)
            code = ExitCode.OK
        except KeyError:
            fail(f"no entry or batch has the key {key!r}", ExitCode.USAGE)
        except ValueError as exc:
            fail(str(exc), ExitCode.USAGE)
        finally:
            ledger.finish_run(run_id, {}, time.monotonic() - t0, int(code))
    if requeue:
        out.print(f"requeued {changed} entries; `capture-sync replay` (or the daemon's next sweep) sends them")
    else:
        out.print(f"dismissed {changed} entries")
    return 0


@app.command("copy")
@command(ledger_only=True)
def copy_(
    cfg: LedgerPlace,
    to: str = typer.Option(
        ...,
        "--to",
        help="The new ledger: postgresql://USER@HOST:PORT/DB (password from PGPASSWORD or ~/.pgpass), or a SQLite file's path.",
    ),
    to_password_file: Path | None = typer.Option(
        None, "--to-password-file", help="A file holding the target database's password."
    ),
) -> int:
    """Copy the ledger into a new, empty one: SQLite to PostgreSQL, or back.

    Entries, batches, keys, attempts, cursors, runs, flow passes and pauses are copied as they are, in
    one transaction, so a sync on the copy sends nothing already settled. The ledger must not be in use
    (stop the daemon first) and the target must be empty. Then point the config's ledger table at the copy.

    Example: capture-sync ledger copy -c capture-sync.toml --to postgresql://capture@db.internal:5432/capture
    """
    with (
        open_existing(cfg, exclusive=True) as ledger,
        Ledger(
            to,
            password_file=to_password_file,
            integration=cfg.integration_name,
        ) as target,
    ):
        target.acquire_daemon_lock()
        if not target.is_empty():
            fail(
                f"ledger {target.name} is not empty: `ledger copy` fills a new, empty ledger only; name another",
                ExitCode.USAGE,
            )
        counts = ledger.copy_to(target)
    where = f'url = "{target.name}"' if target.path is None else f'path = "{target.path.resolve()}"'
    out.print(
        f"copied {counts['entries']} entries, {counts['batches']} batches, {counts['attempts']} attempts, "
        f"{counts['runs']} runs and {counts['source_state']} cursors from {ledger.name} to {target.name}; "
        f"to use it, set [ledger] {where} in {cfg.path}",
        markup=False,
    )
    return 0
