"""What a command that sends shares with the Python API (`connector.sync`, `replay`): the API client
built from a config, the ledger opened (and locked, for one sending process at a time), and the
flow gate. Kept out of `connector.cli` so that the Python API does not load the CLI (typer, its commands)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import tracing
from .config_file import LedgerLocation
from .ledger import Ledger, LedgerError, LedgerLocked

if TYPE_CHECKING:
    import httpx

    from .api import CaptureClient
    from .config import Config


def api_client(cfg: Config, transport: httpx.AsyncBaseTransport | None = None) -> CaptureClient:
    """A 401 re-reads the credentials once (a rotated secret in its file is picked up, verified and
    used for the request in hand); one that renewal does not cure names where they were read from.
    `transport` sits in front of the network (the flow keeps every response with one)."""
    from .api import CaptureClient

    base_url, creds = cfg.api()
    tracing.name_integration(cfg.path.stem)  # the spans of what this client does name its config
    return CaptureClient(
        base_url,
        creds.api_key,
        creds.api_secret,
        timeout_s=cfg.capture.timeout_s,
        retry_policy=cfg.capture.retry.policy(),
        allow_insecure_http=cfg.capture.allow_insecure_http,
        max_connections=max(cfg.capture.concurrency, 1),
        credentials_from=creds.origins(),
        reload_credentials=cfg.reload_credentials,
        transport=transport,
    )


def pass_flow_gate(cfg: Config, ledger: Ledger) -> None:
    """Before a sending command reads or sends anything: while no synthetic test flow has passed
    against this base URL, warn once, or refuse (`capture.require_flow`, exit 2)."""
    from .flow_gate import flow_gate  # the gate alone: the flow itself (check --flow) is not loaded for it

    base_url, _ = cfg.api()
    flow_gate(ledger, base_url, required=cfg.capture.require_flow, config=cfg.path)


def open_ledger(cfg: LedgerLocation, *, exclusive: bool = False) -> Ledger:
    """`exclusive` takes the single-process lock: only one process may send from a ledger at a time,
    or a replay could re-send a batch another process is still waiting on."""
    ledger = Ledger(
        cfg.ledger_target,
        synchronous=cfg.ledger.synchronous,
        password_file=cfg.ledger_password_file,
        integration=cfg.integration_name,
    )
    if exclusive:
        try:
            ledger.acquire_daemon_lock()
        except LedgerLocked:
            ledger.close()
            raise
    return ledger


# How long a command asked through a shared ledger waits for a daemon to take it (the leader polls
# every 0.5 s; a takeover after a crash needs up to lease_s more).
TAKE_WITHIN_S = 30.0


def leader_asker(cfg: LedgerLocation) -> Callable[[str, dict[str, Any]], dict[str, Any]] | None:
    """On a PostgreSQL ledger: how to ask the daemon leading the integration, wherever it runs
    (through the database); None on SQLite (the local control socket is the only way)."""
    if cfg.ledger.url is None:
        return None

    def ask(command: str, args: dict[str, Any]) -> dict[str, Any]:
        from .control import Refused
        from .exit_codes import ExitCode

        try:
            with open_ledger(cfg) as ledger:
                return ledger.ask_leader(command, args, TAKE_WITHIN_S)
        except LedgerError as exc:
            raise Refused(str(exc), ExitCode.UNSETTLED) from None

    return ask
