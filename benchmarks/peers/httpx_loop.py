"""The plain httpx baseline: read the CSV, normalise phones to E.164 with `phonenumbers`, post bulk
requests of 100 with 4 in flight (capture-sync's default). No ledger, no state, no validation
beyond the phone; a 429 is retried after its Retry-After with the same Idempotency-Key (a random
key per batch, so a re-run sends everything again under new keys). Prints the persons the API took.

benchmarks/naive_post.py, the overhead figure's baseline, stays as it is (no phones, no retries),
so that figure keeps its meaning; this is it plus what the peers comparison needs.

    CAPTURE_API_KEY=... CAPTURE_API_SECRET=... python httpx_loop.py CSV BASE_URL
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
from phones import e164

BATCH = 100
CONCURRENCY = 4
MAX_ATTEMPTS = 10


def persons(path: str) -> Iterator[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            yield {
                "name": f"{row['First']} {row['Last']}", "first_name": row["First"], "last_name": row["Last"],
                "email": row["Email"], "phone": e164(row["Phone"]), "company": row["Company"],
                "custom_fields": {"plan": row["Plan"]},
            }


async def post(http: httpx.AsyncClient, body: bytes) -> int:
    """Persons taken by one bulk request; a 429 waits its Retry-After and goes again, same key."""
    headers = {"Idempotency-Key": uuid.uuid4().hex, "Content-Type": "application/json"}
    for _ in range(MAX_ATTEMPTS):
        response = await http.post("/persons/bulk", content=body, headers=headers)
        if response.status_code == 429:
            await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
            continue
        response.raise_for_status()
        data = response.json()["data"]
        return len(data["successful"]) + len(data["duplicates"])
    raise RuntimeError(f"still rate-limited after {MAX_ATTEMPTS} attempts")


async def post_all(path: str, base_url: str) -> int:
    auth = {"X-API-Key": os.environ["CAPTURE_API_KEY"], "X-API-Secret": os.environ["CAPTURE_API_SECRET"]}
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(CONCURRENCY)
    taken = 0
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=base_url, headers=auth, limits=limits, timeout=30) as http:

        async def worker() -> None:
            nonlocal taken
            while (body := await queue.get()) is not None:
                taken += await post(http, body)

        workers = [asyncio.create_task(worker()) for _ in range(CONCURRENCY)]
        batch: list[dict[str, Any]] = []
        for person in persons(path):
            batch.append(person)
            if len(batch) == BATCH:
                await queue.put(json.dumps({"persons": batch}).encode())
                batch = []
        if batch:
            await queue.put(json.dumps({"persons": batch}).encode())
        for _ in workers:
            await queue.put(None)
        await asyncio.gather(*workers)
    return taken


if __name__ == "__main__":
    print(asyncio.run(post_all(sys.argv[1], sys.argv[2])))
