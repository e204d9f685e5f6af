"""Ledger alone: entries enqueued and settled per second, and bytes of ledger per entry.

    .venv/bin/python benchmarks/ledger_bench.py [--entries 100000] [--synchronous FULL]
    .venv/bin/python benchmarks/ledger_bench.py --versions 200000 [--postgresql]

`--versions N`: a claim's cost when the record it takes has N settled older versions (a row that
changes every poll, for months): each round enqueues a new version, claims it (timed) and settles it.

Enqueue runs in chunks of 1,000 (one transaction each, as a sync does); settle claims batches of
100 and settles them with a realistic mix of outcomes, one transaction per batch (each settle
claims the next batch in its own transaction, as delivery does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
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


# N settled versions of record "hot", written straight into the table (through the ledger they would
# take N enqueue-claim-settle rounds); the columns a settled version has.
_HOT_COLUMNS = "id, key, source, record_id, state, payload, content_hash, mapping_version, revision, batch_id"
_HOT_SQLITE = (
    f"INSERT INTO entries ({_HOT_COLUMNS}) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
    "SELECT i, 'hot-' || i, 'bench', 'hot', 'captured', '{}', 'h' || i, 'v1', 0, NULL FROM n"
)
_HOT_POSTGRESQL = (
    f"INSERT INTO entries ({_HOT_COLUMNS}) SELECT i, 'hot-' || i, 'bench', 'hot', 'captured', '{{}}', 'h' || i, "
    "'v1', 0, NULL FROM generate_series(1, %s) AS i"
)


@contextlib.contextmanager
def _target(postgresql: bool, tmp: str) -> Iterator[str]:
    if not postgresql:
        yield str(Path(tmp) / "ledger.sqlite3")
        return
    sys.path.insert(0, str(Path(__file__).parent))
    import pg_server

    with pg_server.required_database() as url:
        yield url


def _fill_hot(target: str, versions: int) -> None:
    if target.startswith("postgresql"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(_HOT_POSTGRESQL, (versions,))
            conn.execute("ANALYZE entries")
    else:
        import sqlite3

        conn = sqlite3.connect(target, isolation_level=None)
        conn.execute(_HOT_SQLITE, (versions,))
        conn.close()


def claim_with_versions(versions: int, rounds: int, postgresql: bool) -> list[float]:
    """Seconds per claim of a new version of a record with `versions` settled older ones."""
    with tempfile.TemporaryDirectory() as tmp, _target(postgresql, tmp) as target:
        Ledger(target).close()  # the schema
        _fill_hot(target, versions)
        times = []
        with Ledger(target) as ledger:
            for n in range(rounds):
                ledger.enqueue("bench", "v1", [Mapped("hot", payload=payload(n))], {})
                t0 = time.perf_counter()
                batch = ledger.claim(Claim(100))
                times.append(time.perf_counter() - t0)
                assert batch is not None and len(batch.members) == 1
                ledger.settle(batch, [Outcome(batch.members[0].entry_id, "captured")], [])
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    parser.add_argument("--versions", type=int, help="time claims of a record with this many older versions")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--postgresql", action="store_true", help="with --versions: on a throwaway PostgreSQL")
    args = parser.parse_args()
    if args.versions is not None:
        times = sorted(claim_with_versions(args.versions, args.rounds, args.postgresql))
        engine = "postgresql" if args.postgresql else "sqlite"
        print(
            f"claim ({engine}), record with {args.versions:,} older versions: median {statistics.median(times) * 1e3:.2f} ms "
            f"(p10 {times[len(times) // 10] * 1e3:.2f}, p90 {times[len(times) * 9 // 10] * 1e3:.2f}) over {len(times)} claims"
        )
        return
    result = run(args.entries, args.synchronous)
    print(f"ledger ({args.synchronous}): {result['entries']:,} entries")
    print(f"  enqueued  {result['enqueued_per_s']:>12,.0f} entries/s")
    print(f"  settled   {result['settled_per_s']:>12,.0f} entries/s")
    print(f"  size      {result['bytes_per_entry']:>12,.0f} bytes/entry")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
