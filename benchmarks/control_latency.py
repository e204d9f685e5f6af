"""Operator command round trip through a shared PostgreSQL ledger (issue 23): the time from asking
`state` of the daemon that leads an integration (as `capture-sync pause -c ...` on another host
asks: a row in the requests table) to holding its answer. One `run` daemon on a throwaway
PostgreSQL, idle (a yearly schedule), the asker in this process; the figures are the round trips'
median, p90 and max.

    .venv/bin/python benchmarks/control_latency.py [--asks 40]

It measures the code on the import path, the daemon's and the asker's alike: with LISTEN/NOTIFY the
leader wakes on the asker's NOTIFY and the asker on the leader's; before it, the leader looked every
0.5 s and the asker every 0.1 s (`PYTHONPATH=<an older checkout>` measures that).
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

from connector.ledger import Ledger


def _leads(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            return bool(
                conn.execute("SELECT 1 FROM capture_sync_ha.leases WHERE expires_at > now()").fetchone() is not None
            )
        except psycopg.errors.UndefinedTable:  # no daemon has opened the ledger yet
            return False


def run(asks: int = 40) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, pg_server.required_database() as url:
        folder = Path(tmp)
        csv_path = folder / "contacts.csv"
        generate(csv_path, 10, messy=False)
        with harness.sandbox(folder / "sandbox") as api:
            config = harness.write_config(folder, api, csv_path)
            text = config.read_text().replace(f'path = "{folder / "ledger.sqlite3"}"', f"url = {json.dumps(url)}")
            text = text.replace('primary_key = "id"\n', 'primary_key = "id"\nschedule = "0 0 1 1 *"\n')
            config.write_text(f'[integration]\nname = "bench"\n\n{text}')
            with (folder / "daemon.log").open("wb") as log:
                daemon = subprocess.Popen(
                    [str(harness.CLI), "run", "-c", str(config)], stdout=log, stderr=log, env=api.env()
                )
            try:
                deadline = time.monotonic() + 60
                while not _leads(url):
                    if daemon.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"the daemon did not lead: see {folder / 'daemon.log'}")
                    time.sleep(0.05)
                times = []
                with Ledger(url, integration="bench") as ledger:
                    for _ in range(asks):
                        started = time.perf_counter()
                        answer = ledger.ask_leader("state", {}, 30.0)
                        times.append(time.perf_counter() - started)
                        assert answer.get("ok"), answer
            finally:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(timeout=20)
    ms = sorted(t * 1000 for t in times)
    return {
        "asks": asks,
        "median_ms": round(statistics.median(ms), 1),
        "p90_ms": round(ms[int(len(ms) * 0.9) - 1], 1),
        "max_ms": round(ms[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=40)
    result = run(parser.parse_args().asks)
    print(
        f"operator command round trip through PostgreSQL over {result['asks']} asks: median "
        f"{result['median_ms']:.1f} ms, p90 {result['p90_ms']:.1f} ms, max {result['max_ms']:.1f} ms"
    )


if __name__ == "__main__":
    main()
