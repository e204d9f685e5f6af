"""`run --http` on a PostgreSQL ledger: the daemon sends, its /metrics, /readyz and status page read
the same ledger `status` reads, a second daemon on the same database stands by (the first holds the
integration's lease) and a one-shot sync is refused, a pause reaches the leader through its local
control socket, and SIGTERM stops it; the standby then leads."""

from __future__ import annotations

import json
from pathlib import Path

CONTACTS = 30


def test_the_daemon_serves_metrics_and_the_status_page_from_a_postgresql_ledger(
    kit,
    sandbox,
    start_daemon,
    postgres_config,
    tmp_path: Path,
) -> None:
    rows = [kit.contact(n) for n in range(CONTACTS)] + [kit.contact(99, Email="bad@@example.org")]
    config, contacts = postgres_config(rows, "every 1s")

    daemon = start_daemon(config)
    scrape = daemon.poll(
        lambda: (m := daemon.metrics())("capture_sync_persons_captured_total", source="signups") == CONTACTS and m,
        "every contact to be captured",
    )
    status = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
    assert status["by_state"]["captured"] == CONTACTS and status["by_state"]["rejected"] == 1
    for state, n in status["by_state"].items():
        assert scrape("capture_sync_entries", source="signups", state=state) == (n or None), state
    assert daemon.get("/readyz").status_code == 200
    page = daemon.get("/")
    assert page.status_code == 200 and "signups" in page.text
    assert scrape.integrations == {"capture-sync"}  # every series names the integration: the config's stem
    assert "<h2>Integrations</h2>" in page.text and "<code>capture-sync</code>" in page.text
    assert not (tmp_path / "ledger.sqlite3").exists()

    standby = start_daemon(config)
    ready = standby.poll(
        lambda: (r := standby.get("/readyz")).status_code == 200 and r.json(), "the standby to be ready"
    )
    assert ready["integrations"]["capture-sync"]["leads"] is False, ready
    assert daemon.get("/readyz").json()["integrations"]["capture-sync"]["leads"] is True
    assert daemon.metrics()("capture_sync_leader") == 1 and standby.metrics()("capture_sync_leader") == 0
    assert "another daemon leads it" in standby.get("/").text
    one_shot = kit.run("replay", "-c", str(config))
    assert one_shot.code in (0, 2), one_shot.stderr  # asked of the local leader, or refused: never beside it
    paused = kit.run("pause", "-c", str(config), "--source", "signups")
    assert paused.code == 0 and "no daemon runs" not in paused.stdout, paused.stdout + paused.stderr
    assert "paused" in kit.run("status", "-c", str(config)).stdout  # asked of the running daemon
    resumed = kit.run("resume", "-c", str(config), "--source", "signups")
    assert resumed.code == 0 and "no daemon runs" not in resumed.stdout, resumed.stdout + resumed.stderr

    assert daemon.stop() == 0, daemon.log.read_text()  # a clean stop hands the lease over at once
    standby.poll(lambda: standby.get("/readyz").json()["integrations"]["capture-sync"]["leads"], "the standby to lead")
    kit.contacts(contacts, [kit.contact(n) for n in range(CONTACTS, CONTACTS + 5)], header=False)
    standby.poll(lambda: len(sandbox.store.persons()) == CONTACTS + 5, "the new leader to send the new rows")
    assert standby.stop() == 0, standby.log.read_text()
    assert len(sandbox.store.captures()) == CONTACTS + 5  # none sent twice
