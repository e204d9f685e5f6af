"""Leadership spreads over the live daemons: four integrations on one PostgreSQL ledger, two
`run` processes each running all four (`run -c a -c b -c c -c d`). The first takes every lease; once
the second is up (its heartbeat row), the first hands leases back one at a time until each leads
two; when the second stops, the first leads all four again. Every integration delivers its rows once."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psycopg

NAMES = ("alpha", "beta", "gamma", "delta")


def leads(url: str) -> dict[int, int]:
    """pid -> how many integrations it leads now."""
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            rows = conn.execute("SELECT holder FROM capture_sync_ha.leases WHERE expires_at > now()").fetchall()
        except psycopg.errors.UndefinedTable:
            return {}
    counts: dict[int, int] = {}
    for (holder,) in rows:
        pid = int(holder.split(":")[1])
        counts[pid] = counts.get(pid, 0) + 1
    return counts


def poll(check, what: str, deadline_s: float = 90):
    deadline = time.monotonic() + deadline_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"not within {deadline_s} s: {what}"
        time.sleep(0.1)
    return value


def test_four_integrations_spread_over_two_daemons(kit, sandbox, tmp_path: Path, postgres_ledger_url: str) -> None:
    configs = []
    for i, name in enumerate(NAMES):
        config = kit.integration(
            sandbox, tmp_path, name, [kit.contact(n) for n in range(i * 100, i * 100 + 3)], "every 1s"
        )
        text = config.read_text().replace(
            '[ledger]\npath = "ledger.sqlite3"', f"[ledger]\nurl = {json.dumps(postgres_ledger_url)}"
        )
        config.write_text(f'[integration]\nname = "{name}"\n\n[daemon]\nlease_s = 3\n\n' + text)
        configs.append(config)
    args = [a for c in configs for a in ("-c", str(c))]
    procs = []
    try:
        with (tmp_path / "first.log").open("w") as log:
            procs.append(
                subprocess.Popen([str(kit.script), "run", *args], stdout=log, stderr=subprocess.STDOUT, env=kit.env())
            )
        first = procs[0].pid
        poll(lambda: leads(postgres_ledger_url) == {first: 4}, "the first daemon to lead all four")
        with (tmp_path / "second.log").open("w") as log:
            procs.append(
                subprocess.Popen([str(kit.script), "run", *args], stdout=log, stderr=subprocess.STDOUT, env=kit.env())
            )
        second = procs[1].pid
        poll(lambda: leads(postgres_ledger_url) == {first: 2, second: 2}, "two integrations each")
        poll(lambda: len(sandbox.store.persons()) == 12, "every integration to deliver")

        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(timeout=20) == 0
        poll(lambda: leads(postgres_ledger_url) == {first: 4}, "the first daemon to lead all four again")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=20)
    assert len(sandbox.store.captures()) == 12  # none twice
