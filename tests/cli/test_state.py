"""Cursor control: `state show/set/reset` keep every replaced cursor and print the command that puts it
back; they refuse while a daemon holds the ledger; `sync --full-refresh` re-reads a source from the
start and change detection sends only what changed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from connector.ledger import Ledger


def _synced(kit, sandbox, tmp_path: Path, rows: int) -> tuple[str, Path]:
    """A config with one csv source of `rows` contacts, synced once into the sandbox."""
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, rows + 1)])
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))
    assert kit.run("sync", "-c", config).code == 0
    return config, contacts


def _state(kit, config: str) -> object:
    shown = kit.run("state", "show", "-c", config, "--source", "signups", "--json")
    assert shown.code == 0, shown.stderr
    [row] = json.loads(shown.stdout)["states"]
    return row["state"]


def _undo(stdout: str) -> list[str]:
    [line] = [x for x in stdout.splitlines() if x.startswith("undo: ")]
    argv = shlex.split(line.removeprefix("undo: "))
    assert argv[0] == "capture-sync"
    return argv[1:]


def test_set_and_reset_keep_the_old_cursor_and_print_the_command_that_puts_it_back(
    kit, sandbox, tmp_path: Path
) -> None:
    config, _contacts = _synced(kit, sandbox, tmp_path, 3)
    original = _state(kit, config)
    assert isinstance(original, dict) and original["file"] == "contacts.csv" and original["line"] == 4

    reset = kit.run("state", "reset", "-c", config, "--source", "signups")
    assert reset.code == 0, reset.stderr
    assert _state(kit, config) is None
    undo = kit.run(*_undo(reset.stdout))  # `capture-sync state set ... '<the old JSON>'`
    assert undo.code == 0, undo.stderr
    assert _state(kit, config) == original

    history = json.loads(kit.run("state", "show", "-c", config, "--history", "--json").stdout)["history"]
    assert [(h["action"], h["old"], h["new"]) for h in history] == [("set", None, original), ("reset", original, None)]
    assert history[0]["undo"] == f"capture-sync state reset -c {config} --source signups"
    runs = json.loads(kit.run("runs", "list", "-c", config, "--json").stdout)["runs"]
    assert [(r["kind"], r["note"]) for r in runs[:2]] == [
        ("state", "state set --source signups"),
        ("state", "state reset --source signups"),
    ]
    assert [h["run_id"] for h in history] == [r["id"] for r in runs[:2]]

    # A reset source is read again from its start, and the ledger sends nothing it already delivered.
    kit.run("state", "reset", "-c", config, "--source", "signups")
    again = json.loads(kit.run("sync", "-c", config, "--json").stdout)
    assert (again["counts"]["read"], again["counts"]["unchanged"], again["counts"]["sent"]) == (3, 3, 0)


def test_a_bad_value_or_a_running_daemon_is_refused_and_nothing_changes(kit, sandbox, tmp_path: Path) -> None:
    config, _ = _synced(kit, sandbox, tmp_path, 1)
    before = _state(kit, config)

    not_json = kit.run("state", "set", "-c", config, "--source", "signups", "{cursor: 1}")
    assert not_json.code == 2 and "not JSON" in not_json.stderr and '{"cursor": VALUE}' in not_json.stderr
    not_object = kit.run("state", "set", "-c", config, "--source", "signups", "42")
    assert not_object.code == 2 and "JSON object" in not_object.stderr
    unknown = kit.run("state", "reset", "-c", config, "--source", "nope")
    assert unknown.code == 2 and "no source named 'nope'" in unknown.stderr

    with Ledger(tmp_path / "ledger.sqlite3") as daemon:
        daemon.acquire_daemon_lock()  # what `capture-sync run` holds while it runs
        locked = kit.run("state", "reset", "-c", config, "--source", "signups")
    assert locked.code == 2 and "already running" in locked.stderr and locked.stdout == ""
    assert _state(kit, config) == before
    assert json.loads(kit.run("state", "show", "-c", config, "--history", "--json").stdout)["history"] == []


def test_a_full_refresh_sends_nothing_unchanged_and_an_edited_row_once(kit, sandbox, tmp_path: Path) -> None:
    config, contacts = _synced(kit, sandbox, tmp_path, 3)
    cursor = _state(kit, config)
    assert len(sandbox.store.captures()) == 3

    unchanged = kit.run("sync", "-c", config, "--full-refresh", "--source", "signups", "--json")
    assert unchanged.code == 0, unchanged.stderr
    report = json.loads(unchanged.stdout)
    assert (report["counts"]["read"], report["counts"]["unchanged"], report["counts"]["sent"]) == (3, 3, 0)
    assert len(sandbox.store.captures()) == 3

    # Row 2 edited in place: a full refresh sends exactly that row, once.
    kit.contacts(contacts, [kit.contact(1), kit.contact(2, Last="Byron"), kit.contact(3)])
    edited = json.loads(kit.run("sync", "-c", config, "--full-refresh", "--source", "signups", "--json").stdout)
    assert (
        edited["counts"]["read"],
        edited["counts"]["enqueued"],
        edited["counts"]["sent"],
        edited["counts"]["captured"],
    ) == (3, 1, 1, 1)
    assert (
        json.loads(kit.run("sync", "-c", config, "--full-refresh", "--source", "signups", "--json").stdout)["counts"][
            "sent"
        ]
        == 0
    )
    assert len(sandbox.store.captures()) == 4
    [ada2] = [p for p in sandbox.store.persons() if p["data"]["email"] == "ada2@example.org"]
    assert ada2["data"]["last_name"] == "Byron"

    history = json.loads(kit.run("state", "show", "-c", config, "--history", "--json").stdout)["history"]
    assert [h["action"] for h in history] == ["full-refresh"] * 3 and history[-1]["old"] == cursor
    assert history[0]["run_id"] == json.loads(kit.run("runs", "list", "-c", config, "--json").stdout)["runs"][0]["id"]
    rows = [
        json.loads(x)
        for x in kit.run("runs", "show", "-c", config, str(edited["run"]), "--format", "jsonl").stdout.splitlines()
    ]
    assert [(r["record_id"], r["state"]) for r in rows] == [("R2", "captured")]

    needs_source = kit.run("sync", "-c", config, "--full-refresh")
    assert needs_source.code == 2 and "--full-refresh needs --source" in needs_source.stderr
