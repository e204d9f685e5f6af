"""Where figure 2's CPU per record goes: each stage of the connector's pipeline timed alone on the
same records, beside the steps the naive baseline also does, in one process and one run.

    .venv/bin/python benchmarks/stages.py [--records 30000]

CPU time (time.process_time: user + sys, so the ledger's fsyncs count) per record for: reading the
CSV (the csv source; the baseline's csv.DictReader), mapping (the whole `Mapping.map`, and inside
it the e164 phone transform and the PersonInput validation alone, and that validation a chunk at a
time; the transform again on the peers' mixed spellings, beside `phonenumbers` alone as the peers
run it), serialising the payload, the ledger's enqueue, claim + settle (one transaction per batch of
100 and one hop to a worker thread, as delivery runs it, with synchronous FULL; with --postgres-url,
on PostgreSQL too), parsing a bulk response (the client's `parse_response`) and matching it to the
batch's members, and the `batch.settled` log line per batch. What is not here is the HTTP exchange,
the rest of asyncio and start-up: the overhead benchmark's total less these stages.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import naive_post
import structlog
from csv_read import MAPPING, generate
from harness import print_cpu_per_record
from peers.contacts import phone as peer_phone
from peers.phones import e164 as phonenumbers_e164
from pydantic import TypeAdapter

from connector.api import BulkCaptureResult, PersonInput, encode_json
from connector.api._wire import parse_response
from connector.delivery._boundary import Checker
from connector.delivery.engine import to_mapped
from connector.delivery.extract import LOGGER
from connector.delivery.settle import match_bulk
from connector.ledger import Claim, Ledger, Member, Outcome
from connector.logs import configure
from connector.mapping import Mapping
from connector.mapping.transforms import e164
from connector.plugins import build_source

T = TypeVar("T")
# pydantic-core's own loop over a chunk: measured beside the validation a record at a time, which the
# mapper keeps (the per-record Python validators dominate, and a chunk's persons kept alive together
# cost more in garbage collection than the loop saves: Mapping.map a record at a time is as fast).
_PERSONS = TypeAdapter(list[PersonInput])
CHUNK = 1000  # records per enqueue transaction, as the engine's default chunk_size
BATCH = 100


def _cpu(fn: Callable[[], T]) -> tuple[T, float]:
    t0 = time.process_time()
    result = fn()
    return result, time.process_time() - t0


def _bulk_answer(batch_keys: list[str]) -> httpx.Response:
    """A 200 as the sandbox answers a bulk request: each member echoed with its key and a person id."""
    data = {
        "successful": [
            {"index": i, "idempotency_key": key, "person_id": str(uuid.uuid4()), "action": "created"}
            for i, key in enumerate(batch_keys)
        ],
        "duplicates": [],
        "failed": [],
    }
    body = {"success": True, "statusCode": 200, "timestamp": "2026-01-01T00:00:00.000Z", "message": "ok", "data": data}
    return httpx.Response(200, content=json.dumps(body, separators=(",", ":")).encode("ascii"))


def _log_stages(batches: int, per_record: Callable[[str, Callable[[], Any]], Any]) -> None:
    """A `batch.settled` line per batch as `capture-sync` logs it (JSON, level INFO, to a stream no
    one reads): written at info, and at debug, where the level filter drops it. Last: it configures
    logging for the process."""
    configure("INFO", json=True, stream=io.StringIO())
    log = structlog.get_logger(LOGGER)
    fields = {"operation": "bulk", "size": BATCH, "key_prefix": "b-0123456789ab", "latency_ms": 12.5, "wait_ms": 0.0}
    for level in ("info", "debug"):
        emit = getattr(log, level)
        per_record(
            f"log batch.settled per batch at {level}",
            lambda emit=emit: [emit("batch.settled", **fields, captured=BATCH) for _ in range(batches)],
        )


def _ledger_stages(
    ledger: Ledger,
    label: str,
    version: str,
    mapped: list[Any],
    per_record: Callable[[str, Callable[[], Any]], Any],
    batches: list[tuple[Member, ...]],
    wall: dict[str, float] | None = None,
) -> None:
    def enqueue() -> None:
        for start in range(0, len(mapped), CHUNK):
            ledger.enqueue("bench", version, mapped[start : start + CHUNK], {"offset": start})

    def claim_and_settle() -> None:
        # As delivery calls the ledger: one call per batch (the settle, with the merges it counted,
        # claiming the next batch in its transaction) on a worker thread. Every member settles
        # "captured" under a named person id; matching a response is timed on its own below.
        async def loop() -> None:
            work = await asyncio.to_thread(ledger.claim, Claim(BATCH))
            while work is not None:
                batches.append(work.members)
                outcomes = [
                    Outcome(m.entry_id, "captured", person_id=str(m.entry_id), named_person=True) for m in work.members
                ]
                work, _ = await asyncio.to_thread(ledger.settle_counting, work, outcomes, [], then=Claim(BATCH))

        asyncio.run(loop())

    for name, fn in (
        (f"{label}: enqueue (chunks of 1,000)", enqueue),
        (f"{label}: claim + settle (a transaction and a thread hop per batch)", claim_and_settle),
    ):
        t0 = time.perf_counter()
        per_record(name, fn)
        if wall is not None:
            wall[name] = (time.perf_counter() - t0) / len(mapped) * 1e6


def run(records: int = 30_000, postgres_url: str | None = None) -> dict[str, Any]:
    """With `postgres_url` (an empty database), the ledger's stages again on PostgreSQL: this
    process's CPU, and wall time per record apart (the server's own CPU is in its processes)."""
    us: dict[str, float] = {}
    wall: dict[str, float] = {}

    def per_record(name: str, fn: Callable[[], T]) -> T:
        result, seconds = _cpu(fn)
        us[name] = seconds / records * 1e6
        return result

    with tempfile.TemporaryDirectory(prefix="capture-sync-bench-") as tmp:
        folder = Path(tmp)
        csv_path = folder / "records.csv"
        generate(csv_path, records, messy=False)

        naive = per_record("naive: read the CSV into persons", lambda: list(naive_post.persons(str(csv_path))))
        per_record(
            "naive: JSON bodies",
            lambda: [json.dumps({"persons": naive[i : i + BATCH]}).encode() for i in range(0, records, BATCH)],
        )

        source = build_source("bench", "csv", {"path": str(csv_path), "primary_key": "id"})
        mapping = Mapping.from_config(MAPPING, where="sources.bench.mapping")
        read = per_record("read the CSV (csv source, cursor per record)", lambda: list(source.read(None)))
        checker = Checker(states=not source._spells_its_states())  # as a sync checks them
        per_record("check what the source yields (the plugin boundary)", lambda: [checker.check(r) for r in read])
        persons = per_record("map (Mapping.map, all rules + validation)", lambda: [mapping.map(r.data) for r in read])
        assert all(isinstance(p, PersonInput) for p in persons), "the generated records are all valid"
        phone = e164("US")
        per_record("  of which: e164 phone transform", lambda: [phone(r.data["Phone"]) for r in read])
        dumped = [p.to_json_dict() for p in persons]  # type: ignore[union-attr]
        per_record("  of which: PersonInput validation", lambda: [PersonInput.model_validate(d) for d in dumped])
        spelled = [peer_phone(i) for i in range(records)]
        per_record("  e164 on the peers' five spellings", lambda: [phone(p) for p in spelled])
        per_record("  the same by phonenumbers alone (no fast path)", lambda: [phonenumbers_e164(p) for p in spelled])
        chunks = [dumped[i : i + CHUNK] for i in range(0, records, CHUNK)]
        per_record("  (that validation a chunk at a time)", lambda: [_PERSONS.validate_python(c) for c in chunks])
        per_record("serialise the payload (JSON text)", lambda: [encode_json(p.to_json_dict()) for p in persons])  # type: ignore[union-attr]
        mapped = [to_mapped(mapping, r) for r in read]

        batches: list[tuple[Member, ...]] = []
        with Ledger(folder / "ledger.sqlite3", synchronous="FULL") as ledger:
            _ledger_stages(ledger, "ledger", mapping.version, mapped, per_record, batches, wall)
        if postgres_url:
            with Ledger(postgres_url) as ledger:
                _ledger_stages(ledger, "ledger on PostgreSQL", mapping.version, mapped, per_record, [], wall)
        answers = [_bulk_answer([m.key for m in members]) for members in batches]
        parsed = per_record(
            "parse a bulk response (SuccessEnvelope, compiled)",
            lambda: [parse_response(a, BulkCaptureResult, "capture_bulk") for a in answers],
        )
        responses = list(zip(batches, parsed, strict=True))
        per_record("match a bulk response to members", lambda: [match_bulk(m, r) for m, r in responses])
        _log_stages(len(batches), per_record)
    return {"records": records, "cpu_us_per_record": us, "wall_us_per_record": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--postgres-url", help="an empty PostgreSQL database: time the ledger's stages there too")
    args = parser.parse_args()
    r = run(args.records, args.postgres_url)
    print_cpu_per_record(f"CPU per record by stage ({r['records']:,} records, one process):", r, 52)
    for name, us in r["wall_us_per_record"].items():
        print(f"  wall time, {name}: {us:.1f} us/record")


if __name__ == "__main__":
    main()
