"""Sandbox throughput: persons/s through POST /persons/bulk with many clients at once.

    .venv/bin/python benchmarks/sandbox_throughput.py [--clients 20] [--requests 20] [--persons 100]
        [--in-process]

By default the sandbox runs as its own process (`capture-sync sandbox serve`), so the load
generator does not share its interpreter. Half of every batch are identities all clients send at
once. After the run the sandbox's records are checked: every request 200, no person lost, none
created twice, no per-person key captured twice; the exit code is 1 if any of that fails.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from connector.sandbox import SandboxServer, SandboxStore, spawn_sandbox
from connector.sandbox.loadgen import LoadResult, integrity_problems, run_bulk_load


def run(clients: int, requests: int, persons: int, in_process: bool) -> tuple[LoadResult, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sandbox.sqlite3"
        with SandboxStore(db) as store:
            credentials = [store.create_client(f"bench-{n}", rate_limit=1_000_000) for n in range(clients)]
        if in_process:
            with SandboxServer(db) as server:
                assert server.base_url is not None
                result = asyncio.run(run_bulk_load(server.base_url, credentials, requests, persons))
        else:
            process = spawn_sandbox(db, Path(tmp) / "sandbox.log")
            try:
                result = asyncio.run(run_bulk_load(process.base_url, credentials, requests, persons))
            finally:
                process.stop()
        with SandboxStore(db) as store:
            return result, integrity_problems(store, result, clients, requests, persons)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=20, help="bulk requests per client")
    parser.add_argument("--persons", type=int, default=100, help="persons per request (1..100)")
    parser.add_argument("--in-process", action="store_true", help="serve from this interpreter")
    args = parser.parse_args()
    result, problems = run(args.clients, args.requests, args.persons, args.in_process)
    where = "in-process" if args.in_process else "separate process"
    print(f"sandbox ({where}): {args.clients} clients x {args.requests} requests x {args.persons} persons")
    print(f"  persons sent      {result.sent}")
    print(f"  statuses          {dict(sorted(result.statuses.items()))}")
    print(f"  wall time         {result.duration_s:.2f} s")
    print(
        f"  throughput        {result.persons_per_s:,.0f} persons/s "
        f"({result.sent / args.persons / result.duration_s:,.1f} requests/s)"
    )
    print(f"  distinct persons  {len(result.identities)}")
    print(
        "  integrity         " + ("ok: no 500, none lost, none created twice" if not problems else "; ".join(problems))
    )
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
