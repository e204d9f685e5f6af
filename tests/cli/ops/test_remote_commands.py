"""Operator commands reach the leading daemon through a shared PostgreSQL ledger: `pause`, `resume`,
`sync` and `replay` run from another host (here: the same config in another folder, where no control
socket is) are taken by the daemon that leads the integration, which answers through the database."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def test_pause_resume_sync_and_replay_from_another_host_reach_the_leader(
    kit,
    sandbox,
    start_daemon,
    postgres_config,
    tmp_path: Path,
) -> None:
    config, contacts = postgres_config(
        [kit.contact(n) for n in range(5)], "every 1h", head='[integration]\nname = "crm"\n\n'
    )
    elsewhere = tmp_path / "other-host"
    elsewhere.mkdir()
    for name in ("api_key", "api_secret"):
        shutil.copy2(tmp_path / name, elsewhere / name)
    remote = elsewhere / "capture-sync.toml"
    remote.write_text(config.read_text())

    daemon = start_daemon(config)
    daemon.poll(lambda: daemon.get("/readyz").json().get("integrations", {}).get("crm", {}).get("leads"), "it to lead")
    daemon.poll(lambda: len(sandbox.store.persons()) == 5, "the first pass")

    paused = kit.run("pause", "-c", str(remote), "--source", "signups")
    assert paused.code == 0, paused.stdout + paused.stderr
    assert "no daemon runs" not in paused.stdout
    asked = [json.loads(line) for line in daemon.log.read_text().splitlines() if line.startswith("{")]
    assert [(e["command"], e["via"]) for e in asked if e.get("event") == "control.request"] == [("pause", "ledger")]
    assert "paused" in daemon.get("/").text

    kit.contacts(contacts, [kit.contact(9)], header=False)
    synced = kit.run("sync", "-c", str(remote), "--source", "signups")  # an operator's pass runs, paused or not
    assert synced.code == 0, synced.stdout + synced.stderr
    assert "by the daemon" in synced.stdout + synced.stderr and len(sandbox.store.persons()) == 6

    replayed = kit.run("replay", "-c", str(remote))
    assert replayed.code == 0, replayed.stdout + replayed.stderr
    resumed = kit.run("resume", "-c", str(remote))
    assert resumed.code == 0 and "runs a pass of it now" in resumed.stdout, resumed.stdout + resumed.stderr

    assert daemon.stop() == 0, daemon.log.read_text()
    nobody = kit.run("pause", "-c", str(remote))  # no daemon: recorded for the next one, as on SQLite
    assert nobody.code == 0 and "no daemon runs" in nobody.stdout, nobody.stdout + nobody.stderr
