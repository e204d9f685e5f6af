"""Every command's --help works and shows an example; --version prints the version."""

from __future__ import annotations

from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from connector import __version__
from connector.cli import app

runner = CliRunner()


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    ctx = typer.Context(group)
    for name in group.list_commands(ctx):  # the root loads its commands lazily: not all are in .commands
        cmd = group.get_command(ctx, name)
        path = (*prefix, name)
        found.append(path)
        if hasattr(cmd, "commands"):  # a group
            found += _commands(cmd, path)
    return found


COMMANDS = _commands(typer.main.get_command(app))
OURS = {("demo",), ("check",), ("sync",), ("run",), ("replay",), ("status",), ("ledger", "list"),
        ("ledger", "show"), ("ledger", "resolve")}


def test_every_command_of_the_design_is_there() -> None:
    assert OURS <= set(COMMANDS)
    assert {("sandbox",), ("sources",)} <= set(COMMANDS)


def test_root_help_and_version(kit) -> None:
    result = kit.run("--help")
    assert result.code == 0, result.stderr
    for name in ("demo", "check", "sync", "run", "replay", "status", "ledger"):
        assert name in result.stdout
    version = kit.run("--version")
    assert (version.code, version.stdout.strip()) == (0, f"capture-sync {__version__}")


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_each_help_runs(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    if path in OURS:
        assert "Example: capture-sync " + " ".join(path) in " ".join(result.output.split())
