"""Failover over real sockets: one PostgreSQL ledger, two integrations (each its own sandbox client
and contacts), three `run` daemons each running both (`run -c eu -c us`; subprocesses on this host,
as on three hosts). During the run the leading daemon of an integration is SIGKILLed again and again
(each replaced by a new one), one leader is SIGSTOPped for longer than lease_s and then SIGCONTed (a
zombie leader), and before every kill the upstream changes as in the chaos test (`Upstream`):
existing rows get new content, half of them rows the ledger has in flight, and new rows arrive;
PostgreSQL crashes once and comes back after 2 x lease_s.

The oracle is what the sandboxes hold, and the ledger's lease history: per integration 0 lost, 0
doubled and 0 stale (`check_versions`: each record's newest version is the CRM's data, the ledger
agrees), and no request from a daemon outside its own lease: each Capture request a daemon logs (its
key tells the integration) started while the lease history names that daemon the holder (the database's clock and the daemons' share
this host). It prints the failover times (from a kill to the integration's next request: median, max).

`make test` runs 6 kills; `make soak-ha` runs HA_KILLS=24 with more records.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psycopg

from connector.ledger._postgres import DIALECT
from connector.ledger._types import state_of
from connector.sandbox import Faults

from .upstream import CURSOR, MAPPING, Upstream, check_versions, version_figures

LEASE_S = 3
DEADLINE_S = 90
UNSETTLED = "SELECT count(*) FROM entries WHERE state NOT IN ('captured', 'duplicate', 'rejected', 'superseded')"
IN_HAND = f"SELECT DISTINCT record_id FROM entries WHERE {state_of(DIALECT, 'entries')} IN ('in_flight', 'unknown')"
EDITED = 0.06  # the share of the rows each change upstream rewrites (and a third as many new ones)


@dataclass
class Integration:
    name: str
    config: Path
    env: dict[str, str]
    store: object
    upstream: Upstream
    failovers: list[float] = field(default_factory=list)


@dataclass
class Daemons:
    """The `run` processes, each running every integration."""

    args: list[str]
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def start(self, rel) -> None:
        log = rel.tmp / f"daemon-{len(self.procs)}.log"
        with log.open("w") as out:
            self.procs.append(
                subprocess.Popen(
                    rel.command("run", *self.args, "--log-level", "DEBUG"),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    cwd=rel.tmp,
                )
            )
        self.logs.append(log)

    def of(self, pid: int) -> subprocess.Popen[bytes]:
        return next(p for p in self.procs if p.pid == pid)


def query(url: str, integration: str, sql: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True, options=f'-c search_path="{integration}"') as conn:
        return conn.execute(sql, params).fetchall()


def leader_pid(url: str, integration: str) -> int | None:
    try:
        found = query(
            url,
            integration,
            "SELECT holder FROM capture_sync_ha.leases WHERE integration = %s AND expires_at > now()",
            (integration,),
        )
    except psycopg.errors.UndefinedTable:  # no daemon has opened the ledger yet
        return None
    return int(found[0][0].split(":")[1]) if found else None


def poll(check, what: str, deadline_s: float = DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"not within {deadline_s} s: {what}"
        time.sleep(0.05)
    return value


def change_upstream(url: str, it: Integration) -> None:
    """Work for the next leader: rows rewritten with new content (half of them rows in hand, the
    riskiest to change), new rows added."""
    try:
        in_hand = [r for (r,) in query(url, it.name, IN_HAND)]
    except psycopg.errors.UndefinedTable:
        in_hand = []
    it.upstream.edit(EDITED, focus=in_hand)


def attempts_by_pid(daemons: Daemons, url: str, it: Integration) -> list[tuple[int, float]]:
    """(pid, when the request started) for every Capture request of `it` the daemons logged (the
    key's prefix names an attempt of its ledger)."""
    keys = {k[:12] for (k,) in query(url, it.name, "SELECT key FROM attempts WHERE key IS NOT NULL")}
    found = []
    for proc, log in zip(daemons.procs, daemons.logs, strict=True):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{") and '"capture_api.attempt"' in line:
                event = json.loads(line)
                if event.get("key_prefix") in keys:
                    at = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
                    found.append((proc.pid, at - event["latency_ms"] / 1000))
    return found


def test_leaders_killed_and_paused_lose_nothing_double_nothing_and_never_send_outside_their_lease(
    rel,
    sandbox_factory,
    tmp_path: Path,
    postgres_url,
    postgres_ledger_url: str,
) -> None:
    kills = rel.scaled("HA_KILLS", 6)
    records = rel.scaled("HA_RECORDS", 150)
    rng = random.Random(20261127)
    url = postgres_ledger_url
    integrations = []
    for name in ("crm-eu", "crm-us"):
        box = sandbox_factory(faults=Faults(latency_s=0.02, seed=len(integrations)))
        folder = tmp_path / name
        folder.mkdir()
        upstream = Upstream.create(folder / "contacts.csv", records, rng)
        config = rel.config(
            folder,
            box.base_url,
            upstream.path,
            ledger_url=url,
            batch_size=10,
            concurrency=2,
            mapping=MAPPING,
            cursor=CURSOR,
        )
        text = config.read_text(encoding="utf-8").replace(
            'primary_key = "id"\n', 'primary_key = "id"\nschedule = "every 1s"\n'
        )
        config.write_text(
            f'[integration]\nname = "{name}"\n\n[daemon]\nlease_s = {LEASE_S}\nretry_sweep = "every 2s"\n\n' + text
        )
        integrations.append(Integration(name, config, rel.client(box.store, rate_limit=100_000), box.store, upstream))
    # one process runs both integrations: the credentials of each come from files beside its config
    for it in integrations:
        for var, file in (("CAPTURE_API_KEY", "api_key"), ("CAPTURE_API_SECRET", "api_secret")):
            (it.config.parent / file).write_text(it.env[var])
            (it.config.parent / file).chmod(0o600)
        it.config.write_text(
            it.config.read_text().replace(
                "[capture]\n", '[capture]\napi_key_file = "api_key"\napi_secret_file = "api_secret"\n', 1
            )
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPTURE_")}
    daemons = Daemons([a for it in integrations for a in ("-c", str(it.config))], env)
    for _ in range(3):
        daemons.start(rel)

    def killed_leader(it: Integration, how: signal.Signals) -> int:
        pid = poll(lambda: leader_pid(url, it.name), f"{it.name} to have a leader")
        proc = daemons.of(pid)
        change_upstream(url, it)
        poll(
            lambda: (
                query(url, it.name, f"SELECT count(*) FROM entries WHERE {state_of(DIALECT, 'entries')} = 'in_flight'")[
                    0
                ][0]
                or not query(url, it.name, "SELECT count(*) FROM entries WHERE state = 'pending'")[0][0]
            ),
            "a batch in flight, or nothing left to send",
        )
        proc.send_signal(how)
        return pid

    try:
        for n in range(kills):
            it = integrations[n % 2]
            pid = killed_leader(it, signal.SIGKILL)
            at = time.time()
            daemons.of(pid).wait()
            daemons.start(rel)  # three daemons again
            first = poll(
                lambda it=it, at=at: query(
                    url, it.name, "SELECT min(started_at) FROM attempts WHERE started_at > %s", (at,)
                )[0][0],
                f"{it.name}'s next request after kill {n + 1}",
            )
            it.failovers.append(first - at)

        for it in integrations:  # work in hand when the database goes
            change_upstream(url, it)
        postgres_url.stop()  # PostgreSQL crashes (immediate stop) and stays away past lease_s
        try:
            time.sleep(LEASE_S * 2)  # the outage's length, not a wait for a condition
        finally:
            postgres_url.start()
        for it in integrations:
            poll(lambda it=it: leader_pid(url, it.name), f"{it.name} led again after the database came back")

        zombie_of = integrations[0]
        pid = killed_leader(zombie_of, signal.SIGSTOP)
        poll(
            lambda: (holder := leader_pid(url, zombie_of.name)) is not None and holder != pid, "a standby to take over"
        )
        zombie = daemons.of(pid)
        zombie.send_signal(signal.SIGCONT)
        zombie_log = daemons.logs[daemons.procs.index(zombie)]
        poll(lambda: '"lease.lost"' in zombie_log.read_text(), "the zombie to find its lease lost")

        alive = [p.poll() is None for p in daemons.procs if p.returncode != -signal.SIGKILL]
        assert all(alive), f"a daemon ended by itself: {daemons.logs}"  # all carried on through the outage
        for it in integrations:
            poll(
                lambda it=it: (
                    not query(url, it.name, UNSETTLED)[0][0]
                    and not version_figures(it.store, it.upstream, (url, it.name)).lost
                ),
                f"{it.name} to settle",
            )
    finally:
        for proc in daemons.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in daemons.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        for it in integrations:  # the credential files are meant to hold the secret: gone before the scan
            for file in ("api_key", "api_secret"):
                (it.config.parent / file).unlink(missing_ok=True)

    for it in integrations:
        versions = check_versions(it.store, it.upstream, (url, it.name))  # 0 lost, 0 doubled, 0 stale
        print(f"\n{it.name}: upstream edits {it.upstream.edits}; {versions.line()}")
        captured = it.store.captures()  # type: ignore[attr-defined]

        terms = query(
            url,
            it.name,
            "SELECT extract(epoch FROM taken_at)::float8, holder FROM capture_sync_ha.lease_history "
            "WHERE integration = %s ORDER BY token",
            (it.name,),
        )
        sent = attempts_by_pid(daemons, url, it)
        assert len(sent) >= len(captured) // 10 and len(terms) > kills // 2, (len(sent), len(terms))
        outside = []
        for pid, started in sent:
            holder = next((int(h.split(":")[1]) for t, h in reversed(terms) if t <= started), None)
            if holder != pid:
                outside.append((pid, started, holder))
        assert not outside, f"{it.name}: requests sent outside the sender's lease: {outside[:5]}"

    times = [t for it in integrations for t in it.failovers]
    print(
        f"\nfailover (kill -> next request, lease_s={LEASE_S}): {len(times)} kills, "
        f"median {statistics.median(times):.2f} s, max {max(times):.2f} s"
    )
