"""Matching a bulk response's result objects to the batch's members (`match_bulk`), alone: CPU per
member for each result shape the sandbox can answer with, on batches of 100 of the peers' contacts
mapped as a sync maps them, with the answers parsed by the client's own `parse_response`.

    .venv/bin/python benchmarks/matching.py [--members 30000] [--shapes echo,nested]
    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python benchmarks/matching.py --passes 1
    (and --passes 3: the difference of the two instruction counts over 2 x members is the matching's
    instructions per member, deterministic on a busy machine with PYTHONHASHSEED=0)

Each shape's truths: every member captured, and a mix (one in ten failed, one in ten a duplicate).
The cyclic collector runs at the threshold a run sets (connector/delivery/engine.py).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from csv_read import MAPPING

sys.path.insert(0, str(Path(__file__).with_name("peers")))
from contacts import generate  # benchmarks/peers is not a package

from connector.api import BulkCaptureResult
from connector.api._wire import parse_response
from connector.delivery.engine import to_mapped
from connector.delivery.settle import match_bulk
from connector.ledger import Member
from connector.mapping import Mapping
from connector.plugins import build_source
from connector.sandbox.behaviour import BulkResultShape
from connector.sandbox.results import Kind, PersonOutcome, bulk_result

BATCH = 100
YOUNG_THRESHOLD = 10_000  # as a run sets it while it goes (engine._fewer_collections)
SHAPES: tuple[BulkResultShape, ...] = ("echo", "nested", "index1", "array_index", "bare")


def batches(records: int) -> list[list[Member]]:
    """The members a sync would claim: the peers' contacts, mapped, keyed by their content."""
    with tempfile.TemporaryDirectory(prefix="capture-sync-match-") as tmp:
        csv_path = Path(tmp) / "contacts.csv"
        generate(csv_path, records)
        source = build_source("bench", "csv", {"path": str(csv_path), "primary_key": "id"})
        mapping = Mapping.from_config(MAPPING, where="sources.bench.mapping")
        payloads = [m.payload for m in (to_mapped(mapping, r) for r in source.read(None)) if m.payload]
    members = [
        Member(i, "p-" + hashlib.sha256(p.encode()).hexdigest()[:40], p) for i, p in enumerate(payloads, start=1)
    ]
    return [members[i : i + BATCH] for i in range(0, len(members), BATCH)]


def _kind(pos: int, mixed: bool) -> Kind:
    if mixed and pos % 10 == 3:
        return "failed"
    return "duplicates" if mixed and pos % 10 == 7 else "successful"


def answer(shape: BulkResultShape, batch: list[Member], mixed: bool) -> BulkCaptureResult:
    """The sandbox's answer in `shape`, as bytes on the wire and parsed as the client parses it."""
    outcomes = []
    for pos, m in enumerate(batch):
        kind = _kind(pos, mixed)
        raw = {**json.loads(m.payload), "idempotency_key": m.key}
        if kind == "failed":
            outcomes.append(PersonOutcome(kind, pos, raw, error={"code": "invalid_person", "message": "bad"}))
        else:
            action = "created" if kind == "successful" else None
            outcomes.append(
                PersonOutcome(kind, pos, raw, person_id=f"00000000-0000-4000-8000-{m.entry_id:012d}", action=action)
            )
    body: dict[str, Any] = {
        "success": True,
        "statusCode": 200,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": "ok",
        "data": {**bulk_result(shape, outcomes), "idempotent_replay": False},
    }
    response = httpx.Response(200, content=json.dumps(body, separators=(",", ":")).encode())
    return parse_response(response, BulkCaptureResult, "capture_bulk")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=30_000)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated, of " + ", ".join(SHAPES))
    parser.add_argument("--passes", type=int, default=5, help="timed passes per shape; the best is printed")
    args = parser.parse_args()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    work = batches(args.members)
    n = sum(len(b) for b in work)
    for shape in [s for s in SHAPES if s in args.shapes.split(",")]:
        for mixed in (False, True):
            answers = [(b, answer(shape, b, mixed)) for b in work]
            best = float("inf")
            for _ in range(args.passes):
                t0 = time.process_time()
                for b, a in answers:
                    match_bulk(b, a)
                best = min(best, time.process_time() - t0)
            settled = Counter(o.state for b, a in answers for o in match_bulk(b, a))
            label = f"{shape}, {'mixed' if mixed else 'all captured'}"
            print(
                f"{label:<28} {best / n * 1e6:6.2f} us CPU/member (best of {args.passes}, {n:,} members; "
                + ", ".join(f"{state} {count}" for state, count in sorted(settled.items()))
                + ")"
            )


if __name__ == "__main__":
    os.chdir(Path(__file__).parent)
    main()
