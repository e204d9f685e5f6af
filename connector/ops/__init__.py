"""What the daemon shows to operators over HTTP (`run --http ADDRESS`): /metrics for Prometheus,
/healthz and /readyz for probes, and a read-only status page at /.

Importing this package is cheap (the address rule and the open-files limit only): prometheus-client and uvicorn load in
`start_ops`, when the daemon actually serves, so `--help` and the other commands never pay for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ..control import Steered
from ..loopback import HttpAddress, parse_address
from ._fds import raise_open_files_limit

if TYPE_CHECKING:
    from ..api.client import CaptureClient
    from ..config import Config
    from ..health import DaemonHealth
    from ._server import OpsServer


class Running(Steered, Protocol):
    """Another integration's daemon in the same process (connector.scheduler.Daemon), served too
    (and steered: `POST /integrations/<name>/control/<command>`)."""

    @property
    def config(self) -> Config: ...
    @property
    def health(self) -> DaemonHealth: ...
    @property
    def client(self) -> CaptureClient: ...


async def start_ops(
    address: HttpAddress,
    config: Config,
    health: DaemonHealth,
    client: CaptureClient,
    control: Steered | None = None,
    more: Sequence[Running] = (),
) -> OpsServer:
    """Listen on `address` on the running loop (raises OSError when it cannot) and serve until `stop()`.
    `control`: the daemon, steered by POST /control/<command> when `[daemon] control_token_file` is set;
    `more`: the other integrations the process runs, in /metrics, /readyz and the status page."""
    import asyncio
    import contextvars

    import structlog

    from ._served import Served
    from ._server import OpsServer

    others = [Served(d.config, d.health, d.client, d) for d in more]
    server = OpsServer(address, config, health, client, control, more=others)
    # The process's server, not the first integration's whose daemon starts it: its lines (and its
    # requests' tasks) name no integration; a control request names the one it steers.
    outside = contextvars.copy_context()
    outside.run(structlog.contextvars.unbind_contextvars, "integration")
    await asyncio.create_task(server.start(), context=outside)
    return server


__all__ = ["HttpAddress", "parse_address", "raise_open_files_limit", "start_ops"]
