"""Resume: with a ledger of 1,000,000 entries, the time from starting `capture-sync replay` to its
first capture request.

    .venv/bin/python benchmarks/resume.py [--entries 1000000] [--pending 10000] [--open-batches 3]

The ledger is built through the Ledger API as a sync interrupted mid-delivery leaves it: every
entry enqueued, all but `--pending` settled (captured, every tenth a duplicate), and
`--open-batches` batches of 100 written ahead but never answered. The clock starts just before
the process is spawned and stops at the `started_at` of the first attempt the replay records in
the ledger (the first open batch resent), so start-up, opening the ledger, GET /info and finding
the work are all inside the figure. The replay then runs to the end to check nothing was left.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import capture_sync, sandbox, write_config
from ledger_bench import payload

from connector.ledger import Claim, Ledger, Mapped
from connector.ledger._counts import recount

TARGET_S = 1.0
CHUNK = 20_000


def build_ledger(path: Path, entries: int, pending: int, open_batches: int) -> float:
    """Returns the seconds it took. NORMAL synchronous: only the build, not the replay, runs so."""
    t0 = time.perf_counter()
    with Ledger(path, synchronous="NORMAL") as ledger:
        for start in range(0, entries, CHUNK):
            chunk = [Mapped(str(i), payload=payload(i)) for i in range(start, min(start + CHUNK, entries))]
            ledger.enqueue("bench", "v1", chunk, {"offset": start + len(chunk)})
        for _ in range(open_batches):
            ledger.claim(Claim(100))
    # Settling 990,000 entries one batch at a time would be the ledger benchmark again; the end
    # state is what matters here, so the settled majority is written in one statement.
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE entries SET state = CASE WHEN id % 10 = 0 THEN 'duplicate' ELSE 'captured' END, "
            "person_id = printf('00000000-0000-4000-8000-%012d', id) "
            "WHERE state = 'pending' AND id <= ?",
            (entries - pending,),
        )
        recount(db)  # the settled states' counters (schema v11), which the ledger's own writes keep
    return time.perf_counter() - t0


def run(entries: int = 1_000_000, pending: int = 10_000, open_batches: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="capture-sync-bench-") as tmp:
        folder = Path(tmp)
        ledger_path = folder / "ledger.sqlite3"
        build_s = build_ledger(ledger_path, entries, pending, open_batches)
        csv_path = folder / "empty.csv"
        csv_path.write_text("id,First,Last,Email,Phone,Company,Plan\n")
        with sandbox(folder) as api:
            config = write_config(folder, api, csv_path)
            child = capture_sync("replay", config, api, folder / "connector.log")
        with sqlite3.connect(ledger_path) as db:
            (first,) = db.execute("SELECT min(started_at) FROM attempts").fetchone()
            counts = dict(db.execute("SELECT state, count(*) FROM entries GROUP BY state").fetchall())
        size_mb = sum(p.stat().st_size for p in folder.glob("ledger.sqlite3*")) / 1e6
    left = sum(counts.get(s, 0) for s in ("pending", "in_flight", "unknown"))
    if first is None or left:
        raise RuntimeError(f"the replay left {left} entries unsettled (first attempt at {first})")
    return {
        "entries": entries,
        "pending": pending + open_batches * 100,
        "ledger_mb": size_mb,
        "build_s": build_s,
        "first_request_s": first - child.started_at,
        "target_s": TARGET_S,
        "replay_wall_s": child.wall_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=10_000, help="entries left pending")
    parser.add_argument("--open-batches", type=int, default=3, help="batches written but never answered")
    args = parser.parse_args()
    r = run(args.entries, args.pending, args.open_batches)
    print(
        f"resume: ledger of {r['entries']:,} entries ({r['ledger_mb']:,.0f} MB, built in {r['build_s']:.0f} s), "
        f"{r['pending']:,} unsettled"
    )
    print(f"  replay start -> first request  {r['first_request_s']:.3f} s (target < {TARGET_S:g} s)")
    print(f"  whole replay                   {r['replay_wall_s']:.1f} s")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
