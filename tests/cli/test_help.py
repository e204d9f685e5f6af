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
OURS = {
    ("demo",),
    ("check",),
    ("sync",),
    ("run",),
    ("replay",),
    ("status",),
    ("ledger", "list"),
    ("ledger", "show"),
    ("ledger", "resolve"),
}


def test_every_command_of_the_design_is_there() -> None:
    assert set(COMMANDS) >= OURS
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


def _json_helps() -> list[tuple[str, str]]:
    command = typer.main.get_command(app)
    found = []
    for path in COMMANDS:
        cmd, ctx = command, typer.Context(command)
        for name in path:
            cmd = cmd.get_command(ctx, name)  # type: ignore[attr-defined]
            ctx = typer.Context(cmd)
        found += [(" ".join(path), p.help or "") for p in cmd.params if "--json" in getattr(p, "opts", ())]
    return found


def test_every_json_option_says_whether_it_prints_one_object_or_one_a_line() -> None:
    helps = _json_helps()
    assert {"status", "ledger list", "runs list"} <= {path for path, _ in helps}
    for path, text in helps:
        said = " ".join(text.split()).lower()
        assert "one json object" in said, (path, text)
    shapes = {path: "per line" in " ".join(text.split()) for path, text in helps}
    assert shapes["ledger list"] and not shapes["status"] and not shapes["runs list"]
