"""The `capture-sync` command line. Each command group lives in its own module of this package.

Commands load lazily: the root group knows each command by name, module, help panel and one-line
summary (`COMMANDS`), and imports a command's module only when that command is run or its own
`--help` is asked for. So `capture-sync --help` loads typer and rich only, and `status` loads what
status needs, not the delivery engine, the sandbox (FastAPI, uvicorn), the scheduler, or a
source's driver. The summaries are what the root `--help` lists; a test checks that each is the
first line of its command's own help, so the two cannot drift apart.
"""

from __future__ import annotations

import gc
import importlib
import os
from typing import NamedTuple

import typer
import typer.core
import typer.main
from typer._click.core import Command, Context  # typer vendors click: its groups take these classes
from typer._click.formatting import HelpFormatter


class Entry(NamedTuple):
    module: str  # in connector.cli
    attribute: str  # a command function, or a command group's `typer.Typer`
    panel: str | None  # the root --help panel it is listed under (None: "Commands")
    summary: str  # the first line of its help, listed by the root --help


COMMANDS: dict[str, Entry] = {
    "sandbox": Entry("sandbox", "app", None, "The local Capture API (sandbox): serve it, manage its clients."),
    "demo": Entry(
        "demo",
        "demo",
        "Start here",
        "Start the sandbox Capture API, sync the sample contacts into it, print a summary and the status.",
    ),
    "check": Entry(
        "check",
        "check",
        "Talk to the Capture API",
        "Call GET /info and print the client's settings (never the secret), then check each source.",
    ),
    "sync": Entry(
        "sync",
        "sync",
        "Talk to the Capture API",
        "One pass over the sources, then deliver everything the ledger holds unsettled.",
    ),
    "run": Entry(
        "run",
        "run",
        "Talk to the Capture API",
        "The daemon: each source on its schedule plus a retry sweep, until SIGTERM or SIGINT.",
    ),
    "replay": Entry(
        "sync",
        "replay",
        "Talk to the Capture API",
        "Re-send what the ledger holds unsettled, with the same idempotency keys and bodies.",
    ),
    "pause": Entry(
        "pause",
        "pause",
        "Talk to the Capture API",
        "Stop the daemon reading a source on its schedule; without --source, stop all it does by itself.",
    ),
    "resume": Entry(
        "pause",
        "resume",
        "Talk to the Capture API",
        "Lift a pause (without --source, every pause); a running daemon reads what was held at once.",
    ),
    "status": Entry(
        "status",
        "status",
        "Inspect",
        "Counts by state and source, the last runs, and one line of advice for each state that holds.",
    ),
    "ledger": Entry("ledger", "app", "Inspect", "Inspect the ledger's entries and batches, and resolve blocked ones."),
    "sources": Entry("sources", "app", "Inspect", "Source types: the built-ins and installed plugins."),
    "runs": Entry("runs", "app", "Inspect", "Run history, and the records each run changed."),
    "state": Entry(
        "state",
        "app",
        "Inspect",
        "A source's cursor (where its next read starts): show it, set it, reset it; the old value is kept.",
    ),
}


def load_command(name: str) -> Command:
    """Import a command's module and build its click command exactly as `app.command` or `app.add_typer`
    on the root would: under a stand-in root with a callback (without one, typer would make a group of
    one command that very command)."""
    entry = COMMANDS[name]
    target = getattr(importlib.import_module(f"{__name__}.{entry.module}"), entry.attribute)
    root = typer.Typer()
    root.callback()(lambda: None)
    if isinstance(target, typer.Typer):
        root.add_typer(target, name=name, rich_help_panel=entry.panel)
    else:
        root.command(name, rich_help_panel=entry.panel)(target)
    group = typer.main.get_command(root)
    assert isinstance(group, typer.core.TyperGroup)
    _started()
    return group.commands[name]


class _LazyGroup(typer.core.TyperGroup):
    """The root group: while it prints its own help it lists each command from its `Entry`; resolving
    a command to run it (or print its --help) loads the real one."""

    _listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return [*super().list_commands(ctx), *COMMANDS]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        if self._listing:
            entry = COMMANDS[cmd_name]
            return typer.core.TyperCommand(cmd_name, help=entry.summary, rich_help_panel=entry.panel)
        return load_command(cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="capture-sync",
    cls=_LazyGroup,
    help="Keep a CRM fed with new contacts through its Capture API, effectively once.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"capture-sync {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    verbose: bool = typer.Option(
        False, "-v", "--verbose", help="As -v after the command: DEBUG logs, and a traceback on unexpected errors."
    ),
) -> None:
    """Keep a CRM fed with new contacts through its Capture API, effectively once."""
    # Nothing to do here: a command reads the root's `verbose` from the click context (_common.command).


_starting = False  # `main` turned the cyclic garbage collector off for the imports


def _started() -> None:
    """The command's modules are in: what start-up made lives as long as the process, so it is frozen
    (never scanned again by a full collection) and the collector is back on for the command's work."""
    global _starting
    if _starting:
        _starting = False
        gc.freeze()
        gc.enable()


def main() -> None:
    """The `capture-sync` entry point: the process is ours, so two start-up costs are cut here, not at
    a library import (a host program that imports `connector` keeps its own settings).

    The imports of a command (pydantic, httpx, the engine) create some 60,000 objects that live until
    exit; the cyclic collector would scan them again and again while they load (about 126 young, 11
    middle and one full collection before a sync's first request, some 40-60 ms), and the last
    collection at exit walked them all once more (150-190 ms of a sync). It is off until the command's
    modules are loaded, then they are frozen (`_started`); docs/performance.md has the figures.

    pydantic scans every installed distribution's entry points for plugins at its first model (some
    6 ms); capture-sync uses none, so `PYDANTIC_DISABLE_PLUGINS` is set for this process (and the
    children it starts) unless the environment sets it already (an empty value lets plugins load)."""
    global _starting
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if gc.isenabled():
        gc.disable()
        _starting = True
    try:
        app()
    finally:
        _started()
