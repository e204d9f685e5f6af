"""The ledger's database failing under a running daemon: PostgreSQL crashes and stays away past
lease_s, then comes back. Meanwhile /readyz answers 503 naming the database (never its password)
and nothing is sent that could not be recorded; afterwards the daemon leads again by itself and
delivers what arrived meanwhile, none of it twice."""

from __future__ import annotations

PASSWORD = "pw-never-printed-31c9"


def test_a_database_crash_makes_the_daemon_unready_and_it_carries_on_by_itself(
    kit,
    sandbox,
    start_daemon,
    postgres_config,
    postgres_url,
    monkeypatch,
) -> None:
    config, contacts = postgres_config(
        [kit.contact(n) for n in range(5)], "every 1s", head='[integration]\nname = "crm"\n\n[daemon]\nlease_s = 3\n\n'
    )
    monkeypatch.setenv("PGPASSWORD", PASSWORD)  # trust auth ignores it: it must never be shown
    daemon = start_daemon(config)
    daemon.poll(lambda: len(sandbox.store.persons()) == 5, "the first pass")

    postgres_url.stop()
    try:
        kit.contacts(contacts, [kit.contact(n) for n in range(5, 8)], header=False)
        down = daemon.poll(lambda: (r := daemon.get("/readyz")).status_code == 503 and r.json(), "/readyz to say 503")
        [reason] = [r for r in down["reasons"] if "ledger" in r]
        assert "cannot be reached" in reason and "127.0.0.1" in reason and PASSWORD not in reason, reason
        daemon.poll(lambda: not daemon.get("/readyz").json()["integrations"]["crm"]["leads"], "it to stand by")
        assert len(sandbox.store.persons()) == 5  # nothing read while the ledger is away is sent
    finally:
        postgres_url.start()

    daemon.poll(lambda: daemon.get("/readyz").json()["integrations"]["crm"]["leads"], "it to lead again")
    daemon.poll(lambda: len(sandbox.store.persons()) == 8, "the rows that arrived meanwhile")
    assert daemon.get("/readyz").status_code == 200
    assert daemon.stop() == 0, daemon.log.read_text()
    assert len(sandbox.store.captures()) == 8 and PASSWORD not in daemon.log.read_text()
