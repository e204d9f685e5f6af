"""The Python API behind `from connector import sync, replay, status`: the CLI's commands for a
pipeline step (a Dagster asset, an Airflow task, a Prefect flow), with typed results and the CLI's
exit semantics: a non-zero exit code is an exception of `connector._errors` carrying the report.

Like the CLI, `sync` and `replay` beside a running daemon (`capture-sync run` on the same ledger)
ask that daemon to do the work now over its control socket and return its report. Logging is the
host's: events go to the stdlib `logging` module unless `log_level=` asks for the CLI's set-up.
No signal handler is installed: the host owns its signals (an interrupt cancels the run, and what
was in flight is re-sent with the same keys by the next run).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from . import logs
from ._errors import ConfigError, raise_for, translated
from ._run import api_client, leader_asker, open_ledger, pass_flow_gate
from .config_file import LedgerPlace, load_ledger_place
from .ledger import StatusReport as LedgerStatus

if TYPE_CHECKING:
    from .api import CaptureClient
    from .config import Config
    from .delivery import RunReport
    from .ledger import Ledger
    from .recovery import Advice

ConfigLike: TypeAlias = "str | os.PathLike[str] | Config"  # a config file's path, or a Config from `load_config`
Work: TypeAlias = "Callable[[Ledger, CaptureClient], Awaitable[RunReport]]"


@dataclass
class StatusReport(LedgerStatus):
    """What `capture-sync status --json` shows: the ledger's counts by state and by source, the last
    runs, the oldest unsettled entry (`settled` is True when nothing waits); with a daemon running,
    its `live` state (what is paused, its health); and one line of `advice` per state that holds."""

    live: dict[str, Any] | None = None
    advice: list[Advice] = field(default_factory=list)


def sync(
    config: ConfigLike,
    *,
    sources: str | Sequence[str] | None = None,
    full_refresh: bool = False,
    check: bool = True,
    log_level: str | None = None,
    dry_run: bool = False,
    on_preview: Callable[[dict[str, Any]], None] | None = None,
) -> RunReport:
    """One pass over the sources (all, or the ones named), then deliver everything the ledger holds
    unsettled: `capture-sync sync`. `full_refresh` reads the named sources from the start (their
    cursors ignored; unchanged records are not sent again). Returns the run's report; with `check`
    (the default) a non-zero exit code raises its exception instead, carrying the report.
    Beside a running daemon, the daemon runs the pass (one source or all; `full_refresh` is refused).

    `dry_run`: `sync --dry-run`: map and validate, send nothing and change nothing (no API call, no
    credential read, beside a daemon too). The report's `dry_run_preview` holds the first persons;
    `on_preview` gets every line as it is read (`"outcome": "send"` with the person, or `"rejected"`
    with its reasons and record), so a preview of any size can go to the host's own sink."""
    _logging(log_level)
    names = [sources] if isinstance(sources, str) else list(sources or [])
    if full_refresh and not names:
        raise ConfigError("full_refresh=True needs sources=NAME: the source(s) to read again from the start")
    if on_preview is not None and not dry_run:
        raise ConfigError("on_preview goes with dry_run=True; a real run's records: `capture-sync runs show RUN`")
    with translated(), _loaded(config) as cfg:
        from . import delivery

        jobs = [job for name in names for job in cfg.jobs(name)] if names else cfg.jobs()
        if full_refresh:
            jobs = [replace(job, from_start=True) for job in jobs]
        if dry_run:
            with open_ledger(cfg) as ledger:
                return _checked(delivery.preview(ledger, jobs, on_preview), check)
        beside_daemon = (
            "full_refresh=True does not run beside it"
            if full_refresh
            else "it runs one source or all: call sync once per source"
            if len(names) > 1
            else None
        )

        def work(ledger: Ledger, client: CaptureClient) -> Awaitable[RunReport]:
            return delivery.sync(
                ledger, client, jobs, cfg.delivery_settings(), gate=lambda: pass_flow_gate(cfg, ledger)
            )

        report = _deliver(cfg, work, "sync", {"source": names[0] if names else None}, beside_daemon)
    return _checked(report, check)


def replay(
    config: ConfigLike, *, include_failed: bool = False, check: bool = True, log_level: str | None = None
) -> RunReport:
    """Re-send what the ledger holds unsettled with the same keys and bodies: `capture-sync replay`.
    `include_failed` also re-sends failed entries (after fixing their cause). `check` as for `sync`.
    Beside a running daemon, the daemon replays, stalled batches included."""
    _logging(log_level)
    with translated(), _loaded(config) as cfg:
        from . import delivery

        def work(ledger: Ledger, client: CaptureClient) -> Awaitable[RunReport]:
            return delivery.replay(
                ledger,
                client,
                cfg.delivery_settings(),
                include_failed=include_failed,
                gate=lambda: pass_flow_gate(cfg, ledger),
            )

        report = _deliver(cfg, work, "replay", {"include_failed": include_failed or None}, None)
    return _checked(report, check)


def status(config: ConfigLike, *, log_level: str | None = None) -> StatusReport:
    """What the ledger holds and what to do about it: `capture-sync status --json`. Reads the ledger
    alone (a config path needs only its [ledger] table: no credential is read) and never waits on a
    running daemon. Raises ConfigError when there is no ledger yet at the configured path."""
    _logging(log_level)
    from .control import daemon_state
    from .recovery import advice

    with translated():
        place = _place(config)
        if not place.ledger_path.exists():
            raise ConfigError(
                f"no ledger at {place.ledger_path}: nothing was synced with {place.path} yet, or its [ledger] path "
                "names another file (a relative path starts from the config file's folder)"
            )
        live = daemon_state(place.ledger_path)  # asked before the ledger is opened, as the CLI does
        with open_ledger(place) as ledger:
            counts = ledger.status()
            lines = advice(counts, live, place.path, recorded_pauses=ledger.paused() if live is None else None)
    return StatusReport(**{f.name: getattr(counts, f.name) for f in fields(counts)}, live=live, advice=lines)


def _place(config: ConfigLike) -> Config | LedgerPlace:
    """Where the ledger is: a Config as given, or a file's [ledger] table alone."""
    from .config import Config

    return config if isinstance(config, Config) else load_ledger_place(Path(config))


def _logging(level: str | None) -> None:
    """`level`: the CLI's logging (JSON lines or a console on stderr, at that level); None: the host's."""
    if level is None:
        logs.hand_to_stdlib()
    else:
        logs.configure(level)


@contextmanager
def _loaded(config: ConfigLike) -> Iterator[Config]:
    """The Config, loaded from its path (and its sources closed after) or as given (the caller's to close)."""
    from .config import Config, load_config

    if isinstance(config, Config):
        yield config
        return
    cfg = load_config(Path(config))
    try:
        yield cfg
    finally:
        cfg.close_sources()


def _deliver(cfg: Config, work: Work, command: str, args: dict[str, Any], refused: str | None) -> RunReport:
    """Run `work` with the ledger to ourselves and an API client; beside a daemon holding the ledger,
    ask the daemon to run `command` instead and return its report (or, `refused`, say why not)."""
    from .control import forward
    from .delivery import report_from_dict
    from .ledger import LedgerLocked

    try:
        ledger = open_ledger(cfg, exclusive=True)
    except LedgerLocked:
        if refused is not None:
            raise ConfigError(
                f"a capture-sync daemon holds ledger {cfg.ledger_path}: {refused}; stop the daemon (SIGTERM), "
                "run this, then start it again"
            ) from None
        return report_from_dict(forward(cfg.ledger_path, command, args, leader_asker(cfg))["report"])

    async def main() -> RunReport:
        async with api_client(cfg) as client:
            return await work(ledger, client)

    with ledger:
        return asyncio.run(main())


def _checked(report: RunReport, check: bool) -> RunReport:
    if check:
        raise_for(report)
    return report
