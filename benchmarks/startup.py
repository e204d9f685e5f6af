"""Start-up: `capture-sync --help`, and `capture-sync status` on a ledger of 1,000,000 entries,
each the median wall time of 5 runs of the whole process (start-up, imports, config, queries); and a
`capture-sync sync` of 10 new contacts into a sandbox, on a ledger that exists already (as every sync
but the first finds it) and on none (the first sync, which creates it): the child's CPU, and the time
from its spawn to its first request (the first attempt's `started_at` in its ledger: imports, config,
ledger, GET /info and the first chunk inside).

    .venv/bin/python benchmarks/startup.py [--entries 1000000] [--runs 5] [--ledger PATH] [--pending-heavy]

The ledger is a realistic mix, written in a few SQL statements (the Ledger API would take minutes):
four sources; about 78% captured, 5% duplicate, 2% rejected, 13% pending, and some failed,
superseded, blocked, in flight and unknown entries in batches (some stalled); the last 1% are
newer versions of earlier records, so some pending versions wait behind a live older one. The schema
is the current one (the file is created through `Ledger`); `--ledger` keeps the file for reuse.
`--pending-heavy` builds a ledger of a backfill read but hardly sent: about 96% pending, the other
states scaled down alike (for `status`, whose live counts walk the pending entries).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import CLI, Api, run_child, sandbox, write_config

from connector.ledger import Ledger
from connector.ledger._counts import recount

sys.path.insert(0, str(Path(__file__).with_name("peers")))
from contacts import generate  # benchmarks/peers is not a package

HELP_TARGET_S = 0.3
STATUS_TARGET_S = 0.5
SYNC_RECORDS = 10
SOURCES = ("crm", "shop", "events", "legacy")

# (upper bound of id * 7919 % 1000, state): a pseudo-random but reproducible spread of states.
_SPREAD = (
    (780, "captured"),
    (830, "duplicate"),
    (850, "rejected"),
    (855, "failed"),
    (860, "superseded"),
    (862, "blocked"),
    (865, "in_flight"),
    (866, "unknown"),
    (1000, "pending"),
)
# The same states, about 3% of them: the rest pending.
_PENDING_HEAVY = (
    (20, "captured"),
    (22, "duplicate"),
    (24, "rejected"),
    (25, "failed"),
    (26, "superseded"),
    (28, "blocked"),
    (31, "in_flight"),
    (32, "unknown"),
    (1000, "pending"),
)


def build_ledger(path: Path, entries: int, spread: tuple[tuple[int, str], ...] = _SPREAD) -> float:
    """Returns the seconds it took."""
    t0 = time.perf_counter()
    Ledger(path, synchronous="NORMAL").close()  # the current schema, migrations included
    state = "CASE " + " ".join(f"WHEN id * 7919 % 1000 < {bound} THEN '{s}'" for bound, s in spread) + " END"
    source = "CASE id % 4 " + " ".join(f"WHEN {i} THEN '{s}'" for i, s in enumerate(SOURCES)) + " END"
    newer = entries - entries // 100  # ids above this are newer versions of the records of ids 1, 2, ...
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA synchronous = OFF")
        db.execute(
            "WITH RECURSIVE n(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM n WHERE id < ?) "
            "INSERT INTO entries (id, key, source, record_id, state, payload, content_hash, mapping_version, "
            "revision, batch_id, created_at, updated_at) "
            f"SELECT id, printf('%032x', id), {source}, "
            "CAST(CASE WHEN id > ? THEN id - ? ELSE id END AS TEXT), "
            f"CASE WHEN id > ? THEN 'pending' ELSE {state} END, "
            "json_object('name', 'Person ' || id, 'email', 'p' || id || '@example.org'), "
            "printf('%016x', id), 'v1', 1, NULL, 1.7e9 + id / 100.0, 1.7e9 + id / 100.0 FROM n",
            (entries, newer, newer, newer),
        )
        # Entries that were sent sit in batches (per block of 100 ids, one for each of four kinds):
        # the in-flight ones in open batches, about every 7th stalled; the blocked ones in blocked
        # batches, the unknown ones in settled batches, the captured, duplicate and failed ones in
        # settled batches of their own. Members are an array on the batch row (schema v12), and each
        # batch keeps the highest entry id when it was written (`top_entry`, schema v13): its block of
        # 100 ids was enqueued by then, the newer versions (pending, in no batch) not yet.
        sent = "('in_flight', 'unknown', 'blocked', 'captured', 'duplicate', 'failed')"
        batch = (
            "(id / 100) * 4 + CASE state WHEN 'in_flight' THEN 0 WHEN 'unknown' THEN 1 WHEN 'blocked' THEN 2 ELSE 3 END"
        )
        db.execute(
            "INSERT INTO batches (id, key, operation, state, body_hash, size, created_at, updated_at, members, "
            f"top_entry) SELECT {batch}, printf('b%031x', {batch}), 'bulk', "
            "CASE WHEN max(state = 'blocked') THEN 'blocked' WHEN max(state = 'in_flight') = 0 THEN 'settled' "
            "WHEN (id / 100) % 7 = 0 THEN 'stalled' ELSE 'open' END, "
            "'h', count(*), min(created_at), max(updated_at), json_group_array(id), min(max(id / 100) * 100 + 99, ?) "
            f"FROM (SELECT * FROM entries WHERE state IN {sent} ORDER BY id) GROUP BY {batch}",
            (newer,),
        )
        db.execute(f"UPDATE entries SET batch_id = {batch} WHERE state IN {sent}")
        # in flight as schema v10 keeps it: pending members of open or stalled batches
        db.execute(
            "UPDATE entries SET state = 'pending', batch_id = NULL WHERE state = 'in_flight' "
            "AND batch_id IN (SELECT id FROM batches WHERE state IN ('open', 'stalled'))"
        )
        recount(db)  # the settled states' counters (schema v11), as the ledger's own writes keep them
        # each record's newest version is its highest id: no `records` row (schema v12)
        db.executemany(
            "INSERT INTO runs (kind, started_at, finished_at, duration_s, read, enqueued, captured, exit_code) "
            "VALUES ('sync', ?, ?, 60.0, 100000, 100000, 90000, 0)",
            [(1.7e9 + i * 3600, 1.7e9 + i * 3600 + 60) for i in range(30)],
        )
    return time.perf_counter() - t0


def timed_runs(args: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Wall seconds of each run of the whole process (after one warm-up run, not counted)."""
    walls = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        proc = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
        if i:
            walls.append(wall)
    return walls


def sync_run(folder: Path, api: Api, template: Path | None) -> tuple[float, float]:
    """One `sync` of SYNC_RECORDS new contacts on a copy of an empty ledger of the current schema (on
    no ledger, as the first sync: `template` None): the child's CPU seconds, and the seconds from its
    spawn to its first request's `started_at`."""
    folder.mkdir()
    ledger = folder / "ledger.sqlite3"
    if template is not None:
        ledger.write_bytes(template.read_bytes())
    generate(folder / "contacts.csv", SYNC_RECORDS)
    config = write_config(folder, api, folder / "contacts.csv")
    child = run_child([str(CLI), "sync", "-c", str(config)], folder / "sync.log", env=api.env())
    if child.exit_code != 0:
        raise RuntimeError(f"capture-sync sync exited {child.exit_code}: {(folder / 'sync.log').read_text()[-500:]}")
    with sqlite3.connect(ledger) as db:
        (first,) = db.execute("SELECT min(started_at) FROM attempts").fetchone()
    return child.cpu_s, first - child.started_at


def run(
    entries: int = 1_000_000, runs: int = 5, ledger: Path | None = None, pending_heavy: bool = False
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="capture-sync-bench-") as tmp:
        folder = Path(tmp)
        path = ledger or folder / "ledger.sqlite3"
        spread = _PENDING_HEAVY if pending_heavy else _SPREAD
        build_s = build_ledger(path, entries, spread) if not path.exists() else 0.0
        api = Api("http://127.0.0.1:9", "bench-key", "bench-secret", folder / "unused.sqlite3")
        config = write_config(folder, api, folder / "unused.csv")
        config.write_text(config.read_text().replace(json.dumps(str(folder / "ledger.sqlite3")), json.dumps(str(path))))
        env = api.env()
        template = folder / "empty.sqlite3"
        Ledger(template).close()
        # Alternate the four commands, so that a slow moment of a shared machine hits all alike.
        help_s: list[float] = []
        status_s: list[float] = []
        sync_cpu_s: list[float] = []
        first_request_s: list[float] = []
        first_sync_cpu_s: list[float] = []
        first_sync_request_s: list[float] = []
        with sandbox(folder / "sandbox") as capture_api:
            sync_run(folder / "warm-up", capture_api, template)
            for i in range(runs):
                help_s += timed_runs([str(CLI), "--help"], 1, env)
                status_s += timed_runs([str(CLI), "status", "-c", str(config)], 1, env)
                cpu_s, to_first_s = sync_run(folder / f"sync-{i}", capture_api, template)
                sync_cpu_s.append(cpu_s)
                first_request_s.append(to_first_s)
                cpu_s, to_first_s = sync_run(folder / f"first-sync-{i}", capture_api, None)
                first_sync_cpu_s.append(cpu_s)
                first_sync_request_s.append(to_first_s)
    return {
        "entries": entries,
        "pending_heavy": pending_heavy,
        "build_s": build_s,
        "runs": runs,
        "help_s": help_s,
        "help_median_s": statistics.median(help_s),
        "help_target_s": HELP_TARGET_S,
        "status_s": status_s,
        "status_median_s": statistics.median(status_s),
        "status_target_s": STATUS_TARGET_S,
        "sync_records": SYNC_RECORDS,
        "sync_cpu_s": sync_cpu_s,
        "sync_cpu_median_s": statistics.median(sync_cpu_s),
        "first_request_s": first_request_s,
        "first_request_median_s": statistics.median(first_request_s),
        "first_sync_cpu_s": first_sync_cpu_s,
        "first_sync_cpu_median_s": statistics.median(first_sync_cpu_s),
        "first_sync_request_s": first_sync_request_s,
        "first_sync_request_median_s": statistics.median(first_sync_request_s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ledger", type=Path, help="build the ledger here once and reuse it")
    parser.add_argument("--pending-heavy", action="store_true", help="about 96%% of the entries pending")
    args = parser.parse_args()
    r = run(args.entries, args.runs, args.ledger, args.pending_heavy)
    if r["build_s"]:
        print(f"start-up: ledger of {r['entries']:,} entries built in {r['build_s']:.0f} s")
    for name, target in (("help", HELP_TARGET_S), ("status", STATUS_TARGET_S)):
        walls = r[f"{name}_s"]
        print(
            f"  {name:<7} median {r[f'{name}_median_s']:.3f} s (min {min(walls):.3f}, max {max(walls):.3f}; "
            f"target < {target:g} s)"
        )
    for name, key, ledger in (
        ("CPU", "sync_cpu", "an existing ledger"),
        ("1st req", "first_request", "an existing ledger"),
        ("CPU", "first_sync_cpu", "a new ledger"),
        ("1st req", "first_sync_request", "a new ledger"),
    ):
        values = r[f"{key}_s"]
        print(
            f"  sync {name:<7} median {r[f'{key}_median_s']:.3f} s (min {min(values):.3f}, max {max(values):.3f}; "
            f"{r['sync_records']} records, {ledger})"
        )
    print(json.dumps(r))


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "200")
    main()
