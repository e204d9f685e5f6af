"""Rotating the API secret without downtime (spec 5: regenerate, update the integration, test with
GET /info; the old secret stops working at once).

Setup: a sandbox answering each request in 40 ms and a feed of 300 contacts sent 10 per request, one
request at a time, so the secret can be regenerated while a pass is under way. Oracle: the sandbox's
own records (every contact captured exactly once), the ledger's attempts (the request refused with
401 went again under its same key and was answered 2xx), and the process itself (the daemon never
exits)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from connector.sandbox import Faults

DEADLINE_S = 60
CONTACTS = 300
STOP_BOUND_S = 10


def wait_until(done: Callable[[], bool], proc: subprocess.Popen[str] | None, log: Path, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if proc is not None:
            assert proc.poll() is None, f"exited {proc.returncode} while waiting for {what}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}\n{log.read_text()}"
        time.sleep(0.05)  # polling interval; each round checks the outcome itself


def events(log: Path, name: str) -> list[dict[str, object]]:
    """The daemon's log events called `name` (JSON lines: its stderr is not a terminal)."""
    found = []
    for line in log.read_text().splitlines():
        if line.startswith("{") and (event := json.loads(line)).get("event") == name:
            found.append(event)
    return found


def refused_then_accepted(ledger: Path) -> list[str]:
    """Batch keys with a 401 attempt followed by a 2xx attempt under the same key."""
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT key, status_code FROM attempts ORDER BY id").fetchall()
    refused = {key for key, status in rows if status == 401}
    return sorted({key for key, status in rows if key in refused and status is not None and 200 <= status < 300})


@pytest.fixture
def feed(kit, sandbox_factory, tmp_path: Path):
    """A sandbox, a client whose credentials are in files, 300 contacts, and a config for them."""
    box = sandbox_factory(faults=Faults(latency_s=0.04))
    key, secret = box.create_client("rotation-test", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(CONTACTS)])

    def config(daemon: str = "") -> Path:
        path = kit.config(tmp_path, box.base_url, contacts, schedule="every 1h", extra_capture="concurrency = 1\n")
        path.write_text(path.read_text() + daemon)
        return path

    return box, key, config


def start(kit, args: list[str], log: Path) -> subprocess.Popen[str]:
    with log.open("w") as out:
        return subprocess.Popen(
            [str(kit.script), *args], stdout=out, stderr=subprocess.STDOUT, text=True, env=kit.env()
        )


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_the_daemon_carries_on_when_the_secret_is_rotated_mid_pass_and_written_to_its_file(
    kit, feed, tmp_path: Path
) -> None:
    box, key, config = feed
    log = tmp_path / "daemon.log"
    # No credentials tick in this test: only the 401's own re-read can carry the daemon on.
    daemon = start(kit, ["run", "-c", str(config('\n[daemon]\ncredentials_check = "every 1h"\n'))], log)
    try:
        wait_until(lambda: len(box.store.captures()) >= 60, daemon, log, "the pass to be under way")
        # The new secret is in its file before the server switches to it, so the first 401 finds it
        # there (the other order, a 401 before the file is written, is the next test's).
        new_secret = "rotated-" + key[-8:] + "-0000000000000000"
        kit.credentials(tmp_path, key, new_secret)
        box.store.regenerate_secret(key, new_secret)  # the old secret stops working now
        wait_until(lambda: len(box.store.persons()) == CONTACTS, daemon, log, "every contact captured")
        assert daemon.poll() is None  # no restart: the same process goes on
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=STOP_BOUND_S) == 0, log.read_text()
    finally:
        stop(daemon)
    assert len(box.store.captures()) == CONTACTS  # 0 lost, 0 doubled
    assert refused_then_accepted(tmp_path / "ledger.sqlite3"), "no request was refused and re-sent under its key"
    assert events(log, "daemon.auth_failed") == []  # the request in hand went on: the daemon never stopped sending
    assert len(events(log, "credentials.renewed")) == 1
    assert new_secret not in log.read_text()


@pytest.mark.parametrize("trigger", ["SIGHUP", "tick"])
def test_the_daemon_stays_up_while_the_files_hold_a_refused_secret_and_resumes_once_they_are_fixed(
    kit, feed, tmp_path: Path, trigger: str
) -> None:
    box, key, config = feed
    check = "every 1h" if trigger == "SIGHUP" else "every 1s"  # SIGHUP alone, or the credentials tick alone
    log = tmp_path / "daemon.log"
    daemon = start(kit, ["run", "-c", str(config(f'\n[daemon]\ncredentials_check = "{check}"\n'))], log)
    try:
        wait_until(lambda: len(box.store.captures()) >= 60, daemon, log, "the pass to be under way")
        new_secret = box.store.regenerate_secret(key)  # the files still hold the old one
        wait_until(lambda: bool(events(log, "daemon.auth_failed")), daemon, log, "the daemon to report the refusal")
        captured_while_refused = len(box.store.captures())
        assert captured_while_refused < CONTACTS

        kit.credentials(tmp_path, key, new_secret)
        if trigger == "SIGHUP":
            daemon.send_signal(signal.SIGHUP)
        wait_until(lambda: len(box.store.persons()) == CONTACTS, daemon, log, "every contact captured")
        assert [e["trigger"] for e in events(log, "daemon.auth_recovered")] == [trigger]
        assert len(events(log, "daemon.auth_failed")) == 1  # said once, not on every tick
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=STOP_BOUND_S) == 0, log.read_text()
    finally:
        stop(daemon)
    assert len(box.store.captures()) == CONTACTS
    assert refused_then_accepted(tmp_path / "ledger.sqlite3")
    assert new_secret not in log.read_text()


def test_sighup_with_a_pair_the_api_refuses_keeps_the_working_pair_in_use(kit, feed, tmp_path: Path) -> None:
    box, key, config = feed
    log = tmp_path / "daemon.log"
    daemon = start(kit, ["run", "-c", str(config())], log)
    try:
        wait_until(lambda: len(box.store.captures()) >= 60, daemon, log, "the pass to be under way")
        kit.credentials(tmp_path, key, "a-mistyped-secret")
        daemon.send_signal(signal.SIGHUP)
        wait_until(lambda: bool(events(log, "credentials.refused")), daemon, log, "the new pair to be refused")
        wait_until(lambda: len(box.store.persons()) == CONTACTS, daemon, log, "every contact captured")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=STOP_BOUND_S) == 0, log.read_text()
    finally:
        stop(daemon)
    assert events(log, "daemon.auth_failed") == []
    assert len(box.store.captures()) == CONTACTS
    assert "a-mistyped-secret" not in log.read_text()


def test_sync_picks_up_a_secret_rotated_mid_run(kit, feed, tmp_path: Path) -> None:
    box, key, config = feed
    log = tmp_path / "sync.log"
    proc = start(kit, ["sync", "-c", str(config())], log)
    try:
        wait_until(lambda: len(box.store.captures()) >= 60, proc, log, "the sync to be under way")
        kit.credentials(tmp_path, key, box.store.regenerate_secret(key))
        assert proc.wait(timeout=DEADLINE_S) == 0, log.read_text()
    finally:
        stop(proc)
    assert len(box.store.captures()) == len(box.store.persons()) == CONTACTS
    assert refused_then_accepted(tmp_path / "ledger.sqlite3")


def test_sync_with_refused_credentials_reads_nothing_and_names_where_they_were_read_from(
    kit, feed, tmp_path: Path
) -> None:
    box, key, config = feed
    path = config()
    kit.credentials(tmp_path, key, "a-wrong-secret-value")

    result = kit.run("sync", "-c", str(path))

    assert result.code == 3, result.stderr
    assert f"secret from file {tmp_path / 'api_secret'}" in result.stderr
    assert "a-wrong-secret-value" not in result.stdout + result.stderr
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as db:  # GET /info came first: no source was read
        assert db.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM source_state").fetchone()[0] == 0
    assert box.store.persons() == []
