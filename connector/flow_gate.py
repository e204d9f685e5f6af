"""The gate `sync` and `run` pass before sending: has the synthetic test flow passed against this
base URL? Spec 1 says production comes only after it works; a warning says so once per process, and
`[capture] require_flow = true` turns it into a refusal. A pass as any client counts: the flow probes
the server's behaviour (replays, result objects, key scope), and the spec wants it run with a
disposable test client rather than the production one."""

from __future__ import annotations

import shlex
from pathlib import Path

from . import logs
from .ledger import Ledger
from .problems import ConfigProblem

log = logs.get_logger("capture_sync.flow")
_warned: set[str] = set()  # the base URLs this process has warned about


def flow_command(config: str | Path | None = None) -> str:
    return f"capture-sync check -c {shlex.quote(str(config)) if config else 'CONFIG'} --flow"


def flow_gate(ledger: Ledger, base_url: str, *, required: bool, config: str | Path | None = None) -> None:
    """Nothing when a flow has passed against `base_url` (as any client); else one warning
    (`flow.not_passed`) per base URL and process, or, when `required`, a ConfigProblem (exit 2) naming
    the command to run. It needs no answer from the API, so it runs before anything is read or
    sent, whether or not the API answers. `config` fills the command's -c."""
    if ledger.flow_passed(base_url) is not None:
        return
    command = flow_command(config)
    if required:
        raise ConfigProblem(
            [
                f"capture.require_flow: no synthetic test flow has passed against {base_url}: run `{command}` "
                "first, best with a disposable test client (it sends a few synthetic test persons)"
            ]
        )
    if base_url in _warned:
        return
    _warned.add(base_url)
    log.warning(
        "flow.not_passed",
        base_url=base_url,
        command=command,
        why="the spec asks for a synthetic test flow before production; set capture.require_flow to refuse",
    )
