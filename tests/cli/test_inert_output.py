"""Terminal output is inert: a value from outside (the API's client name, a source's data) that holds
terminal escapes prints as visible text, in every command that shows it, and JSON keeps its value.

Oracle: no output byte is a control character a terminal obeys (C0 but newline and tab, DEL, C1),
and the escapes show as `\\u001b`..."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path

import structlog
from rich.table import Table

from connector import logs
from connector.cli._output import InertConsole

HOSTILE_NAME = "\x1b]0;pwned\x07\x1b[31mred\x9b2J\x7f"
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _inert(text: str) -> bool:
    return OBEYED.search(text) is None


def test_inert_escapes_what_a_terminal_obeys_and_keeps_text_newlines_and_tabs() -> None:
    assert logs.inert(HOSTILE_NAME) == "\\u001b]0;pwned\\u0007\\u001b[31mred\\u009b2J\\u007f"
    assert logs.inert("Zoë\tÅsa\nline 2 — ok") == "Zoë\tÅsa\nline 2 — ok"
    assert json.loads(f'"{logs.inert(HOSTILE_NAME)}"') == HOSTILE_NAME  # the escape is JSON's


def test_the_console_renders_strings_cells_and_json_inert() -> None:
    buffer = io.StringIO()
    console = InertConsole(file=buffer, width=200, force_terminal=True)
    table = Table("client")
    table.add_row(HOSTILE_NAME)
    console.print(table)
    console.print(f"error: {HOSTILE_NAME}", markup=False)
    console.print_json(json.dumps({"client_name": HOSTILE_NAME}, ensure_ascii=False))
    text = re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())  # the console's own colours
    assert _inert(text) and text.count("\\u001b]0;pwned") == 3


def test_console_log_lines_are_inert(monkeypatch) -> None:
    stream = io.StringIO()
    stream.isatty = lambda: True  # type: ignore[method-assign]
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # configure() adds one to the root; pytest's come back after
    monkeypatch.setattr(root, "level", root.level)
    logs.configure("INFO", json=False, stream=stream)  # structlog: put back by a fixture of conftest
    structlog.get_logger("capture_sync.test").warning("api.refused", reason=HOSTILE_NAME)
    text = re.sub(r"\x1b\[[0-9;]*m", "", stream.getvalue())
    assert "\\u001b]0;pwned" in text and _inert(text)


def test_a_client_name_with_terminal_escapes_prints_inert_in_check(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client(HOSTILE_NAME)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))

    shown = kit.run("check", "-c", config)
    assert shown.code == 0, shown.stderr
    assert _inert(shown.stdout + shown.stderr) and "\\u001b]0;pwned" in shown.stdout
    as_json = kit.run("check", "-c", config, "--json")
    assert _inert(as_json.stdout) and json.loads(as_json.stdout)["client"]["client_name"] == HOSTILE_NAME


def test_source_data_with_terminal_escapes_prints_inert_in_every_command(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client()
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1, First=f"Ada{HOSTILE_NAME}"), kit.contact(2, First="", Last=HOSTILE_NAME)])
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))
    assert kit.run("sync", "-c", config).code == 0

    listed = [kit.run("ledger", "list", "-c", config, "--state", state, "--json") for state in ("captured", "rejected")]
    entries = [json.loads(line) for result in listed for line in result.stdout.splitlines()]
    assert [e["state"] for e in entries] == ["captured", "rejected"]
    # the mapping drops control characters from what it sends; a rejected record keeps its raw value
    assert entries[1]["payload"]["record"]["Last"] == HOSTILE_NAME
    shown: dict[tuple[str, ...], str] = {}
    for args in (
        ("ledger", "list", "-c", config, "--state", "captured"),
        ("ledger", "list", "-c", config, "--state", "rejected"),
        ("ledger", "show", "-c", config, entries[0]["key"]),
        ("ledger", "show", "-c", config, entries[0]["key"], "--json"),
        ("status", "-c", config),
        ("runs", "show", "-c", config, "last", "--show-contact-data"),
        ("runs", "show", "-c", config, "last", "--show-contact-data", "--format", "csv"),
        ("runs", "show", "-c", config, "last", "--show-contact-data", "--format", "jsonl"),
        ("runs", "show", "-c", config, "last", "--show-contact-data", "--json"),
        ("sync", "-c", config, "--dry-run"),
        ("sync", "-c", config, "--dry-run", "--json"),
    ):
        result = kit.run(*args)
        assert result.code == 0, (args, result.stderr)
        shown[args] = result.stdout + result.stderr
        assert _inert(shown[args]), (args, result.stdout)
    assert all(_inert(result.stdout) and "\\u001b]0;pwned" in result.stdout for result in listed[1:])
    assert all("\\u001b]0;pwned" in text for args, text in shown.items() if args[0] == "runs"), shown
