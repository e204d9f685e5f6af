"""The `capture-sync` command line. Each command group lives in its own module of this package."""

from __future__ import annotations

import typer

from .. import __version__

app = typer.Typer(
    name="capture-sync",
    help="Keep a CRM fed with new contacts through its Capture API, effectively once.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"capture-sync {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Keep a CRM fed with new contacts through its Capture API, effectively once."""


from . import sandbox  # noqa: E402  (command groups import after the root app exists)
app.add_typer(sandbox.app, name="sandbox")
from . import check, demo, ledger, run, status, sync  # noqa: E402
app.command("demo", rich_help_panel="Start here")(demo.demo)
app.command("check", rich_help_panel="Talk to the Capture API")(check.check)
app.command("sync", rich_help_panel="Talk to the Capture API")(sync.sync)
app.command("run", rich_help_panel="Talk to the Capture API")(run.run)
app.command("replay", rich_help_panel="Talk to the Capture API")(sync.replay)
app.command("status", rich_help_panel="Inspect")(status.status)
app.add_typer(ledger.app, name="ledger", rich_help_panel="Inspect")
from . import sources  # noqa: E402
app.add_typer(sources.app, name="sources", rich_help_panel="Inspect")
from . import runs, state  # noqa: E402
app.add_typer(runs.app, name="runs", rich_help_panel="Inspect")
app.add_typer(state.app, name="state", rich_help_panel="Inspect")


def main() -> None:
    app()
