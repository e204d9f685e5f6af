"""`capture-sync run`: the daemon captures appended rows on a later tick, refuses a second daemon on
the same ledger, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from connector.sandbox import SandboxStore

STOP_BOUND_S = 10  # design 5: SIGTERM -> exit 0 within 10 s
DEADLINE_S = 30


def wait_for_emails(store: SandboxStore, emails: set[str], daemon: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if emails <= {p["data"].get("email") for p in store.persons()}:
            return
        assert daemon.poll() is None, f"the daemon exited {daemon.returncode}:\n{log.read_text()}"
        time.sleep(0.1)  # polling interval, not a stand-in for synchronisation: the loop checks the outcome
    raise AssertionError(f"not captured within {DEADLINE_S} s: {emails}\n{log.read_text()}")


def test_daemon_ticks_refuses_a_second_instance_and_stops_on_sigterm(kit, sandbox_process, tmp_path: Path) -> None:
    box = sandbox_process()
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("daemon-test", rate_limit=1000)
        kit.credentials(tmp_path, key, secret)
        contacts = tmp_path / "contacts.csv"
        kit.contacts(contacts, [kit.contact(1), kit.contact(2)])
        config = kit.config(tmp_path, box.base_url, contacts, schedule="every 1s")
        log = tmp_path / "daemon.log"
        with log.open("w") as err:
            daemon = subprocess.Popen(
                [str(kit.script), "run", "-c", str(config)],
                stdout=err,
                stderr=subprocess.STDOUT,
                text=True,
                env=kit.env(),
            )
        try:
            wait_for_emails(store, {"ada1@example.org", "ada2@example.org"}, daemon, log)
            kit.contacts(contacts, [kit.contact(3), kit.contact(4, Email="", Phone="+1 415 555 0104")], header=False)
            wait_for_emails(store, {"ada3@example.org"}, daemon, log)
            assert any(p["data"].get("phone") == "+1 415 555 0104" for p in store.persons())

            second = kit.run("run", "-c", str(config))
            assert second.code == 2, second.stderr
            assert "already running" in second.stderr

            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=STOP_BOUND_S) == 0, log.read_text()
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
        assert len(store.persons()) == 4  # every row once, however many ticks ran
        assert len(store.captures()) == 4

    status = kit.run("status", "-c", str(config), "--json")
    assert status.code == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["by_state"]["captured"] == 4
    assert report["oldest_unsettled"] is None
    assert "daemon stopped" in log.read_text()


def test_run_once_syncs_every_source_and_exits(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client()
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, 6)])
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    result = kit.run("run", "--once", "-c", str(config))
    assert result.code == 0, result.stderr
    assert len(sandbox.store.persons()) == 5
    assert "captured" in result.stdout


def test_the_daemon_stops_with_exit_3_when_the_credentials_are_refused(kit, sandbox, tmp_path: Path) -> None:
    key, _secret = sandbox.create_client()
    kit.credentials(tmp_path, key, "a-wrong-secret-value")
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, sandbox.base_url, contacts, schedule="every 1s")
    result = kit.run("run", "-c", str(config))
    assert result.code == 3, result.stderr
    assert "authentication failed" in result.stderr
    assert sandbox.store.persons() == []


@pytest.mark.parametrize(
    ("command", "sig", "stopped_code"),
    [("run", signal.SIGTERM, 0), ("sync", signal.SIGINT, 4)],  # sync: work is left unsettled, so 4
)
def test_a_stop_signal_mid_delivery_records_the_request_in_hand_and_nothing_is_doubled(
    kit, sandbox_process, tmp_path: Path, command: str, sig: signal.Signals, stopped_code: int
) -> None:
    box = sandbox_process(latency_ms=700)
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("sigterm-test", rate_limit=1000)
        kit.credentials(tmp_path, key, secret)
        contacts = tmp_path / "contacts.csv"
        kit.contacts(contacts, [kit.contact(n) for n in range(1, 41)])
        config = kit.config(tmp_path, box.base_url, contacts, extra_capture="concurrency = 1\n")
        log = tmp_path / "proc.log"
        with log.open("w") as err:
            proc = subprocess.Popen(
                [str(kit.script), command, "-c", str(config)],
                stdout=err,
                stderr=subprocess.STDOUT,
                text=True,
                env=kit.env(),
            )
        try:
            deadline = time.monotonic() + DEADLINE_S
            while not store.captures():
                assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
                time.sleep(0.05)
            proc.send_signal(sig)
            assert proc.wait(timeout=STOP_BOUND_S) == stopped_code, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        done_by_crm = len(store.captures())
        assert 0 < done_by_crm < 40  # stopped mid-way
        status = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
        assert status["by_state"]["captured"] == done_by_crm  # the CRM's work is all in the ledger
        assert status["by_state"]["in_flight"] == 0

        finish = kit.run("sync", "-c", str(config))
        assert finish.code == 0, finish.stderr
        assert len(store.captures()) == 40 == len(store.persons())
