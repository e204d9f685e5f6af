"""Streaming: how soon the first request leaves, and whether memory stays flat as the source grows.

    .venv/bin/python benchmarks/streaming.py [--records 1000000] [--small 10000] [--seconds 60]

`capture-sync sync` of a `--records`-row CSV against the sandbox, no rate limit: the time from
spawning the process to the first capture request it sends (the first attempt in the ledger), and
its peak RSS (VmHWM) after `--seconds` of delivery, when it is stopped with SIGTERM (a whole
million-row run takes minutes; with reading paused while enough work is queued, memory after the
first minute stays where it is). Beside it, the peak RSS of a whole sync of `--small` rows.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from csv_read import generate
from harness import CLI, delivered, sandbox, write_config
from overhead import connector_run


def _first_attempt(ledger: Path) -> float | None:
    if not ledger.exists():
        return None
    try:
        with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=0.1) as db:
            return db.execute("SELECT min(started_at) FROM attempts WHERE operation != 'info'").fetchone()[0]
    except sqlite3.Error:
        return None


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def big_run(folder: Path, csv_path: Path, seconds: float) -> dict[str, Any]:
    with sandbox(folder) as api:
        config = write_config(folder, api, csv_path)
        ledger = folder / "ledger.sqlite3"
        with (folder / "connector.log").open("ab") as log:
            started = time.time()
            proc = subprocess.Popen([str(CLI), "sync", "-c", str(config)], stdout=log, stderr=log, env=api.env())
            first = None
            while first is None and proc.poll() is None and time.time() - started < 30:
                time.sleep(0.02)
                first = _first_attempt(ledger)
            deadline = started + seconds
            peak = 0.0
            while proc.poll() is None and time.time() < deadline:
                peak = max(peak, _peak_rss_mb(proc.pid))
                time.sleep(0.5)
            if proc.poll() is None:
                peak = max(peak, _peak_rss_mb(proc.pid))
                proc.send_signal(signal.SIGTERM)
            _, _, usage = os.wait4(proc.pid, 0)
    with sqlite3.connect(ledger) as db:
        read = db.execute("SELECT count(*) FROM entries").fetchone()[0]
    return {
        "first_request_s": None if first is None else first - started,
        "peak_rss_mb": max(peak, usage.ru_maxrss / 1024),
        "seconds": seconds,
        "read": read,
        "delivered": delivered(ledger),
    }


def run(records: int, small: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="capture-sync-bench-") as tmp:
        folder = Path(tmp)
        big_csv, small_csv = folder / "big.csv", folder / "small.csv"
        generate(big_csv, records, messy=False)
        generate(small_csv, small, messy=False)
        big = big_run(folder / "big", big_csv, seconds)
        small_run = connector_run(folder / "small", small_csv, small)
    return {
        "records": records,
        **big,
        "small_records": small,
        "small_peak_rss_mb": small_run.max_rss_mb,
        "rss_ratio": big["peak_rss_mb"] / small_run.max_rss_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    r = run(args.records, args.small, args.seconds)
    first = "none" if r["first_request_s"] is None else f"{r['first_request_s']:.2f} s"
    print(
        f"streaming: {r['records']:,}-row CSV: first request after {first}; after {r['seconds']:g} s "
        f"{r['read']:,} read, {r['delivered']:,} delivered, peak RSS {r['peak_rss_mb']:.0f} MB"
    )
    print(
        f"  whole sync of {r['small_records']:,} rows: peak RSS {r['small_peak_rss_mb']:.0f} MB "
        f"(ratio {r['rss_ratio']:.2f}, target <= 1.2)"
    )
    print(json.dumps(r))


if __name__ == "__main__":
    main()
