"""`capture-sync run`: the daemon."""

import asyncio
import contextlib

import typer

from ..config import Config, check_rejects_files
from ..leadership import Leadership, holder_id
from ..ops import HttpAddress, parse_address
from ..problems import ConfigProblem
from ..scheduler import Daemon
from ._common import api_client, command, open_ledger, pass_flow_gate, print_report, run_until_signal


@command(many=True)
def run(
    cfg: Config,
    once: bool = typer.Option(False, "--once", help="Run every source once, deliver, and exit (for cron or a timer)."),
    http: str | None = typer.Option(
        None,
        "--http",
        metavar="HOST:PORT",
        help="Serve /metrics (Prometheus), /healthz, /readyz and a status page at / there, e.g. 127.0.0.1:9464 "
        "(overrides [daemon] http_address; port 0 picks a free one, logged as ops.serving).",
    ),
    http_public: bool = typer.Option(
        False,
        "--http-public",
        help="Allow an --http address that is not loopback: the endpoints have no login.",
    ),
    more: list[Config] | None = None,
) -> int:
    """The daemon: each source on its schedule plus a retry sweep, until SIGTERM or SIGINT.

    On a stop signal the requests in hand finish and are recorded, then it exits 0 (within 10 s).
    One daemon per SQLite ledger: a second one exits 2. On a PostgreSQL ledger several daemons (on
    one host or many) may run: one leads the integration while it holds a lease (its length is the
    daemon table's lease_s), the others stand by and take over within lease_s when it dies. A mapped column a source lacks stops it at start
    (exit 2, every problem listed); a source that cannot be read, or fails mid-read, is reported in
    one line on each of its ticks while the others run on, and is read again once fixed. With
    --once, the exit codes are those of `sync`. While it runs, `sync`, `replay`, `pause` and `resume`
    on the same config reach it over a socket beside the ledger and wait for the outcome.

    Example: capture-sync run -c /etc/capture-sync/capture-sync.toml

    Several integrations (one config file each: its own API client, sources and schedule) run in one
    process when -c is repeated, or with --configs DIR: every *.toml in DIR, in name order, after
    the -c files (a folder without one is a config error, exit 2). --http serves them all: /metrics
    carries every integration (its `integration` label), /readyz is ready when every one is (each
    reason prefixed by its integration), and the status page lists them, each with its own page.
    POST /integrations/NAME/control/COMMAND steers each with the token of its own config's
    control_token_file, in the daemon table (reaching the daemon that leads it on a shared PostgreSQL
    ledger; another integration's token is refused); every log line of
    an integration's work carries integration=NAME.

    Example: capture-sync run -c capture-sync.toml --http 127.0.0.1:9464

    Example: capture-sync run -c crm-eu.toml -c crm-us.toml

    Example: capture-sync run --configs /etc/capture-sync/integrations.d
    """
    if once and http:
        raise ConfigProblem(["--http serves while the daemon runs; it does nothing with --once"])
    address = _http_address(cfg, http, http_public) if not once else None

    configs = [cfg, *(more or [])]
    names = [c.integration_name for c in configs]
    if len(set(names)) < len(names):
        raise ConfigProblem([f"two configs name the same integration ({', '.join(names)}): set [integration] name"])
    check_rejects_files(configs)
    if once and len(configs) > 1:
        raise ConfigProblem(["--once runs one config: run it once per config file"])

    def shared(c: Config) -> bool:  # daemons on one PostgreSQL ledger lead each integration by lease
        return c.ledger.url is not None and not once

    async def go(stop: asyncio.Event) -> int:
        async with contextlib.AsyncExitStack() as clients:
            daemons: list[Daemon] = []
            # the first integration's daemon serves --http for all: the others are built before it
            for i, (c, ledger) in reversed(list(enumerate(zip(configs, ledgers, strict=True)))):
                client = await clients.enter_async_context(api_client(c))
                leadership = (
                    Leadership(ledger.lease(holder_id(), c.daemon.lease_s), c.daemon.lease_s) if shared(c) else None
                )
                first = i == 0
                http_at, others = (address, list(daemons)) if first else (None, [])
                daemons.insert(
                    0, Daemon(c, ledger, client, stop, http=http_at, leadership=leadership, serves_too=others)
                )
            if not once:
                return max(await asyncio.gather(*(d.serve() for d in daemons)))
            report = await daemons[0].once()
            print_report(report, "Run once", cfg.path)
            return report.exit_code

    with contextlib.ExitStack() as opened:
        ledgers = [opened.enter_context(open_ledger(c, exclusive=not shared(c))) for c in configs]
        for c, ledger in zip(configs, ledgers, strict=True):
            pass_flow_gate(c, ledger)
        return run_until_signal(go)


def _http_address(cfg: Config, flag: str | None, public: bool) -> HttpAddress | None:
    text = flag or cfg.daemon.http_address
    if text is None:
        return None
    try:
        return parse_address(text, public=public or cfg.daemon.http_public)
    except ValueError as exc:
        raise ConfigProblem([f"{'--http' if flag else f'{cfg.path}: daemon.http_address'}: {exc}"]) from None
