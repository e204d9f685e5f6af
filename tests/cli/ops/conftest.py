"""A daemon started as a user starts it (`capture-sync run --http 127.0.0.1:0`), and reading what it serves."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")
DEADLINE_S = 60
STOP_BOUND_S = 10


class Scrape(dict[tuple[str, frozenset[tuple[str, str]]], float]):
    """One /metrics answer parsed by prometheus-client's own text parser, keyed by each series' labels
    but `integration` (which every series carries: `integrations` holds the names seen)."""

    integrations: set[str]

    def __call__(self, name: str, **labels: str) -> float | None:
        return self.get((name, frozenset(labels.items())))

    def names(self) -> set[str]:
        return {name for name, _ in self}


@dataclass
class Daemon:
    proc: subprocess.Popen[str]
    log: Path
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def poll(self, check: Callable[[], T | None], what: str) -> T:
        """The first truthy value of `check`, retried until the deadline while the daemon lives."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert self.proc.poll() is None, (
                f"exited {self.proc.returncode} waiting for {what}:\n{self.log.read_text()}"
            )
            if value := check():
                return value
            assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}\n{self.log.read_text()}"
            time.sleep(0.05)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=10)

    def metrics(self) -> Scrape:
        response = self.get("/metrics")
        assert response.status_code == 200, response.text
        samples = [s for family in text_string_to_metric_families(response.text) for s in family.samples]
        scrape = Scrape(
            ((s.name, frozenset((k, v) for k, v in s.labels.items() if k != "integration")), s.value) for s in samples
        )
        scrape.integrations = {s.labels.get("integration", "") for s in samples}
        return scrape

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=STOP_BOUND_S)


def _serving_port(log: Path) -> int | None:
    for line in log.read_text().splitlines():
        if line.startswith("{") and (event := json.loads(line)).get("event") == "ops.serving":
            return int(event["port"])
    return None


@pytest.fixture
def start_daemon(kit, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """start_daemon(config, *more_args): `run --http 127.0.0.1:0` (a free port, read from its log);
    config None: no -c (the args name the configs, e.g. --configs DIR)."""
    started: list[Daemon] = []

    def start(config: Path | None, *args: str) -> Daemon:
        log = tmp_path / f"daemon-{len(started)}.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [str(kit.script), "run", *(["-c", str(config)] if config else []), "--http", "127.0.0.1:0", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=kit.env(),
            )
        daemon = Daemon(proc, log)
        started.append(daemon)
        daemon.port = daemon.poll(lambda: _serving_port(log), "the daemon to serve HTTP")
        return daemon

    yield start
    for daemon in started:
        if daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait()


@pytest.fixture
def chromium() -> str:
    """Debian's chromium (.ci/run installs it). In CI its absence fails the test; elsewhere it skips."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing: .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


@pytest.fixture
def postgres_config(kit, sandbox, tmp_path: Path, postgres_ledger_url: str) -> Callable[..., tuple[Path, Path]]:
    """postgres_config(rows, schedule, head=""): a config of one csv source (`rows` as the contacts)
    and a sandbox client, its ledger in a fresh PostgreSQL database; `head` goes first in the file.
    Returns (config, contacts)."""

    def make(rows: list[dict[str, str]], schedule: str, head: str = "") -> tuple[Path, Path]:
        key, secret = sandbox.create_client(rate_limit=100_000)
        kit.credentials(tmp_path, key, secret)
        contacts = tmp_path / "contacts.csv"
        kit.contacts(contacts, rows)
        config = kit.config(tmp_path, sandbox.base_url, contacts, schedule=schedule)
        text = config.read_text().replace(
            '[ledger]\npath = "ledger.sqlite3"', f"[ledger]\nurl = {json.dumps(postgres_ledger_url)}"
        )
        config.write_text(head + text)
        return config, contacts

    return make
