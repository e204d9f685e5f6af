"""The `capture-sync` command line. Each command group lives in its own module of this package."""

from __future__ import annotations

import typer

from .. import __version__

app = typer.Typer(
    name="capture-sync",
    help="Keep a CRM fed with new contacts through its Capture API, effectively once.",
    no_args_is_help=True,
    add_completion=False,
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


def main() -> None:
    app()
