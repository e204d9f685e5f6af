"""`capture-sync run`: the daemon."""

import asyncio

import typer

from ..config import Config
from ..scheduler import Daemon
from ._common import api_client, command, open_ledger, print_report, run_until_signal


@command()
def run(
    cfg: Config,
    once: bool = typer.Option(False, "--once", help="Run every source once, deliver, and exit (for cron or a timer)."),
) -> int:
    """The daemon: each source on its schedule plus a retry sweep, until SIGTERM or SIGINT.

    On a stop signal the requests in hand finish and are recorded, then it exits 0 (within 10 s).
    One daemon per ledger: a second one exits 2. A mapped column a source lacks stops it at start
    (exit 2, every problem listed); a source that cannot be read, or fails mid-read, is reported in
    one line on each of its ticks while the others run on, and is read again once fixed. With
    --once, the exit codes are those of `sync`.

    Example: capture-sync run -c /etc/capture-sync/capture-sync.toml
    """

    async def go(stop: asyncio.Event) -> int:
        async with api_client(cfg) as client:
            daemon = Daemon(cfg, ledger, client, stop)
            if not once:
                return await daemon.serve()
            report = await daemon.once()
            print_report(report, "Run once", cfg.path)
            return report.exit_code

    with open_ledger(cfg, exclusive=True) as ledger:
        return run_until_signal(go)
