"""The root `--help` lists every command from `connector.cli.COMMANDS` without importing it, with the
first line of the command's own help; `--help` and `--version` load none of the heavy libraries."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer

from connector.cli import COMMANDS, load_command

HEAVY = (
    "pydantic", "httpx", "sqlite_utils", "structlog", "apscheduler", "phonenumbers", "email_validator", "sqlalchemy",
    "fastapi", "uvicorn", "prometheus_client", "connector.sandbox", "connector.delivery", "connector.config",
    "connector.ledger", "connector.mapping",
)

# Runs the CLI in a fresh interpreter and prints which of HEAVY it imported.
PROBE = f"""
import sys
from connector.cli import main
sys.argv = ["capture-sync", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("loaded:", *[m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)
"""


@pytest.mark.parametrize("name", COMMANDS)
def test_each_listed_summary_is_the_first_line_of_the_commands_own_help(name: str) -> None:
    command = load_command(name)
    assert COMMANDS[name].summary == (command.help or "").strip().splitlines()[0]
    assert command.name == name


@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=" ".join)
def test_help_and_version_load_no_heavy_library(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True)
    assert proc.stderr.strip().splitlines()[-1] == "loaded:"


def test_an_unknown_command_is_refused_as_before() -> None:
    from connector.cli import app
    import typer.main

    group = typer.main.get_command(app)
    assert group is not None
    assert group.get_command(typer.Context(group), "nonesuch") is None
