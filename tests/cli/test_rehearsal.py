"""Rehearsing an outage as docs/operations.md tells it: a sandbox and a daemon both keep running while
`sandbox faults set` starts the outage and `sandbox faults clear` ends it (issue 26).

Oracle: during the outage the daemon's requests are answered 503 (its log says so) and the new row
is not captured; once cleared, the daemon delivers it by itself, and nothing is doubled.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from connector.sandbox import SandboxStore

DEADLINE_S = 30


def wait_until(condition: Callable[[], bool], daemon: subprocess.Popen[str], log: Path, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if condition():
            return
        assert daemon.poll() is None, f"the daemon exited {daemon.returncode}:\n{log.read_text()}"
        time.sleep(0.1)  # polling interval: the loop checks the outcome
    raise AssertionError(f"not within {DEADLINE_S} s: {what}\n{log.read_text()}")


def test_an_outage_rehearsed_on_a_running_daemon_without_restarting_anything(kit, sandbox_process, tmp_path):
    box = sandbox_process()
    where = ["--url", box.base_url, "--admin-token-file", str(box.admin_token_file)]
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("rehearsal", rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, box.base_url, contacts, schedule="every 1s")
    config.write_text(config.read_text() + '\n[daemon]\nretry_sweep = "every 1s"\n')
    log = tmp_path / "daemon.log"
    with log.open("w") as out:
        daemon = subprocess.Popen(
            [str(kit.script), "run", "-c", str(config)], stdout=out, stderr=subprocess.STDOUT, text=True, env=kit.env()
        )
    try:
        with SandboxStore(box.db) as store:

            def emails() -> set[str]:
                return {p["data"].get("email") for p in store.persons()}

            wait_until(lambda: emails() == {"ada1@example.org"}, daemon, log, "the first row captured")
            started = kit.run("sandbox", "faults", "set", *where, "--p-retryable-503", "1")
            assert started.code == 0, started.stderr
            kit.contacts(contacts, [kit.contact(2)], header=False)
            wait_until(lambda: "HTTP 503" in log.read_text(), daemon, log, "a 503 met by the daemon")
            assert emails() == {"ada1@example.org"}

            ended = kit.run("sandbox", "faults", "clear", *where)
            assert ended.code == 0, ended.stderr
            wait_until(lambda: emails() == {"ada1@example.org", "ada2@example.org"}, daemon, log, "the second row")
            assert len(store.captures()) == 2
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=10) == 0, log.read_text()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
