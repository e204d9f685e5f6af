"""Alerts from the daemon to a webhook: a local receiver on loopback records every body it is sent.

Setup: `capture-sync run` with its source, retry sweep and alerts tick every second, feeding a
sandbox. Oracle: the receiver's bodies (one per change of a condition: started, then cleared), what
the sandbox holds (delivery goes on whatever the webhook does) and the daemon's JSON log lines.
Bodies never hold the API secret, the webhook URL or any contact's name, email or phone."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from connector.sandbox import SandboxStore

DEADLINE_S = 60
STOP_BOUND_S = 10
FAST = '\n[daemon]\nretry_sweep = "every 1s"\ncredentials_check = "every 1s"\nalerts_check = "every 1s"\n'


class Receiver:
    """A webhook on 127.0.0.1: records each POSTed JSON body; answers `failing` with 503 first."""

    def __init__(self, failing: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []  # what it accepted (2xx)
        self.refused: list[dict[str, Any]] = []  # what it answered 503
        self.failing = failing
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    refuse = len(receiver.refused) < receiver.failing
                    (receiver.refused if refuse else receiver.bodies).append(body)
                self.send_response(503 if refuse else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.token = secrets.token_hex(12)  # the URL's secret part: it must show up nowhere
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/{self.token}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def received(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.bodies)


@pytest.fixture
def receiver() -> Iterator[Callable[..., Receiver]]:
    started: list[Receiver] = []

    def start(failing: int = 0) -> Receiver:
        started.append(Receiver(failing))
        return started[-1]

    yield start
    for r in started:
        r.server.shutdown()
        r.server.server_close()


def wait_until(done: Callable[[], bool], proc: subprocess.Popen[str], log: Path, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert proc.poll() is None, f"exited {proc.returncode} while waiting for {what}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}\n{log.read_text()}"
        time.sleep(0.05)  # polling interval; each round checks the outcome itself


def events(log: Path, name: str) -> list[dict[str, Any]]:
    return [
        e for line in log.read_text().splitlines() if line.startswith("{") and (e := json.loads(line))["event"] == name
    ]


def start(kit, config: Path, log: Path) -> subprocess.Popen[str]:
    with log.open("w") as out:
        return subprocess.Popen(
            [str(kit.script), "run", "-c", str(config)], stdout=out, stderr=subprocess.STDOUT, text=True, env=kit.env()
        )


def stop(proc: subprocess.Popen[str], log: Path) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=STOP_BOUND_S) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def configure(kit, tmp_path: Path, base_url: str, rows: list[dict[str, str]], alerts: str) -> Path:
    """Contacts in a csv, a source read every second, the fast daemon ticks and `alerts` (TOML)."""
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, rows)
    config = kit.config(tmp_path, base_url, contacts, schedule="every 1s")
    config.write_text(config.read_text() + FAST + alerts)
    return config


def persons(db: Path) -> int:
    with SandboxStore(db) as store:
        return len(store.persons())


def assert_clean(bodies: list[dict[str, Any]], *forbidden: str) -> None:
    text = json.dumps(bodies)
    for value in forbidden:
        assert value not in text, f"a body holds {value!r}"
    for contact_data in ("Ada", "ada", "Lovelace", "example.org", "+1415"):
        assert contact_data not in text, f"a body holds contact data ({contact_data!r})"


def test_an_outage_longer_than_the_threshold_gives_one_alert_and_its_recovery_one_more(
    kit, sandbox_process, receiver, tmp_path: Path
) -> None:
    box = sandbox_process()
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("alerts-outage", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    hook = receiver()
    rows = [kit.contact(n, Phone=f"+1415555{n:04d}") for n in range(5)]
    config = configure(kit, tmp_path, box.base_url, rows, f'\n[[alerts]]\nurl = "{hook.url}"\noutage_after = "2s"\n')
    log = tmp_path / "daemon.log"
    daemon = start(kit, config, log)
    try:
        wait_until(lambda: persons(box.db) == 5, daemon, log, "the first contacts captured")
        box.kill()  # the outage: new contacts wait in the ledger
        more = [kit.contact(n, Phone=f"+1415555{n:04d}") for n in range(5, 8)]
        kit.contacts(tmp_path / "contacts.csv", more, header=False)
        wait_until(lambda: len(hook.received()) == 1, daemon, log, "the outage alert")
        again = sandbox_process(db=box.db, port=box.port)
        wait_until(lambda: len(hook.received()) == 2, daemon, log, "the recovery alert")
        wait_until(lambda: persons(again.db) == 8, daemon, log, "every contact captured")
        passes = len(events(log, "run.finished"))  # each pass is judged when it ends: a few more say nothing new
        wait_until(lambda: len(events(log, "run.finished")) >= passes + 3, daemon, log, "three more passes")
    finally:
        stop(daemon, log)
    started, cleared = hook.received()
    assert [(b["condition"], b["status"]) for b in hook.received()] == [("outage", "started"), ("outage", "cleared")]
    assert started["since"] == cleared["since"] and started["duration_s"] >= 2
    assert started["counts"]["unsettled"] >= 3 and started["sources"] == ["signups"]
    assert started["command"] == f"capture-sync check -c {config.absolute()}"
    assert "Delivery halted" in started["summary"] and "Delivery resumed" in cleared["summary"]
    assert_clean(hook.received(), secret, hook.token)
    assert hook.token not in log.read_text()
    assert [e["status"] for e in events(log, "alert.sent")] == ["started", "cleared"]


def test_refused_credentials_give_one_auth_alert_and_the_fixed_file_one_cleared_in_slack_shape(
    kit, sandbox, receiver, tmp_path: Path
) -> None:
    key, secret = sandbox.create_client("alerts-auth", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    hook = receiver()
    (tmp_path / "webhook-url").write_text(hook.url + "\n")
    rows = [kit.contact(n) for n in range(3)]
    config = configure(
        kit, tmp_path, sandbox.base_url, rows, '\n[[alerts]]\nurl_file = "webhook-url"\nformat = "slack"\n'
    )
    log = tmp_path / "daemon.log"
    daemon = start(kit, config, log)
    try:
        wait_until(lambda: len(sandbox.store.persons()) == 3, daemon, log, "the contacts captured")
        new_secret = sandbox.store.regenerate_secret(key)  # the file still holds the old one
        wait_until(lambda: len(hook.received()) == 1, daemon, log, "the auth alert")
        kit.credentials(tmp_path, key, new_secret)
        wait_until(lambda: len(hook.received()) == 2, daemon, log, "the cleared alert")
        passes = len(events(log, "run.finished"))
        wait_until(lambda: len(events(log, "run.finished")) >= passes + 3, daemon, log, "three more passes")
    finally:
        stop(daemon, log)
    started, cleared = hook.received()
    assert started["text"].startswith("capture-sync auth started: The Capture API refuses the credentials")
    assert cleared["text"].startswith("capture-sync auth cleared:")
    for body in (started, cleared):
        assert set(body) == {"text", "blocks"}
        assert [b["type"] for b in body["blocks"]] == ["header", "section", "section", "section", "context"]
        assert body["blocks"][0]["text"]["type"] == "plain_text"
        assert all(f["type"] == "mrkdwn" for f in body["blocks"][2]["fields"])
        assert body["blocks"][3]["text"]["text"] == f"Run: `capture-sync check -c {config.absolute()}`"
    assert_clean(hook.received(), secret, new_secret, hook.token)
    assert hook.token not in log.read_text() and new_secret not in log.read_text()


def test_a_failing_webhook_is_retried_with_backoff_while_delivery_goes_on(
    kit, sandbox, receiver, tmp_path: Path
) -> None:
    key, secret = sandbox.create_client("alerts-down", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    hook = receiver(failing=2)
    # 5 of 20 rejected: 25 %, above the 10 % threshold
    rows = [kit.contact(n, Email=f"not-an-email-{n}" if n % 4 == 0 else f"ada{n}@example.org") for n in range(20)]
    config = configure(
        kit, tmp_path, sandbox.base_url, rows, f'\n[[alerts]]\nurl = "{hook.url}"\nconditions = ["reject_rate"]\n'
    )
    log = tmp_path / "daemon.log"
    daemon = start(kit, config, log)
    try:
        wait_until(lambda: len(sandbox.store.persons()) == 15, daemon, log, "the valid contacts captured")
        wait_until(lambda: len(hook.received()) == 1, daemon, log, "the alert through, on its third try")
    finally:
        stop(daemon, log)
    failed = events(log, "alert.send_failed")
    assert [(e["attempt"], e["error"], e["condition"]) for e in failed] == [
        (1, "WebhookRefused: HTTP 503", "reject_rate"),
        (2, "WebhookRefused: HTTP 503", "reject_rate"),
    ]
    assert 1 <= failed[0]["retry_in_s"] < failed[1]["retry_in_s"]  # the waits grow
    [body] = hook.received()
    assert hook.refused == [body, body]  # the same body each time
    assert (body["condition"], body["subject"], body["counts"]) == (
        "reject_rate",
        "signups",
        {"read": 20, "rejected": 5, "reject_share": 0.25},
    )
    assert body["command"] == f"capture-sync ledger list -c {config.absolute()} --state rejected --source signups"
    assert_clean(hook.received(), secret, hook.token)
    assert "not-an-email" not in json.dumps(body)
