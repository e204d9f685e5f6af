"""`run --http` as an operator's Prometheus and Kubernetes see it, against the sandbox over loopback.

Setup: 40 contacts, 5 with an email the mapping refuses, and a sandbox that refuses a fifth of the
valid persons (`p_person_fail`), so that captured, failed and rejected are all non-zero. Oracle:
`capture-sync status --json` (the ledger's own counts) and the ledger's attempts table, read after
the pass, must equal what /metrics says; /readyz follows the credentials the sandbox accepts."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

from connector.sandbox import Faults

CONTACTS, BAD_EMAILS = 40, 5


def test_metrics_match_the_ledger_after_a_pass_and_readyz_follows_the_credentials(
    kit, sandbox_factory, start_daemon, tmp_path: Path
) -> None:
    box = sandbox_factory(faults=Faults(p_person_fail=0.2, seed=11))
    key, secret = box.create_client("metrics-test", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(
        contacts,
        [kit.contact(n, Email="not-an-email" if n < BAD_EMAILS else f"ada{n}@example.org") for n in range(CONTACTS)],
    )
    config = kit.config(tmp_path, box.base_url, contacts, schedule="every 1s")
    config.write_text(config.read_text() + '\n[daemon]\ncredentials_check = "every 1h"\n')  # SIGHUP alone cures

    daemon = start_daemon(config)
    scrape = daemon.poll(
        lambda: (m := daemon.metrics())("capture_sync_last_success_timestamp_seconds", source="signups") and m,
        "a pass of signups to succeed",
    )
    status = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
    scrape = daemon.metrics()  # after status: a pass that ended in between is in both

    ledger = status["by_source"]["signups"]
    assert ledger["rejected"] == BAD_EMAILS and ledger["captured"] > 0 and ledger["failed"] > 0
    assert scrape("capture_sync_records_read_total", source="signups") == CONTACTS
    assert scrape("capture_sync_records_rejected_total", source="signups") == ledger["rejected"]
    assert scrape("capture_sync_records_queued_total", source="signups") == CONTACTS - BAD_EMAILS
    assert scrape("capture_sync_persons_captured_total", source="signups") == ledger["captured"]
    assert scrape("capture_sync_persons_failed_total", source="signups") == ledger["failed"]
    assert scrape("capture_sync_persons_duplicates_total", source="signups") == ledger.get("duplicate", 0)
    for state, n in status["by_state"].items():
        assert scrape("capture_sync_entries", source="signups", state=state) == (n or None), state
    assert scrape("capture_sync_blocked_entries") == status["attention"]["blocked"] == 0
    assert scrape("capture_sync_oldest_unsettled_age_seconds") == 0
    assert scrape("capture_sync_rate_limit_requests") == 100_000
    assert 0 < scrape("capture_sync_rate_limit_remaining_requests") < 100_000

    with sqlite3.connect(f"file:{tmp_path / 'ledger.sqlite3'}?mode=ro", uri=True) as db:
        sent = dict(
            db.execute(
                "SELECT status_code, count(*) FROM attempts WHERE operation = 'capture_bulk' GROUP BY status_code"
            )
        )
    assert {
        int(dict(labels)["status"]): n
        for (name, labels), n in scrape.items()
        if name == "capture_sync_requests_total" and dict(labels)["operation"] == "capture_bulk"
    } == sent
    assert scrape("capture_sync_request_duration_seconds_count", operation="capture_bulk") == sum(sent.values())

    ready = daemon.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert daemon.get("/healthz").status_code == 200

    new_secret = box.store.regenerate_secret(key)  # the files still hold the old secret: the next pass meets 401
    refused = daemon.poll(lambda: (r := daemon.get("/readyz")).status_code == 503 and r, "/readyz to turn not ready")
    assert "authentication failing" in refused.json()["reasons"][0]
    assert daemon.metrics()("capture_sync_auth_failing") == 1
    assert daemon.get("/healthz").status_code == 200  # alive: a restart would not fix credentials

    kit.credentials(tmp_path, key, new_secret)
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.poll(lambda: daemon.get("/readyz").status_code == 200, "/readyz to be ready again")
    assert daemon.metrics()("capture_sync_auth_failing") == 0
    assert daemon.stop() == 0, daemon.log.read_text()
    assert new_secret not in daemon.log.read_text() and secret not in daemon.log.read_text()
