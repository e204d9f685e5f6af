"""Failover time (issue 23): one integration on a throwaway PostgreSQL ledger, two `run` daemons
(leader and standby) against a sandbox child; the leader is SIGKILLed in the middle of its work,
again and again (a new standby started each time), and the time from each kill to the
integration's next Capture request is measured (the request's start as the ledger records it).

    .venv/bin/python benchmarks/failover.py [--kills 8] [--lease-s 3]      (also in `make bench`)

The bound it is held to is the design's: the lease runs out (lease_s after the last renewal, at most
lease_s after the kill), then a standby's next try (every second, or lease_s / 3 if shorter) takes it and
sweeps at once.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import harness
import pg_server
import psycopg
from csv_read import generate

from connector.ledger._postgres import DIALECT
from connector.ledger._types import state_of


def _query(url: str, sql: str, params: tuple[Any, ...] = ()) -> Any:
    with psycopg.connect(url, autocommit=True, options='-c search_path="bench"') as conn:
        try:
            return conn.execute(sql, params).fetchone()
        except psycopg.errors.UndefinedTable:  # no daemon has opened the ledger yet
            return None


def _poll(check: Any, what: str, deadline_s: float = 120) -> Any:
    deadline = time.monotonic() + deadline_s
    while not (value := check()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {deadline_s} s: {what}")
        time.sleep(0.02)
    return value


def run(kills: int = 8, lease_s: float = 3.0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, pg_server.required_database() as url:
        folder = Path(tmp)
        rows = 2_000
        csv_path = folder / "contacts.csv"
        generate(csv_path, rows, messy=False)
        with harness.sandbox(folder / "sandbox", latency_ms=20) as api:
            config = harness.write_config(folder, api, csv_path, concurrency=2)
            text = config.read_text().replace(f'path = "{folder / "ledger.sqlite3"}"', f"url = {json.dumps(url)}")
            text = text.replace('primary_key = "id"\n', 'primary_key = "id"\nschedule = "every 1s"\n')
            config.write_text(f'[integration]\nname = "bench"\n\n[daemon]\nlease_s = {lease_s}\n\n{text}')
            daemons: list[subprocess.Popen[bytes]] = []

            def start() -> None:
                log = (folder / f"daemon-{len(daemons)}.log").open("wb")
                daemons.append(
                    subprocess.Popen(
                        [str(harness.CLI), "run", "-c", str(config)], stdout=log, stderr=log, env=api.env()
                    )
                )

            start(), start()
            times = []
            try:
                for _ in range(kills):
                    holder = _poll(
                        lambda: _query(url, "SELECT holder FROM capture_sync_ha.leases WHERE expires_at > now()"),
                        "a leader",
                    )[0]
                    leader = next(p for p in daemons if p.pid == int(holder.split(":")[1]))
                    with csv_path.open("a") as fh:  # work for the next leader
                        fh.writelines(
                            f"{i},P{i},N{i},person.{i}@example.com,+14155550000,Ex,pro\n"
                            for i in range(rows, rows + 300)
                        )
                    rows += 300
                    _poll(
                        lambda: (
                            _query(
                                url, f"SELECT count(*) FROM entries WHERE {state_of(DIALECT, 'entries')} = 'in_flight'"
                            )
                            or [0]
                        )[0],
                        "a batch in flight",
                    )
                    leader.send_signal(signal.SIGKILL)
                    killed_at = time.time()
                    leader.wait()
                    start()
                    first = _poll(
                        lambda at=killed_at: _query(
                            url, "SELECT min(started_at) FROM attempts WHERE started_at > %s", (at,)
                        )[0],
                        "the next request",
                    )
                    times.append(first - killed_at)
            finally:
                for proc in daemons:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
                for proc in daemons:
                    proc.wait(timeout=20)
    bound = lease_s + lease_s / 3 + 1.0
    return {
        "lease_s": lease_s,
        "kills": kills,
        "failover_s": [round(t, 3) for t in times],
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "bound_s": round(bound, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--lease-s", type=float, default=3.0)
    args = parser.parse_args()
    result = run(args.kills, args.lease_s)
    print(
        f"failover over {result['kills']} kills (lease_s={result['lease_s']:g}): median {result['median_s']:.2f} s, "
        f"max {result['max_s']:.2f} s (bound {result['bound_s']:.2f} s)"
    )


if __name__ == "__main__":
    main()
