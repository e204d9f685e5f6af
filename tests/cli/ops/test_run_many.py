"""`run -c a.toml -c b.toml`: several integrations in one process, each with its own API client,
sources, schedule and ledger; both deliver, and SIGTERM stops them together (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path


def test_one_process_runs_two_integrations(kit, sandbox, start_daemon, tmp_path: Path) -> None:
    configs = []
    for name, first in (("crm-eu", 0), ("crm-us", 100)):
        folder = tmp_path / name
        folder.mkdir()
        key, secret = sandbox.create_client(name, rate_limit=100_000)
        kit.credentials(folder, key, secret)
        contacts = folder / "contacts.csv"
        kit.contacts(contacts, [kit.contact(n) for n in range(first, first + 4)])
        config = kit.config(folder, sandbox.base_url, contacts, schedule="every 1s")
        configs.append(config.rename(folder / f"{name}.toml"))

    daemon = start_daemon(configs[0], "-c", str(configs[1]))
    daemon.poll(lambda: len(sandbox.store.persons()) == 8, "both integrations to deliver")
    for config in configs:
        status = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
        assert status["by_state"]["captured"] == 4  # each its own ledger
    assert daemon.metrics().integrations == {"crm-eu"}  # --http serves the first integration
    assert daemon.stop() == 0, daemon.log.read_text()

    twice = kit.run("run", "-c", str(configs[0]), "-c", str(configs[0]))
    assert twice.code == 2 and "name the same integration" in twice.stderr, twice.stderr
