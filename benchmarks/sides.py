"""Where a sync's CPU goes, by side: the same CSV read into the ledger with the API down (extract:
read, map, enqueue), then delivered by `replay` (load: claim, HTTP, match, settle), beside a whole
`sync` of it, each a `capture-sync` child as a user runs it.

    .venv/bin/python benchmarks/sides.py [--records 100000]

CPU per record is the child's user + sys (os.wait4), start-up included in each; the two sides add
up to the whole sync when streaming costs nothing extra. `stages.py` splits each side further.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from csv_read import generate
from harness import CLI, Api, delivered, print_cpu_per_record, run_child, sandbox, write_config

CLOSED_PORT_URL = "http://127.0.0.1:9"  # discard: nothing listens, so the API is down


def run(records: int = 100_000) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="capture-sync-bench-") as tmp:
        folder = Path(tmp)
        csv_path = folder / "records.csv"
        generate(csv_path, records, messy=False)
        whole_dir, split_dir = folder / "whole", folder / "split"
        with sandbox(whole_dir / "sandbox") as api:
            whole = run_child(
                [str(CLI), "sync", "-c", str(write_config(whole_dir, api, csv_path))], whole_dir / "log", api.env()
            )
        with sandbox(split_dir / "sandbox") as api:
            down = Api(CLOSED_PORT_URL, api.api_key, api.api_secret, api.db)
            config = write_config(split_dir, down, csv_path)
            # One attempt at GET /info: the sources are read, then delivery gives up at once (exit 4).
            env = {**api.env(), "CAPTURE_SYNC__CAPTURE__RETRY__MAX_ATTEMPTS": "1"}
            extract = run_child([str(CLI), "sync", "-c", str(config)], split_dir / "extract.log", env)
            config.write_text(config.read_text().replace(json.dumps(CLOSED_PORT_URL), json.dumps(api.base_url)))
            load = run_child([str(CLI), "replay", "-c", str(config)], split_dir / "replay.log", api.env())
        for name, child, ledger in (("sync", whole, whole_dir), ("replay", load, split_dir)):
            if child.exit_code != 0 or delivered(ledger / "ledger.sqlite3") != records:
                raise RuntimeError(f"{name} exited {child.exit_code}; see {ledger}")
    return {
        "records": records,
        "cpu_us_per_record": {
            "whole sync": whole.per_record_us(records),
            "extract (sync with the API down)": extract.per_record_us(records),
            "load (replay)": load.per_record_us(records),
        },
        "wall_s": {"whole sync": whole.wall_s, "load (replay)": load.wall_s},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    r = run(args.records)
    print_cpu_per_record(f"CPU per record by side ({r['records']:,} records, start-up included in each):", r, 34)


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "200")
    main()
