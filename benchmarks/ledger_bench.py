"""Ledger alone: entries enqueued and settled per second, and bytes of ledger per entry.

    .venv/bin/python benchmarks/ledger_bench.py [--entries 100000] [--synchronous FULL]

Enqueue runs in chunks of 1,000 (one transaction each, as a sync does); settle claims batches of
100 and settles them with a realistic mix of outcomes, one transaction per batch (each settle
claims the next batch in its own transaction, as delivery does).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from connector.ledger import Claim, Ledger, Mapped, Outcome


def payload(i: int) -> str:
    return json.dumps(
        {
            "name": f"Person Number{i}",
            "first_name": "Person",
            "last_name": f"Number{i}",
            "email": f"person.number{i}@example.com",
            "phone": f"+1555{i:07d}",
            "company": "Example Corp",
            "custom_fields": {"plan": "pro"},
        },
        separators=(",", ":"),
    )


def run(entries: int, synchronous: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.sqlite3"
        with Ledger(path, synchronous=synchronous) as ledger:
            t0 = time.perf_counter()
            for start in range(0, entries, 1000):
                chunk = [Mapped(str(i), payload=payload(i)) for i in range(start, min(start + 1000, entries))]
                ledger.enqueue("bench", "v1", chunk, {"offset": start + len(chunk)})
            enqueue_s = time.perf_counter() - t0

            t0 = time.perf_counter()
            settled = 0
            batch = ledger.claim(Claim(100))
            while batch is not None:
                outcomes = [
                    Outcome(
                        m.entry_id,
                        "duplicate" if m.entry_id % 10 == 0 else "captured",
                        person_id=f"00000000-0000-4000-8000-{m.entry_id:012d}",
                    )
                    for m in batch.members
                ]
                batch = ledger.settle(batch, outcomes, [], then=Claim(100))
                settled += len(outcomes)
            settle_s = time.perf_counter() - t0
        size = sum(os.path.getsize(p) for p in Path(tmp).glob("ledger.sqlite3*"))
    return {
        "entries": entries,
        "enqueued_per_s": entries / enqueue_s,
        "settled_per_s": settled / settle_s,
        "bytes_per_entry": size / entries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    args = parser.parse_args()
    result = run(args.entries, args.synchronous)
    print(f"ledger ({args.synchronous}): {result['entries']:,} entries")
    print(f"  enqueued  {result['enqueued_per_s']:>12,.0f} entries/s")
    print(f"  settled   {result['settled_per_s']:>12,.0f} entries/s")
    print(f"  size      {result['bytes_per_entry']:>12,.0f} bytes/entry")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
