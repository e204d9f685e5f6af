"""`capture-sync pause` and `capture-sync resume`: hold a running daemon's own work, and let it go."""

from __future__ import annotations

import shlex
import time

import typer

from ..config import Config
from ..ledger import LedgerLocked
from ._common import command, open_ledger, out
from ._forward import ask_daemon

ALL = "*"
_SOURCE = typer.Option(None, "--source", help="Only this source (default: every source, and the retry sweeps).")


@command()
def pause(cfg: Config, source: str | None = _SOURCE) -> int:
    """Stop the daemon reading a source on its schedule; without --source, stop all it does by itself.

    A paused source's scheduled ticks read nothing, so nothing new of it is enqueued; what the ledger
    already holds still settles (the other sources' passes and the retry sweep deliver it). Without
    --source, every tick and the retry sweeps are held: the daemon reads and sends nothing on its own;
    a pass in hand finishes first (this command waits for it). `sync` and `replay` run when asked,
    paused or not. The pause is kept in the ledger: a daemon started again stays paused until `resume`.
    With no daemon running, the pause is recorded for the next one.

    Example: capture-sync pause -c capture-sync.toml --source signups

    Example: capture-sync pause -c capture-sync.toml
    """
    name = cfg.jobs(source)[0].name if source else ALL  # an unknown name: exit 2, naming the configured ones
    try:
        ledger = open_ledger(cfg, exclusive=True)
    except LedgerLocked:
        paused = ask_daemon(cfg, "pause", {"source": source})["paused"]
        running = True
    else:
        with ledger:
            ledger.pause(name)
            paused = ledger.paused()
        running = False
    what = (
        f"source {name}"
        if source
        else "everything the daemon does by itself (every source's ticks and the retry sweeps)"
    )
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(paused[name]))
    out.print(f"paused {what} since {since}", markup=False)
    if not running:
        out.print(f"no daemon runs on {cfg.ledger_name}: the next `capture-sync run` on it starts paused", markup=False)
    out.print(f"lift it: {_resume_command(cfg, source)}", markup=False)
    return 0


@command()
def resume(cfg: Config, source: str | None = _SOURCE) -> int:
    """Lift a pause (without --source, every pause); a running daemon reads what was held at once.

    Example: capture-sync resume -c capture-sync.toml --source signups

    Example: capture-sync resume -c capture-sync.toml
    """
    name = cfg.jobs(source)[0].name if source else None
    try:
        ledger = open_ledger(cfg, exclusive=True)
    except LedgerLocked:
        answer = ask_daemon(cfg, "resume", {"source": source})
        lifted, still, running = answer["resumed"], answer["paused"], True
    else:
        with ledger:
            lifted, still, running = ledger.resume(name), ledger.paused(), False
    if not lifted:
        out.print(f"source {name} was not paused" if name else "nothing was paused", markup=False)
    else:
        names = ", ".join("everything" if n == ALL else n for n in lifted)
        then = (
            "the daemon runs a pass of it now"
            if running
            else f"no daemon runs on {cfg.ledger_name}: the next `capture-sync run` reads it on schedule"
        )
        out.print(f"resumed {names}: {then}", markup=False)
    if still:
        held = ", ".join("everything" if n == ALL else n for n in still)
        out.print(f"still paused: {held} ({_resume_command(cfg, None)} lifts every pause)", markup=False)
    return 0


def _resume_command(cfg: Config, source: str | None) -> str:
    return f"capture-sync resume -c {shlex.quote(str(cfg.path))}" + (
        f" --source {shlex.quote(source)}" if source else ""
    )
