"""Overhead per record and memory: `capture-sync sync` on a CSV with no rate limit, beside a naive
baseline (benchmarks/naive_post.py) posting the same records in the same run.

    .venv/bin/python benchmarks/overhead.py [--records 100000] [--small 10000]

Figures: records/s (wall time of the whole child, start-up included) and the child's own CPU
(user + sys, from os.wait4) per record, for the connector and the baseline; the connector's peak
RSS for `--small` and `--records` records. Each run gets a fresh sandbox child, so the server does
the same work for both. The ledger runs with synchronous = FULL (the default).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from csv_read import generate
from harness import ChildRun, capture_sync, delivered, run_child, sandbox, write_config

BASELINE = Path(__file__).with_name("naive_post.py")
CPU_TARGET_RATIO = 2.0
RSS_TARGET_RATIO = 1.2


def connector_run(folder: Path, csv_path: Path, records: int) -> ChildRun:
    with sandbox(folder) as api:
        run = capture_sync("sync", write_config(folder, api, csv_path), api, folder / "connector.log")
    taken = delivered(folder / "ledger.sqlite3")
    if taken != records:
        raise RuntimeError(f"the connector delivered {taken} of {records} records; see {folder}")
    return run


def baseline_run(folder: Path, csv_path: Path, records: int) -> ChildRun:
    log = folder / "baseline.log"
    with sandbox(folder) as api:
        run = run_child([sys.executable, str(BASELINE), str(csv_path), api.base_url], log, env=api.env())
    taken = int(log.read_text().split()[-1]) if run.exit_code == 0 else -1
    if taken != records:
        raise RuntimeError(f"the baseline delivered {taken} of {records} records; see {log}")
    return run


def run(records: int = 100_000, small: int = 10_000) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="capture-sync-bench-") as tmp:
        folder = Path(tmp)
        big_csv, small_csv = folder / "big.csv", folder / "small.csv"
        generate(big_csv, records, messy=False)
        generate(small_csv, small, messy=False)
        ours = connector_run(folder / "connector", big_csv, records)
        naive = baseline_run(folder / "baseline", big_csv, records)
        ours_small = connector_run(folder / "connector-small", small_csv, small)
    ours_us, naive_us = ours.per_record_us(records), naive.per_record_us(records)
    return {
        "records": records,
        "ledger_synchronous": "FULL",
        "connector_records_per_s": records / ours.wall_s,
        "connector_cpu_us_per_record": ours_us,
        "baseline_records_per_s": records / naive.wall_s,
        "baseline_cpu_us_per_record": naive_us,
        "cpu_ratio": ours_us / naive_us,
        "cpu_target_ratio": CPU_TARGET_RATIO,
        "memory": {
            "small_records": small,
            "small_peak_rss_mb": ours_small.max_rss_mb,
            "large_records": records,
            "large_peak_rss_mb": ours.max_rss_mb,
            "ratio": ours.max_rss_mb / ours_small.max_rss_mb,
            "target_ratio": RSS_TARGET_RATIO,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    args = parser.parse_args()
    r = run(args.records, args.small)
    m = r["memory"]
    print(f"overhead: {r['records']:,} records, no rate limit, ledger synchronous FULL")
    print(
        f"  connector  {r['connector_records_per_s']:>8,.0f} records/s  {r['connector_cpu_us_per_record']:>6,.0f} us CPU/record"
    )
    print(
        f"  baseline   {r['baseline_records_per_s']:>8,.0f} records/s  {r['baseline_cpu_us_per_record']:>6,.0f} us CPU/record"
    )
    print(f"  ratio      {r['cpu_ratio']:.2f}x (target <= {CPU_TARGET_RATIO:g}x)")
    print(
        f"memory: peak RSS {m['small_peak_rss_mb']:.0f} MB at {m['small_records']:,}, "
        f"{m['large_peak_rss_mb']:.0f} MB at {m['large_records']:,} ({m['ratio']:.2f}x, target <= {RSS_TARGET_RATIO:g}x)"
    )
    print(json.dumps(r))


if __name__ == "__main__":
    main()
