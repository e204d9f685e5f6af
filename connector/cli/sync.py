"""`capture-sync sync` and `capture-sync replay`: one pass now, with a progress bar on a terminal."""

import json

import typer

from .. import delivery
from ..config import Config
from ..progress import progress_for
from ._common import api_client, command, open_ledger, out, print_report, run_until_signal


@command()
def sync(
    cfg: Config,
    source: str | None = typer.Option(None, "--source", help="Only this source (default: all)."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Map and validate, show what would be sent; send nothing, change nothing."
    ),
) -> int:
    """One pass over the sources, then deliver everything the ledger holds unsettled.

    The setup is checked first: a mapped column a source lacks stops before anything is read (exit 2).
    A source that cannot be read is skipped (exit 2) and one that fails mid-read keeps what it gave
    (exit 6); the other sources are read and everything is delivered all the same. Rejected records
    are set aside in the ledger and do not change the exit code.

    Example: capture-sync sync -c capture-sync.toml --source signups
    """
    jobs = cfg.jobs(source)
    if dry_run:
        with open_ledger(cfg) as ledger:
            report = delivery.preview(ledger, jobs)
        for person in report.dry_run_preview or []:
            out.print(json.dumps(person, ensure_ascii=False), markup=False)
        print_report(report, "Dry run: nothing was sent", cfg.path)
        return report.exit_code

    async def go(stop):
        async with api_client(cfg) as client:
            with progress_for(out) as progress:
                return await delivery.sync(ledger, client, jobs, cfg.delivery_settings(), progress=progress, stop=stop)

    with open_ledger(cfg, exclusive=True) as ledger:
        report = run_until_signal(go)
    print_report(report, "Sync", cfg.path)
    return report.exit_code


@command()
def replay(
    cfg: Config,
    include_failed: bool = typer.Option(
        False, "--include-failed", help="Also re-send entries that failed (after fixing their cause): new batch keys, each person's own key."
    ),
) -> int:
    """Re-send what the ledger holds unsettled, with the same idempotency keys and bodies.

    Example: capture-sync replay -c capture-sync.toml --include-failed
    """

    async def go(stop):
        async with api_client(cfg) as client:
            with progress_for(out) as progress:
                return await delivery.replay(
                    ledger, client, cfg.delivery_settings(), include_failed=include_failed, progress=progress, stop=stop
                )

    with open_ledger(cfg, exclusive=True) as ledger:
        report = run_until_signal(go)
    print_report(report, "Replay", cfg.path)
    return report.exit_code
