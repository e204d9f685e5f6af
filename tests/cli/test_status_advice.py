"""`capture-sync status`: one line of advice for each state, with the exact command, never one that
the state would refuse (issue 26). Where the ledger alone shows the state (nothing to do, pending,
stalled, blocked) the real command runs against a ledger a real `sync` left; where only a running
daemon knows it (credentials refused, an outage, a source not read) the rendering is given the live
state a daemon's health describes, over a ledger a real `sync` left."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from connector.cli.status import print_status
from connector.health import DaemonHealth, Unread
from connector.ledger import Ledger
from connector.sandbox import SandboxStore


def _synced(kit, tmp_path: Path, base_url: str, key: str, secret: str, rows: int = 3, code: int = 0) -> Path:
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, rows + 1)])
    config = kit.config(tmp_path, base_url, contacts)
    synced = kit.run("sync", "-c", str(config), "--log-level", "ERROR")
    assert synced.code == code, synced.stdout + synced.stderr
    return config


def _status(kit, config: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The advice lines `status` ends with, and the advice of `status --json` (the same lines)."""
    text = kit.run("status", "-c", str(config))
    assert text.code == 0, text.stderr
    as_json = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
    assert as_json["live"] is None  # no daemon holds the ledger
    lines = text.stdout.splitlines()[-len(as_json["advice"]) :]
    assert lines == [a["text"] for a in as_json["advice"]]
    return lines, as_json["advice"]


def _rendered(capsys: pytest.CaptureFixture[str], config: Path, live: dict[str, Any] | None) -> str:
    with Ledger(config.parent / "ledger.sqlite3") as ledger:
        print_status(ledger, config, live=live)
    return capsys.readouterr().out


def _live(health: DaemonHealth, **paused: float) -> dict[str, Any]:
    return {"paused": paused, "health": health.describe(time.time())}


def test_nothing_to_do(kit, sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _synced(kit, tmp_path, sandbox.base_url, *sandbox.create_client(rate_limit=1000))
    lines, advice = _status(kit, config)
    assert lines == ["nothing to do: everything is settled and every source is read"]
    assert [a["state"] for a in advice] == ["settled"]
    beside_a_daemon = _rendered(capsys, config, _live(DaemonHealth(("signups",), config)))
    assert "nothing to do" in beside_a_daemon


def test_pending_during_an_outage(kit, sandbox_process, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    box = sandbox_process()
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("advice-outage", rate_limit=1000)
    box.stop()
    config = _synced(kit, tmp_path, box.base_url, key, secret, code=4)
    [line], [advice] = _status(kit, config)
    assert line == (
        f"3 entries wait to be sent and no daemon runs: `capture-sync replay -c {config}` sends them once the API "
        f"answers (`capture-sync check -c {config}` says whether it does)"
    )
    assert advice["state"] == "pending"

    health = DaemonHealth(("signups",), config)
    health.outage_since = time.time() - 95
    health.next_run = lambda job: 1_900_000_000.0 if job == "retry-sweep" else None
    [line] = _rendered(capsys, config, _live(health)).splitlines()[-1:]
    assert line.startswith("3 entries wait: the Capture API has not answered since ")
    assert (
        "the daemon re-sends them by itself once it answers (next try: its retry sweep at 2030-03-17 17:46:40 UTC)"
        in line
    )
    assert "replay" not in line  # the daemon does it: no command to run


def test_stalled(kit, gated_sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    box, gate = gated_sandbox()
    gate.captures = False  # 503, retryable: false
    config = _synced(kit, tmp_path, box.base_url, *box.create_client(rate_limit=1000), code=4)
    [line], [advice] = _status(kit, config)
    assert line.startswith("3 entries stalled: a non-retryable answer stopped their batches; ")
    assert line.endswith(f"`capture-sync replay -c {config}` re-sends them with the same keys")
    assert advice["state"] == "stalled"

    health = DaemonHealth(("signups",), config, retry_stalled_every="every 1h")
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        health.ledger_read(ledger.unsettled_count(), ledger.blocked_count(), ledger.stalls())
    [line] = _rendered(capsys, config, _live(health)).splitlines()[-1:]
    assert "(HTTP 503 ServiceUnavailableError/capture_failed, since " in line
    assert line.endswith(
        f"re-sent on [daemon] retry_stalled_every (every 1h); `capture-sync replay -c {config}` sends them now"
    )


def test_blocked(kit, sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _synced(kit, tmp_path, sandbox.base_url, *sandbox.create_client(rate_limit=1000))
    with sqlite3.connect(
        tmp_path / "ledger.sqlite3"
    ) as db:  # as tests/cli/test_outage.py: a 409's outcome, put directly
        db.execute("UPDATE entries SET state = 'blocked', last_error = 'HTTP 409' WHERE record_id = 'R2'")
    db.close()
    [line], [advice] = _status(kit, config)
    assert line.startswith("1 blocked: a batch got 409")
    assert line.endswith(f"then run the `ledger resolve` command that `capture-sync ledger show -c {config} KEY` gives")
    assert advice["state"] == "blocked"
    # beside a running daemon, `ledger resolve` is refused: the advice says to stop it first
    [line] = _rendered(capsys, config, _live(DaemonHealth(("signups",), config))).splitlines()[-1:]
    assert (
        "then stop the daemon (`ledger resolve` is refused while it holds the ledger) and run the `ledger resolve`"
        in line
    )


def test_credentials_refused(kit, sandbox_process, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    box = sandbox_process()
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("advice-refused", rate_limit=1000)
    box.stop()  # three entries left waiting in the ledger
    config = _synced(kit, tmp_path, box.base_url, key, secret, code=4)
    health = DaemonHealth(("signups",), config)
    health.refused("invalid credentials (HTTP 401, capture_bulk)", since=time.time() - 60)
    health.skipped("signups")
    health.next_run = lambda job: 1_900_000_000.0 if job == "credentials" else None
    text = _rendered(capsys, config, _live(health))
    assert "everything is settled" not in text and "the daemon sends them" not in text  # it does not, while refused
    [line] = text.splitlines()[-1:]
    assert line.startswith("the Capture API refuses the credentials since ")
    assert "nothing is sent (3 entries wait in the ledger) and these sources are not read: signups since " in line
    assert line.endswith(
        f"write a working pair into the credential files, then `kill -HUP {health.describe(0)['pid']}` "
        "(or wait: the daemon reads them again at 2030-03-17 17:46:40 UTC)"
    )


def test_a_source_that_cannot_be_read(kit, sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _synced(kit, tmp_path, sandbox.base_url, *sandbox.create_client(rate_limit=1000))
    health = DaemonHealth(("signups",), config)
    health.unread["signups"] = Unread(time.time() - 300, "no file matches contacts.csv")
    text = _rendered(capsys, config, _live(health))
    assert "everything is settled" not in text
    [line] = text.splitlines()[-1:]
    assert line.startswith("not read: signups since ")
    assert line.endswith(
        f": no file matches contacts.csv; fix it (`capture-sync check -c {config}` says what is wrong); the daemon "
        "reads it again on its next tick"
    )


def test_paused(kit, sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The live state's `paused` map (ctl's control channel fills it): one line, the exact resume command."""
    config = _synced(kit, tmp_path, sandbox.base_url, *sandbox.create_client(rate_limit=1000))
    health = DaemonHealth(("signups",), config)
    [line] = _rendered(capsys, config, _live(health, signups=1_900_000_000.0)).splitlines()[-1:]
    assert (
        line
        == f"paused: signups since 2030-03-17 17:46:40 UTC; `capture-sync resume -c {config} --source signups` resumes it"
    )
    [line] = _rendered(capsys, config, {"paused": {"*": 1_900_000_000.0}, "health": health.describe(0)}).splitlines()[
        -1:
    ]
    assert line == f"delivery is paused since 2030-03-17 17:46:40 UTC: `capture-sync resume -c {config}` resumes it"
