"""`capture-sync sync` and `capture-sync replay`: one pass now, with a progress bar on a terminal."""

import json
import shlex
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from .. import delivery
from ..config import Config
from ..ledger import LedgerLocked
from ..progress import TerminalProgress, progress_for
from ._common import (
    ExitCode,
    api_client,
    command,
    fail,
    open_ledger,
    open_output,
    out,
    pass_flow_gate,
    print_report,
    run_until_signal,
)
from ._forward import ask_daemon
from ._output import emit_json


@command()
def sync(
    cfg: Config,
    source: str | None = typer.Option(None, "--source", help="Only this source (default: all)."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Map and validate, show what would be sent; send nothing, change nothing."
    ),
    full_refresh: bool = typer.Option(
        False,
        "--full-refresh",
        help="With --source: read that source from the start, its cursor ignored (the old one is kept: "
        "`state show --history`). Records whose content did not change are not sent again.",
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        dir_okay=False,
        help="With --dry-run: write the whole preview to this file as JSON lines (created 0600): every record "
        "that would be sent, and every rejected one with its reasons.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the report as one JSON object on stdout, and nothing else there."
    ),
) -> int:
    """One pass over the sources, then deliver everything the ledger holds unsettled.

    The setup is checked first: a mapped column a source lacks stops before anything is read (exit 2).
    A source that cannot be read is skipped (exit 2) and one that fails mid-read keeps what it gave
    (exit 6); the other sources are read and everything is delivered all the same. Rejected records
    are set aside in the ledger and do not change the exit code.

    Example: capture-sync sync -c capture-sync.toml --source signups

    Example: capture-sync sync -c capture-sync.toml --dry-run --output preview.jsonl

    Example: capture-sync sync -c capture-sync.toml --full-refresh --source signups --json

    Beside a running daemon (`capture-sync run` on the same ledger), the daemon runs the pass now,
    paused or not, and this command prints its outcome and exits with its code. --dry-run changes
    nothing and runs by itself; --full-refresh is refused beside a daemon.
    """
    if full_refresh and source is None:
        fail("--full-refresh needs --source NAME: the source to read again from the start", ExitCode.USAGE)
    if output is not None and not dry_run:
        fail(
            "--output goes with --dry-run; a real run's records: `capture-sync runs show RUN --output FILE`",
            ExitCode.USAGE,
        )
    jobs = cfg.jobs(source)
    if full_refresh:
        jobs = [replace(job, from_start=True) for job in jobs]
    if dry_run:
        with open_ledger(cfg) as ledger, _preview_file(output) as sink:
            report = delivery.preview(ledger, jobs, sink)
        if as_json:
            emit_json(delivery.report_dict(report))
            return report.exit_code
        for person in report.dry_run_preview or []:
            out.print(json.dumps(person, ensure_ascii=False), markup=False)
        print_report(report, "Dry run: nothing was sent", cfg.path)
        if output is not None:
            out.print(
                f"the whole preview ({report.enqueued} to send, {report.rejected} rejected): {output}", markup=False
            )
        return report.exit_code

    async def go(stop):
        async with api_client(cfg) as client:
            with _progress(as_json) as progress:
                return await delivery.sync(
                    ledger,
                    client,
                    jobs,
                    cfg.delivery_settings(),
                    progress=progress,
                    stop=stop,
                    gate=lambda: pass_flow_gate(cfg, ledger),
                )

    try:
        ledger = open_ledger(cfg, exclusive=True)
    except LedgerLocked:
        if full_refresh:
            raise LedgerLocked(
                f"a capture-sync daemon holds ledger {cfg.ledger_name}: --full-refresh does not run beside it; "
                "stop the daemon (SIGTERM), run this, then start it again"
            ) from None
        answer = ask_daemon(cfg, "sync", {"source": source}, quiet=as_json)
        return _finish(delivery.report_from_dict(answer["report"]), "Sync (by the daemon)", cfg, as_json)
    with ledger:
        report = run_until_signal(go)
    return _finish(report, "Sync", cfg, as_json)


@command()
def replay(
    cfg: Config,
    include_failed: bool = typer.Option(
        False,
        "--include-failed",
        help="Also re-send entries that failed (after fixing their cause): new batch keys, each person's own key.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the report as one JSON object on stdout, and nothing else there."
    ),
) -> int:
    """Re-send what the ledger holds unsettled, with the same idempotency keys and bodies.

    Beside a running daemon (`capture-sync run` on the same ledger), the daemon replays now, stalled
    batches included, and this command prints its outcome and exits with its code.

    Example: capture-sync replay -c capture-sync.toml --include-failed
    """

    async def go(stop):
        async with api_client(cfg) as client:
            with _progress(as_json) as progress:
                return await delivery.replay(
                    ledger,
                    client,
                    cfg.delivery_settings(),
                    include_failed=include_failed,
                    progress=progress,
                    stop=stop,
                    gate=lambda: pass_flow_gate(cfg, ledger),
                )

    try:
        ledger = open_ledger(cfg, exclusive=True)
    except LedgerLocked:
        answer = ask_daemon(cfg, "replay", {"include_failed": include_failed or None}, quiet=as_json)
        return _finish(delivery.report_from_dict(answer["report"]), "Replay (by the daemon)", cfg, as_json)
    with ledger:
        report = run_until_signal(go)
    return _finish(report, "Replay", cfg, as_json)


def _progress(as_json: bool) -> AbstractContextManager[TerminalProgress | None]:
    """No progress bar under --json: stdout holds the JSON object only."""
    return nullcontext(None) if as_json else progress_for(out)


def _finish(report: delivery.RunReport, title: str, cfg: Config, as_json: bool) -> int:
    if as_json:
        emit_json(delivery.report_dict(report))
    else:
        print_report(report, title, cfg.path)
        if report.run_id is not None:
            out.print(
                f"this run's records: capture-sync runs show -c {shlex.quote(str(cfg.path))} {report.run_id}",
                markup=False,
            )
    return report.exit_code


@contextmanager
def _preview_file(path: Path | None) -> Iterator[Callable[[dict[str, Any]], None] | None]:
    """A sink writing each preview line to `path` as it comes (no size limit); 0600: it holds contact data."""
    if path is None:
        yield None
        return
    with open_output(path) as fh:

        def write(line: dict[str, Any]) -> None:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")

        yield write
