"""Rate-limited throughput: `capture-sync sync` on a CSV against a sandbox that admits 120 requests
per 10 s sliding window and answers each after 50 ms.

    .venv/bin/python benchmarks/rate_limited.py [--records 30000]

The ceiling is 100 persons x 12 requests/s = 1,200 persons/s. The figure is persons delivered per
second of the delivery phase (first bulk request sent to last response), as a fraction of that
ceiling; the whole run's wall time (start-up and reading the CSV included) is shown beside it.
429s are counted from the ledger's attempts table, which records every HTTP attempt.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from csv_read import generate
from harness import capture_sync, delivered, sandbox, write_config

RATE_LIMIT = 120
WINDOW_S = 10.0
LATENCY_MS = 50
FRACTION_TARGET = 0.95
SHARE_429_TARGET = 0.01


def run(records: int = 30_000) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="capture-sync-bench-") as tmp:
        folder = Path(tmp)
        csv_path = folder / "contacts.csv"
        generate(csv_path, records, messy=False)
        with sandbox(folder, rate_limit=RATE_LIMIT, rate_window=WINDOW_S, latency_ms=LATENCY_MS) as api:
            config = write_config(folder, api, csv_path, rate_window_s=WINDOW_S)
            child = capture_sync("sync", config, api, folder / "connector.log")
        taken = delivered(folder / "ledger.sqlite3")
        with sqlite3.connect(folder / "ledger.sqlite3") as db:
            attempts, limited, first, last = db.execute(
                "SELECT count(*), sum(status_code = 429), min(started_at), max(started_at + latency_ms / 1000) "
                "FROM attempts"
            ).fetchone()
    if taken != records:
        raise RuntimeError(f"delivered {taken} of {records} records")
    ceiling = RATE_LIMIT / WINDOW_S * 100
    delivery_s = last - first
    return {
        "records": records,
        "rate_limit": f"{RATE_LIMIT} requests / {WINDOW_S:g} s, {LATENCY_MS} ms latency",
        "ceiling_persons_per_s": ceiling,
        "persons_per_s": taken / delivery_s,
        "fraction_of_ceiling": taken / delivery_s / ceiling,
        "fraction_target": FRACTION_TARGET,
        "delivery_s": delivery_s,
        "whole_run_s": child.wall_s,
        "whole_run_fraction_of_ceiling": taken / child.wall_s / ceiling,
        "requests": attempts,
        "answered_429": limited,
        "share_429": limited / attempts,
        "share_429_target": SHARE_429_TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000)
    args = parser.parse_args()
    r = run(args.records)
    print(f"rate-limited sync: {r['records']:,} records, {r['rate_limit']}")
    print(f"  delivery    {r['persons_per_s']:,.0f} persons/s in {r['delivery_s']:.1f} s = "
          f"{r['fraction_of_ceiling']:.3f} of the {r['ceiling_persons_per_s']:,.0f}/s ceiling (target >= {FRACTION_TARGET})")
    print(f"  whole run   {r['whole_run_s']:.1f} s = {r['whole_run_fraction_of_ceiling']:.3f} of the ceiling")
    print(f"  429s        {r['answered_429']} of {r['requests']} requests = {r['share_429']:.2%} (target < {SHARE_429_TARGET:.0%})")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
