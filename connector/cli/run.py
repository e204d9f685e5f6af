"""`capture-sync run`: the daemon."""

import asyncio

import typer

from ..config import Config
from ..leadership import Leadership, holder_id
from ..ops import HttpAddress, parse_address
from ..problems import ConfigProblem
from ..scheduler import Daemon
from ._common import api_client, command, open_ledger, pass_flow_gate, print_report, run_until_signal


@command()
def run(
    cfg: Config,
    once: bool = typer.Option(False, "--once", help="Run every source once, deliver, and exit (for cron or a timer)."),
    http: str | None = typer.Option(
        None, "--http", metavar="HOST:PORT",
        help="Serve /metrics (Prometheus), /healthz, /readyz and a status page at / there, e.g. 127.0.0.1:9464 "
        "(overrides [daemon] http_address; port 0 picks a free one, logged as ops.serving).",
    ),
    http_public: bool = typer.Option(
        False, "--http-public", help="Allow an --http address that is not loopback: the endpoints have no login.",
    ),
) -> int:
    """The daemon: each source on its schedule plus a retry sweep, until SIGTERM or SIGINT.

    On a stop signal the requests in hand finish and are recorded, then it exits 0 (within 10 s).
    One daemon per SQLite ledger: a second one exits 2. On a PostgreSQL ledger several daemons (on
    one host or many) may run: one leads the integration while it holds a lease ([daemon] lease_s),
    the others stand by and take over within lease_s when it dies. A mapped column a source lacks stops it at start
    (exit 2, every problem listed); a source that cannot be read, or fails mid-read, is reported in
    one line on each of its ticks while the others run on, and is read again once fixed. With
    --once, the exit codes are those of `sync`. While it runs, `sync`, `replay`, `pause` and `resume`
    on the same config reach it over a socket beside the ledger and wait for the outcome.

    Example: capture-sync run -c /etc/capture-sync/capture-sync.toml

    Example: capture-sync run -c capture-sync.toml --http 127.0.0.1:9464
    """
    if once and http:
        raise ConfigProblem(["--http serves while the daemon runs; it does nothing with --once"])
    address = _http_address(cfg, http, http_public) if not once else None

    shared = cfg.ledger.url is not None and not once  # daemons on one PostgreSQL ledger lead by lease

    async def go(stop: asyncio.Event) -> int:
        async with api_client(cfg) as client:
            leadership = Leadership(ledger.lease(holder_id(), cfg.daemon.lease_s), cfg.daemon.lease_s) if shared else None
            daemon = Daemon(cfg, ledger, client, stop, http=address, leadership=leadership)
            if not once:
                return await daemon.serve()
            report = await daemon.once()
            print_report(report, "Run once", cfg.path)
            return report.exit_code

    with open_ledger(cfg, exclusive=not shared) as ledger:
        pass_flow_gate(cfg, ledger)
        return run_until_signal(go)


def _http_address(cfg: Config, flag: str | None, public: bool) -> HttpAddress | None:
    text = flag or cfg.daemon.http_address
    if text is None:
        return None
    try:
        return parse_address(text, public=public or cfg.daemon.http_public)
    except ValueError as exc:
        raise ConfigProblem([f"{'--http' if flag else f'{cfg.path}: daemon.http_address'}: {exc}"]) from None
