"""Rate-limited throughput: `capture-sync sync` on a CSV against a sandbox whose client may send
1,200 persons/s (12 bulk requests of 100 per 1 s, 120 per 10 s, 720 per 60 s; sliding window,
Retry-After sent, 50 ms per answer), with `capture.rate_window_s` configured and left unset.

    .venv/bin/python benchmarks/rate_limited.py [--records 100000] [--records-60 150000] [--only 1,10,60]

The figure is the share of the ceiling from process start to exit: persons delivered / wall time
of the whole `capture-sync sync` process (start-up, reading the CSV, delivery) / 1,200. The share
of the delivery phase alone (first request to last answer) is shown beside it. 429s are counted
from the ledger's attempts table, which records every HTTP attempt.
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

CEILING = 1200.0  # persons per second
LATENCY_MS = 50
TARGETS = {True: (0.97, 0.005), False: (0.95, 0.01)}  # configured?: (share of the ceiling, share of 429s)


def run_one(folder: Path, csv_path: Path, records: int, window_s: float, configured: bool) -> dict[str, Any]:
    folder.mkdir()
    rate_limit = int(CEILING * window_s / 100)
    with sandbox(folder, rate_limit=rate_limit, rate_window=window_s, latency_ms=LATENCY_MS) as api:
        config = write_config(folder, api, csv_path, rate_window_s=window_s)
        if not configured:
            text = config.read_text().splitlines()
            config.write_text("\n".join(line for line in text if not line.startswith("rate_window_s")) + "\n")
        child = capture_sync("sync", config, api, folder / "connector.log")
    taken = delivered(folder / "ledger.sqlite3")
    with sqlite3.connect(folder / "ledger.sqlite3") as db:
        attempts, limited, first, last = db.execute(
            "SELECT count(*), sum(status_code = 429), min(started_at), max(started_at + latency_ms / 1000) "
            "FROM attempts"
        ).fetchone()
    if taken != records:
        raise RuntimeError(f"delivered {taken} of {records} records")
    share_target, share_429_target = TARGETS[configured]
    whole = taken / child.wall_s / CEILING
    return {
        "records": records, "window_s": window_s, "configured": configured,
        "rate_limit": f"{rate_limit} requests / {window_s:g} s",
        "whole_run_s": child.wall_s, "fraction_of_ceiling": whole,
        "delivery_fraction_of_ceiling": taken / (last - first) / CEILING,
        "requests": attempts, "answered_429": limited or 0, "share_429": (limited or 0) / attempts,
        "fraction_target": share_target, "share_429_target": share_429_target,
        "met": whole >= share_target and (limited or 0) / attempts < share_429_target,
    }


def run(records: int = 100_000, records_60: int | None = None, windows: tuple[float, ...] = (1.0, 10.0, 60.0)) -> dict[str, Any]:
    """Each window configured and unset; the 60 s window with `records_60` records."""
    records_60 = records_60 or records
    scenarios = []
    with tempfile.TemporaryDirectory(prefix="capture-sync-bench-") as tmp:
        folder = Path(tmp)
        csvs: dict[int, Path] = {}
        for window_s in windows:
            n = records_60 if window_s >= 60 else records
            if n not in csvs:
                csvs[n] = folder / f"contacts-{n}.csv"
                generate(csvs[n], n, messy=False)
            for configured in (True, False):
                name = f"w{window_s:g}-{'configured' if configured else 'unset'}"
                scenarios.append(run_one(folder / name, csvs[n], n, window_s, configured))
    return {"records": records, "records_60": records_60, "ceiling_persons_per_s": CEILING, "scenarios": scenarios}


def describe(s: dict[str, Any]) -> str:
    return (f"{s['records']:>7,} records, {s['rate_limit']:>18}, window {'configured' if s['configured'] else 'unset':>10}: "
            f"{s['fraction_of_ceiling']:.3f} of the ceiling from start to exit ({s['whole_run_s']:.1f} s; "
            f"delivery phase {s['delivery_fraction_of_ceiling']:.3f}), 429s {s['answered_429']} of {s['requests']} "
            f"= {s['share_429']:.2%} (targets >= {s['fraction_target']}, < {s['share_429_target']:.1%}: "
            f"{'met' if s['met'] else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--records-60", type=int, default=150_000)
    parser.add_argument("--only", default="1,10,60", help="the windows to run, seconds, comma-separated")
    args = parser.parse_args()
    windows = tuple(float(w) for w in args.only.split(","))
    r = run(args.records, args.records_60, windows)
    print(f"rate-limited sync, ceiling {CEILING:,.0f} persons/s, {LATENCY_MS} ms per answer")
    for s in r["scenarios"]:
        print("  " + describe(s), flush=True)
    print(json.dumps(r))


if __name__ == "__main__":
    main()
